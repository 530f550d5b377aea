"""The launcher: task processes, each in its own session, behind a tiny ``/bin/sh`` wrapper.

Why a wrapper, and why ``/bin/sh``
----------------------------------
The agent must be able to die (``kill -9``) without its tasks dying, and still learn their exit
codes afterwards. So every task runs under a wrapper process that outlives the agent: the wrapper
(session and process-group leader, ``setsid``) runs the task as a foreground child in the same
process group, waits for it, writes ``<code>\\n`` to the task's ``exit_status`` file and exits
with the same code. The wrapper is ``/bin/sh -c WRAPPER_SCRIPT`` rather than a Python program:
starting a Python interpreter per task costs ~15 ms, dash costs well under 1 ms, which keeps
launch throughput near the raw spawn rate (see README, "Launch speed").

The wrapper traps TERM/INT/HUP/QUIT (so a SIGTERM to the group reaches the task and the wrapper
survives to record the status; trapped signals are reset to default in the task), joins the
task's cgroup first when there is one, and ``cd``s into the sandbox.

Kill: SIGTERM to the process group, then SIGKILL to the group after the grace period (the
tracker times it). When the wrapper ends, for whatever reason, the launcher SIGKILLs the group
*before* reaping it (the zombie still holds the pgid), so no task process outlives its task.

Reaping without a busy loop: one ``pidfd`` per process, registered with the event loop
(``add_reader``); it becomes readable when the process exits. Our own children are then reaped
with ``waitpid``; wrappers adopted after an agent restart (children of init now) are read from
their ``exit_status`` file.

Spawning uses ``os.posix_spawn`` (vfork-style, cheap even from a large Python process) with
``setsid`` and file actions for stdin (``/dev/null``), ``stdout`` and ``stderr``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import psutil

from agent.checkpoint import parse_exit_status

log = logging.getLogger(__name__)

WRAPPER_SCRIPT = (
    "trap : TERM INT HUP QUIT; "
    '[ "$2" = - ] || for f in $2; do echo $$ > "$f" || exit 125; done; '
    'cd "$1" || exit 126; '
    "shift 2; "
    '"$@" 3<&- 4<&-; rc=$?; '
    "printf '%d\\n' $rc > \"$0\"; "
    "exit $rc"
)
# The wrapper of agents before November 2026 (one cgroup file, no log pipes): still recognised at
# recovery, so an upgraded agent re-attaches the tasks an older one started.
LEGACY_WRAPPER_SCRIPTS = (
    "trap : TERM INT HUP QUIT; "
    '[ "$2" = - ] || echo $$ > "$2" || exit 125; '
    'cd "$1" || exit 126; '
    "shift 2; "
    '"$@"; rc=$?; '
    "printf '%d\\n' $rc > \"$0\"; "
    "exit $rc",
)
SH = "/bin/sh"
SIGNALS = {"TERM": signal.SIGTERM, "KILL": signal.SIGKILL}


_TICKS = os.sysconf("SC_CLK_TCK")
_TICK_NS = 1_000_000_000 // _TICKS  # the kernel's nsec_to_clock_t divides by this


def boot_time() -> float:
    """The boot time as ``/proc/stat`` ``btime`` gives it (whole seconds since the epoch), which
    is what psutil adds to a process's start ticks. Computed from two vDSO clocks (CLOCK_REALTIME
    minus CLOCK_BOOTTIME, floored, as the kernel does) instead of reading ``/proc/stat``; within a
    millisecond of a second boundary the floor could go either way, so there ``/proc/stat`` is read."""
    offset = time.clock_gettime(time.CLOCK_REALTIME) - time.clock_gettime(time.CLOCK_BOOTTIME)
    frac = offset % 1.0
    if 0.001 < frac < 0.999:
        return float(int(offset))
    with open("/proc/stat", "rb") as f:
        for line in f:
            if line.startswith(b"btime"):
                return float(line.split()[1])
    return float(int(offset))  # pragma: no cover - every Linux /proc/stat has btime


def proc_start(pid: int) -> tuple[float, str]:
    """``(create time, state letter)`` of a process from one read of ``/proc/PID/stat``: the start
    time (field 22, clock ticks since boot) plus the boot time, exactly as ``psutil.Process(pid)
    .create_time()`` computes it (so records written with either compare equal), at a third of its
    cost. This is the pid-reuse guard of the pid records. Raises ``OSError`` if there is no such
    process."""
    with open(f"/proc/{pid}/stat", "rb") as f:
        data = f.read()
    fields = data.rpartition(b")")[2].split()
    try:
        return float(fields[19]) / _TICKS + boot_time(), fields[0].decode()
    except (IndexError, ValueError) as e:  # pragma: no cover - the kernel's format is fixed
        raise OSError(f"unreadable /proc/{pid}/stat") from e


def start_time(pid: int) -> float:
    """The process's create time (see ``proc_start``); ``OSError`` if it does not exist."""
    return proc_start(pid)[0]


def boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return "unknown"


class LaunchError(Exception):
    pass


@attrs.define
class Proc:
    key: str
    pid: int
    create_time: float
    exit_status: Path
    child: bool  # our child (reaped with waitpid) or adopted after a restart
    pidfd: int | None = None
    done: bool = False


ExitCallback = Callable[[str, int | None], None]


class Launcher:
    """Starts, signals and watches wrapped processes. ``on_exit(key, code)`` is called once per
    process with the task's exit code (128+N for signal N) or None when nothing was recorded."""

    def __init__(self, on_exit: ExitCallback) -> None:
        self._on_exit = on_exit
        self._procs: dict[str, Proc] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        # key -> (cpu seconds, peak RSS bytes) of an own child that ended, from ``wait4`` (the
        # wrapper and every descendant it reaped); taken by the exit callback (``pop_rusage``)
        self._rusage: dict[str, tuple[float, int]] = {}

    def _get_loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
        return self._loop

    def __contains__(self, key: str) -> bool:
        return key in self._procs

    def get(self, key: str) -> Proc | None:
        return self._procs.get(key)

    def pids(self) -> dict[str, int]:
        return {k: p.pid for k, p in self._procs.items()}

    # --- launch ----------------------------------------------------------------------------

    def launch(
        self,
        key: str,
        argv: Sequence[str],
        env: Mapping[str, str],
        sandbox: Path,
        exit_status: Path,
        join: Sequence[str] = (),
    ) -> Proc:
        """``spawn`` + ``watch`` (on the event loop)."""
        if key in self._procs:
            raise LaunchError(f"{key} is already running")
        proc = spawn(key, argv, env, sandbox, exit_status, join)
        self.watch(proc)
        return proc

    def watch(self, proc: Proc) -> None:
        """Start watching a process from ``spawn`` (event-loop thread only)."""
        self._procs[proc.key] = proc
        self._watch(proc)

    def adopt(self, key: str, pid: int, create_time: float, exit_status: Path) -> bool:
        """Re-attach a wrapper that survived an agent restart. Only a process whose pid *and*
        create time match is adopted (the caller has checked the boot id); anything else —
        a reused pid — is left alone. Returns False if it is not (or no longer) ours."""
        try:
            pidfd = os.pidfd_open(pid)
        except OSError:
            return False
        try:
            ct, state = proc_start(pid)
        except OSError:
            os.close(pidfd)
            return False
        dead = state == "Z"  # exited, not yet reaped by init
        if dead or abs(ct - create_time) > 0.05:
            os.close(pidfd)
            return False
        proc = Proc(key, pid, create_time, exit_status, child=False, pidfd=pidfd)
        self._procs[key] = proc
        self._watch(proc)
        return True

    def _watch(self, proc: Proc) -> None:
        loop = self._get_loop()
        if proc.pidfd is None:
            try:
                proc.pidfd = os.pidfd_open(proc.pid)
            except OSError:
                # Gone already (only possible for a child that was reaped: never here) —
                # treat as exited right away.
                loop.call_soon(self._exited, proc)
                return
        loop.add_reader(proc.pidfd, self._exited, proc)

    def _exited(self, proc: Proc) -> None:
        if proc.done:
            return
        proc.done = True
        if proc.pidfd is not None:
            with contextlib.suppress(Exception):
                self._get_loop().remove_reader(proc.pidfd)
            os.close(proc.pidfd)
            proc.pidfd = None
        # The wrapper is gone; make sure nothing of its group survives (before reaping: the
        # zombie keeps the pgid from being reused).
        self._kill_group(proc, signal.SIGKILL)
        code: int | None = None
        if proc.child:
            try:
                _, status, ru = os.wait4(proc.pid, 0)
                wcode = os.waitstatus_to_exitcode(status)
                if wcode >= 0:
                    code = wcode
                self._rusage[proc.key] = (ru.ru_utime + ru.ru_stime, ru.ru_maxrss * 1024)  # maxrss: KiB
            except ChildProcessError:
                pass
        recorded = read_exit_status(proc.exit_status)
        if recorded is not None:
            code = recorded
        self._procs.pop(proc.key, None)
        try:
            self._on_exit(proc.key, code)
        except Exception:
            log.exception("exit callback failed for %s", proc.key)
        finally:
            self._rusage.pop(proc.key, None)

    def pop_rusage(self, key: str) -> tuple[float, int] | None:
        """In the exit callback: ``(cpu seconds, peak RSS bytes)`` of the wrapper and everything
        it reaped (the task), from ``wait4``; None for an adopted process (not our child)."""
        return self._rusage.pop(key, None)

    # --- signals ---------------------------------------------------------------------------

    def signal(self, key: str, name: str) -> bool:
        proc = self._procs.get(key)
        if proc is None or proc.done:
            return False
        self._kill_group(proc, SIGNALS[name])
        return True

    @staticmethod
    def _kill_group(proc: Proc, sig: int) -> None:
        try:
            os.killpg(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    def tree(self, key: str) -> list[psutil.Process]:
        """The wrapper and every descendant (for usage and memory accounting)."""
        proc = self._procs.get(key)
        if proc is None:
            return []
        try:
            p = psutil.Process(proc.pid)
            return [p, *p.children(recursive=True)]
        except psutil.Error:
            return []

    def detach_all(self) -> None:
        """Stop watching without touching the processes (agent shutdown: tasks keep running)."""
        loop = self._loop
        for proc in list(self._procs.values()):
            if proc.pidfd is not None:
                if loop is not None:
                    with contextlib.suppress(Exception):
                        loop.remove_reader(proc.pidfd)
                os.close(proc.pidfd)
                proc.pidfd = None
        self._procs.clear()


def spawn(
    key: str,
    argv: Sequence[str],
    env: Mapping[str, str],
    sandbox: Path,
    exit_status: Path,
    join: Sequence[str] = (),
    stdio: tuple[int, int] | None = None,
    keep: tuple[int, int] | None = None,
) -> Proc:
    """Start ``argv`` under the wrapper, in a new session, in ``sandbox``. Blocking but touches
    no shared state, so it may run in a worker thread; hand the result to ``Launcher.watch``.

    ``join``: the ``cgroup.procs`` files the wrapper writes its pid to before running the task
    (paths without whitespace). ``stdio``: descriptors for the task's stdout and stderr (the
    write ends of its log pipes) instead of the sandbox's ``stdout``/``stderr`` files; ``keep``:
    descriptors the wrapper holds as its fds 3 and 4 (the pipes' read ends: while it lives the
    pipes keep a reader, so a log writer that restarts finds them again; the task does not get
    them)."""
    if not argv:
        raise LaunchError("empty command")
    sb, ex = str(sandbox), str(exit_status)
    try:
        os.mkdir(sb)
    except FileExistsError:
        pass
    except FileNotFoundError:
        os.makedirs(sb, exist_ok=True)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(ex)  # a reused task id: never read the previous task's code
    args = [SH, "-c", WRAPPER_SCRIPT, ex, sb, " ".join(join) if join else "-", *argv]
    flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND
    actions: list[tuple[Any, ...]] = [(os.POSIX_SPAWN_OPEN, 0, "/dev/null", os.O_RDONLY, 0)]
    if stdio is None:
        actions += [
            (os.POSIX_SPAWN_OPEN, 1, sb + "/stdout", flags, 0o644),
            (os.POSIX_SPAWN_OPEN, 2, sb + "/stderr", flags, 0o644),
        ]
    else:
        actions += [(os.POSIX_SPAWN_DUP2, stdio[0], 1), (os.POSIX_SPAWN_DUP2, stdio[1], 2)]
        if keep is not None:
            actions += [(os.POSIX_SPAWN_DUP2, keep[0], 3), (os.POSIX_SPAWN_DUP2, keep[1], 4)]
    before = time.clock_gettime_ns(time.CLOCK_BOOTTIME)
    try:
        pid = os.posix_spawn(SH, args, dict(env), file_actions=actions, setsid=True)
    except OSError as e:
        raise LaunchError(f"cannot start {argv[0]!r}: {e}") from e
    return Proc(key, pid, _spawned_at(pid, before), exit_status, child=True)


def _spawned_at(pid: int, before: int) -> float:
    """The create time of a child just spawned, as ``start_time`` reads it, without reading
    ``/proc`` when the clock says it: the kernel stamps a new process with CLOCK_BOOTTIME at the
    fork (``start_boottime``), between ``before`` and now, and ``/proc/PID/stat`` gives it in
    whole clock ticks; when both readings fall in the same tick, so does the fork, and the value
    is the one ``/proc`` would give. Across a tick boundary (a spawn that took longer, or one
    close to a tick) it is read: the pid-reuse guard compares these values for equality."""
    after = time.clock_gettime_ns(time.CLOCK_BOOTTIME)
    tick = before // _TICK_NS
    if after // _TICK_NS == tick:
        return float(tick) / _TICKS + boot_time()
    try:
        return start_time(pid)  # our unreaped child: the pid is stable
    except OSError:
        return 0.0


def read_exit_status(path: Path) -> int | None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        return parse_exit_status(os.read(fd, 64))
    except OSError:
        return None
    finally:
        os.close(fd)


def kill_leftovers(groups: dict[int, tuple[float, str]]) -> int:
    """After a restart: SIGKILL what is left of tasks whose wrapper is gone. ``groups`` maps a
    dead wrapper's pid (= the task's pgid) to (its create time, the task's sandbox). A process is
    killed only if it is in that process group, was created after the wrapper, and carries the
    task's ``MESOS_SANDBOX`` in its environment — a reused pid or pgid is never touched.
    One pass over ``/proc``; returns how many processes were killed."""
    if not groups:
        return 0
    killed = 0
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                rest = f.read().rpartition(b")")[2].split()
            pgid = int(rest[2])
            if pgid not in groups:
                continue
            born, sandbox = groups[pgid]
            if float(rest[19]) / _TICKS + boot_time() + 0.05 < born:
                continue
            with open(f"/proc/{name}/environ", "rb") as f:
                env = f.read().split(b"\0")
            if f"MESOS_SANDBOX={sandbox}".encode() not in env:
                continue
            os.kill(int(name), signal.SIGKILL)
            killed += 1
        except (OSError, ValueError, IndexError, psutil.Error):
            continue
    return killed


def find_wrappers(marker: str, prefix: bool = False) -> list[psutil.Process]:
    """Wrapper processes whose command line names ``marker`` (a task's exit-status path, or a
    prefix of it): used at recovery for a task checkpointed without a pid record (a crash
    between the spawn and the pid record) and to find leftover executors."""
    found = []
    for p in psutil.process_iter(["cmdline"]):
        try:
            cmd = p.info["cmdline"] or []
        except psutil.Error:
            continue
        is_wrapper = len(cmd) > 3 and cmd[0] == SH and (cmd[2] == WRAPPER_SCRIPT or cmd[2] in LEGACY_WRAPPER_SCRIPTS)
        if is_wrapper and (cmd[3] == marker or (prefix and cmd[3].startswith(marker))):
            found.append(p)
    return found
