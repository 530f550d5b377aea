"""The batch planner: which pending tasks go on which offers now, and why the rest wait.

A pure function of (jobs, offers, now). Jobs are served in priority order (higher first, then
older, then lower id) across queues; a job only uses offers allocated to its queue's role and
agents whose attributes match its constraints. A gang (``spec.gang`` tasks that must start
together) is placed tentatively, like a Volcano statement: committed whole or discarded.

Backfill: the highest-priority gang that cannot start yet becomes the *head gang*; whatever it
could already use is held for it (its offers are kept, not declined) and lower-priority jobs
may only use what is left, which by construction cannot host a task of the head gang, so they do
not delay it. A hold older than ``gang_timeout`` is released (the service declines those offers)
so two frameworks each holding half of what their gangs need can never deadlock.

A gang the cluster cannot hold at all (``cannot_fit``: more than its agents' totals, each agent
counted as if free) holds nothing and is never the head gang: it waits with its reason until the
cluster changes, and everything behind it runs meanwhile. A gang that could fit holds only for
its bounded hold.

Every job that is not fully placed gets a human reason: "waiting for 4 gpus; largest free
offer has 2", "gang 3/8 placed", "after job 12", "behind gang job 5". Given the cluster's agents
(``AgentCapacity``: their totals, from the master), a job that cannot fit in them says so rather
than what it waits for: "cannot fit in the cluster: 4 x cpus:1;mem:128 at once, its agents have
room for 2".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import attrs

from frameworks.batch.model import JobSpec
from frameworks.client.placement import attribute_equals, pick
from protocol.resources import Resources

__pure__ = True

DEFAULT_GANG_TIMEOUT = 30.0


@attrs.frozen
class OfferView:
    offer_id: str
    agent_id: str
    hostname: str
    role: str  # the role the offer is allocated to
    resources: Resources  # what is available in it now (empty: all of it is in use by our tasks)
    attributes: Mapping[str, str] = attrs.field(factory=dict)


@attrs.frozen
class AgentCapacity:
    """One agent of the cluster as the master shows it (``/state``): its total resources
    (scalars, roles flattened), its attributes as text, its revocable resources (usage slack)."""

    agent_id: str
    scalars: Mapping[str, float]  # regular totals
    attributes: Mapping[str, str] = attrs.field(factory=dict)
    revocable: Mapping[str, float] = attrs.field(factory=dict)  # on top, for preemptible jobs


@attrs.frozen
class JobView:
    job_id: int
    spec: JobSpec
    submitted_at: float
    pending: tuple[int, ...]  # task indexes ready to place now
    active: int = 0  # tasks launching or running
    gang_started: bool = False  # the gang has started once; the rest place one by one
    blocked: str | None = None  # dependency or retry reason; the job is not placeable now
    hold_since: float | None = None  # when this job started holding resources for its gang


@attrs.frozen
class Placement:
    job_id: int
    index: int
    offer_id: str
    agent_id: str
    resources: Resources  # concrete entries carved out of the offer (roles, revocable kept)


@attrs.frozen
class Plan:
    placements: tuple[Placement, ...]
    reasons: Mapping[int, str]  # job id -> why it is not (fully) placed
    held_offers: frozenset[str]  # keep these for the head gang
    holding_job: int | None  # the head gang, if one is holding
    released_job: int | None  # a head gang whose hold timed out: decline its held offers

    def placements_for(self, job_id: int) -> list[Placement]:
        return [p for p in self.placements if p.job_id == job_id]


def job_order_key(job: JobView) -> tuple[int, float, int]:
    return (-job.spec.priority, job.submitted_at, job.job_id)


def matches(spec: JobSpec, offer: OfferView) -> bool:
    """The offer's role serves the job's queue and the agent satisfies its constraints."""
    if offer.role != spec.queue:
        return False
    return constraints_met(spec, offer.attributes)


def constraints_met(spec: JobSpec, attributes: Mapping[str, str]) -> bool:
    """Numbers compare as numbers: ``host_index=1.0`` matches the agent attribute ``host_index:1``."""
    return all(attribute_equals(attributes.get(name), value) for name, value in spec.constraints)


def shape_text(r: Resources) -> str:
    """``cpus:1;mem:128`` (no brackets: the CLI prints reasons through rich, which takes
    ``[...]`` for markup and printed ``waiting for 4 x  to be offered together``)."""
    return ";".join(f"{k}:{v:g}" for k, v in sorted(r.scalars().items()))


def room_for(spec: JobSpec, capacity: Sequence[AgentCapacity]) -> int | None:
    """How many tasks of ``spec`` the agents in ``capacity`` that meet its constraints could
    hold at once, each on one agent (None when no agent has been seen with anything in it)."""
    if not any(v > 0 for a in capacity for v in (*a.scalars.values(), *a.revocable.values())):
        return None
    shape = {n: v for n, v in spec.resources().scalars().items() if v > 0}
    total = 0
    for agent in capacity:
        if not constraints_met(spec, agent.attributes):
            continue
        have = dict(agent.scalars)
        if spec.preemptible:
            for n, v in agent.revocable.items():
                have[n] = have.get(n, 0.0) + v
        fit = min((int((have.get(n, 0.0) + 1e-9) // v) for n, v in shape.items()), default=0)
        total += max(fit, 0)
    return total


def cannot_fit(spec: JobSpec, need: int, capacity: Sequence[AgentCapacity]) -> str | None:
    """``cannot fit in the cluster: ...`` when ``need`` tasks of ``spec`` (a whole gang, or one
    task) do not fit at once in the cluster's agents even if all of them were free, else None."""
    room = room_for(spec, capacity)
    if room is None or room >= need:
        return None
    if spec.constraints and not any(constraints_met(spec, a.attributes) for a in capacity):
        wanted = ", ".join(f"{k}={v}" for k, v in spec.constraints)
        return f"cannot fit in the cluster: no agent matches {wanted}"
    shape = shape_text(spec.resources())
    if need == 1:
        return f"cannot fit in the cluster: no agent has room for {shape}"
    return f"cannot fit in the cluster: {need} x {shape} at once, its agents have room for {room}"


