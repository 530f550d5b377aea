"""Resource isolation: cgroup v2 per task when delegated, psutil-style monitoring otherwise.

``detect(prefer)`` picks the isolator:

- ``CgroupV2Isolator`` when the agent's own cgroup is on a cgroup2 hierarchy, is writable and
  offers the ``memory`` and ``cpu`` controllers (a delegated subtree). The agent moves itself
  into a leaf ``<own>/agent`` (the "no internal processes" rule), enables ``+memory +cpu`` in its
  cgroup's ``subtree_control`` and gives each task ``<own>/tasks/<fid>.<tid>`` with
  ``memory.max`` and ``cpu.max``; the task wrapper joins it before running the task, a kill
  writes ``cgroup.kill``, and ``memory.events`` (``oom_kill``) reveals a memory-limit kill.
- ``MonitorIsolator`` otherwise (this is what runs on cgroup v1 / hybrid machines): one sampling
  pass over ``/proc/*/stat`` per interval sums the RSS of every process in each task's process
  group (the wrapper is the group leader, so orphaned grandchildren still count) and reports
  tasks past their limit; the service then kills them (``REASON_CONTAINER_LIMITATION_MEMORY``).

Both report per-task usage (RSS bytes, cumulative CPU seconds) for the resource estimator.
"""

from __future__ import annotations

import contextlib
import logging
import os
from pathlib import Path
from typing import Protocol

import attrs

log = logging.getLogger(__name__)

_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


@attrs.frozen
class Usage:
    rss: int  # bytes
    cpu_seconds: float  # cumulative user+system time of the group's live processes


@attrs.frozen
class Breach:
    key: str
    message: str


@attrs.define
class _Limits:
    pid: int | None
    mem_limit: int | None
    cpus: float | None
    cgroup: Path | None = None


class Isolator(Protocol):
    name: str

    def prepare(self, key: str, mem_limit: int | None, cpus: float | None) -> Path | None:
        """Before spawning: the cgroup directory the wrapper should join (or None)."""
        ...

    def attach(self, key: str, pid: int) -> None: ...

    def release(self, key: str) -> None: ...

    def sample(self) -> tuple[dict[str, Usage], list[Breach]]: ...


def read_proc_groups() -> dict[int, Usage]:
    """One pass over ``/proc``: RSS and CPU time summed per process group, without the group
    leader (for a task that is the agent's wrapper, whose ~1.5 MB are not the task's)."""
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
        if pgrp == int(name):
            continue
        cpu = (int(rest[11]) + int(rest[12])) / _TICKS
        rss = int(rest[21]) * _PAGE
        acc = out.setdefault(pgrp, [0.0, 0.0])
        acc[0] += rss
        acc[1] += cpu
    return {g: Usage(int(v[0]), v[1]) for g, v in out.items()}


def _fmt_mb(n: int) -> str:
    return f"{n / (1024 * 1024):.1f} MB"


MIN_MEMORY = 32 * 1024 * 1024  # limits below this are enforced as this (Mesos' MIN_MEMORY)


class MonitorIsolator:
    name = "psutil"

    def __init__(self) -> None:
        self._tasks: dict[str, _Limits] = {}

    def prepare(self, key: str, mem_limit: int | None, cpus: float | None) -> Path | None:
        self._tasks[key] = _Limits(None, mem_limit, cpus)
        return None

    def attach(self, key: str, pid: int) -> None:
        lim = self._tasks.setdefault(key, _Limits(None, None, None))
        lim.pid = pid

    def set_limits(self, key: str, mem_limit: int | None, cpus: float | None) -> None:
        lim = self._tasks.setdefault(key, _Limits(None, None, None))
        lim.mem_limit, lim.cpus = mem_limit, cpus

    def release(self, key: str) -> None:
        self._tasks.pop(key, None)

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


def _own_cgroup2() -> Path | None:
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    rel = next((ln[3:] for ln in lines if ln.startswith("0::")), None)
    if rel is None:
        return None
    mounts: list[Path] = []
    try:
        for ln in Path("/proc/self/mountinfo").read_text().splitlines():
            left, _, right = ln.partition(" - ")
            if right.split()[:1] == ["cgroup2"]:
                mounts.append(Path(left.split()[4]))
    except (OSError, IndexError):
        return None
    for m in mounts:
        p = m / rel.lstrip("/")
        if (p / "cgroup.controllers").exists():
            return p
    return None


