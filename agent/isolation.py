"""Resource isolation: kernel-enforced limits with cgroups (v2 or v1), ``/proc`` monitoring otherwise.

``detect(prefer, work_dir)`` picks the isolator from what the kernel offers (``agent.cgroup_probe``
decides, this module tries):

- ``CgroupV2Isolator`` when the agent's own cgroup is a delegated cgroup2 subtree offering
  ``memory`` and ``cpu`` (systemd ``Delegate=yes``). The agent moves itself into a leaf
  ``<own>/agent`` (the "no internal processes" rule), enables ``+memory +cpu (+pids)`` in its
  cgroup's ``subtree_control`` and gives each task ``<own>/tasks/<task>`` with ``memory.max``,
  ``memory.swap.max 0``, ``cpu.max`` (``cpu.weight`` by share) and ``pids.max``; the task's
  wrapper joins it before running the task, a kill writes ``cgroup.kill``, ``memory.events``
  (``oom_kill``) reveals a memory-limit kill.
- ``CgroupV1Isolator`` (``agent.cgroups_v1``) where ``memory``, ``cpu`` and ``cpuacct`` are cgroup v1
  hierarchies (Mesos' ``cgroups/cpu,mem`` isolator): ``memory.limit_in_bytes`` with an OOM
  notification (eventfd), ``cpu.cfs_quota_us``/``cpu.shares``, ``cpuacct.usage``, ``pids.max``, and
  a kill that freezes the cgroup (``freezer``) and SIGKILLs every process in it.
- ``MonitorIsolator`` otherwise: one sampling pass over ``/proc/*/stat`` per interval sums the RSS
  and CPU time of every process in each task's process group (the wrapper is the group leader, so
  orphaned grandchildren still count) and reports tasks past their memory limit; the service then
  kills them (``REASON_CONTAINER_LIMITATION_MEMORY``). No CPU limit.

Every isolator reports per-task usage (resident memory, cumulative CPU seconds) for the usage
reports, the resource estimator and the terminal status's labels. Blocking methods (``prepare``,
``kill``, ``release``, ``sample``, ``cleanup``) run off the event loop.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import time
from pathlib import Path
from typing import Any, Protocol

import attrs

from agent import cgroup_probe

log = logging.getLogger(__name__)

_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100

MIN_MEMORY = 32 * 1024 * 1024  # limits below this are enforced as this (Mesos' MIN_MEMORY)
CFS_PERIOD_US = 100_000  # Mesos' default CFS period
MIN_CFS_QUOTA_US = 1_000


@attrs.frozen
class Usage:
    rss: int  # bytes
    cpu_seconds: float  # cumulative user+system time


@attrs.frozen
class Breach:
    key: str
    message: str


@attrs.frozen
class CgroupOptions:
    """What the cgroup isolators enforce beyond memory: a hard CPU limit (CFS quota; off: CPU
    shares only, a weight under contention), a cap on the task's processes (0: none)."""

    cpu_quota: bool = True
    pids_max: int = 0
    cgroups_root: str = "agora"


@attrs.define
class _Limits:
    pid: int | None
    mem_limit: int | None
    cpus: float | None
    cgroup: Path | None = None
    oom_kills: int = 0  # the kernel's oom_kill count already reported


