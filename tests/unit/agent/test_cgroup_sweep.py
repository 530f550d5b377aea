"""The suite's end-of-run cgroup sweep (``tests/conftest.py``) against the real kernel: it removes
the empty cgroups of agents whose work dirs lay in this run's temporary directory, and leaves
alone those of any other run on the machine (CI jobs and other checkouts run concurrently), empty
or not, however old. Skips, saying why, where no cgroup v1 hierarchy is writable."""

from __future__ import annotations

import os
from pathlib import Path

from agent import cgroup_probe

from ...cgroup_env import drop_v1, own_agent_cgroup_names, sweep_own_cgroups, v1_or_skip

CGROUPS = Path("/sys/fs/cgroup")


def test_the_sweep_removes_this_runs_empty_cgroups_and_no_other_runs(tmp_path: Path) -> None:
    run, other_run = tmp_path / "this-run", tmp_path / "other-run"
    ours_dir, theirs_dir = run / "test_x0" / "agent", other_run / "test_x0" / "agent"
    ours_dir.mkdir(parents=True)
    theirs_dir.mkdir(parents=True)
    ours = v1_or_skip(ours_dir)
    theirs = v1_or_skip(theirs_dir)
    try:
        ours.prepare("t/fw/a", 64 << 20, 0.5)  # an agent stopped, its task killed: empty cgroups left
        theirs.prepare("t/fw/b", 64 << 20, 0.5)  # another run's agent between a mkdir and its task
        old = 1_000_000_000.0  # other runs' cgroups are kept however old they look
        for d in theirs.bases.values():
            os.utime(d / "fw.b", (old, old))
        assert all(b.is_relative_to(CGROUPS) for b in ours.bases.values())

        removed = sweep_own_cgroups(CGROUPS, [run])

        for controller, base in ours.bases.items():
            assert not (base / "fw.a").exists() and not base.exists(), controller
        for controller, base in theirs.bases.items():
            assert (base / "fw.b").is_dir(), controller
        assert {p.name for p in removed} >= {"fw.a", ours.bases["memory"].name}
        assert theirs.bases["memory"].name not in {p.name for p in removed}
    finally:
        drop_v1(theirs)
        drop_v1(ours)


def test_own_names_are_the_digests_of_this_runs_directories(tmp_path: Path) -> None:
    (tmp_path / "a" / "agent").mkdir(parents=True)
    names = own_agent_cgroup_names([tmp_path])
    assert cgroup_probe.agent_cgroup_name(os.path.realpath(tmp_path / "a" / "agent")) in names
    assert cgroup_probe.agent_cgroup_name("/var/lib/agora") not in names
    assert own_agent_cgroup_names([tmp_path / "missing"]) == set()
