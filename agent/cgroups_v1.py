"""The cgroup v1 isolator (Mesos' ``cgroups/cpu,mem``, with ``pids`` and a freezer kill).

Each task gets a cgroup named after it under this agent's base directory in every hierarchy it
uses (``<mount>/<cgroups_root>/agent-<work dir digest>/<task>``; hierarchies mounted together,
such as ``cpu,cpuacct``, share one directory):

- ``memory``: ``memory.limit_in_bytes`` (and ``memory.memsw.limit_in_bytes`` where swap is
  accounted, so the task cannot swap past it); an eventfd registered on ``memory.oom_control``
  through ``cgroup.event_control`` wakes the agent when the kernel OOM-kills in the task, and the
  ``oom_kill`` counter of ``memory.oom_control`` confirms it (also read when the task exits);
- ``cpu``: ``cpu.shares`` (1024 per CPU) and, unless turned off, ``cpu.cfs_quota_us`` over a
  100 ms ``cpu.cfs_period_us`` (a hard limit: 0.5 CPU is 50 ms of every 100 ms);
- ``cpuacct``: ``cpuacct.usage``, the CPU time of every process that was ever in the cgroup;
- ``pids`` (where mounted): ``pids.max``, so a fork bomb stops at its cap;
- ``freezer`` (where mounted): a kill freezes the cgroup, SIGKILLs every process in it and thaws
  it, so nothing forks its way out; without it, ``cgroup.procs`` is walked until empty.

The task's wrapper joins every one of these cgroups (``echo $$ > .../cgroup.procs``) before it
runs the task, so every process of the task is in them from its first instruction.

Spare cgroups. Making a cgroup in five hierarchies and removing it again is a large part of the
agent's work per task, so up to ``SPARE_CGROUPS`` task cgroups are kept ready under names no task
can have (``+spare-<n>``): ``fill`` (the monitor's background thread) makes them, ``prepare``
renames one to the task's name in every hierarchy, and ``release`` renames a task's cgroup back to
a spare name once no process is left in it. A launch that takes a spare some task used before
writes every setting a new cgroup would have (no memory or CPU limit where the task has none,
1024 shares) and zeroes ``cpuacct.usage`` and the memory peak (which restarts from the page
cache still charged to the cgroup), so the figures are the new task's (the OOM count is read as
the baseline, as for a new cgroup). A cgroup still holding a
process, or one a step fails on, is removed as before. A restarted agent removes every spare
(``cleanup``: no task of its checkpoint has such a name). The per-task paths are strings and
the files are written with ``os.open``/``os.write`` (pathlib and text I/O cost more than the
system calls here).
"""

from __future__ import annotations

import collections
import contextlib
import itertools
import logging
import os
import signal
import time
from pathlib import Path
from typing import Any

import attrs

from agent import cgroup_probe
from agent.isolation import (
    CFS_PERIOD_US,
    MIN_CFS_QUOTA_US,
    MIN_MEMORY,
    Breach,
    CgroupOptions,
    Usage,
    kill_procs,
    memory_message,
    rmdir_retry,
)

log = logging.getLogger(__name__)

SPARE_CGROUPS = 64  # task cgroups kept ready (``fill``), and released ones kept for reuse
SPARE_PREFIX = "+spare-"  # a task's cgroup name never has a "+" (``cgroup_probe.task_cgroup_name``)


def _write(path: str, value: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, value.encode())
    finally:
        os.close(fd)


def _read(path: str) -> str:
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        chunks = []
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
        return b"".join(chunks).decode()
    finally:
        os.close(fd)


