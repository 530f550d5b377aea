"""The batch queue as the planner sees it (pure): each live job with pending tasks as a
``JobView`` - its placeable tasks (a retry waits out its backoff), its multifactor rank, and why it
may not be placed now (a dependency, a hold, a singleton ahead of it, a gang regrouping or cooling
down after a hold). Jobs that are not placed say why in ``reason`` (a periodic template: its
next run; an aborting gang: why it aborts).
"""

from __future__ import annotations

from collections.abc import Mapping

from frameworks.batch.book import JobBook
from frameworks.batch.model import dependency_status
from frameworks.batch.periodic import stamp
from frameworks.batch.planner import JobView

__pure__ = True


def job_views(book: JobBook, now: float, ranks: Mapping[int, float]) -> list[JobView]:
    """The views of the live jobs with pending tasks, in ``book.live`` order; ``ranks``: each
    job's multifactor priority."""
    states = book.states()
    views: list[JobView] = []
    singles = book.singletons()
    for job in book.live.values():
        if job.periodic:
            job.reason = (
                f"held by {job.held}"
                if job.held is not None
                else f"periodic: next run {stamp(job.next_run)}"
                if job.next_run is not None
                else None
            )
            continue
        if not job.pending:
            job.reason = job.aborting  # (an aborting gang says why until its last rank is gone)
            continue
        later: list[float] = []
        if job.backoff:
            for i in list(job.backoff):
                not_before = job.tasks[i].not_before
                if not_before > now:
                    later.append(not_before)
                else:
                    job.backoff.discard(i)  # due: an ordinary pending task from now on
        pending = tuple(sorted(job.pending - job.backoff if job.backoff else job.pending))
        ready, why = dependency_status(job.spec, states)
        blocked = None if ready else why
        if blocked is None and job.regrouping is not None:
            blocked = f"{job.regrouping}; waiting for {len(job.active)} task(s) to end"
        if job.held is not None and job.regrouping is None:
            blocked = f"held by {job.held}"
        if blocked is None and job.spec.singleton:
            first = singles.get((job.spec.name, job.user))
            if first is not None and first != job.job_id:
                blocked = f"singleton: job {first} of the same name and user has not ended"
        if blocked is None and not pending:
            blocked = f"retry in {min(later) - now:.1f}s"
        if blocked is None and job.hold_cooldown_until > now:
            blocked = "gang hold released; waiting before holding again"
        active = len(job.active)
        views.append(
            JobView(
                job_id=job.job_id,
                spec=job.spec,
                submitted_at=job.submitted_at,
                pending=pending,
                active=active,
                gang_started=job.gang_started,
                blocked=blocked,
                hold_since=job.hold_since,
                rank=ranks.get(job.job_id, 0.0),
                user=job.user or "",
            )
        )
    return views
