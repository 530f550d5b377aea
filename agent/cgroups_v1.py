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

Spare cgroups. Making a cgroup in five hierarchies and removing it again costs the agent more
than most of a launch, so up to ``SPARE_CGROUPS`` task cgroups are kept ready under names no task
can have (``+spare-<n>``): ``fill`` (the monitor's background thread) makes them, ``prepare``
renames one to the task's name in every hierarchy before it writes the task's limits, and
``release`` turns a task's cgroup back into a spare once every process has left it: its limits
and counters reset to a new cgroup's (no memory or CPU limit, 1024 shares, ``pids.max`` max,
``cpuacct.usage`` and the memory peak zeroed), then renamed. A cgroup still holding a process,
or one a step fails on, is removed as before. A restarted agent removes every spare
(``cleanup``: no task of its checkpoint has such a name).
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
    read_kv,
    read_procs,
    rmdir_retry,
)

log = logging.getLogger(__name__)

SPARE_CGROUPS = 16  # task cgroups kept ready (``fill``), and released ones kept for reuse
SPARE_PREFIX = "+spare-"  # a task's cgroup name never has a "+" (``cgroup_probe.task_cgroup_name``)


@attrs.define
class _Task:
    pid: int | None
    mem_limit: int | None
    cpus: float | None
    dirs: dict[str, Path]  # controller -> the task's cgroup directory
    oom_kills: int = 0
    efd: int | None = None  # the OOM eventfd
    ocfd: int | None = None  # memory.oom_control, held open for the eventfd registration


