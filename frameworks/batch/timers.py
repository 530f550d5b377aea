"""Time in the batch core (pure): the tasks whose time limit has run out, and the earliest time
something becomes due next (the shell sleeps until then unless a fact comes first).
"""

from __future__ import annotations

from frameworks.batch.book import JobBook
from frameworks.batch.effects import Effect, Kill
from frameworks.batch.model import TaskPhase
from frameworks.batch.records import mark_unsaved

__pure__ = True


def time_limits(book: JobBook, now: float) -> list[Effect]:
    """Kill the tasks past their job's time limit (a whole gang's time counts from its first
    rank running, and all its ranks are stopped together)."""
    effects: list[Effect] = []
    for job in book.live.values():
        if job.periodic:
            continue
        limit = job.spec.time_limit
        if limit is None:
            continue
        if job.spec.whole_gang:
            # the gang's time: from its first rank running; all its ranks are stopped together
            if job.gang_started_at is not None and now - job.gang_started_at >= limit:
                for i in sorted(job.active):
                    t = job.tasks[i]
                    if t.killing is None:
                        t.killing = "time limit"
                        mark_unsaved(job, t.index)
                        cur = t.current
                        agent = cur.agent_id if cur is not None else None
                        effects.append(
                            Kill(t.task_id, agent, f"time limit of {limit:g}s exceeded (the gang's)")
                        )
            continue
        for i in sorted(job.active):
            t = job.tasks[i]
            cur = t.current
            if (
                t.phase is TaskPhase.RUNNING
                and t.killing is None
                and cur is not None
                and cur.started_at is not None
                and now - cur.started_at >= limit
            ):
                t.killing = "time limit"
                mark_unsaved(job, i)
                effects.append(Kill(t.task_id, cur.agent_id, f"time limit of {limit:g}s exceeded"))
    return effects


def next_wakeup(book: JobBook, now: float, round_at: float | None, gang_timeout: float) -> float | None:
    """The earliest time something becomes due (a retry, a time limit, a gang hold timeout).

    A time that passed after the latest round (``round_at``: the core's latest ``tick`` or
    ``schedule``) is still due, not over: that round saw it a moment early ("retry in 0.0s"), and
    nothing else would wake the loop for it while the offers it needs are already held."""
    seen = now if round_at is None else min(now, round_at)
    times: list[float] = []
    for job in book.live.values():
        if job.periodic:
            if job.next_run is not None and job.held is None:
                times.append(max(job.next_run, seen))
            continue
        # (A hold that ran out before the latest round is released by the next schedule; a
        # round without one - disconnected - must not make the loop spin until it comes.)
        if job.hold_since is not None and job.hold_since + gang_timeout > seen:
            times.append(job.hold_since + gang_timeout)
        if job.hold_cooldown_until > seen:
            times.append(job.hold_cooldown_until)  # the gang may hold again then
        for i in job.backoff:
            if job.tasks[i].not_before > seen:
                times.append(job.tasks[i].not_before)
        if job.spec.time_limit and job.spec.whole_gang:
            if job.gang_started_at is not None and any(job.tasks[i].killing is None for i in job.active):
                times.append(job.gang_started_at + job.spec.time_limit)
        elif job.spec.time_limit:
            for i in job.active:
                t = job.tasks[i]
                cur = t.current
                if t.phase is TaskPhase.RUNNING and t.killing is None and cur and cur.started_at:
                    times.append(cur.started_at + job.spec.time_limit)
    return min(times) if times else None
