"""The EDL scaling and fulfillment policy over several elastic jobs.

Input: every job's minimum, maximum, current workers (on regular and on revocable resources),
priority and whether it accepts revocable resources; and the free capacity in worker slots
(regular and revocable). Output: a ``Plan`` with a target per job, the changes to reach it and a
reason for every job left below its maximum.

Rules, in order:

1. A job above its maximum (after ``scale --max``) shrinks to it, revocable workers first.
2. A job with no workers *starts* only when its whole minimum fits on regular slots (gang of the
   minimum). Free slots are used first; the rest is taken, one worker at a time, from the
   most-fulfilled job of the same or lower priority, never pushing that job below its own minimum.
   If the minimum cannot be gathered nothing is taken.
3. Free slots go, one at a time, to the job with the lowest *fulfillment*
   ``(current - min) / (max - min)`` (higher priority first; a job below its minimum has negative
   fulfillment and comes first). Workers beyond the minimum take revocable slots when the job
   allows it and there are any; the minimum always sits on regular slots.
4. Rebalance: a worker moves from the most-fulfilled job to the least-fulfilled one while, after
   the move, the donor is still at least as fulfilled as the receiver (plus ``margin``); a
   higher-priority job takes from lower-priority jobs above their minimum. This converges (each
   move strictly narrows the spread) and never oscillates.

Invariants (property-tested): a job holding its minimum never goes below it; no job goes above its
maximum; the targets never use more than held + free capacity, per kind.
"""

from __future__ import annotations

import attrs

__pure__ = True


class PolicyError(ValueError):
    """Bad policy input."""


@attrs.frozen
class JobView:
    job_id: str
    min_workers: int
    max_workers: int
    regular: int = 0
    revocable: int = 0
    priority: int = 0
    revocable_ok: bool = True
    order: float = 0.0  # submission order: earlier first among equals

    def __attrs_post_init__(self) -> None:
        if self.min_workers < 1 or self.max_workers < self.min_workers:
            raise PolicyError(
                f"job {self.job_id}: need 1 <= min_workers <= max_workers, got {self.min_workers}..{self.max_workers}"
            )
        if self.regular < 0 or self.revocable < 0:
            raise PolicyError(f"job {self.job_id}: negative worker counts")

    @property
    def current(self) -> int:
        return self.regular + self.revocable


@attrs.frozen
class Capacity:
    """Free worker slots."""

    regular: int
    revocable: int = 0


@attrs.frozen
class Target:
    job_id: str
    regular: int
    revocable: int

    @property
    def total(self) -> int:
        return self.regular + self.revocable


@attrs.frozen
class Change:
    """Grow (positive) or shrink (negative) a job by kind of slot."""

    job_id: str
    regular: int
    revocable: int


@attrs.frozen
class Plan:
    targets: dict[str, Target]
    changes: tuple[Change, ...]
    started: tuple[str, ...]
    reasons: dict[str, str]  # why a job is below its maximum

    def target(self, job_id: str) -> Target:
        return self.targets[job_id]


def fulfillment(current: int, min_workers: int, max_workers: int) -> float:
    """``(current - min) / (max - min)``; negative below the minimum; 1.0 when min == max is held."""
    if current < min_workers:
        return (current - min_workers) / min_workers
    if max_workers == min_workers:
        return 1.0
    return (current - min_workers) / (max_workers - min_workers)


@attrs.define
class _Job:
    view: JobView
    regular: int
    revocable: int

    @property
    def total(self) -> int:
        return self.regular + self.revocable

    def f(self, delta: int = 0) -> float:
        return fulfillment(self.total + delta, self.view.min_workers, self.view.max_workers)

    def need_key(self) -> tuple[int, float, float, str]:
        """Smallest = neediest."""
        return (-self.view.priority, self.f(), self.view.order, self.view.job_id)


