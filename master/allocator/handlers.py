"""Event handlers: how each fact changes the ledger (and which decisions it causes at once).

One function per event class, ``(ledger, event, now) -> list[Decision]``, dispatched by
``HANDLERS``. Facts never create offers here; ``Allocator.allocate`` does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from master.allocator.accept import accept as accept_offers
from master.allocator.decisions import Decision, OfferRescinded, OfferUpdated
from master.allocator.eligibility import (
    HELD_CONSTRAINTS,
    HELD_GPU,
    LEASE,
    Check,
    refresh_activity,
    refresh_exclusions,
    why_not,
)
from master.allocator.errors import AllocatorError
from master.allocator.events import (
    AgentAdded,
    AgentDeactivated,
    AgentReactivated,
    AgentRemoved,
    AgentSlackEstimated,
    AgentUpdated,
    AllocationRecovered,
    DemandDeclared,
    FrameworkActivated,
    FrameworkAdded,
    FrameworkDeactivated,
    FrameworkRemoved,
    OffersAccepted,
    OffersDeclined,
    QuotaSet,
    ResourcesRecovered,
    Revived,
    Suppressed,
    WeightSet,
)
from master.allocator.ledger import Ledger
from master.allocator.offering import take_back
from master.allocator.revocable import enforce, revocable_back
from master.allocator.roles import check_role
from master.allocator.state import EMPTY, AgentState, DemandState, FrameworkState, OfferPhase, TaskAlloc

__pure__ = True


# --- agents -------------------------------------------------------------------------

def _agent_added(ledger: Ledger, ev: AgentAdded, now: float) -> list[Decision]:
    l_ = ledger
    agent = l_.agents.get(ev.agent_id)
    if agent is not None:  # re-registration
        agent.hostname = ev.hostname
        agent.attributes = dict(ev.attributes)
        out = _agent_updated(ledger, AgentUpdated(ev.agent_id, ev.total), now)
        if l_.constrained:  # its attributes may have changed: constraints are evaluated again
            _constraints_on(l_, agent)
            out.extend(_take_back_ineligible(l_, agent.offers, HELD_CONSTRAINTS))
        if not agent.active:
            agent.active = True
            l_.active_agents += 1
        l_.mark_dirty(ev.agent_id)
        return out
    agent = AgentState(ev.agent_id, ev.hostname, ev.total, dict(ev.attributes), l_.next_agent_seq())
    l_.agents[ev.agent_id] = agent
    if l_.constrained:
        _constraints_on(l_, agent)
    l_.active_agents += 1
    l_.totals.add(agent.total_scalars)
    l_.mark_dirty(ev.agent_id)
    l_.activity_dirty = True
    return []

def _agent_removed(ledger: Ledger, ev: AgentRemoved, now: float) -> list[Decision]:
    l_ = ledger
    agent = l_.agents.get(ev.agent_id)
    if agent is None:
        return []
    out = _drop_offers_on(ledger, agent, ev.reason)
    for key in list(agent.tasks):
        task = l_.tasks.get(key)
        if task is not None:
            l_.task_end(task)
    l_.filters.remove_agent(ev.agent_id)
    l_.lenders.pop(ev.agent_id, None)
    for fid in l_.constrained:
        for agents in l_.frameworks[fid].excluded.values():
            agents.discard(ev.agent_id)
    l_.totals.add(agent.total_scalars, -1.0)
    if agent.active:
        l_.active_agents -= 1
    del l_.agents[ev.agent_id]
    l_.dirty.pop(ev.agent_id, None)
    l_.activity_dirty = True
    return out

def _agent_updated(ledger: Ledger, ev: AgentUpdated, now: float) -> list[Decision]:
    l_ = ledger
    agent = _agent(ledger, ev.agent_id)
    if ev.total == agent.total:
        return []
    out: list[Decision] = []
    for oid in list(agent.offers):
        d = take_back(l_, l_.offers[oid], "agent resources changed", revocable=False)
        if d is not None:
            out.append(d)
    l_.totals.add(agent.total_scalars, -1.0)
    agent.set_total(ev.total)
    l_.totals.add(agent.total_scalars)
    agent.free = agent.total.non_revocable() - agent.allocated - l_.agent_offered(agent)
    if agent.has_gpus:  # (it may have gained GPUs) revocable parts go too where GPUs exclude them
        out.extend(_take_back_ineligible(l_, agent.offers, HELD_GPU))
    l_.mark_dirty(agent.agent_id)
    return out

def _agent_slack(ledger: Ledger, ev: AgentSlackEstimated, now: float) -> list[Decision]:
    l_ = ledger
    agent = _agent(ledger, ev.agent_id)
    agent.usage_slack = ev.slack.flatten().only(*ledger.config.revocable_names)
    out: list[Decision] = []
    enforce(l_, agent, "usage slack estimate shrank", out)
    l_.mark_dirty(agent.agent_id)
    return out

def _agent_deactivated(ledger: Ledger, ev: AgentDeactivated, now: float) -> list[Decision]:
    agent = _agent(ledger, ev.agent_id)
    if not agent.active:
        return []
    agent.active = False
    ledger.active_agents -= 1
    return _drop_offers_on(ledger, agent, ev.reason)

def _agent_reactivated(ledger: Ledger, ev: AgentReactivated, now: float) -> list[Decision]:
    agent = _agent(ledger, ev.agent_id)
    if not agent.active:
        agent.active = True
        ledger.active_agents += 1
    ledger.mark_dirty(agent.agent_id)
    return []

def _drop_offers_on(ledger: Ledger, agent: AgentState, reason: str) -> list[Decision]:
    out: list[Decision] = []
    for oid in list(agent.offers):
        o = ledger.offers[oid]
        ledger.offer_drop(o)
        out.append(OfferRescinded(oid, o.framework_id, o.agent_id, reason))
    return out

# --- frameworks ---------------------------------------------------------------------

def _framework_added(ledger: Ledger, ev: FrameworkAdded, now: float) -> list[Decision]:
    l_ = ledger
    roles = tuple(check_role(r) for r in (ev.roles or ("*",)))
    fw = l_.frameworks.get(ev.framework_id)
    if fw is None:
        fw = FrameworkState(ev.framework_id, roles, ev.capabilities, ev.active, l_.next_framework_seq())
        l_.frameworks[ev.framework_id] = fw
    else:  # re-subscription (or a placeholder from recovered allocations)
        fw.roles = tuple(dict.fromkeys(fw.roles + roles))
        fw.offer_roles = roles
        fw.set_capabilities(ev.capabilities)
        fw.active = ev.active
    fw.suppressed = set(ev.suppressed_roles)
    if ev.offer_constraints or fw.constraints:
        fw.constraints = dict(ev.offer_constraints)
        fw.excluded = {}
        refresh_exclusions(l_, fw, l_.agents.values())
        if fw.constraints:
            l_.constrained[fw.framework_id] = None
        else:
            l_.constrained.pop(fw.framework_id, None)
    fw.min_allocatable = dict(ev.min_allocatable)
    if fw.min_allocatable:
        l_.own_minimum[fw.framework_id] = None
    else:
        l_.own_minimum.pop(fw.framework_id, None)
    for role in fw.roles:
        l_.roles.add_framework(role, fw.framework_id)
    if fw.revocable_ok:
        l_.rev_sorter.add(fw.framework_id)
    refresh_activity(l_, fw)
    ledger.full_pass = True
    # re-subscribed without GPU_RESOURCES: what it holds on agents with GPUs goes back
    out = [] if fw.gpu_ok else _take_back_ineligible(l_, fw.offers, HELD_GPU)
    # new offer constraints: what it holds on agents they exclude goes back
    if fw.excluded:
        out.extend(_take_back_ineligible(l_, fw.offers, HELD_CONSTRAINTS))
    # re-subscribed or updated (UPDATE_FRAMEWORK) without a role: its offers in that role go back,
    # as Mesos rescinds them
    for oid in list(fw.offers):
        o = l_.offers.get(oid)
        if o is not None and o.role not in roles:
            d = take_back(l_, o, f"role {o.role} removed from the framework")
            if d is not None:
                out.append(d)
    return out


def _take_back_ineligible(ledger: Ledger, offer_ids: dict[str, None], checks: tuple[Check, ...]) -> list[Decision]:
    """Take back the idle parts of those offers whose holder the eligibility ``checks``
    (``HELD_GPU``, ``HELD_CONSTRAINTS``) now refuse on the offer's agent in the offer's role, with
    the failing check's reason (a lease with running tasks stays, emptied; its tasks' resources
    do not flow back into it; tasks running there stay)."""
    out: list[Decision] = []
    for oid in list(offer_ids):
        o = ledger.offers[oid]
        reason = why_not(checks, ledger, ledger.frameworks[o.framework_id], o.role, ledger.agents[o.agent_id])
        if reason is not None:
            d = take_back(ledger, o, reason)
            if d is not None:
                out.append(d)
    return out

def _constraints_on(ledger: Ledger, agent: AgentState) -> None:
    """Evaluate every constrained framework's offer constraints on a (re-)registered agent."""
    for fid in ledger.constrained:
        refresh_exclusions(ledger, ledger.frameworks[fid], (agent,))


