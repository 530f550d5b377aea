"""ACCEPT: validate against the offer book, then apply (launch, reserve, unreserve).

Every ACCEPT is re-validated: offer ids must be known, owned by the caller, distinct and from a
single agent; the operations, applied in order to the pool of offered resources, must never use
more than is there. A rejected ACCEPT changes nothing except that the caller's classic offers
named in it are consumed (their resources return to the pool, as in Mesos); reusable offers stay
intact. On success a lease keeps the remainder under the same offer id (``OfferUpdated``); a
classic offer's remainder is declined with the ACCEPT's filter.
"""

from __future__ import annotations

from master.allocator.decisions import (
    Accepted,
    AcceptResult,
    Decision,
    LaunchedTask,
    OfferRescinded,
    OfferUpdated,
    RejectCode,
    Rejected,
)
from master.allocator.events import Launch, OffersAccepted, Reserve, Unreserve
from master.allocator.ledger import Ledger
from master.allocator.quantities import units_that_fit
from master.allocator.state import FrameworkState, OfferPhase, OfferState, TaskAlloc
from protocol.resources import ResourceError, Resources, is_subrole

__pure__ = True


def _reject(ledger: Ledger, offers: list[OfferState], code: RejectCode, reason: str) -> Rejected:
    for o in offers:
        if not o.reusable and o.offer_id in ledger.offers:
            ledger.offer_drop(o, end=OfferPhase.REJECTED)
    return Rejected(code, reason)


def _role_ok(role: str, resources: Resources) -> bool:
    return all(r == role or is_subrole(r, role) for r in resources.roles())


def accept(ledger: Ledger, ev: OffersAccepted, now: float) -> AcceptResult:
    fw = ledger.frameworks.get(ev.framework_id)
    if fw is None:
        return Rejected(RejectCode.UNKNOWN_FRAMEWORK, f"framework {ev.framework_id} is not known")
    if not ev.offer_ids:
        return Rejected(RejectCode.NO_OFFERS, "ACCEPT names no offer")
    offers: list[OfferState] = []
    seen: set[str] = set()
    problem: tuple[RejectCode, str] | None = None
    for oid in ev.offer_ids:
        if oid in seen:
            problem = problem or (RejectCode.DUPLICATE_OFFER, f"offer {oid} appears twice in the ACCEPT")
            continue
        seen.add(oid)
        o = ledger.offers.get(oid)
        if o is None:
            problem = problem or (RejectCode.UNKNOWN_OFFER, f"offer {oid} is no longer valid")
            continue
        if o.framework_id != fw.framework_id:
            problem = problem or (RejectCode.NOT_OWNER, f"offer {oid} belongs to another framework")
            continue
        offers.append(o)
    if problem is None and len({o.agent_id for o in offers}) > 1:
        problem = (RejectCode.DIFFERENT_AGENTS, "ACCEPT combines offers from different agents")
    if problem is None and len({o.role for o in offers}) > 1:
        problem = (RejectCode.INVALID_OPERATION, "ACCEPT combines offers allocated to different roles")
    if problem is not None:
        return _reject(ledger, offers, *problem)

    role = offers[0].role
    pool = Resources.sum(o.regular + (o.revocable.as_revocable() if o.revocable else o.revocable) for o in offers)
    launches: list[Launch] = []
    reserves: list[Reserve] = []
    unreserves: list[Unreserve] = []
    transforms: list[tuple[Resources, Resources]] = []  # (removed from total, added to total)
    task_ids: set[str] = set()
    try:
        for op in ev.operations:
            if isinstance(op, Launch):
                if op.task_id in fw.tasks or op.task_id in task_ids:
                    return _reject(ledger, offers, RejectCode.DUPLICATE_TASK, f"task {op.task_id} already exists")
                if not pool.contains(op.resources):
                    return _reject(
                        ledger,
                        offers,
                        RejectCode.INSUFFICIENT_RESOURCES,
                        f"task {op.task_id} uses more resources than offered: {op.resources} not in {pool}",
                    )
                task_ids.add(op.task_id)
                pool = pool - op.resources
                launches.append(op)
            elif isinstance(op, Reserve):
                res = op.resources
                if not res or res.revocable() or res.unreserved() or not _role_ok(role, res):
                    return _reject(
                        ledger, offers, RejectCode.INVALID_OPERATION, f"cannot reserve {res} for role {role}"
                    )
                src = res.unreserve()
                if not pool.contains(src):
                    return _reject(
                        ledger, offers, RejectCode.INSUFFICIENT_RESOURCES, f"RESERVE of {res}: {src} not offered"
                    )
                pool = pool - src + res
                transforms.append((src, res))
                reserves.append(op)
            elif isinstance(op, Unreserve):
                res = op.resources
                if not res or res.unreserved() or res.revocable() or not _role_ok(role, res):
                    return _reject(ledger, offers, RejectCode.INVALID_OPERATION, f"cannot unreserve {res}")
                if not pool.contains(res):
                    return _reject(
                        ledger, offers, RejectCode.INSUFFICIENT_RESOURCES, f"UNRESERVE of {res}: not offered"
                    )
                dst = res.unreserve()
                pool = pool - res + dst
                transforms.append((res, dst))
                unreserves.append(op)
    except ResourceError as exc:
        return _reject(ledger, offers, RejectCode.INVALID_OPERATION, str(exc))
    return _apply(ledger, fw, offers, role, launches, reserves, unreserves, transforms, pool, ev, now)