def _kv(path: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for ln in _read(path).splitlines():
        k, _, v = ln.partition(" ")
        with contextlib.suppress(ValueError):
            out[k] = int(v)
    return out


def _procs(cgroup: str) -> list[int]:
    try:
        return [int(p) for p in _read(cgroup + "/cgroup.procs").split()]
    except (OSError, ValueError):
        return []


@attrs.define
class _Task:
    pid: int | None
    mem_limit: int | None
    cpus: float | None
    dirs: dict[str, str]  # controller -> the task's cgroup directory
    oom_kills: int = 0
    efd: int | None = None  # the OOM eventfd
    ocfd: int | None = None  # memory.oom_control, held open for the eventfd registration


class CgroupV1Isolator:
    name = "cgroups-v1"

    def __init__(self, bases: dict[str, Path], options: CgroupOptions | None = None) -> None:
        self.bases = bases  # controller -> this agent's base directory in its hierarchy
        self.options = options or CgroupOptions()
        self._base = {c: str(b) for c, b in bases.items()}
        self._unique_bases = list(dict.fromkeys(self._base.values()))
        self._tasks: dict[str, _Task] = {}
        # (name, used before): ready in every hierarchy; deque appends and pops are atomic
        self._spare: collections.deque[tuple[str, bool]] = collections.deque()
        self._spare_seq = itertools.count()
        self.spare_made = 0  # spares made by ``fill``
        self.spare_used = 0  # launches that took a spare
        self.spare_returned = 0  # released cgroups kept as spares

    @classmethod
    def try_create(cls, bases: dict[str, str], options: CgroupOptions) -> tuple[CgroupV1Isolator | None, str]:
        paths = {c: Path(d) for c, d in bases.items()}
        usable: dict[str, Path] = {}
        for c, d in paths.items():
            try:
                d.mkdir(parents=True, exist_ok=True)
                if not os.access(d / "cgroup.procs", os.W_OK):
                    raise PermissionError(f"{d}/cgroup.procs is not writable")
            except OSError as e:
                if c in cgroup_probe.V1_REQUIRED:
                    return None, f"cgroups-v1: cannot use {d}: {e}"
                log.info("cgroups-v1: %s not used (%s)", c, e)
                continue
            usable[c] = d
        if options.cpu_quota and not (usable["cpu"] / "cpu.cfs_quota_us").exists():
            return None, "cgroups-v1: the cpu controller has no CFS bandwidth control (cpu.cfs_quota_us)"
        return cls(usable, options), ""

    def _dirs(self, key: str) -> dict[str, str]:
        name = cgroup_probe.task_cgroup_name(key)
        return {c: f"{b}/{name}" for c, b in self._base.items()}

    @staticmethod
    def _unique(dirs: dict[str, str]) -> list[str]:
        return list(dict.fromkeys(dirs.values()))

    # --- spare cgroups ---------------------------------------------------------------------------

    def fill(self) -> int:
        """Background thread: make spare cgroups until ``SPARE_CGROUPS`` are ready; how many."""
        made = 0
        while len(self._spare) < SPARE_CGROUPS:
            name = f"{SPARE_PREFIX}{next(self._spare_seq)}"
            dirs = [f"{b}/{name}" for b in self._unique_bases]
            try:
                for d in dirs:
                    os.makedirs(d)
            except OSError as e:
                log.debug("cgroups-v1: no spare cgroup %s: %s", name, e)
                for d in dirs:
                    with contextlib.suppress(OSError):
                        os.rmdir(d)
                break
            self._spare.append((name, False))
            made += 1
        self.spare_made += made
        return made

    @property
    def spares(self) -> int:
        return len(self._spare)

    def _take_spare(self, dirs: dict[str, str]) -> bool | None:
        """Rename a spare to the task's cgroup in every hierarchy: None when there is none (or
        renaming failed: the caller makes the cgroup instead), else whether a task used it before."""
        try:
            name, used = self._spare.popleft()
        except IndexError:
            return None
        moved: list[tuple[str, str]] = []
        try:
            for d in self._unique(dirs):
                src = f"{d.rsplit('/', 1)[0]}/{name}"
                os.rename(src, d)
                moved.append((src, d))
        except OSError as e:
            log.debug("cgroups-v1: spare %s not used: %s", name, e)
            for src, d in moved:
                with contextlib.suppress(OSError):
                    os.rename(d, src)
            for b in self._unique_bases:
                with contextlib.suppress(OSError):
                    os.rmdir(f"{b}/{name}")
            return None
        self.spare_used += 1
        return used

    def _keep_spare(self, dirs: dict[str, str]) -> bool:
        """A released task's cgroup, empty, renamed to a spare name in every hierarchy (False: not
        kept; the caller removes what is left). Its settings are rewritten by the next launch."""
        if len(self._spare) >= SPARE_CGROUPS or _procs(dirs["memory"]):
            return False  # every process of a task is in all its cgroups: one listing tells
        name = f"{SPARE_PREFIX}{next(self._spare_seq)}"
        moved: list[tuple[str, str]] = []
        try:
            for d in self._unique(dirs):
                dst = f"{d.rsplit('/', 1)[0]}/{name}"
                os.rename(d, dst)
                moved.append((d, dst))
        except OSError as e:
            log.debug("cgroups-v1: %s not kept as a spare: %s", dirs["memory"], e)
            for d, dst in moved:
                with contextlib.suppress(OSError):
                    os.rename(dst, d)
            return False
        self._spare.append((name, True))
        self.spare_returned += 1
        return True

    # --- life of a task --------------------------------------------------------------------------

    def prepare(self, key: str, mem_limit: int | None, cpus: float | None) -> tuple[str, ...]:
        dirs = self._dirs(key)
        used = self._take_spare(dirs)
        if used is None:
            for d in self._unique(dirs):
                # parents: the agent's base may have been removed while it held no task (an empty
                # cgroup is fair game for a cleanup sweep); every launch would fail without it
                os.makedirs(d, exist_ok=True)
        mem = dirs["memory"]
        if used:  # a task had it: zero its counters (its settings are all rewritten below)
            _write(f"{mem}/memory.max_usage_in_bytes", "0")
            _write(f"{dirs['cpuacct']}/cpuacct.usage", "0")
        if mem_limit is not None:
            limit = str(max(mem_limit, MIN_MEMORY))
            if used:  # the swap limit may be below the new limit: raise it first
                with contextlib.suppress(OSError):
                    _write(f"{mem}/memory.memsw.limit_in_bytes", "-1")
            _write(f"{mem}/memory.limit_in_bytes", limit)
            with contextlib.suppress(OSError):  # only where swap is accounted
                _write(f"{mem}/memory.memsw.limit_in_bytes", limit)
        elif used:
            with contextlib.suppress(OSError):
                _write(f"{mem}/memory.memsw.limit_in_bytes", "-1")
            _write(f"{mem}/memory.limit_in_bytes", "-1")
        cpu = dirs["cpu"]
        if cpus is not None:
            _write(f"{cpu}/cpu.shares", str(max(2, int(1024 * cpus))))
            if self.options.cpu_quota:
                _write(f"{cpu}/cpu.cfs_period_us", str(CFS_PERIOD_US))
                _write(f"{cpu}/cpu.cfs_quota_us", str(max(MIN_CFS_QUOTA_US, int(cpus * CFS_PERIOD_US))))
        elif used:
            _write(f"{cpu}/cpu.shares", "1024")
            with contextlib.suppress(OSError):  # no CFS bandwidth control: never set either
                _write(f"{cpu}/cpu.cfs_quota_us", "-1")
        if self.options.pids_max > 0 and "pids" in dirs:
            _write(f"{dirs['pids']}/pids.max", str(self.options.pids_max))
        t = _Task(None, mem_limit, cpus, dirs)
        self._watch_oom(t)
        old = self._tasks.pop(key, None)
        if old is not None:
            self._close(old)
        self._tasks[key] = t
        return tuple(f"{d}/cgroup.procs" for d in self._unique(dirs))

    def _watch_oom(self, t: _Task) -> None:
        mem = t.dirs["memory"]
        try:
            t.oom_kills = _kv(f"{mem}/memory.oom_control").get("oom_kill", 0)
        except OSError:
            t.oom_kills = 0
        if t.mem_limit is None:
            return
        try:
            t.efd = os.eventfd(0, os.EFD_CLOEXEC | os.EFD_NONBLOCK)
            t.ocfd = os.open(f"{mem}/memory.oom_control", os.O_RDONLY | os.O_CLOEXEC)
            _write(f"{mem}/cgroup.event_control", f"{t.efd} {t.ocfd}")
        except OSError as e:
            log.info("no OOM notification for %s (%s): sampled instead", mem, e)
            self._close(t)

    @staticmethod
    def _close(t: _Task) -> None:
        for fd in (t.efd, t.ocfd):
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)
        t.efd = t.ocfd = None

    def attach(self, key: str, pid: int) -> None:
        t = self._tasks.get(key)
        if t is not None:
            t.pid = pid

    def recover(self, key: str, pid: int, mem_limit: int | None, cpus: float | None) -> None:
        dirs = self._dirs(key)
        if not os.path.isdir(dirs["memory"]):
            return  # launched before this isolator ran: nothing of ours to watch
        t = _Task(pid, mem_limit, cpus, dirs)
        self._watch_oom(t)
        self._tasks[key] = t

    def oom_fd(self, key: str) -> int | None:
        t = self._tasks.get(key)
        return t.efd if t is not None else None

    def oom_event(self, key: str) -> str | None:
        """The eventfd woke (the cgroup hit its limit and the kernel is OOM-killing in it, or the
        cgroup is going away): drain it, and the message if it was an OOM."""
        t = self._tasks.get(key)
        if t is None or t.efd is None:
            return None
        with contextlib.suppress(OSError):
            os.eventfd_read(t.efd)
        mem = t.dirs["memory"]
        if not os.path.isdir(mem):
            return None  # the notification a removed cgroup sends
        with contextlib.suppress(OSError):
            t.oom_kills = max(t.oom_kills, _kv(f"{mem}/memory.oom_control").get("oom_kill", 0))
        peak = None
        with contextlib.suppress(OSError, ValueError):
            peak = int(_read(f"{mem}/memory.max_usage_in_bytes"))
        return memory_message(peak, t.mem_limit)

    def oom_killed(self, key: str) -> str | None:
        t = self._tasks.get(key)
        if t is None or t.mem_limit is None:
            return None
        mem = t.dirs["memory"]
        try:
            n = _kv(f"{mem}/memory.oom_control").get("oom_kill", 0)
        except OSError:
            return None
        if n <= t.oom_kills:
            return None
        t.oom_kills = n
        peak = None
        with contextlib.suppress(OSError, ValueError):
            peak = int(_read(f"{mem}/memory.max_usage_in_bytes"))
        return memory_message(peak, t.mem_limit)

    def usage(self, key: str) -> Usage | None:
        t = self._tasks.get(key)
        if t is None:
            return None
        try:
            cpu = int(_read(f"{t.dirs['cpuacct']}/cpuacct.usage")) / 1e9
            rss = _kv(f"{t.dirs['memory']}/memory.stat").get("total_rss", 0)
        except (OSError, ValueError):
            return None
        return Usage(rss, cpu)

    def kill(self, key: str) -> int:
        t = self._tasks.get(key)
        dirs = t.dirs if t is not None else self._dirs(key)
        return self._kill_dirs(dirs)

    def _kill_dirs(self, dirs: dict[str, str]) -> int:
        sent = 0
        frz = dirs.get("freezer")
        if frz is not None and _procs(frz):
            try:
                _write(f"{frz}/freezer.state", "FROZEN")
                deadline = time.monotonic() + 0.5
                while _read(f"{frz}/freezer.state").strip() != "FROZEN" and time.monotonic() < deadline:
                    time.sleep(0.001)
                for pid in _procs(frz):
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.kill(pid, signal.SIGKILL)
                        sent += 1
            except OSError as e:
                log.debug("freezer kill of %s: %s", frz, e)
            finally:
                with contextlib.suppress(OSError):
                    _write(f"{frz}/freezer.state", "THAWED")
        if not _procs(dirs["memory"]):
            return sent  # (also when it is gone)
        return sent + kill_procs(Path(dirs["memory"]))

    def release(self, key: str) -> None:
        t = self._tasks.pop(key, None)
        if t is not None:
            self._close(t)
        dirs = t.dirs if t is not None else self._dirs(key)
        if not os.path.isdir(dirs["memory"]):
            return
        self._kill_dirs(dirs)
        if not self._keep_spare(dirs):
            self._remove(dirs)

    def _remove(self, dirs: dict[str, str]) -> None:
        if not os.path.isdir(dirs["memory"]):
            return
        self._kill_dirs(dirs)
        for d in self._unique(dirs):
            if not rmdir_retry(Path(d)):
                log.warning("cgroup %s could not be removed (processes left in it)", d)

    def cleanup(self, keep: set[str]) -> int:
        names = {cgroup_probe.task_cgroup_name(k) for k in keep}
        stale: set[str] = set()
        for b in self._unique_bases:
            with contextlib.suppress(OSError):
                stale |= {e.name for e in os.scandir(b) if e.is_dir(follow_symlinks=False) and e.name not in names}
        self._spare.clear()  # spares are removed too (``+spare-`` names are never kept)
        for name in stale:
            self._remove({c: f"{b}/{name}" for c, b in self._base.items()})
        return len(stale)

    def close(self) -> None:
        while self._spare:
            name, _ = self._spare.popleft()
            for b in self._unique_bases:
                with contextlib.suppress(OSError):
                    os.rmdir(f"{b}/{name}")
        for base in dict.fromkeys(self.bases.values()):
            with contextlib.suppress(OSError):
                base.rmdir()  # only when no task cgroup is left in it
                base.parent.rmdir()  # the cgroups root, when no other agent uses it

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "kernel_limits": True,
                "cgroups": {c: str(d) for c, d in sorted(self.bases.items())},
                "cpu_quota": self.options.cpu_quota, "pids_max": self.options.pids_max,
                "spare_cgroups": {"ready": len(self._spare), "made": self.spare_made, "used": self.spare_used,
                                  "returned": self.spare_returned}}

    def sample(self) -> tuple[dict[str, Usage], list[Breach]]:
        usage: dict[str, Usage] = {}
        breaches: list[Breach] = []
        for key in list(self._tasks):
            u = self.usage(key)
            if u is not None:
                usage[key] = u
            msg = self.oom_killed(key)
            if msg is not None:
                breaches.append(Breach(key, msg))
        return usage, breaches


__all__ = ["CgroupV1Isolator"]