def _framework_removed(ledger: Ledger, ev: FrameworkRemoved, now: float) -> list[Decision]:
    l_ = ledger
    fw = l_.frameworks.get(ev.framework_id)
    if fw is None:
        return []
    out: list[Decision] = []
    for oid in list(fw.offers):
        o = l_.offers[oid]
        l_.offer_drop(o)
        out.append(OfferRescinded(oid, fw.framework_id, o.agent_id, "framework removed"))
    for tid in list(fw.tasks):
        task = l_.tasks.get((fw.framework_id, tid))
        if task is not None:
            l_.task_end(task)
    for role in fw.roles:
        l_.roles.remove_framework(role, fw.framework_id)
    l_.rev_sorter.remove(fw.framework_id)
    l_.constrained.pop(fw.framework_id, None)
    l_.own_minimum.pop(fw.framework_id, None)
    for agent_id in l_.filters.clear(fw.framework_id):
        l_.mark_dirty(agent_id)
    del l_.frameworks[fw.framework_id]
    ledger.why.pop(fw.framework_id, None)
    return out

def _framework_activated(ledger: Ledger, ev: FrameworkActivated, now: float) -> list[Decision]:
    fw = _framework(ledger, ev.framework_id)
    fw.active = True
    refresh_activity(ledger, fw)
    ledger.full_pass = True
    return []