class CgroupV2Isolator:
    name = "cgroups-v2"

    def __init__(self, root: Path) -> None:
        self.root = root
        self.tasks_dir = root / "tasks"
        self._tasks: dict[str, _Limits] = {}

    @classmethod
    def try_create(cls) -> CgroupV2Isolator | None:
        own = _own_cgroup2()
        if own is None or not os.access(own, os.W_OK):
            return None
        try:
            controllers = (own / "cgroup.controllers").read_text().split()
            if "memory" not in controllers or "cpu" not in controllers:
                return None
            leaf = own / "agent"
            leaf.mkdir(exist_ok=True)
            # move every process of our cgroup (normally just us) into the leaf
            for pid in (own / "cgroup.procs").read_text().split():
                with contextlib.suppress(OSError):
                    (leaf / "cgroup.procs").write_text(pid)
            (own / "cgroup.subtree_control").write_text("+memory +cpu")
            tasks = own / "tasks"
            tasks.mkdir(exist_ok=True)
            (tasks / "cgroup.subtree_control").write_text("+memory +cpu")
        except OSError as e:
            log.info("cgroup v2 not usable (%s); using the monitoring isolator", e)
            return None
        return cls(own)

    def prepare(self, key: str, mem_limit: int | None, cpus: float | None) -> Path | None:
        d = self.tasks_dir / key.replace("/", ".")
        d.mkdir(exist_ok=True)
        if mem_limit is not None:
            (d / "memory.max").write_text(str(max(mem_limit, MIN_MEMORY)))
            with contextlib.suppress(OSError):
                (d / "memory.swap.max").write_text("0")
        if cpus is not None:
            period = 100_000
            (d / "cpu.max").write_text(f"{max(1000, int(cpus * period))} {period}")
        self._tasks[key] = _Limits(None, mem_limit, cpus, d)
        return d

    def attach(self, key: str, pid: int) -> None:
        lim = self._tasks.get(key)
        if lim is None:
            d = self.tasks_dir / key.replace("/", ".")
            lim = self._tasks[key] = _Limits(None, None, None, d if d.exists() else None)
        lim.pid = pid

    def release(self, key: str) -> None:
        lim = self._tasks.pop(key, None)
        if lim is not None and lim.cgroup is not None:
            with contextlib.suppress(OSError):
                lim.cgroup.rmdir()

    def sample(self) -> tuple[dict[str, Usage], list[Breach]]:
        usage: dict[str, Usage] = {}
        breaches: list[Breach] = []
        for key, lim in list(self._tasks.items()):
            if lim.cgroup is None:
                continue
            try:
                rss = int((lim.cgroup / "memory.current").read_text())
                stat = dict(ln.split() for ln in (lim.cgroup / "cpu.stat").read_text().splitlines())
                usage[key] = Usage(rss, int(stat.get("usage_usec", "0")) / 1e6)
                events = dict(ln.split() for ln in (lim.cgroup / "memory.events").read_text().splitlines())
                if int(events.get("oom_kill", "0")) > 0 and lim.mem_limit is not None:
                    breaches.append(Breach(key, f"Memory limit exceeded: {_fmt_mb(lim.mem_limit)} limit (OOM kill)"))
            except (OSError, ValueError):
                continue
        return usage, breaches


def detect(prefer: str = "auto") -> Isolator:
    """``prefer``: ``auto`` (cgroup v2 if delegated), ``cgroups-v2`` (same, but logged loudly
    when it is unavailable) or ``psutil``."""
    if prefer in ("auto", "cgroups-v2"):
        iso = CgroupV2Isolator.try_create()
        if iso is not None:
            return iso
        if prefer == "cgroups-v2":
            log.warning("cgroup v2 isolation requested but no writable delegated subtree; monitoring instead")
    return MonitorIsolator()


__all__ = ["Breach", "CgroupV2Isolator", "Isolator", "MonitorIsolator", "Usage", "detect"]