def plan(jobs: list[JobView] | tuple[JobView, ...], free: Capacity, margin: float = 0.0) -> Plan:
    """Decide targets for every job. ``free`` is capacity not held by any of ``jobs``."""
    if free.regular < 0 or free.revocable < 0:
        raise PolicyError(f"free capacity must not be negative, got {free}")
    seen: set[str] = set()
    for v in jobs:
        if v.job_id in seen:
            raise PolicyError(f"duplicate job id {v.job_id}")
        seen.add(v.job_id)
    state = {v.job_id: _Job(v, v.regular, v.revocable) for v in jobs}
    free_reg, free_rev = free.regular, free.revocable
    reasons: dict[str, str] = {}
    started: list[str] = []

    # 1. clamp to max (revocable first)
    for j in state.values():
        over = j.total - j.view.max_workers
        if over > 0:
            cut = min(over, j.revocable)
            j.revocable -= cut
            free_rev += cut
            j.regular -= over - cut
            free_reg += over - cut

    # 2. start pending jobs whose minimum can be gathered
    pending = sorted((j for j in state.values() if j.total == 0), key=lambda j: j.need_key())
    for p in pending:
        need = p.view.min_workers
        from_free = min(free_reg, need)
        takes: dict[str, int] = {}
        short = need - from_free
        if short > 0:
            donors = {
                d.view.job_id: d.regular - d.view.min_workers
                for d in state.values()
                if d.total > 0 and d.view.priority <= p.view.priority and d.regular > d.view.min_workers
            }
            while short > 0 and donors:
                # the most-fulfilled donor (lowest priority first), counting what it already gave
                best = max(
                    donors,
                    key=lambda k: (
                        -state[k].view.priority,
                        state[k].f(-takes.get(k, 0)),
                        -state[k].view.order,
                        k,
                    ),
                )
                takes[best] = takes.get(best, 0) + 1
                donors[best] -= 1
                if donors[best] == 0:
                    del donors[best]
                short -= 1
        if short > 0:
            reasons[p.view.job_id] = (
                f"pending: its minimum of {need} workers does not fit "
                f"({from_free} free regular slots, {need - from_free - short} reclaimable above other jobs' minimums)"
            )
            continue
        for k, n in takes.items():
            state[k].regular -= n
        free_reg -= from_free
        p.regular = need
        started.append(p.view.job_id)

    # 3. water-fill free capacity, neediest first; 4. rebalance; repeat while a move freed a slot
    # kind that someone else can use
    for _ in range(10_000):
        free_reg, free_rev = _water_fill(state, free_reg, free_rev)
        if not _rebalance_once(state, margin):
            break

    # reasons for jobs below their maximum
    for j in state.values():
        jid = j.view.job_id
        if j.total >= j.view.max_workers or jid in reasons:
            continue
        if j.total < j.view.min_workers:
            reasons[jid] = f"below its minimum ({j.total}/{j.view.min_workers}): waiting for capacity"
        elif not j.view.revocable_ok and free_rev > 0:
            reasons[jid] = (
                f"at its fair share (fulfillment {j.f():.2f}); revocable slots are free but the job refuses them"
            )
        else:
            reasons[jid] = f"at its fair share (fulfillment {j.f():.2f}); no free capacity"

    targets = {jid: Target(jid, j.regular, j.revocable) for jid, j in state.items()}
    changes = tuple(
        Change(v.job_id, targets[v.job_id].regular - v.regular, targets[v.job_id].revocable - v.revocable)
        for v in jobs
        if (targets[v.job_id].regular, targets[v.job_id].revocable) != (v.regular, v.revocable)
    )
    return Plan(targets, changes, tuple(started), reasons)


def _water_fill(state: dict[str, _Job], free_reg: int, free_rev: int) -> tuple[int, int]:
    while free_reg > 0 or free_rev > 0:
        takers = [
            j
            for j in state.values()
            if j.total > 0
            and j.total < j.view.max_workers
            and ((free_reg > 0) or (free_rev > 0 and j.view.revocable_ok and j.total >= j.view.min_workers))
        ]
        if not takers:
            break
        j = min(takers, key=lambda t: t.need_key())
        if j.total >= j.view.min_workers and j.view.revocable_ok and free_rev > 0:
            j.revocable += 1
            free_rev -= 1
        else:
            j.regular += 1
            free_reg -= 1
    return free_reg, free_rev


def _rebalance_once(state: dict[str, _Job], margin: float) -> bool:
    running = [j for j in state.values() if j.total > 0]
    receivers = sorted((j for j in running if j.total < j.view.max_workers), key=lambda j: j.need_key())
    for r in receivers:
        donors = sorted(
            (d for d in running if d is not r and _donatable(d, r) is not None),
            key=lambda d: d.need_key(),
            reverse=True,
        )
        for d in donors:
            higher = r.view.priority > d.view.priority
            if higher or (r.view.priority == d.view.priority and d.f(-1) >= r.f(+1) + margin):
                kind = _donatable(d, r)
                if kind == "revocable":
                    d.revocable -= 1
                    r.revocable += 1
                else:
                    d.regular -= 1
                    r.regular += 1
                return True
    return False


def _donatable(d: _Job, r: _Job) -> str | None:
    """Which kind of slot ``d`` can give ``r`` without going below its own minimum."""
    if d.view.priority > r.view.priority:
        return None
    if (
        d.revocable > 0
        and d.total > d.view.min_workers
        and r.view.revocable_ok
        and r.total >= r.view.min_workers
    ):
        return "revocable"
    if d.regular > d.view.min_workers:
        return "regular"
    return None