def carve(available: Resources, want: Resources, role: str, preemptible: bool) -> Resources | None:
    """Concrete entries of ``available`` covering ``want`` (see ``frameworks.client.placement.pick``).

    Revocable entries only for a preemptible job, and first for it, so regular resources stay
    with the jobs that cannot be preempted.
    """
    if preemptible:
        got = pick(available, want, role=role, only_revocable=True)
        if got is not None:
            return got
    return pick(available, want, role=role, allow_revocable=preemptible)


def shortfall(spec: JobSpec, offers: Sequence[OfferView], free: Mapping[str, Resources]) -> str:
    """Why one more task of ``spec`` does not fit: the first resource no offer has enough of."""
    eligible = [o for o in offers if matches(spec, o)]
    if not eligible:
        if any(o.role == spec.queue for o in offers):
            wanted = ", ".join(f"{k}={v}" for k, v in spec.constraints)
            return f"no offered agent matches {wanted}"
        return f"no offers for queue {spec.queue!r}"
    if not any(free[o.offer_id] for o in eligible):
        return "all held resources in use"
    want = spec.resources()
    for name, amount in want.scalars().items():
        best = 0.0
        for o in eligible:
            usable = free[o.offer_id].allocatable_to(spec.queue)
            if not spec.preemptible:
                usable = usable.non_revocable()
            best = max(best, usable.scalar(name))
        if best < amount:
            return f"waiting for {_fmt(amount)} {name}; largest free offer has {_fmt(best)}"
    return "waiting for resources"


def _fmt(x: float) -> str:
    return f"{x:g}"


