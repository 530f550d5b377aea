"""Process helpers used by `agora up`: start in a new session, stop with SIGTERM then SIGKILL
of the whole group, no orphans."""

from __future__ import annotations

import sys
from pathlib import Path

import psutil
import pytest

from frameworks.cli.common import CliError, start_process, stop_all, stop_process, wait_until


def test_stop_kills_the_whole_group_including_term_ignoring_children(tmp_path: Path) -> None:
    script = (
        "import signal, subprocess, sys, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "c = subprocess.Popen([sys.executable, '-c', "
        "'import signal,time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print(1, flush=True); time.sleep(60)'])\n"
        "print('ready', c.pid, flush=True)\n"
        "time.sleep(60)\n"
    )
    log = tmp_path / "p.log"
    p = start_process("stubborn", [sys.executable, "-c", script], log_path=log)
    wait_until(lambda: "ready" in log.read_text(), 20, "the child to start", procs=[p])
    child_pid = int(log.read_text().split("ready")[1].split()[0])
    assert psutil.pid_exists(child_pid)
    stop_process(p, grace=0.5)
    assert not p.alive()
    assert not psutil.pid_exists(child_pid) or psutil.Process(child_pid).status() == psutil.STATUS_ZOMBIE
    assert stop_process(p) is not None  # idempotent


def test_stop_all_and_exit_detection(tmp_path: Path) -> None:
    a = start_process("a", [sys.executable, "-c", "import time; time.sleep(60)"])
    b = start_process("b", [sys.executable, "-c", "raise SystemExit(3)"], log_path=tmp_path / "b.log")
    with pytest.raises(CliError, match="b exited with code 3"):
        wait_until(lambda: False, 20, "never", procs=[a, b])
    stop_all([a, b], grace=2)
    assert not a.alive() and b.returncode() == 3
    with pytest.raises(CliError, match="cannot start"):
        start_process("x", [str(tmp_path / "missing-binary")])


def test_children_die_with_a_hard_killed_parent(tmp_path: Path) -> None:
    """`agora up` killed with SIGKILL cannot clean up; its children still go (PDEATHSIG)."""
    import signal
    import subprocess

    from frameworks.cli.common import REPO_ROOT, child_env

    if not sys.platform.startswith("linux"):
        pytest.skip("PR_SET_PDEATHSIG is Linux only")
    parent_code = (
        "import sys, time\n"
        "from frameworks.cli.common import start_process\n"
        "p = start_process('sleeper', [sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        "print(p.pid, flush=True)\n"
        "time.sleep(60)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", parent_code], stdout=subprocess.PIPE, env=child_env(),
                              cwd=REPO_ROOT)
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        assert psutil.pid_exists(child)
        parent.send_signal(signal.SIGKILL)
        parent.wait(10)
        wait_until(lambda: not psutil.pid_exists(child) or psutil.Process(child).status() == psutil.STATUS_ZOMBIE,
                   10, "the orphaned child to exit")
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait(10)
        if parent.stdout is not None:
            parent.stdout.close()