class Isolator(Protocol):
    name: str

    def prepare(self, key: str, mem_limit: int | None, cpus: float | None) -> tuple[str, ...]:
        """Before spawning (blocking): the ``cgroup.procs`` files the wrapper joins (none: ``()``)."""
        ...

    def attach(self, key: str, pid: int) -> None: ...

    def recover(self, key: str, pid: int, mem_limit: int | None, cpus: float | None) -> None:
        """After an agent restart: a re-attached task (its cgroup, if any, is found again)."""
        ...

    def oom_fd(self, key: str) -> int | None:
        """A descriptor that becomes readable when the kernel OOM-kills in the task (or None)."""
        ...

    def oom_event(self, key: str) -> str | None:
        """``oom_fd`` became readable: drain it; the message to report (None: not an OOM)."""
        ...

    def oom_killed(self, key: str) -> str | None:
        """If the kernel OOM-killed a process of the task since the last call: the message."""
        ...

    def usage(self, key: str) -> Usage | None:
        """One read of the task's counters now (None: nothing to read)."""
        ...

    def kill(self, key: str) -> int:
        """SIGKILL every process of the task, wherever it went (blocking). How many."""
        ...

    def fill(self) -> int:
        """Background thread: get task cgroups ready ahead of the launches (spares); how many
        were made (0 where nothing is kept ready)."""
        ...

    def release(self, key: str) -> None:
        """The task ended: kill what is left of it, remove its cgroup (blocking)."""
        ...

    def sample(self) -> tuple[dict[str, Usage], list[Breach]]: ...

    def cleanup(self, keep: set[str]) -> int:
        """After recovery (blocking): remove cgroups of tasks not in ``keep``, killing what is in them."""
        ...

    def describe(self) -> dict[str, Any]:
        """For ``/state``: the isolator, where its cgroups are, what it enforces."""
        ...

    def close(self) -> None:
        """The agent stops (blocking): remove its cgroup subtree if no task is left in it."""
        ...


def read_proc_groups() -> dict[int, Usage]:
    """One pass over ``/proc``: RSS and CPU time summed per process group. The group leader (for
    a task, the agent's wrapper, whose ~1.5 MB are not the task's) adds only the CPU time of the
    children it reaped (``cutime``/``cstime``: the task itself once it ended); every other member
    adds its own time and its reaped children's."""
    out: dict[int, list[float]] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return {}
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                raw = f.read()
        except OSError:
            continue
        rest = raw[raw.rfind(b")") + 2 :].split()
        if len(rest) < 22:
            continue
        pgrp = int(rest[2])
        reaped = (int(rest[13]) + int(rest[14])) / _TICKS
        acc = out.setdefault(pgrp, [0.0, 0.0])
        if pgrp == int(name):
            acc[1] += reaped
            continue
        acc[0] += int(rest[21]) * _PAGE
        acc[1] += (int(rest[11]) + int(rest[12])) / _TICKS + reaped
    return {g: Usage(int(v[0]), v[1]) for g, v in out.items()}


def _fmt_mb(n: int) -> str:
    return f"{n / (1024 * 1024):.1f} MB"


def memory_message(used: int | None, limit: int | None) -> str:
    lim = _fmt_mb(max(limit or 0, MIN_MEMORY))
    if used is None:
        return f"Memory limit exceeded: the kernel killed a process of the task at its {lim} limit (OOM kill)"
    return f"Memory limit exceeded: {_fmt_mb(used)} used of the {lim} limit (OOM kill)"


class MonitorIsolator:
    name = "psutil"

    def __init__(self, reason: str = "") -> None:
        self._tasks: dict[str, _Limits] = {}
        self.reason = reason  # why no cgroup isolator runs

    def prepare(self, key: str, mem_limit: int | None, cpus: float | None) -> tuple[str, ...]:
        self._tasks[key] = _Limits(None, mem_limit, cpus)
        return ()

    def attach(self, key: str, pid: int) -> None:
        lim = self._tasks.setdefault(key, _Limits(None, None, None))
        lim.pid = pid

    def recover(self, key: str, pid: int, mem_limit: int | None, cpus: float | None) -> None:
        self._tasks[key] = _Limits(pid, mem_limit, cpus)

    def set_limits(self, key: str, mem_limit: int | None, cpus: float | None) -> None:
        lim = self._tasks.setdefault(key, _Limits(None, None, None))
        lim.mem_limit, lim.cpus = mem_limit, cpus

    def oom_fd(self, key: str) -> int | None:
        return None

    def oom_event(self, key: str) -> str | None:
        return None

    def oom_killed(self, key: str) -> str | None:
        return None

    def usage(self, key: str) -> Usage | None:
        return None

    def kill(self, key: str) -> int:
        return 0  # the launcher's group kill is all there is

    def fill(self) -> int:
        """Nothing is kept ready (the spares are cgroup v1's, ``agent/cgroups_v1.py``)."""
        return 0

    def release(self, key: str) -> None:
        self._tasks.pop(key, None)

    def cleanup(self, keep: set[str]) -> int:
        return 0

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "kernel_limits": False, "why": self.reason}

    def close(self) -> None:
        pass

    def sample(self) -> tuple[dict[str, Usage], list[Breach]]:
        if not self._tasks:
            return {}, []
        groups = read_proc_groups()
        usage: dict[str, Usage] = {}
        breaches: list[Breach] = []
        for key, lim in list(self._tasks.items()):  # prepare() may run in the checkpoint thread
            if lim.pid is None:
                continue
            u = groups.get(lim.pid)
            if u is None:
                continue
            usage[key] = u
            if lim.mem_limit is not None and u.rss > max(lim.mem_limit, MIN_MEMORY):
                breaches.append(
                    Breach(key, f"Memory limit exceeded: {_fmt_mb(u.rss)} used > {_fmt_mb(max(lim.mem_limit, MIN_MEMORY))} limit")
                )
        return usage, breaches


