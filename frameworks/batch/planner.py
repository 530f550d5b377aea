"""The batch planner: which pending tasks go on which offers now, and why the rest wait.

A pure function of (jobs, offers, now). Jobs are served in rank order (``JobView.rank``, the
multifactor priority the core computes with ``fairshare.py``: the owner's fair share, the job's
priority, its age and size), then by priority, then older, then lower id, across queues; a job
only uses offers allocated to its queue's role and agents whose attributes match its
constraints. Given a ``LimitBook`` (``limits.py``), a job over one of its owner's or queue's
limits places nothing (or only what fits under them) and waits with the limit as its reason,
holding nothing. A gang (``spec.gang`` tasks that must start
together) is placed tentatively (``protocol.placement.Tentative``), like a Volcano statement:
committed whole or discarded.

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

from frameworks.batch.backfill import Release, Reservation, earliest_start
from frameworks.batch.limits import LimitBook, Need
from frameworks.batch.model import JobSpec
from frameworks.client.placement import attribute_equals, pick, pick_ports
from protocol.placement import Tentative
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
    address: str = ""  # where tasks on its agent are reached (the agent's address); "" = hostname

    @property
    def reach(self) -> str:
        return self.address or self.hostname


@attrs.frozen
class AgentCapacity:
    """One agent of the cluster as the master shows it (``/state``): its total resources
    (scalars, roles flattened), its attributes as text, its revocable resources (usage slack)."""

    agent_id: str
    scalars: Mapping[str, float]  # regular totals
    attributes: Mapping[str, str] = attrs.field(factory=dict)
    revocable: Mapping[str, float] = attrs.field(factory=dict)  # on top, for preemptible jobs
    ports: int = 0  # how many ports its port ranges hold


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
    rank: float = 0.0  # the multifactor priority (fairshare.py): higher is served first
    user: str = ""  # the owner (limits count per user)


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
    # what is left of each offer after the placements and the head gang's hold (for preemption)
    free_after: Mapping[str, Resources] = attrs.field(factory=dict)
    held_placements: tuple[Placement, ...] = ()  # the head gang's tentative placements (its hold)
    reservation: Reservation | None = None  # planned backfill: the head job's, from time limits
    limited: frozenset[int] = frozenset()  # jobs stopped by a limit of their owner or queue

    def placements_for(self, job_id: int) -> list[Placement]:
        return [p for p in self.placements if p.job_id == job_id]


def job_order_key(job: JobView) -> tuple[float, int, float, int]:
    return (-job.rank, -job.spec.priority, job.submitted_at, job.job_id)


def need_of(spec: JobSpec) -> Need:
    """One task's resources as the limits count them."""
    return Need(cpus=spec.cpus, gpus=spec.gpus, mem=spec.mem)


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
    if spec.ports:
        shape["ports"] = float(spec.ports)
    total = 0
    for agent in capacity:
        if not constraints_met(spec, agent.attributes):
            continue
        have = _agent_has(spec, agent)
        fit = min((int((have.get(n, 0.0) + 1e-9) // v) for n, v in shape.items()), default=0)
        total += max(fit, 0)
    return total


def _agent_has(spec: JobSpec, agent: AgentCapacity) -> dict[str, float]:
    """The agent's totals as the job may use them: revocable on top for a preemptible job, ports
    as a count."""
    have = dict(agent.scalars)
    if spec.preemptible:
        for n, v in agent.revocable.items():
            have[n] = have.get(n, 0.0) + v
    have["ports"] = float(agent.ports)
    return have


def with_offered(capacity: Sequence[AgentCapacity], offers: Sequence[OfferView]) -> Sequence[AgentCapacity]:
    """``capacity`` (the cluster as last read, every ``cluster_interval``) with what the offers
    show since: an agent offered but not in it yet (registered after the read) counts with what
    it offers, and a known agent at least with what it offers now (re-registered larger). So a
    gang the master offers whole as soon as an agent arrives is not judged unable to fit by an
    older read. Unchanged when the offers show nothing new (or no cluster has been read)."""
    if not capacity or not offers:
        return capacity
    seen: dict[str, dict[str, float]] = {}
    rev: dict[str, dict[str, float]] = {}
    ports: dict[str, int] = {}
    attributes: dict[str, Mapping[str, str]] = {}
    for o in offers:
        into = seen.setdefault(o.agent_id, {})
        for n, v in o.resources.non_revocable().scalars().items():
            into[n] = into.get(n, 0.0) + v
        into_rev = rev.setdefault(o.agent_id, {})
        for n, v in o.resources.revocable().scalars().items():
            into_rev[n] = into_rev.get(n, 0.0) + v
        ports[o.agent_id] = ports.get(o.agent_id, 0) + port_count(o.resources)
        attributes.setdefault(o.agent_id, o.attributes)
    out: list[AgentCapacity] = []
    changed = False
    for a in capacity:
        offered = seen.pop(a.agent_id, None)
        if offered is None or all(a.scalars.get(n, 0.0) + 1e-9 >= v for n, v in offered.items()):
            out.append(a)
            continue
        changed = True
        scalars = {**a.scalars, **{n: max(a.scalars.get(n, 0.0), v) for n, v in offered.items()}}
        out.append(attrs.evolve(a, scalars=scalars, ports=max(a.ports, ports[a.agent_id])))
    for agent_id, offered in seen.items():
        changed = True
        out.append(AgentCapacity(agent_id, offered, attributes[agent_id], rev[agent_id], ports[agent_id]))
    return tuple(out) if changed else capacity


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
    if spec.ports:
        shape += f";ports:{spec.ports}"
    if need == 1 or room == 0:
        # name what no agent has enough of: "the most gpus on one agent is 1"
        agents = [a for a in capacity if constraints_met(spec, a.attributes)]
        want = {n: v for n, v in spec.resources().scalars().items() if v > 0}
        if spec.ports:
            want["ports"] = float(spec.ports)
        for name, amount in sorted(want.items()):
            most = max((_agent_has(spec, a).get(name, 0.0) for a in agents), default=0.0)
            if most + 1e-9 < amount:
                return (
                    f"cannot fit in the cluster: no agent has {_fmt(amount)} {name} "
                    f"(the most on one agent is {_fmt(most)})"
                )
        if need == 1:
            return f"cannot fit in the cluster: no agent has room for {shape}"
    return f"cannot fit in the cluster: {need} x {shape} at once, its agents have room for {room}"


def gpu_sharing_error(spec: JobSpec, capacity: Sequence[AgentCapacity]) -> str | None:
    """A fractional ``gpus`` needs an agent that shares GPUs between tasks (one started with
    ``--gpu-sharing`` shows the attribute ``gpu_sharing``); else the refusal, said at submit."""
    if spec.gpus == int(spec.gpus):
        return None
    if any(a.attributes.get("gpu_sharing", "").lower() in ("1", "true", "yes") for a in capacity):
        return None
    return (
        f"gpus: {spec.gpus:g} is not a whole number; a task gets whole GPUs (the devices in its "
        "CUDA_VISIBLE_DEVICES) and no agent of the cluster shares them (one that does runs with "
        "--gpu-sharing and shows the attribute gpu_sharing)"
    )


def rendezvous_port_missing(spec: JobSpec, capacity: Sequence[AgentCapacity]) -> str | None:
    """A gang's rank 0 takes one port more than its ``ports`` (``MASTER_PORT``): say so when no
    agent that meets the job's constraints has that many ports."""
    if spec.gang <= 0 or not any(a.scalars for a in capacity):
        return None
    if any(a.ports > spec.ports and constraints_met(spec, a.attributes) for a in capacity):
        return None
    return (
        f"cannot fit in the cluster: rank 0 needs {spec.ports + 1} ports (its PORTs and MASTER_PORT, "
        "the gang's rendezvous) and no agent offers that many"
    )


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


def shortfall(
    spec: JobSpec, offers: Sequence[OfferView], free: Mapping[str, Resources], first: int | None = None
) -> str:
    """Why one more task of ``spec`` (task ``first``, the next to place) does not fit: the first
    resource no offer has enough of."""
    eligible = [o for o in offers if matches(spec, o)]
    if not eligible:
        if any(o.role == spec.queue for o in offers):
            wanted = ", ".join(f"{k}={v}" for k, v in spec.constraints)
            return f"no offered agent matches {wanted}"
        return f"no offers for queue {spec.queue!r}"
    if not any(has_room(free[o.offer_id]) for o in eligible):
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
    ports = spec.ports_for(first) if first is not None else spec.ports
    if ports:
        best_ports = max(port_count(free[o.offer_id].allocatable_to(spec.queue)) for o in eligible)
        if best_ports < ports:
            return f"waiting for {ports} ports; largest free offer has {best_ports}"
    return "waiting for resources"


def has_room(r: Resources) -> bool:
    """Whether ``r`` has any scalar left (an offer whose cpus, mem... are all in use by our tasks
    keeps only ports or nothing: its resources are in use)."""
    return any(v > 0 for v in r.scalars().values())


def port_count(r: Resources) -> int:
    """How many regular ports ``r``'s ``ports`` ranges hold."""
    return sum(e - b + 1 for b, e in r.non_revocable().ranges("ports"))


def _fmt(x: float) -> str:
    return f"{x:g}"


def _fill(
    job: JobView, want: Resources, offers: Sequence[OfferView], draft: Tentative[str, Placement],
    most: int | None = None,
) -> list[Placement]:
    """Place ``job``'s pending tasks one by one, best fit: each on the eligible offer with the
    least cpus left after placing it, in ``draft`` (its working copy of the offers' free
    resources); returns the placements made.

    The tasks are alike, so this is one pass over the eligible offers sorted by free cpus (a
    stable sort: the first of equals wins): the offer a task went to is still the tightest for
    the next, until it no longer fits, and an offer that does not fit never fits again (it only
    shrinks). O(offers log offers + tasks) instead of O(tasks x offers).
    """
    spec = job.spec
    free = draft.free
    order = sorted(
        (o for o in offers if has_room(free(o.offer_id)) and matches(spec, o)),
        key=lambda o: free(o.offer_id).scalar("cpus"),
    )

    def fits(offer: OfferView, ports: int) -> Resources | None:
        have = free(offer.offer_id)
        got = carve(have, want, spec.queue, spec.preemptible)
        if got is None or not ports:
            return got
        chosen = pick_ports(have - got, ports, spec.queue)
        return None if chosen is None else got + chosen

    out: list[Placement] = []
    k = 0
    for index in job.pending if most is None else job.pending[:most]:
        got = None
        ports = spec.ports_for(index)
        if ports != spec.ports:
            # A gang's rank 0 (one port more than the others): look through every offer left, and
            # keep the ones it does not fit for the others.
            at = next(((j, g) for j in range(k, len(order)) if (g := fits(order[j], ports)) is not None), None)
            if at is None:
                break
            offer, got = order[at[0]], at[1]
        else:
            while k < len(order):
                got = fits(order[k], ports)
                if got is not None:
                    break
                k += 1
            if got is None:
                break
            offer = order[k]
        placement = Placement(job.job_id, index, offer.offer_id, offer.agent_id, got)
        draft.place(offer.offer_id, got, placement)
        out.append(placement)
    return out


def plan(
    jobs: Sequence[JobView],
    offers: Sequence[OfferView],
    now: float,
    gang_timeout: float = DEFAULT_GANG_TIMEOUT,
    capacity: Sequence[AgentCapacity] = (),
    limits: LimitBook | None = None,
    releases: Sequence[Release] = (),
    reservations: Sequence[Reservation] = (),
) -> Plan:
    """``limits``: what each user and queue has in use at the start of the round (not changed:
    the round works on a copy). ``releases``: when our running tasks' resources come back (their
    time limits), which gives the first job that cannot start a reservation (planned backfill,
    ``backfill.py``); ``reservations``: others already made (a preemption's), each binding the
    jobs after its own in the order."""
    free: dict[str, Resources] = {o.offer_id: o.resources for o in offers}
    capacity = with_offered(capacity, offers)
    book = limits.copy() if limits is not None and limits.limits.enabled else None
    ids = {j.job_id for j in jobs}
    pending_res = {r.job_id: r for r in reservations if r.job_id in ids}
    active: list[Reservation] = [r for r in reservations if r.job_id not in ids]
    reservation: Reservation | None = None
    prev: int | None = None
    placements: list[Placement] = []
    reasons: dict[int, str] = {}
    held: set[str] = set()
    head: JobView | None = None
    released: int | None = None
    held_placements: tuple[Placement, ...] = ()
    limited: set[int] = set()

    for job in sorted(jobs, key=job_order_key):
        if prev is not None and prev in pending_res:
            active.append(pending_res.pop(prev))  # binds the jobs after its own
        prev = job.job_id
        spec = job.spec
        if job.blocked is not None:
            reasons[job.job_id] = job.blocked
            continue
        if not job.pending:
            continue
        needs_gang = spec.gang > 0 and not job.gang_started and job.active == 0
        impossible = (
            cannot_fit(spec, spec.gang_size, capacity) or rendezvous_port_missing(spec, capacity)
            if needs_gang
            else None
        )
        if impossible:
            # The cluster cannot hold the whole gang even with every agent free: waiting on
            # offers will not help until the cluster changes, so it holds nothing and blocks
            # nobody (it is not the head gang; smaller jobs and other gangs go on).
            reasons[job.job_id] = f"gang 0/{spec.gang_size} placed; {impossible}"
            continue
        most: int | None = None
        capped: str | None = None
        if book is not None:
            # Over a limit of its owner or queue: it waits, holding nothing (not the head gang).
            want = spec.gang_size if needs_gang else len(job.pending)
            allowed, capped = book.room(
                job.user, spec.queue, need_of(spec), want, starts_job=job.active == 0, whole=needs_gang
            )
            if capped is not None and (allowed == 0 or (needs_gang and allowed < spec.gang_size)):
                reasons[job.job_id] = f"gang 0/{spec.gang_size} placed; {capped}" if needs_gang else capped
                limited.add(job.job_id)
                continue
            most = allowed if capped is not None else None
        if needs_gang and head is not None:
            reasons[job.job_id] = f"gang 0/{spec.gang_size} placed; behind gang job {head.job_id}"
            continue
        draft: Tentative[str, Placement] = Tentative(free)
        hidden = _hide(job, active, draft, now)
        tentative = _fill(job, spec.resources(), offers, draft, most)
        for oid, part in hidden.items():
            draft.release(oid, part)  # what it could not use stays for the others
        gang = spec.gang_size if needs_gang else 1
        if reservation is None and releases and (len(tentative) < gang if needs_gang else not tentative):
            # the first job that cannot start: its reservation binds the jobs after it
            need = gang - len(tentative) if needs_gang else 1
            reservation = _reserve(job, need, offers, draft.working(), releases, now)
            if reservation is not None:
                active.append(reservation)
        if len(tentative) >= gang or (not needs_gang and tentative):
            placements += draft.commit(free)
            if book is not None:
                book.take(job.user, spec.queue, need_of(spec), len(tentative), starts_job=job.active == 0)
            if len(tentative) < len(job.pending):
                why = None
                if book is not None and capped is not None and len(tentative) == most:
                    # stopped by a limit: say where it stands now that these are placed
                    _, why = book.room(job.user, spec.queue, need_of(spec), 1, starts_job=False)
                    limited.add(job.job_id)
                why = why or shortfall(spec, offers, free, job.pending[len(tentative)])
                reasons[job.job_id] = f"{len(tentative)} of {len(job.pending)} pending tasks placed; {why}"
            continue
        if not needs_gang:
            draft.discard()
            reasons[job.job_id] = cannot_fit(spec, 1, capacity) or shortfall(spec, offers, free, job.pending[0])
            if reservation is not None and reservation.job_id == job.job_id:
                reasons[job.job_id] += f"; reserved to start in {reservation.start_at - now:.0f}s"
            continue
        # A gang that cannot start: it becomes the head gang and holds what it could use.
        if not any(has_room(o.resources) and matches(spec, o) for o in offers):
            # Demand-driven allocation offers a gang whole or not at all (REQUEST with gang_min).
            why = f"gang 0/{gang} placed; waiting for {gang} x {shape_text(spec.resources())} to be offered together"
        else:
            nxt = job.pending[len(tentative)] if len(tentative) < len(job.pending) else None
            why = f"gang {len(tentative)}/{gang} placed; {shortfall(spec, offers, draft.working(), nxt)}"
        if job.hold_since is not None and now - job.hold_since >= gang_timeout:
            draft.discard()
            released = job.job_id
            reasons[job.job_id] = f"{why}; released held resources after {gang_timeout:g}s"
            continue
        head = job
        if reservation is not None and reservation.job_id == job.job_id:
            why += f"; reserved to start in {reservation.start_at - now:.0f}s"
        reasons[job.job_id] = why
        if tentative:
            draft.commit(free)  # protected: lower-priority jobs must not take these
            held.update(p.offer_id for p in tentative)
            held_placements = tuple(tentative)
        else:
            draft.discard()

    return Plan(
        placements=tuple(placements),
        reasons=reasons,
        held_offers=frozenset(held),
        holding_job=head.job_id if head is not None and held else None,
        released_job=released,
        free_after=free,
        held_placements=held_placements,
        reservation=reservation,
        limited=frozenset(limited),
    )


def finishes_by(job: JobView, at: float, now: float) -> bool:
    """The job's tasks, started now, are done by ``at`` (they have a time limit that says so)."""
    limit = job.spec.time_limit
    return limit is not None and now + limit <= at


def _part(available: Resources, amounts: Mapping[str, float]) -> Resources:
    """The scalar entries of ``available`` up to ``amounts`` per name."""
    left = dict(amounts)
    parts = []
    for key, value in available.entries():
        if not isinstance(value, int) or left.get(key.name, 0.0) <= 0:
            continue
        take = min(value / 1000.0, left[key.name])
        left[key.name] -= take
        parts.append(
            Resources.scalar_entry(key.name, take, reservations=key.reservations, revocable=key.revocable)
        )
    return Resources.sum(parts)


def _hide(
    job: JobView, active: Sequence[Reservation], draft: Tentative[str, Placement], now: float
) -> dict[str, Resources]:
    """Hold in ``draft`` what the reservations made before ``job``'s turn hold, unless the job
    is done before they start; returns what was held, per offer."""
    hidden: dict[str, Resources] = {}
    for r in active:
        if r.job_id == job.job_id or finishes_by(job, r.start_at, now):
            continue
        for oid, amounts in r.hold.items():
            have = draft.get(oid)
            if have is None:
                continue
            part = _part(have, amounts)
            if part:
                draft.hold(oid, part)
                hidden[oid] = hidden.get(oid, Resources.empty()) + part
    return hidden


def usable_scalars(spec: JobSpec, available: Resources) -> dict[str, float]:
    """What of an offer's resources a task of ``spec`` could use, as scalars."""
    usable = available.allocatable_to(spec.queue)
    if not spec.preemptible:
        usable = usable.non_revocable()
    return usable.scalars()


def _reserve(
    job: JobView, need: int, offers: Sequence[OfferView], free: Mapping[str, Resources],
    releases: Sequence[Release], now: float,
) -> Reservation | None:
    spec = job.spec
    eligible = {o.offer_id: usable_scalars(spec, free[o.offer_id]) for o in offers if matches(spec, o)}
    if not eligible:
        return None
    shape = {k: v for k, v in spec.resources().scalars().items() if v > 0}
    res = earliest_start(job.job_id, shape, need, now, eligible, releases, (), spec.time_limit)
    return res if res is not None and res.start_at > now else None