def _framework_deactivated(ledger: Ledger, ev: FrameworkDeactivated, now: float) -> list[Decision]:
    l_ = ledger
    fw = _framework(ledger, ev.framework_id)
    fw.active = False
    out: list[Decision] = []
    for oid in list(fw.offers):
        o = l_.offers[oid]
        l_.offer_drop(o)
        out.append(OfferRescinded(oid, fw.framework_id, o.agent_id, "framework deactivated"))
    refresh_activity(l_, fw)
    return out

# --- offers and tasks ---------------------------------------------------------------

def _accepted(ledger: Ledger, ev: OffersAccepted, now: float) -> list[Decision]:
    return list(accept_offers(ledger, ev, now).decisions)

def _declined(ledger: Ledger, ev: OffersDeclined, now: float) -> list[Decision]:
    l_ = ledger
    fw = l_.frameworks.get(ev.framework_id)
    if fw is None:
        return []
    refuse = ev.refuse_seconds if ev.refuse_seconds is not None else ledger.config.default_refuse_seconds
    for oid in ev.offer_ids:
        o = l_.offers.get(oid)
        if o is None or o.framework_id != fw.framework_id:
            continue
        declined = o.regular
        l_.offer_drop(o, end=OfferPhase.DECLINED)
        if refuse > 0:
            l_.filters.add(fw.framework_id, o.role, o.agent_id, declined, now + refuse)
            l_.activity_of[fw.framework_id] = None
    return []

