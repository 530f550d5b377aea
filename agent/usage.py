"""The agent's per-task usage book (pure): samples in, live reports and final figures out.

The monitor loop feeds it every isolator sample (``sampled``) and every disk check (``disk``);
a task's end adds the kernel's final figures (``ended``: ``wait4``'s rusage, the cgroup's
counters). ``report`` answers the tasks whose figures changed since the last report (the
``USAGE_REPORT`` to the master); ``get`` gives a task's figures for ``/state`` and for the labels
of its terminal status. ``forget`` drops a task once its terminal update is acknowledged.
"""

from __future__ import annotations

from collections.abc import Iterable

from protocol.usage import TaskUsage

__pure__ = True

TaskKey = tuple[str, str]  # (framework_id, task_id)


class UsageBook:
    def __init__(self) -> None:
        self.tasks: dict[TaskKey, TaskUsage] = {}
        self._reported: dict[TaskKey, TaskUsage] = {}

    def get(self, key: TaskKey) -> TaskUsage | None:
        return self.tasks.get(key)

    def sampled(self, key: TaskKey, cpu_seconds: float, rss: int, now: float) -> None:
        self.tasks[key] = self.tasks.get(key, TaskUsage()).sampled(cpu_seconds, rss, now)

    def disk(self, key: TaskKey, used: int, now: float) -> None:
        self.tasks[key] = self.tasks.get(key, TaskUsage()).with_disk(used, now)

    def ended(self, key: TaskKey, cpu_seconds: float | None, peak: int | None, now: float) -> TaskUsage:
        u = self.tasks[key] = self.tasks.get(key, TaskUsage()).ended(cpu_seconds, peak, now)
        return u

    def forget(self, key: TaskKey) -> None:
        self.tasks.pop(key, None)
        self._reported.pop(key, None)

    def report(self, live: Iterable[TaskKey]) -> list[tuple[TaskKey, TaskUsage]]:
        """The live tasks whose figures changed since they were last reported (timestamps alone
        do not count), in key order; they count as reported from now on."""
        out: list[tuple[TaskKey, TaskUsage]] = []
        for key in sorted(set(live)):
            u = self.tasks.get(key)
            if u is None:
                continue
            last = self._reported.get(key)
            if last is not None and _same(last, u):
                continue
            self._reported[key] = u
            out.append((key, u))
        return out


def _same(a: TaskUsage, b: TaskUsage) -> bool:
    return (round(a.cpu_seconds, 2), a.mem_rss_bytes, a.mem_peak_bytes, a.disk_used_bytes) == (
        round(b.cpu_seconds, 2), b.mem_rss_bytes, b.mem_peak_bytes, b.disk_used_bytes)


__all__ = ["UsageBook"]