# --- helpers shared by the cgroup isolators ---------------------------------------------------------


def read_kv(path: Path) -> dict[str, int]:
    """A ``key value`` per line file (``memory.stat``, ``cpu.stat``, ``memory.events``)."""
    out: dict[str, int] = {}
    for ln in path.read_text().splitlines():
        k, _, v = ln.partition(" ")
        with contextlib.suppress(ValueError):
            out[k] = int(v)
    return out


def read_procs(cgroup: Path) -> list[int]:
    try:
        return [int(p) for p in (cgroup / "cgroup.procs").read_text().split()]
    except (OSError, ValueError):
        return []


def kill_procs(cgroup: Path, rounds: int = 50) -> int:
    """SIGKILL every process listed in ``cgroup`` until it lists none (a process forking as it is
    killed shows up in the next round); how many signals were sent."""
    sent = 0
    for _ in range(rounds):
        pids = read_procs(cgroup)
        if not pids:
            break
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
                sent += 1
        time.sleep(0.001)  # let the signals land before listing again
    return sent


def rmdir_retry(d: Path, attempts: int = 100) -> bool:
    """Remove an (empty) cgroup directory; a just-killed process may take a moment to leave it."""
    for i in range(attempts):
        try:
            d.rmdir()
            return True
        except FileNotFoundError:
            return True
        except OSError:
            if i == attempts - 1:
                return False
            kill_procs(d, rounds=1)
            time.sleep(0.002)
    return False


