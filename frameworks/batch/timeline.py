"""When pending jobs may start (pure): where our running tasks' resources come back and when
(planned backfill's timeline, ``squeue --start``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from frameworks.batch.backfill import Release, Waiting
from frameworks.batch.backfill import expected_starts as backfill_starts
from frameworks.batch.book import JobBook
from frameworks.batch.model import dependency_status
from frameworks.batch.planner import AgentCapacity, OfferView, matches
from protocol.resources import Resources

__pure__ = True


def expected_starts(
    book: JobBook,
    cluster: Sequence[AgentCapacity],
    offers: Sequence[OfferView],
    now: float,
    ranks: Mapping[int, float],
) -> dict[int, float | None]:
    """Each pending job's expected start (``squeue --start``): in the planner's order (the
    multifactor rank, then priority, age, id), from what is free in ``offers`` now and when
    our running tasks' time limits bring more back (``backfill.expected_starts``); None when
    unknown (it waits on a dependency or a hold, or on tasks without a time limit)."""
    waiting: list[Waiting] = []
    out: dict[int, float | None] = {}
    states = book.states()
    offers = [*offers, *offerless(book, cluster, offers)]
    order = sorted(
        book.live.values(),
        key=lambda j: (-ranks.get(j.job_id, 0.0), -j.spec.priority, j.submitted_at, j.job_id),
    )
    for job in order:
        if job.periodic or not job.pending:
            continue
        spec = job.spec
        ready, _ = dependency_status(spec, states)
        if not ready or job.held is not None:
            out[job.job_id] = None
            continue
        gang = spec.gang > 0 and not job.gang_started and not job.active
        waiting.append(
            Waiting(
                job.job_id,
                spec.resources().scalars(),
                spec.gang_size if gang else 1,
                frozenset(o.offer_id for o in offers if matches(spec, o)),
                spec.time_limit,
            )
        )
    free = {o.offer_id: o.resources.non_revocable().scalars() for o in offers}
    for job_id, res in backfill_starts(waiting, now, free, releases_of(book, offers, now)).items():
        out[job_id] = None if res is None else res.start_at
    return out


def offerless(
    book: JobBook, cluster: Sequence[AgentCapacity], offers: Sequence[OfferView]
) -> list[OfferView]:
    """An empty stand-in offer for each (agent, queue) where our tasks run but no offer is
    held now (a full agent's leftover offer was declined, and the master offers nothing
    without cpus): what those tasks hold comes back there all the same, so neither an
    expected start nor a preemption depends on which offers happen to be held. Its
    attributes are the agent's from the master's state."""
    have = {(o.agent_id, o.role) for o in offers}
    attributes = {a.agent_id: a.attributes for a in cluster}
    out: dict[tuple[str, str], OfferView] = {}
    for job in book.live.values():
        if not job.active:
            continue
        for i in job.active:
            cur = job.tasks[i].current
            key = (cur.agent_id if cur is not None else None, job.spec.queue)
            if cur is None or cur.agent_id is None or key in have or key in out:
                continue
            out[(cur.agent_id, job.spec.queue)] = OfferView(
                f"{cur.agent_id}/{job.spec.queue}",
                cur.agent_id,
                cur.hostname or "",
                job.spec.queue,
                Resources.empty(),
                dict(attributes.get(cur.agent_id, {})),
            )
    return list(out.values())


def releases_of(book: JobBook, offers: Sequence[OfferView], now: float) -> list[Release]:
    """When our running tasks with a time limit end at the latest, and where their resources
    come back (the offer of their queue on their agent): planned backfill's timeline."""
    limited = [j for j in book.live.values() if j.active and j.spec.time_limit]
    if not limited:
        return []
    offer_of = {(o.agent_id, o.role): o.offer_id for o in offers}
    out = []
    for job in limited:
        limit = job.spec.time_limit
        assert limit is not None
        shape = job.spec.resources().scalars()
        for i in job.active:
            cur = job.tasks[i].current
            if cur is None or cur.agent_id is None:
                continue
            oid = offer_of.get((cur.agent_id, job.spec.queue))
            if oid is not None:
                start = cur.started_at if cur.started_at is not None else now
                out.append(Release(oid, max(now, start + limit), shape))
    return out
