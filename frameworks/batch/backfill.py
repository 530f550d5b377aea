"""Planned backfill (Slurm's backfill scheduler): reservations in time from the running tasks'
time limits.

A running task with a time limit ends at the latest at ``started_at + time_limit``; its
resources come back into this framework's offer on its agent then (a ``Release``). With those,
the highest-priority job that cannot start now (the *head*) gets a ``Reservation``: the earliest
time its need (a whole gang, or one task) fits in what is free now plus what is released by
then, and the resources, per offer, it will take at that time. A lower-priority job may then use
reserved resources now only if it will be done before the reservation starts (it has a time
limit and ``now + time_limit <= start_at``); otherwise it uses only what the reservation leaves.
So backfill never delays the head job, and short jobs still fill the gap.

``expected_starts`` runs the same simulation for every pending job in priority order, each
reserving what it takes from its start to its end (``squeue --start``). Tasks without a time
limit never end in it (their resources never come back), and a job without one holds what it
takes forever, so a start that depends on them is unknown (None). Only what this framework
holds is simulated: another framework's resources are the master's to offer.

``Reservation`` with ``start_at == now`` and no end is also what a preemption uses: the
resources coming back from the evicted tasks are kept for the preemptor.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import attrs

__pure__ = True

Scalars = Mapping[str, float]


@attrs.frozen
class Release:
    """Resources (``scalars``) coming back into offer ``offer_id`` at time ``at``."""

    offer_id: str
    at: float
    scalars: Scalars


@attrs.frozen
class Reservation:
    job_id: int
    start_at: float
    hold: Mapping[str, Scalars]  # offer id -> what the job takes there from start_at
    end_at: float | None = None  # when it is done with them (None: unknown, never in the simulation)


def fits(have: Scalars, shape: Scalars) -> int:
    n = None
    for name, amount in shape.items():
        if amount <= 0:
            continue
        k = int((have.get(name, 0.0) + 1e-9) // amount)
        n = k if n is None else min(n, k)
    return 0 if n is None else max(n, 0)


def _add(a: Scalars, b: Scalars, sign: float = 1.0) -> dict[str, float]:
    out = dict(a)
    for k, v in b.items():
        out[k] = out.get(k, 0.0) + sign * v
    return out


def earliest_start(
    job_id: int,
    shape: Scalars,
    count: int,
    now: float,
    free: Mapping[str, Scalars],
    releases: Sequence[Release],
    taken: Sequence[Reservation] = (),
    duration: float | None = None,
) -> Reservation | None:
    """The earliest time (``now`` or a release time) at which ``count`` tasks of ``shape`` fit
    in the offers of ``free`` (only those: the job's eligible offers) plus what ``releases``
    brought back by then, less what ``taken`` reservations hold at that time; with the
    resources it takes per offer (offers in id order, each filled before the next). None when
    it never fits in the simulation."""
    shape = {k: v for k, v in shape.items() if v > 0}
    if count <= 0 or not shape:
        return None
    offers = sorted(free)
    times = sorted({now, *(r.at for r in releases if r.at > now and r.offer_id in free)})
    times += sorted({r.end_at for r in taken if r.end_at is not None and r.end_at > now} - set(times))
    times.sort()
    for t in times:
        avail = {o: dict(free[o]) for o in offers}
        for r in releases:
            if r.offer_id in avail and r.at <= t:
                avail[r.offer_id] = _add(avail[r.offer_id], r.scalars)
        for res in taken:
            if res.start_at <= t and (res.end_at is None or t < res.end_at):
                for o, held in res.hold.items():
                    if o in avail:
                        avail[o] = _add(avail[o], held, -1.0)
        # would this also hold for the whole run? a reservation starting later could overlap it
        end = None if duration is None else t + duration
        for res in taken:
            if res.start_at > t and (end is None or res.start_at < end):
                for o, held in res.hold.items():
                    if o in avail:
                        avail[o] = _add(avail[o], held, -1.0)
        hold: dict[str, dict[str, float]] = {}
        left = count
        for o in offers:
            n = min(left, fits(avail[o], shape))
            if n > 0:
                hold[o] = {k: v * n for k, v in shape.items()}
                left -= n
            if left == 0:
                return Reservation(job_id, t, hold, end)
    return None


@attrs.frozen
class Waiting:
    """A pending job as the expected-start simulation sees it."""

    job_id: int
    shape: Scalars
    count: int  # tasks that must start together (a gang), else 1
    offers: frozenset[str]  # the offers it may use (queue and constraints)
    time_limit: float | None


def expected_starts(
    jobs: Sequence[Waiting], now: float, free: Mapping[str, Scalars], releases: Sequence[Release]
) -> dict[int, Reservation | None]:
    """Each job's expected start in the given (priority) order, each reserving what it takes
    for its time limit (forever without one) so later jobs start after or beside it."""
    taken: list[Reservation] = []
    out: dict[int, Reservation | None] = {}
    for w in jobs:
        mine = {o: v for o, v in free.items() if o in w.offers}
        res = earliest_start(w.job_id, w.shape, w.count, now, mine, releases, taken, w.time_limit)
        out[w.job_id] = res
        if res is not None:
            taken.append(res)
    return out