class CgroupV2Isolator:
    name = "cgroups-v2"

    def __init__(self, root: Path, options: CgroupOptions | None = None,
                 controllers: frozenset[str] = frozenset({"memory", "cpu"})) -> None:
        self.root = root
        self.tasks_dir = root / "tasks"
        self.options = options or CgroupOptions()
        self.controllers = controllers
        self._tasks: dict[str, _Limits] = {}

    @classmethod
    def try_create(cls, own: Path, options: CgroupOptions) -> tuple[CgroupV2Isolator | None, str]:
        """Take over the delegated subtree ``own``: the agent moves into ``own/agent`` and
        ``own/tasks`` holds the tasks. (None, why) when the kernel says no."""
        if own.name == "agent" and (own.parent / "tasks").is_dir():
            own = own.parent  # a restart inside the leaf we made last time
        try:
            offered = frozenset((own / "cgroup.controllers").read_text().split())
            wanted = [c for c in ("memory", "cpu", "pids") if c in offered]
            leaf = own / "agent"
            leaf.mkdir(exist_ok=True)
            # our cgroup's processes (the agent, perhaps its log writer) go to the leaf
            for pid in (own / "cgroup.procs").read_text().split():
                with contextlib.suppress(OSError):
                    (leaf / "cgroup.procs").write_text(pid)
            enable = " ".join("+" + c for c in wanted)
            (own / "cgroup.subtree_control").write_text(enable)
            tasks = own / "tasks"
            tasks.mkdir(exist_ok=True)
            (tasks / "cgroup.subtree_control").write_text(enable)
        except OSError as e:
            return None, f"cgroups-v2: {own} is not usable: {e}"
        return cls(own, options, frozenset(wanted)), ""

    def _dir(self, key: str) -> Path:
        return self.tasks_dir / cgroup_probe.task_cgroup_name(key)

    def prepare(self, key: str, mem_limit: int | None, cpus: float | None) -> tuple[str, ...]:
        d = self._dir(key)
        d.mkdir(exist_ok=True)
        if mem_limit is not None and "memory" in self.controllers:
            (d / "memory.max").write_text(str(max(mem_limit, MIN_MEMORY)))
            with contextlib.suppress(OSError):
                (d / "memory.swap.max").write_text("0")
        if cpus is not None and "cpu" in self.controllers:
            with contextlib.suppress(OSError):
                (d / "cpu.weight").write_text(str(min(10000, max(1, round(cpus * 100)))))
            if self.options.cpu_quota:
                (d / "cpu.max").write_text(f"{max(MIN_CFS_QUOTA_US, int(cpus * CFS_PERIOD_US))} {CFS_PERIOD_US}")
        if self.options.pids_max > 0 and "pids" in self.controllers:
            (d / "pids.max").write_text(str(self.options.pids_max))
        self._tasks[key] = _Limits(None, mem_limit, cpus, d)
        return (str(d / "cgroup.procs"),)

    def attach(self, key: str, pid: int) -> None:
        lim = self._tasks.get(key)
        if lim is None:
            d = self._dir(key)
            lim = self._tasks[key] = _Limits(None, None, None, d if d.exists() else None)
        lim.pid = pid

    def recover(self, key: str, pid: int, mem_limit: int | None, cpus: float | None) -> None:
        d = self._dir(key)
        lim = self._tasks[key] = _Limits(pid, mem_limit, cpus, d if d.is_dir() else None)
        if lim.cgroup is not None:
            with contextlib.suppress(OSError, ValueError):
                lim.oom_kills = read_kv(d / "memory.events").get("oom_kill", 0)

    def oom_fd(self, key: str) -> int | None:
        return None  # cgroup2 has no eventfd notification: memory.events is sampled, and read at exit

    def oom_event(self, key: str) -> str | None:
        return None

    def oom_killed(self, key: str) -> str | None:
        lim = self._tasks.get(key)
        if lim is None or lim.cgroup is None or lim.mem_limit is None:
            return None
        try:
            n = read_kv(lim.cgroup / "memory.events").get("oom_kill", 0)
        except OSError:
            return None
        if n <= lim.oom_kills:
            return None
        lim.oom_kills = n
        peak = None
        with contextlib.suppress(OSError, ValueError):
            peak = int((lim.cgroup / "memory.peak").read_text())
        return memory_message(peak, lim.mem_limit)

    def usage(self, key: str) -> Usage | None:
        lim = self._tasks.get(key)
        if lim is None or lim.cgroup is None:
            return None
        try:
            cpu = read_kv(lim.cgroup / "cpu.stat").get("usage_usec", 0) / 1e6
            rss = 0
            if "memory" in self.controllers:
                rss = read_kv(lim.cgroup / "memory.stat").get("anon", 0)
            return Usage(rss, cpu)
        except OSError:
            return None

    def kill(self, key: str) -> int:
        lim = self._tasks.get(key)
        d = lim.cgroup if lim is not None and lim.cgroup is not None else self._dir(key)
        if not d.is_dir():
            return 0
        n = len(read_procs(d))
        try:
            (d / "cgroup.kill").write_text("1")
        except OSError:  # before Linux 5.14: walk the list
            return kill_procs(d)
        return n

    def fill(self) -> int:
        """Nothing is kept ready (the spares are cgroup v1's, ``agent/cgroups_v1.py``)."""
        return 0

    def release(self, key: str) -> None:
        lim = self._tasks.pop(key, None)
        d = lim.cgroup if lim is not None and lim.cgroup is not None else self._dir(key)
        if d.is_dir():
            self._remove(d)

    def _remove(self, d: Path) -> None:
        if read_procs(d):
            with contextlib.suppress(OSError):
                (d / "cgroup.kill").write_text("1")
        if not rmdir_retry(d):
            log.warning("cgroup %s could not be removed (processes left in it)", d)

    def cleanup(self, keep: set[str]) -> int:
        names = {cgroup_probe.task_cgroup_name(k) for k in keep}
        n = 0
        with contextlib.suppress(OSError):
            for d in self.tasks_dir.iterdir():
                if d.is_dir() and d.name not in names:
                    self._remove(d)
                    n += 1
        return n

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.tasks_dir.rmdir()  # only when empty; the agent's own leaf stays (it is in it)

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "kernel_limits": True, "cgroup": str(self.root),
                "controllers": sorted(self.controllers), "cpu_quota": self.options.cpu_quota,
                "pids_max": self.options.pids_max}

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


