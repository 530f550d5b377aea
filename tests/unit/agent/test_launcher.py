"""The launcher with real processes: exit codes, shell vs argv, env, kill escalation, wrapper
crash, adoption after an agent restart, memory limit detection."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import psutil
import pytest

from agent.environment import task_environment
from agent.isolation import MonitorIsolator, detect
from agent.launcher import Launcher, boot_time, find_wrappers, proc_start, start_time

pytestmark = pytest.mark.slow


class Exits:
    def __init__(self) -> None:
        self.futs: dict[str, asyncio.Future[int | None]] = {}

    def fut(self, key: str) -> asyncio.Future[int | None]:
        if key not in self.futs:
            self.futs[key] = asyncio.get_running_loop().create_future()
        return self.futs[key]

    def __call__(self, key: str, code: int | None) -> None:
        f = self.fut(key)
        if not f.done():
            f.set_result(code)

    async def wait(self, key: str, within: float = 20.0) -> int | None:
        return await asyncio.wait_for(self.fut(key), within)


@pytest.fixture
async def env(tmp_path: Path) -> AsyncIterator[tuple[Launcher, Exits, Path]]:
    exits = Exits()
    la = Launcher(exits)
    yield la, exits, tmp_path
    for key, pid in la.pids().items():
        la.signal(key, "KILL")
        await exits.wait(key)
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


def run(la: Launcher, base: Path, key: str, argv: list[str], environ: dict[str, str] | None = None) -> Path:
    sb = base / "sb" / key
    la.launch(key, argv, environ or {"PATH": os.environ["PATH"]}, sb, base / f"{key}.exit")
    return sb


async def test_exit_codes_and_sandbox_files(env: tuple[Launcher, Exits, Path]) -> None:
    la, exits, base = env
    sb = run(la, base, "ok", ["/bin/sh", "-c", "echo out; echo err >&2; pwd"])
    run(la, base, "bad", ["/bin/sh", "-c", "exit 3"])
    run(la, base, "missing", ["/no/such/binary"])
    assert await exits.wait("ok") == 0
    assert await exits.wait("bad") == 3
    assert await exits.wait("missing") == 127
    assert (sb / "stdout").read_text() == f"out\n{sb}\n"
    assert (sb / "stderr").read_text() == "err\n"
    assert (base / "ok.exit").read_text() == "0\n"


async def test_argv_without_shell_does_not_interpret(env: tuple[Launcher, Exits, Path]) -> None:
    la, exits, base = env
    marker = base / "pwned"
    sb = run(la, base, "argv", ["/bin/echo", f"hi; touch {marker}"])
    assert await exits.wait("argv") == 0
    assert (sb / "stdout").read_text() == f"hi; touch {marker}\n"
    assert not marker.exists()


async def test_task_environment(env: tuple[Launcher, Exits, Path]) -> None:
    la, exits, base = env
    sb = base / "sb" / "e"
    e = task_environment(
        agent_id="a1", framework_id="f1", task_id="t1", executor_id="t1", sandbox=str(sb),
        path=os.environ["PATH"], extra=[("FOO", "bar baz")],
    )
    la.launch("e", ["/bin/sh", "-c", "echo $MESOS_TASK_ID $AGORA_FRAMEWORK_ID $MESOS_SANDBOX $FOO"], e, sb, base / "e.exit")
    assert await exits.wait("e") == 0
    assert (sb / "stdout").read_text() == f"t1 f1 {sb} bar baz\n"


async def test_sigterm_reaches_task_and_status_is_recorded(env: tuple[Launcher, Exits, Path]) -> None:
    la, exits, base = env
    sb = run(la, base, "term", ["/bin/sh", "-c", "echo started; exec sleep 60"])
    await wait_for_file(sb / "stdout", "started")
    la.signal("term", "TERM")
    assert await exits.wait("term") == 143


async def test_kill_escalation_leaves_no_process(env: tuple[Launcher, Exits, Path]) -> None:
    la, exits, base = env
    # the task ignores SIGTERM and has a background child in its group
    sb = run(la, base, "stubborn", ["/bin/sh", "-c", "trap '' TERM; sleep 60 & echo $!; wait"])
    await wait_for_file(sb / "stdout", "\n")
    child = int((sb / "stdout").read_text().split()[0])
    wrapper = la.pids()["stubborn"]
    group = [p for p in psutil.process_iter() if _pgid(p.pid) == wrapper]
    assert len(group) >= 3
    la.signal("stubborn", "TERM")
    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(asyncio.shield(exits.fut("stubborn")), 0.3)
    la.signal("stubborn", "KILL")
    await exits.wait("stubborn")
    assert await wait_gone(child)
    for p in group:
        assert await wait_gone(p.pid)


async def test_wrapper_crash_kills_the_task(env: tuple[Launcher, Exits, Path]) -> None:
    la, exits, base = env
    sb = run(la, base, "r7", ["/bin/sh", "-c", "echo $$; exec sleep 60"])
    await wait_for_file(sb / "stdout", "\n")
    task_pid = int((sb / "stdout").read_text())
    os.kill(la.pids()["r7"], signal.SIGKILL)  # the wrapper, not the task
    assert await exits.wait("r7") is None
    assert await wait_gone(task_pid)


async def test_adopt_after_restart_and_pid_reuse_guard(env: tuple[Launcher, Exits, Path]) -> None:
    la, _, base = env
    sb = run(la, base, "long", ["/bin/sh", "-c", "echo go; read x < /dev/null; exec sleep 60"])
    await wait_for_file(sb / "stdout", "go")
    proc = la.get("long")
    assert proc is not None
    assert find_wrappers(str(base / "long.exit"))[0].pid == proc.pid
    la.detach_all()  # the agent "dies"; the wrapper is still our child here, which is fine
    exits2 = Exits()
    la2 = Launcher(exits2)
    assert not la2.adopt("long", proc.pid, proc.create_time + 5.0, base / "long.exit")  # wrong create time
    assert psutil.pid_exists(proc.pid)  # a mismatch is neither adopted nor killed
    assert la2.adopt("long", proc.pid, proc.create_time, base / "long.exit")
    la2.signal("long", "TERM")
    assert await exits2.wait("long") == 143  # read from the exit_status file
    reap(proc.pid)


def test_start_time_is_psutils_create_time() -> None:
    """The pid-reuse guard reads /proc/PID/stat itself; its figure must equal psutil's, with
    which older pid records (and recovery's checks) were written."""
    me = psutil.Process()
    assert start_time(os.getpid()) == me.create_time()
    assert proc_start(os.getpid())[1] in "RS"
    assert boot_time() == psutil.boot_time()
    with pytest.raises(OSError):
        start_time(2**22 + 12345)  # above pid_max: no such process


def test_a_spawned_process_create_time_is_what_proc_says(tmp_path: Path) -> None:
    """``spawn`` takes the create time from the clock when the spawn stays within one clock tick
    (no /proc read); whichever way, it equals what /proc/PID/stat (and psutil) say, which recovery
    compares for equality."""
    from agent.launcher import spawn

    procs = []
    for i in range(40):
        p = spawn(f"t{i}", ["true"], {"PATH": os.environ["PATH"]}, tmp_path / f"sb{i}", tmp_path / f"{i}.exit")
        procs.append(p)
        assert p.create_time == start_time(p.pid) == psutil.Process(p.pid).create_time()
    for p in procs:
        os.waitpid(p.pid, 0)


async def test_memory_limit_is_detected(env: tuple[Launcher, Exits, Path]) -> None:
    la, exits, base = env
    iso = MonitorIsolator()
    iso.prepare("hog", 40 * 1024 * 1024, None)
    code = "b = bytearray(120 * 1024 * 1024); print('allocated', flush=True); import time; time.sleep(60)"
    sb = run(la, base, "hog", [sys.executable, "-c", code])
    iso.attach("hog", la.pids()["hog"])
    await wait_for_file(sb / "stdout", "allocated")
    usage, breaches = iso.sample()
    assert usage["hog"].rss > 100 * 1024 * 1024
    assert [b.key for b in breaches] == ["hog"] and "Memory limit exceeded" in breaches[0].message
    la.signal("hog", "KILL")
    assert await exits.wait("hog") is None


def test_detect_monitors_when_asked(tmp_path: Path) -> None:
    iso = detect("psutil", tmp_path)
    assert iso.name == "psutil" and iso.describe() == {"name": "psutil", "kernel_limits": False, "why": "--isolation psutil"}


async def test_rusage_is_taken_by_the_exit_callback(tmp_path: Path) -> None:
    got: dict[str, tuple[float, int] | None] = {}
    done = asyncio.Event()

    def on_exit(key: str, code: int | None) -> None:
        got[key] = la.pop_rusage(key)
        done.set()

    la = Launcher(on_exit)
    code = "b = bytearray(60 * 1024 * 1024); n = 0\nfor i in range(3_000_000): n += i"
    run(la, tmp_path, "spin", [sys.executable, "-c", code])
    await asyncio.wait_for(done.wait(), 30)
    ru = got["spin"]
    assert ru is not None
    cpu, peak = ru
    assert cpu > 0.05 and peak > 60 * 1024 * 1024  # the task (a grandchild of ours) is counted
    assert la.pop_rusage("spin") is None  # taken once


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except OSError:
        return None


def reap(pid: int) -> None:
    os.waitpid(pid, 0)


def contains(path: Path, text: str) -> bool:
    return path.exists() and text in path.read_text()


async def wait_for_file(path: Path, text: str, within: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + within
    while asyncio.get_running_loop().time() < deadline:
        if contains(path, text):
            return
        await asyncio.sleep(0.01)  # polling a condition with a deadline
    raise AssertionError(f"{path} never contained {text!r}")


async def wait_gone(pid: int, within: float = 10.0) -> bool:
    deadline = asyncio.get_running_loop().time() + within
    while asyncio.get_running_loop().time() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        await asyncio.sleep(0.01)
    return False
