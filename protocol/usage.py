"""Per-task resource usage: what a task consumed, as the agent measures it (pure).

An agent samples every running task (its cgroup, or its process group under ``/proc``) and keeps
one ``TaskUsage`` per task: cumulative CPU seconds, the resident memory now and its peak, and the
sandbox's disk usage at the last disk check. The figures travel two ways:

* live, in the agent's ``USAGE_REPORT`` to the master (``protocol.agent_channel.UsageReport``,
  only the tasks whose figures changed) and on the agent's and master's ``/state``;
* final, as labels of the task's terminal ``TaskStatus`` (next to ``exit_code``), so a framework
  (the batch service's accounting, a Mesos client) has each attempt's total without asking
  anybody: ``cpu_seconds``, ``mem_peak_bytes`` and, when measured, ``disk_used_bytes``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import attrs

from protocol.mesos_common import Label

__pure__ = True

CPU_SECONDS = "cpu_seconds"
MEM_PEAK_BYTES = "mem_peak_bytes"
DISK_USED_BYTES = "disk_used_bytes"
USAGE_LABELS = (CPU_SECONDS, MEM_PEAK_BYTES, DISK_USED_BYTES)


@attrs.frozen
class TaskUsage:
    cpu_seconds: float = 0.0  # user + system, every process of the task, dead ones included where known
    mem_rss_bytes: int = 0  # resident memory now (0 once the task ended)
    mem_peak_bytes: int = 0  # the most it held at once (sampled, or the kernel's peak)
    disk_used_bytes: int | None = None  # the sandbox at the last disk check; None: never measured
    timestamp: float = 0.0  # when the figures were taken (agent clock)

    def sampled(self, cpu_seconds: float, rss: int, now: float) -> TaskUsage:
        """A new sample: CPU time never goes back (a sum over live processes drops when one
        exits, which must not undo the time it spent), the peak is the highest RSS seen."""
        return attrs.evolve(
            self,
            cpu_seconds=max(self.cpu_seconds, cpu_seconds),
            mem_rss_bytes=max(0, rss),
            mem_peak_bytes=max(self.mem_peak_bytes, rss),
            timestamp=now,
        )

    def with_disk(self, used: int, now: float) -> TaskUsage:
        return attrs.evolve(self, disk_used_bytes=max(0, used), timestamp=now)

    def ended(self, cpu_seconds: float | None, peak: int | None, now: float) -> TaskUsage:
        """The task's process ended: the final CPU time and peak where the kernel gave them
        (``wait4``'s rusage, the cgroup's counters), nothing resident any more."""
        return attrs.evolve(
            self,
            cpu_seconds=max(self.cpu_seconds, cpu_seconds or 0.0),
            mem_rss_bytes=0,
            mem_peak_bytes=max(self.mem_peak_bytes, peak or 0),
            timestamp=now,
        )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            CPU_SECONDS: round(self.cpu_seconds, 3),
            "mem_rss_bytes": self.mem_rss_bytes,
            MEM_PEAK_BYTES: self.mem_peak_bytes,
            "timestamp": self.timestamp,
        }
        if self.disk_used_bytes is not None:
            out[DISK_USED_BYTES] = self.disk_used_bytes
        return out

    def labels(self) -> tuple[Label, ...]:
        """The final figures as ``TaskStatus`` labels (values are decimal strings)."""
        out = [Label(CPU_SECONDS, f"{self.cpu_seconds:.3f}"), Label(MEM_PEAK_BYTES, str(self.mem_peak_bytes))]
        if self.disk_used_bytes is not None:
            out.append(Label(DISK_USED_BYTES, str(self.disk_used_bytes)))
        return tuple(out)


def from_labels(labels: Iterable[Label], timestamp: float = 0.0) -> TaskUsage | None:
    """The usage a terminal status carries in its labels, or None when it carries none (an
    agent that does not report usage, a status not from the agent). Malformed values count as
    absent."""
    values: dict[str, str] = {}
    for label in labels:
        if label.key in USAGE_LABELS and label.value is not None:
            values[label.key] = label.value
    if CPU_SECONDS not in values and MEM_PEAK_BYTES not in values:
        return None
    try:
        cpu = float(values.get(CPU_SECONDS, "0"))
        peak = int(values.get(MEM_PEAK_BYTES, "0"))
        disk = int(values[DISK_USED_BYTES]) if DISK_USED_BYTES in values else None
    except ValueError:
        return None
    if cpu != cpu or cpu < 0 or peak < 0 or (disk is not None and disk < 0):  # NaN or negative
        return None
    return TaskUsage(cpu_seconds=cpu, mem_peak_bytes=peak, disk_used_bytes=disk, timestamp=timestamp)


def usage_from_json(d: Any) -> TaskUsage | None:
    """A ``TaskUsage.to_json`` dict back (what the CLI and the web UI read from ``/state``)."""
    if not isinstance(d, dict):
        return None
    try:
        disk = d.get(DISK_USED_BYTES)
        return TaskUsage(
            cpu_seconds=float(d.get(CPU_SECONDS, 0.0)),
            mem_rss_bytes=int(d.get("mem_rss_bytes", 0)),
            mem_peak_bytes=int(d.get(MEM_PEAK_BYTES, 0)),
            disk_used_bytes=int(disk) if disk is not None else None,
            timestamp=float(d.get("timestamp", 0.0)),
        )
    except (TypeError, ValueError):
        return None


def _mb(n: int) -> str:
    return f"{n / (1024 * 1024):.1f} MB"


def usage_text(u: TaskUsage, *, running: bool) -> str:
    """One line for people: ``cpu 1.25 s, mem 12.0 MB (peak 20.5 MB), disk 1.0 MB``."""
    mem = f"mem {_mb(u.mem_rss_bytes)} (peak {_mb(u.mem_peak_bytes)})" if running else f"peak mem {_mb(u.mem_peak_bytes)}"
    parts = [f"cpu {u.cpu_seconds:.2f} s", mem]
    if u.disk_used_bytes is not None:
        parts.append(f"disk {_mb(u.disk_used_bytes)}")
    return ", ".join(parts)


__all__ = [
    "CPU_SECONDS",
    "DISK_USED_BYTES",
    "MEM_PEAK_BYTES",
    "USAGE_LABELS",
    "TaskUsage",
    "from_labels",
    "usage_from_json",
    "usage_text",
]