def _recovered(ledger: Ledger, ev: ResourcesRecovered, now: float) -> list[Decision]:
    l_ = ledger
    task = l_.tasks.get((ev.framework_id, ev.task_id))
    if task is None:
        return []
    l_.task_end(task)
    lease = l_.offers.get(task.offer_id) if task.offer_id is not None else None
    fw = l_.frameworks.get(task.framework_id)
    agent = l_.agents.get(task.agent_id)
    if (
        lease is None
        or fw is None
        or agent is None
        or lease.framework_id != fw.framework_id
        or why_not(LEASE, l_, fw, lease.role, agent) is not None
    ):
        return []
    back = EMPTY
    if task.regular:
        avail = agent.free.allocatable_to(lease.role) if agent.has_reserved else agent.free
        back = avail - (avail - task.regular)
        if back:
            l_.offer_grow(lease, back, EMPTY, now)
    rev_back = revocable_back(l_, fw, agent, task) if task.revocable else EMPTY
    if rev_back:
        l_.offer_grow(lease, EMPTY, rev_back, now)
    if not back and not rev_back:
        return []
    return [OfferUpdated(l_.snapshot(lease), f"task {task.task_id} ended; its resources are back in the lease")]

def _allocation_recovered(ledger: Ledger, ev: AllocationRecovered, now: float) -> list[Decision]:
    l_ = ledger
    agent = _agent(ledger, ev.agent_id)
    if (ev.framework_id, ev.task_id) in l_.tasks:
        return []
    fw = l_.frameworks.get(ev.framework_id)
    role = check_role(ev.role)
    if fw is None:  # not re-subscribed yet: a placeholder keeps the accounting right
        fw = FrameworkState(ev.framework_id, (role,), frozenset(), False, l_.next_framework_seq())
        fw.offer_roles = ()
        l_.frameworks[ev.framework_id] = fw
        l_.roles.add_framework(role, fw.framework_id)
        refresh_activity(l_, fw)
    elif role not in fw.roles:
        fw.roles = (*fw.roles, role)
        l_.roles.add_framework(role, fw.framework_id)
        refresh_activity(l_, fw)
    regular = ev.resources.non_revocable()
    out: list[Decision] = []
    if not agent.free.contains(regular):
        for oid in list(agent.offers):
            d = take_back(l_, l_.offers[oid], "agent reported allocations", revocable=False)
            if d is not None:
                out.append(d)
    regular = regular - (regular - agent.free)  # never beyond the agent's total
    task = TaskAlloc(
        fw.framework_id, ev.task_id, agent.agent_id, role, regular, ev.resources.revocable().flatten(), None,
        ev.priority,
    )
    l_.task_start(task)
    return out

def _suppressed(ledger: Ledger, ev: Suppressed, now: float) -> list[Decision]:
    fw = _framework(ledger, ev.framework_id)
    fw.suppressed |= set(ev.roles or fw.offer_roles)
    refresh_activity(ledger, fw)
    return []

def _revived(ledger: Ledger, ev: Revived, now: float) -> list[Decision]:
    l_ = ledger
    fw = _framework(ledger, ev.framework_id)
    roles = set(ev.roles or fw.offer_roles)
    fw.suppressed -= roles
    for agent_id in l_.filters.clear(fw.framework_id, roles):
        l_.mark_dirty(agent_id)
    refresh_activity(l_, fw)
    ledger.why.pop(fw.framework_id, None)
    ledger.full_pass = True
    return []

