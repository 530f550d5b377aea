"""What the machine running the tests offers (kernel isolation, a file system to fill), found by trying.

``v1_or_skip(work_dir)``: a real cgroup v1 isolator for ``work_dir``, or ``pytest.skip`` with the
reason the agent itself gives (no writable memory/cpu/cpuacct v1 hierarchy: a CI container without
the capability, a pure cgroup2 host). ``v2_subtree_or_skip()``: a fresh cgroup2 directory under the
cgroup2 mount that the tests may use (created, removed afterwards), or a skip saying why not.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest

from agent import cgroup_probe
from agent.cgroups_v1 import CgroupV1Isolator
from agent.isolation import CgroupOptions, detect, kill_procs


def v1_or_skip(work_dir: Path, **options: object) -> CgroupV1Isolator:
    iso = detect("cgroups-v1", work_dir, CgroupOptions(cgroups_root="agora-test", **options))  # type: ignore[arg-type]
    if not isinstance(iso, CgroupV1Isolator):
        pytest.skip(f"no writable cgroup v1 hierarchies here: {iso.describe().get('why')}")
    return iso


def drop_v1(iso: CgroupV1Isolator) -> None:
    """Kill whatever a test left in its cgroups and remove them."""
    iso.cleanup(set())
    iso.close()


def cgroup2_mount() -> Path | None:
    with open("/proc/self/mountinfo") as f:
        mounts = cgroup_probe.parse_mountinfo(f.read())
    return next((Path(m.path) for m in mounts if m.version == 2), None)


@contextlib.contextmanager
def v2_subtree_or_skip(name: str) -> Iterator[Path]:
    """A cgroup2 directory of our own (``<mount>/<name>-<pid>``), removed afterwards."""
    mount = cgroup2_mount()
    if mount is None:
        pytest.skip("no cgroup2 hierarchy is mounted here")
    d = mount / f"{name}-{os.getpid()}"
    try:
        d.mkdir()
    except OSError as e:
        pytest.skip(f"cannot create a cgroup2 directory under {mount}: {e}")
    try:
        yield d
    finally:
        for sub in sorted((p for p in d.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
            kill_procs(sub)
            with contextlib.suppress(OSError):
                sub.rmdir()
        with contextlib.suppress(OSError):
            d.rmdir()


@contextlib.contextmanager
def small_filesystem(where: Path, size: str) -> Iterator[Path]:
    """A real file system of ``size`` (a tmpfs) mounted at ``where``, unmounted afterwards: the
    disk-full tests fill it. Skips, saying why, where mounting is not allowed (no root, no
    CAP_SYS_ADMIN)."""
    import subprocess

    where.mkdir(parents=True, exist_ok=True)
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here to fill it: {r.stderr.strip() or r.returncode}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True)


def own_agent_cgroup_names(tmp_roots: Iterable[Path]) -> set[str]:
    """The agent cgroup names (``agent-<digest of the work dir>``) of every directory under
    ``tmp_roots``: the cgroups any agent whose work dir lay there made, and no other."""
    names: set[str] = set()
    for root in tmp_roots:
        if not root.is_dir():
            continue
        for d, _subdirs, _files in os.walk(root):
            names.add(cgroup_probe.agent_cgroup_name(os.path.realpath(d)))
    return names


def sweep_own_cgroups(cgroup_root: Path, tmp_roots: Iterable[Path]) -> list[Path]:
    """Remove the empty task cgroups, then the agent cgroup itself when it is left empty, of the
    agents whose work dirs were under ``tmp_roots`` (this test run's), in every hierarchy under
    ``cgroup_root`` (``<hierarchy>/agora*/agent-*``). Agent cgroups of other runs on the
    machine, and the shared ``agora*`` roots, are never touched. Returns what it removed."""
    if not cgroup_root.is_dir():
        return []
    own = own_agent_cgroup_names(tmp_roots)
    removed: list[Path] = []
    for base in cgroup_root.glob("*/agora*/agent-*"):
        if base.name not in own or base.is_symlink():
            continue
        with contextlib.suppress(OSError):
            for task in base.iterdir():
                if not task.is_dir():
                    continue
                with contextlib.suppress(OSError):
                    if not (task / "cgroup.procs").read_text().strip():
                        task.rmdir()
                        removed.append(task)
        with contextlib.suppress(OSError):
            base.rmdir()
            removed.append(base)
    return removed