class CgroupV1Isolator:
    name = "cgroups-v1"

    def __init__(self, bases: dict[str, Path], options: CgroupOptions | None = None) -> None:
        self.bases = bases  # controller -> this agent's base directory in its hierarchy
        self.options = options or CgroupOptions()
        self._tasks: dict[str, _Task] = {}
        self._spare: collections.deque[str] = collections.deque()  # ready, in every hierarchy
        self._spare_seq = itertools.count()
        self.spare_made = 0  # spares made by ``fill``
        self.spare_used = 0  # launches that took a spare
        self.spare_returned = 0  # released cgroups turned into spares

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

    def _dirs(self, key: str) -> dict[str, Path]:
        name = cgroup_probe.task_cgroup_name(key)
        return {c: b / name for c, b in self.bases.items()}

    @staticmethod
    def _unique(dirs: dict[str, Path]) -> list[Path]:
        seen: dict[Path, None] = {}
        for d in dirs.values():
            seen.setdefault(d, None)
        return list(seen)

    # --- life of a task --------------------------------------------------------------------------

    # --- spare cgroups ---------------------------------------------------------------------------

    def fill(self) -> int:
        """Background thread: make spare cgroups until ``SPARE_CGROUPS`` are ready; how many."""
        made = 0
        while len(self._spare) < SPARE_CGROUPS:
            name = f"{SPARE_PREFIX}{next(self._spare_seq)}"
            dirs = [b / name for b in self._unique(self.bases)]
            try:
                for d in dirs:
                    d.mkdir(parents=True)
            except OSError as e:
                log.debug("cgroups-v1: no spare cgroup %s: %s", name, e)
                for d in dirs:
                    with contextlib.suppress(OSError):
                        d.rmdir()
                break
            self._spare.append(name)
            made += 1
        self.spare_made += made
        return made

    @property
    def spares(self) -> int:
        return len(self._spare)

    def _take_spare(self, dirs: dict[str, Path]) -> bool:
        """Rename a spare to the task's cgroup in every hierarchy (False: none, or it failed and
        the caller makes the cgroup instead)."""
        try:
            name = self._spare.popleft()
        except IndexError:
            return False
        moved: list[tuple[Path, Path]] = []
        try:
            for d in self._unique(dirs):
                src = d.parent / name
                os.rename(src, d)
                moved.append((src, d))
        except OSError as e:
            log.debug("cgroups-v1: spare %s not used: %s", name, e)
            for src, d in moved:
                with contextlib.suppress(OSError):
                    os.rename(d, src)
            for b in self._unique(self.bases):
                with contextlib.suppress(OSError):
                    (b / name).rmdir()
            return False
        self.spare_used += 1
        return True

    def _make_spare(self, dirs: dict[str, Path]) -> bool:
        """A released task's cgroup, empty, reset to a new cgroup's settings and renamed to a spare
        name in every hierarchy (False: not kept; the caller removes what is left)."""
        if len(self._spare) >= SPARE_CGROUPS:
            return False
        unique = self._unique(dirs)
        try:
            if any(read_procs(d) for d in unique):
                return False
            mem, cpu = dirs["memory"], dirs["cpu"]
            with contextlib.suppress(OSError):  # only where swap is accounted (raised first)
                (mem / "memory.memsw.limit_in_bytes").write_text("-1")
            (mem / "memory.limit_in_bytes").write_text("-1")
            (mem / "memory.max_usage_in_bytes").write_text("0")
            (cpu / "cpu.shares").write_text("1024")
            with contextlib.suppress(OSError):  # no CFS bandwidth control: never written either
                (cpu / "cpu.cfs_quota_us").write_text("-1")
            (dirs["cpuacct"] / "cpuacct.usage").write_text("0")
            if "pids" in dirs:
                (dirs["pids"] / "pids.max").write_text("max")
            name = f"{SPARE_PREFIX}{next(self._spare_seq)}"
            moved: list[tuple[Path, Path]] = []
            try:
                for d in unique:
                    dst = d.parent / name
                    os.rename(d, dst)
                    moved.append((d, dst))
            except OSError:
                for d, dst in moved:
                    with contextlib.suppress(OSError):
                        os.rename(dst, d)
                raise
        except OSError as e:
            log.debug("cgroups-v1: %s not kept as a spare: %s", dirs["memory"], e)
            return False
        self._spare.append(name)
        self.spare_returned += 1
        return True

    # --- life of a task --------------------------------------------------------------------------

    def prepare(self, key: str, mem_limit: int | None, cpus: float | None) -> tuple[str, ...]:
        dirs = self._dirs(key)
        if not self._take_spare(dirs):
            for d in self._unique(dirs):
                # parents: the agent's base may have been removed while it held no task (an empty
                # cgroup is fair game for a cleanup sweep); every launch would fail without it
                d.mkdir(parents=True, exist_ok=True)
        mem = dirs["memory"]
        if mem_limit is not None:
            limit = str(max(mem_limit, MIN_MEMORY))
            (mem / "memory.limit_in_bytes").write_text(limit)
            with contextlib.suppress(OSError):  # only where swap is accounted
                (mem / "memory.memsw.limit_in_bytes").write_text(limit)
        if cpus is not None:
            cpu = dirs["cpu"]
            (cpu / "cpu.shares").write_text(str(max(2, int(1024 * cpus))))
            if self.options.cpu_quota:
                (cpu / "cpu.cfs_period_us").write_text(str(CFS_PERIOD_US))
                (cpu / "cpu.cfs_quota_us").write_text(str(max(MIN_CFS_QUOTA_US, int(cpus * CFS_PERIOD_US))))
        if self.options.pids_max > 0 and "pids" in dirs:
            (dirs["pids"] / "pids.max").write_text(str(self.options.pids_max))
        t = _Task(None, mem_limit, cpus, dirs)
        self._watch_oom(t)
        old = self._tasks.pop(key, None)
        if old is not None:
            self._close(old)
        self._tasks[key] = t
        return tuple(str(d / "cgroup.procs") for d in self._unique(dirs))

    def _watch_oom(self, t: _Task) -> None:
        mem = t.dirs["memory"]
        try:
            t.oom_kills = read_kv(mem / "memory.oom_control").get("oom_kill", 0)
        except OSError:
            t.oom_kills = 0
        if t.mem_limit is None:
            return
        try:
            t.efd = os.eventfd(0, os.EFD_CLOEXEC | os.EFD_NONBLOCK)
            t.ocfd = os.open(mem / "memory.oom_control", os.O_RDONLY | os.O_CLOEXEC)
            (mem / "cgroup.event_control").write_text(f"{t.efd} {t.ocfd}")
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
        if not dirs["memory"].is_dir():
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
        if not mem.is_dir():
            return None  # the notification a removed cgroup sends
        with contextlib.suppress(OSError):
            t.oom_kills = max(t.oom_kills, read_kv(mem / "memory.oom_control").get("oom_kill", 0))
        peak = None
        with contextlib.suppress(OSError, ValueError):
            peak = int((mem / "memory.max_usage_in_bytes").read_text())
        return memory_message(peak, t.mem_limit)

    def oom_killed(self, key: str) -> str | None:
        t = self._tasks.get(key)
        if t is None or t.mem_limit is None:
            return None
        mem = t.dirs["memory"]
        try:
            n = read_kv(mem / "memory.oom_control").get("oom_kill", 0)
        except OSError:
            return None
        if n <= t.oom_kills:
            return None
        t.oom_kills = n
        peak = None
        with contextlib.suppress(OSError, ValueError):
            peak = int((mem / "memory.max_usage_in_bytes").read_text())
        return memory_message(peak, t.mem_limit)

    def usage(self, key: str) -> Usage | None:
        t = self._tasks.get(key)
        if t is None:
            return None
        try:
            cpu = int((t.dirs["cpuacct"] / "cpuacct.usage").read_text()) / 1e9
            rss = read_kv(t.dirs["memory"] / "memory.stat").get("total_rss", 0)
        except (OSError, ValueError):
            return None
        return Usage(rss, cpu)

    def kill(self, key: str) -> int:
        t = self._tasks.get(key)
        dirs = t.dirs if t is not None else self._dirs(key)
        return self._kill_dirs(dirs)

    def _kill_dirs(self, dirs: dict[str, Path]) -> int:
        sent = 0
        frz = dirs.get("freezer")
        if frz is not None and frz.is_dir() and read_procs(frz):
            try:
                (frz / "freezer.state").write_text("FROZEN")
                deadline = time.monotonic() + 0.5
                while (frz / "freezer.state").read_text().strip() != "FROZEN" and time.monotonic() < deadline:
                    time.sleep(0.001)
                for pid in read_procs(frz):
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.kill(pid, signal.SIGKILL)
                        sent += 1
            except OSError as e:
                log.debug("freezer kill of %s: %s", frz, e)
            finally:
                with contextlib.suppress(OSError):
                    (frz / "freezer.state").write_text("THAWED")
        return sent + kill_procs(dirs["memory"])

    def release(self, key: str) -> None:
        t = self._tasks.pop(key, None)
        if t is not None:
            self._close(t)
        dirs = t.dirs if t is not None else self._dirs(key)
        if not dirs["memory"].is_dir():
            return
        self._kill_dirs(dirs)
        if not self._make_spare(dirs):
            self._remove(dirs)

    def _remove(self, dirs: dict[str, Path]) -> None:
        if not dirs["memory"].is_dir():
            return
        self._kill_dirs(dirs)
        for d in self._unique(dirs):
            if not rmdir_retry(d):
                log.warning("cgroup %s could not be removed (processes left in it)", d)

    def cleanup(self, keep: set[str]) -> int:
        names = {cgroup_probe.task_cgroup_name(k) for k in keep}
        stale: set[str] = set()
        for b in self._unique(self.bases):
            with contextlib.suppress(OSError):
                stale |= {d.name for d in b.iterdir() if d.is_dir() and d.name not in names}
        self._spare.clear()  # spares are removed too (``+spare-`` names are never kept)
        for name in stale:
            self._remove({c: b / name for c, b in self.bases.items()})
        return len(stale)

    def close(self) -> None:
        while self._spare:
            name = self._spare.popleft()
            for b in self._unique(self.bases):
                with contextlib.suppress(OSError):
                    (b / name).rmdir()
        for b in self._unique(self.bases):
            with contextlib.suppress(OSError):
                b.rmdir()  # only when no task cgroup is left in it
                b.parent.rmdir()  # the cgroups root, when no other agent uses it

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