def _demand_declared(ledger: Ledger, ev: DemandDeclared, now: float) -> list[Decision]:
    l_ = ledger
    fw = _framework(ledger, ev.framework_id)
    if not fw.offer_roles:
        raise AllocatorError(f"framework {fw.framework_id} is not subscribed; it cannot declare demand")
    old = {(d.shape, d.gang_id, d.role, d.ports): d for d in fw.demands}
    new: list[DemandState] = []
    remap: dict[int, int] = {}
    for dem in ev.demands:
        if dem.count < 0 or (dem.gang_min is not None and dem.gang_min < 0):
            raise AllocatorError(f"demand of framework {fw.framework_id}: negative count")
        role = check_role(dem.role) if dem.role is not None else fw.offer_roles[0]
        if role not in fw.offer_roles:
            raise AllocatorError(f"demand of framework {fw.framework_id}: role {role} not subscribed")
        l_.demand_seq += 1
        d = DemandState(
            l_.demand_seq, fw.framework_id, role, dem.shape, dem.count, dem.gang_id, dem.gang_min,
            dem.revocable_ok, dem.priority, max(0, dem.ports),
        )
        prev = old.pop((dem.shape, dem.gang_id, role, d.ports), None)
        if prev is not None:
            d.in_offers = prev.in_offers
            d.launched = prev.launched
            remap[prev.seq] = d.seq
        new.append(d)
    for oid in fw.offers:
        o = l_.offers[oid]
        if o.demand_units:
            o.demand_units = {remap[s]: u for s, u in o.demand_units.items() if s in remap}
    fw.demands = new
    # An empty REQUEST withdraws the standing demand: the framework is served as in Mesos again.
    fw.uses_demand = bool(new)
    l_.demand_dirty = True
    ledger.why.pop(fw.framework_id, None)
    refresh_activity(l_, fw)
    return []

def _quota_set(ledger: Ledger, ev: QuotaSet, now: float) -> list[Decision]:
    check_role(ev.role)
    limit = ev.limit.scalars() if ev.limit is not None else None
    ledger.roles.set_quota(ev.role, ev.guarantee.scalars(), limit)
    ledger.full_pass = True
    return []

def _weight_set(ledger: Ledger, ev: WeightSet, now: float) -> list[Decision]:
    if not ev.weight > 0:
        raise AllocatorError(f"weight of role {ev.role} must be > 0, got {ev.weight}")
    check_role(ev.role)
    ledger.roles.set_weight(ev.role, ev.weight)
    return []


def _agent(ledger: Ledger, agent_id: str) -> AgentState:
    agent = ledger.agents.get(agent_id)
    if agent is None:
        raise AllocatorError(f"unknown agent {agent_id}")
    return agent


def _framework(ledger: Ledger, framework_id: str) -> FrameworkState:
    fw = ledger.frameworks.get(framework_id)
    if fw is None:
        raise AllocatorError(f"unknown framework {framework_id}")
    return fw


HANDLERS: dict[type, Callable[[Ledger, Any, float], list[Decision]]] = {
    AgentAdded: _agent_added,
    AgentRemoved: _agent_removed,
    AgentUpdated: _agent_updated,
    AgentSlackEstimated: _agent_slack,
    AgentDeactivated: _agent_deactivated,
    AgentReactivated: _agent_reactivated,
    FrameworkAdded: _framework_added,
    FrameworkRemoved: _framework_removed,
    FrameworkActivated: _framework_activated,
    FrameworkDeactivated: _framework_deactivated,
    OffersAccepted: _accepted,
    OffersDeclined: _declined,
    ResourcesRecovered: _recovered,
    AllocationRecovered: _allocation_recovered,
    Suppressed: _suppressed,
    Revived: _revived,
    DemandDeclared: _demand_declared,
    QuotaSet: _quota_set,
    WeightSet: _weight_set,
}