def _apply(
    ledger: Ledger,
    fw: FrameworkState,
    offers: list[OfferState],
    role: str,
    launches: list[Launch],
    reserves: list[Reserve],
    unreserves: list[Unreserve],
    transforms: list[tuple[Resources, Resources]],
    remainder: Resources,
    ev: OffersAccepted,
    now: float,
) -> Accepted:
    agent = ledger.agents[offers[0].agent_id]
    lease = offers[0] if fw.reusable else None
    # demand bookkeeping before the offers change
    for launch in launches:
        _count_launch(ledger, fw, offers, launch)
    # 1. everything offered goes back to the free pools
    for o in offers:
        ledger.offer_shrink(o, o.regular, o.revocable, settle=False)
    # 2. reservations change the agent's total (and free, where the resources now are)
    for removed, added in transforms:
        agent.set_total(agent.total - removed + added)
        agent.free = agent.free - removed + added
    # 3. tasks take their resources
    launched: list[LaunchedTask] = []
    for launch in launches:
        task = TaskAlloc(
            fw.framework_id,
            launch.task_id,
            agent.agent_id,
            role,
            launch.resources.non_revocable(),
            launch.resources.revocable().flatten(),
            lease.offer_id if lease is not None else None,
            launch.priority,
        )
        ledger.task_start(task)
        if lease is not None:
            assert lease.tasks is not None
            lease.tasks.add(task.task_id)
        launched.append(LaunchedTask(launch.task_id, agent.agent_id, launch.resources, task.offer_id))
    decisions: list[Decision] = []
    regular_rest = remainder.non_revocable()
    revocable_rest = remainder.revocable().flatten()
    if lease is not None:
        ledger.offer_grow(lease, regular_rest, revocable_rest, now)
        for o in offers[1:]:
            if o.tasks:  # tasks launched from a merged lease now return to the surviving one
                assert lease.tasks is not None
                for tid in o.tasks:
                    moved = ledger.tasks.get((fw.framework_id, tid))
                    if moved is not None:
                        moved.offer_id = lease.offer_id
                        lease.tasks.add(tid)
                o.tasks.clear()
            ledger.offer_drop(o, settle=False, end=OfferPhase.ACCEPTED)
            decisions.append(
                OfferRescinded(o.offer_id, fw.framework_id, agent.agent_id, f"merged into {lease.offer_id} by ACCEPT")
            )
        if lease.is_empty() and not lease.tasks:
            ledger.offer_drop(lease, settle=False, end=OfferPhase.ACCEPTED)
            decisions.append(OfferRescinded(lease.offer_id, fw.framework_id, agent.agent_id, "lease used up"))
        else:
            decisions.append(OfferUpdated(ledger.snapshot(lease), "remainder kept after ACCEPT"))
    else:
        for o in offers:
            ledger.offer_drop(o, settle=False, end=OfferPhase.ACCEPTED)
        refuse = ev.refuse_seconds if ev.refuse_seconds is not None else ledger.config.default_refuse_seconds
        if refuse > 0 and (regular_rest or revocable_rest):
            ledger.filters.add(fw.framework_id, role, agent.agent_id, regular_rest, now + refuse)
            ledger.activity_of[fw.framework_id] = None
    ledger.settle_lent(agent)
    ledger.mark_dirty(agent.agent_id)
    return Accepted(
        agent.agent_id,
        tuple(decisions),
        tuple(launched),
        tuple(r.resources for r in reserves),
        tuple(u.resources for u in unreserves),
    )


def _count_launch(ledger: Ledger, fw: FrameworkState, offers: list[OfferState], launch: Launch) -> None:
    """A launch that fits a standing demand's shape consumes one unit of it."""
    if not fw.demands:
        return
    have = launch.resources.scalars()
    for demand in sorted(fw.demands, key=lambda d: (-d.priority, d.seq)):
        # (the scalar shape decides: a task of a demand with ``ports`` may take fewer ports than
        # its unit carried, as a gang's other ranks do beside the rendezvous rank)
        if demand.count > 0 and units_that_fit(have, demand.shape_scalars, 1) == 1:
            demand.count -= 1
            demand.launched += 1
            for o in offers:
                units = o.demand_units.get(demand.seq, 0) if o.demand_units else 0
                if units > 0 and o.demand_units is not None:
                    o.demand_units[demand.seq] = units - 1
                    demand.in_offers = max(0, demand.in_offers - 1)
                    break
            ledger.demand_dirty = True
            return