def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError:
        return ""


def remove_agent_cgroups(work_dir: Path, cgroups_root: str = "agora") -> int:
    """Kill and remove every cgroup v1 task cgroup of the agent of ``work_dir``, then its subtree
    (an agent that will not come back; tests after their agents are gone). How many removed."""
    from agent.cgroups_v1 import CgroupV1Isolator

    mounts = cgroup_probe.parse_mountinfo(_read("/proc/self/mountinfo"))
    name = cgroup_probe.agent_cgroup_name(os.path.realpath(work_dir))
    bases: dict[str, Path] = {}
    for m in mounts:
        if m.version == 1:
            for c in m.controllers:
                d = Path(m.path) / cgroups_root / name
                if d.is_dir():
                    bases[c] = d
    if "memory" not in bases:
        return 0
    iso = CgroupV1Isolator(bases)
    n = iso.cleanup(set())
    iso.close()
    return n


def detect(prefer: str = "auto", work_dir: Path | None = None, options: CgroupOptions | None = None) -> Isolator:
    """The isolator for ``--isolation prefer`` (``auto``, ``cgroups-v2``, ``cgroups-v1``,
    ``psutil``) on this kernel; a cgroup isolator that was asked for by name but cannot run is
    logged loudly and replaced by monitoring."""
    from agent.cgroups_v1 import CgroupV1Isolator

    opts = options or CgroupOptions()
    mounts = cgroup_probe.parse_mountinfo(_read("/proc/self/mountinfo"))
    own = cgroup_probe.parse_proc_cgroup(_read("/proc/self/cgroup"))
    v2_controllers: frozenset[str] = frozenset()
    v2 = next((m for m in mounts if m.version == 2), None)
    if v2 is not None and "" in own:
        rel = own[""]
        tail = rel[len(v2.root.rstrip("/")):] if v2.root != "/" else rel
        v2_controllers = frozenset(_read(os.path.join(v2.path, tail.lstrip("/"), "cgroup.controllers")).split())
    name = cgroup_probe.agent_cgroup_name(os.path.realpath(work_dir or Path.cwd()))
    choice = cgroup_probe.choose(prefer, mounts, own, v2_controllers, cgroups_root=opts.cgroups_root, agent_name=name)
    reasons = list(choice.passed_over)
    for cand in choice.candidates:
        iso: Isolator | None = None
        if cand.isolator == "cgroups-v2" and cand.v2_dir is not None:
            iso, why = CgroupV2Isolator.try_create(Path(cand.v2_dir), opts)
        elif cand.isolator == "cgroups-v1":
            iso, why = CgroupV1Isolator.try_create(dict(cand.v1_dirs), opts)
        else:
            why = "; ".join(reasons)
            if prefer in ("cgroups-v2", "cgroups-v1"):
                log.warning("--isolation %s asked for but not available (%s); monitoring /proc instead", prefer, why)
            else:
                log.info("isolation: monitoring /proc (%s)", why or "asked for")
            return MonitorIsolator(why)
        if iso is not None:
            log.info("isolation: %s (%s)", iso.name, iso.describe())
            return iso
        reasons.append(why)
    return MonitorIsolator("; ".join(reasons))  # pragma: no cover - psutil is always the last candidate


__all__ = [
    "Breach",
    "CgroupOptions",
    "CgroupV2Isolator",
    "Isolator",
    "MonitorIsolator",
    "Usage",
    "detect",
    "memory_message",
    "read_proc_groups",
]