def _fill(
    job: JobView, want: Resources, offers: Sequence[OfferView], free: dict[str, Resources]
) -> list[Placement]:
    """Place ``job``'s pending tasks one by one, best fit: each on the eligible offer with the
    least cpus left after placing it. ``free`` is updated.

    The tasks are alike, so this is one pass over the eligible offers sorted by free cpus (a
    stable sort: the first of equals wins): the offer a task went to is still the tightest for
    the next, until it no longer fits, and an offer that does not fit never fits again (it only
    shrinks). O(offers log offers + tasks) instead of O(tasks x offers).
    """
    spec = job.spec
    order = sorted(
        (o for o in offers if free[o.offer_id] and matches(spec, o)),
        key=lambda o: free[o.offer_id].scalar("cpus"),
    )
    out: list[Placement] = []
    k = 0
    for index in job.pending:
        got = None
        while k < len(order):
            got = carve(free[order[k].offer_id], want, spec.queue, spec.preemptible)
            if got is not None:
                break
            k += 1
        if got is None:
            break
        offer = order[k]
        free[offer.offer_id] = free[offer.offer_id] - got
        out.append(Placement(job.job_id, index, offer.offer_id, offer.agent_id, got))
    return out


def plan(
    jobs: Sequence[JobView],
    offers: Sequence[OfferView],
    now: float,
    gang_timeout: float = DEFAULT_GANG_TIMEOUT,
    capacity: Sequence[AgentCapacity] = (),
) -> Plan:
    free: dict[str, Resources] = {o.offer_id: o.resources for o in offers}
    placements: list[Placement] = []
    reasons: dict[int, str] = {}
    held: set[str] = set()
    head: JobView | None = None
    released: int | None = None

    for job in sorted(jobs, key=job_order_key):
        spec = job.spec
        if job.blocked is not None:
            reasons[job.job_id] = job.blocked
            continue
        if not job.pending:
            continue
        needs_gang = spec.gang > 0 and not job.gang_started and job.active == 0
        impossible = cannot_fit(spec, spec.gang_size, capacity) if needs_gang else None
        if impossible:
            # The cluster cannot hold the whole gang even with every agent free: waiting on
            # offers will not help until the cluster changes, so it holds nothing and blocks
            # nobody (it is not the head gang; smaller jobs and other gangs go on).
            reasons[job.job_id] = f"gang 0/{spec.gang_size} placed; {impossible}"
            continue
        if needs_gang and head is not None:
            reasons[job.job_id] = f"gang 0/{spec.gang_size} placed; behind gang job {head.job_id}"
            continue
        trial = dict(free)
        tentative = _fill(job, spec.resources(), offers, trial)
        gang = spec.gang_size if needs_gang else 1
        if len(tentative) >= gang or (not needs_gang and tentative):
            placements += tentative
            free = trial
            if len(tentative) < len(job.pending):
                reasons[job.job_id] = (
                    f"{len(tentative)} of {len(job.pending)} pending tasks placed; "
                    + shortfall(spec, offers, free)
                )
            continue
        if not needs_gang:
            reasons[job.job_id] = cannot_fit(spec, 1, capacity) or shortfall(spec, offers, free)
            continue
        # A gang that cannot start: it becomes the head gang and holds what it could use.
        if not any(o.resources and matches(spec, o) for o in offers):
            # Demand-driven allocation offers a gang whole or not at all (REQUEST with gang_min).
            why = f"gang 0/{gang} placed; waiting for {gang} x {shape_text(spec.resources())} to be offered together"
        else:
            why = f"gang {len(tentative)}/{gang} placed; {shortfall(spec, offers, trial)}"
        if job.hold_since is not None and now - job.hold_since >= gang_timeout:
            released = job.job_id
            reasons[job.job_id] = f"{why}; released held resources after {gang_timeout:g}s"
            continue
        head = job
        reasons[job.job_id] = why
        if tentative:
            free = trial  # protected: lower-priority jobs must not take these
            held.update(p.offer_id for p in tentative)

    return Plan(
        placements=tuple(placements),
        reasons=reasons,
        held_offers=frozenset(held),
        holding_job=head.job_id if head is not None and held else None,
        released_job=released,
    )
