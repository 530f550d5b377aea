"""Revocable pools: usage slack (the agent's estimate of allocated-but-unused resources) plus
allocation slack (reserved or quota-held resources nobody is using), offered tagged revocable
only to REVOCABLE_RESOURCES frameworks in a DRF pass after regular allocation.

Allocation slack handed out is moved into the agent's ``lent`` (it counts as allocated in the
regular ledger, never toward anyone's guarantee or DRF share). When the usage estimate shrinks,
or the owner (the reservation's role, or a quota role below its guarantee) wants its resources
back, outstanding revocable offers are rescinded first; if revocable allocations still exceed
what backs them, tasks are revoked with a grace period; which ones is the ``VictimPolicy`` hook's
choice (``victims.py``; by default lowest priority first, larger tasks first so that as few
tasks as possible go).
"""

from __future__ import annotations

from collections.abc import Iterable

from master.allocator.decisions import Decision, Revoke
from master.allocator.eligibility import REVOCABLE, available_to, gpu_blocked, why_not
from master.allocator.ledger import Ledger
from master.allocator.offering import give, take_back
from master.allocator.quantities import meets_minimum, port_count, shrink, take, take_ports, units_that_fit
from master.allocator.state import EMPTY, AgentState, DemandState, FrameworkState, TaskAlloc
from protocol.resources import Resources, is_subrole

__pure__ = True


def lendable(ledger: Ledger, agent: AgentState) -> Resources:
    """Exact free resources that count as allocation slack on this agent right now."""
    names = ledger.config.revocable_names
    reserved = agent.free.reserved().only(*names) if agent.has_reserved else EMPTY
    held = EMPTY
    if agent.quota_held:
        # quota_held is flat; take the matching unreserved free resources
        unreserved = agent.free.unreserved().only(*names)
        held = unreserved - (unreserved - agent.quota_held)
    return reserved + held


def revocable_stage(ledger: Ledger, agents: Iterable[AgentState], now: float, out: list[Decision]) -> None:
    sorter = ledger.rev_sorter
    if not sorter.first_keys():
        return
    names = ledger.config.revocable_names
    minimum = ledger.config.min_allocatable
    for agent in agents:
        if not agent.active:
            continue
        if not agent.usage_slack and not (agent.free and (agent.has_reserved or agent.quota_held)) and not agent.lent:
            continue
        lend = lendable(ledger, agent)
        capacity = (ledger.revocable_capacity(agent) + lend.flatten()).only(*names)
        own = bool(ledger.own_minimum)  # then each framework's minimum is checked when it is chosen
        if not capacity or (not own and not meets_minimum(capacity.scalars(), minimum)):
            continue
        for key in sorter.first_keys():
            fw = ledger.frameworks[key[2]]
            role = next((r for r in fw.offer_roles if r not in fw.suppressed), None)
            if role is None or why_not(REVOCABLE, ledger, fw, role, agent, capacity) is not None:
                continue
            offer, regular, demand, units = capacity, EMPTY, None, 0
            if fw.uses_demand:  # shaped to its first unmet demand that accepts revocable resources
                demand = next(
                    (d for d in sorted(fw.demands, key=lambda d: (-d.priority, d.seq)) if d.revocable_ok and d.unmet()),
                    None,
                )
                if demand is None:
                    continue
                units, regular = _mixed_units(ledger, agent, demand, capacity)
                free_ports = EMPTY
                if demand.ports:  # ports are never revocable: from the agent's free regular ranges
                    free_ports = available_to(agent, demand.role) if agent.free else EMPTY
                    units = min(units, port_count(free_ports) // demand.ports)
                if units <= 0 or units < demand.gang_needed():  # a gang: whole on this agent or not here
                    continue
                rev_part = {n: v * units for n, v in demand.shape_scalars.items() if capacity.scalar(n) > 0}
                offer = take(capacity, rev_part)
                regular = take(regular, {n: v * units for n, v in demand.shape_scalars.items() if n not in rev_part})
                if demand.ports:
                    regular = regular + take_ports(free_ports, demand.ports * units)
                role = demand.role
            # lend only the allocation slack the offer needs beyond what already backs revocable use
            spare = ledger.revocable_capacity(agent)
            need = {n: v - spare.scalar(n) for n, v in offer.scalars().items() if v > spare.scalar(n) + 1e-9}
            ledger.lend(agent, take(lend, need) if need else EMPTY)
            reason = "revocable: usage and allocation slack"
            out.append(give(ledger, fw, role, agent, regular, offer, now, reason, demand, units))
            break


def _mixed_units(
    ledger: Ledger, agent: AgentState, demand: DemandState, capacity: Resources
) -> tuple[int, Resources]:
    """How many units of ``demand`` this agent can host on revocable resources, and the regular
    resources they may draw on. The revocable pool holds what the estimator reports (often cpus
    only); a shape name it lacks (mem of a 1-cpu task) comes from the agent's free regular
    resources, as it does when a regular offer and a revocable one are accepted together.
    Without this, a preemptible job whose framework's lease had no idle regular memory was
    never offered the agent's revocable cpus at all."""
    rev = capacity.scalars()
    rev_shape = {n: v for n, v in demand.shape_scalars.items() if rev.get(n, 0.0) > 0}
    if not rev_shape:
        return 0, EMPTY
    units = units_that_fit(rev, rev_shape, demand.unmet())
    reg_shape = {n: v for n, v in demand.shape_scalars.items() if n not in rev_shape}
    if not reg_shape or units <= 0:
        return units, EMPTY
    regular = available_to(agent, demand.role) if agent.free else EMPTY
    room = ledger.roles.headroom_limit(demand.role)
    if room:
        regular = shrink(regular, dict(room))
    return min(units, units_that_fit(regular.scalars(), reg_shape, units)), regular


def revocable_back(ledger: Ledger, fw: FrameworkState, agent: AgentState, task: TaskAlloc) -> Resources:
    """The part of an ended revocable task's resources (flat) that may go back into the lease
    it was launched from: what its backing still covers, as the revocable stage would offer it
    (usage slack first, then allocation slack lent again unless its owner wants it back).
    Nothing for a framework that cannot take revocable resources or a task being revoked."""
    if not fw.revocable_ok or task.revoking or gpu_blocked(fw, agent):
        return EMPTY
    want = task.revocable
    spare = ledger.revocable_capacity(agent)
    need = {n: v - spare.scalar(n) for n, v in want.scalars().items() if v > spare.scalar(n) + 1e-9}
    if need:
        lend = lendable(ledger, agent)
        if lend:
            ledger.lend(agent, take(lend, need))
            if owner_wants(ledger, agent) is not None:  # its owner wants it: lend nothing
                ledger.settle_lent(agent)
    capacity = ledger.revocable_capacity(agent)
    return want - (want - capacity)


def owner_wants(ledger: Ledger, agent: AgentState) -> str | None:
    """Why the lent resources of this agent must come back (None when nobody wants them)."""
    if not agent.lent:
        return None
    reserved_roles = agent.lent.reserved().roles()
    for role in reserved_roles:
        for fw in ledger.frameworks.values():
            for r in fw.offer_roles:
                if (r == role or is_subrole(r, role)) and _wants(ledger, fw, r, agent):
                    return f"role {role} reclaims its reserved resources"
    if agent.lent.unreserved():
        for role in ledger.roles.quota_roles:
            node = ledger.roles.nodes[role]
            if node.deficit():
                for fw_role, fid in ledger.roles.iter_frameworks(node):
                    if _wants(ledger, ledger.frameworks[fid], fw_role, agent):
                        return f"role {role} below its quota guarantee"
    return None


def _wants(ledger: Ledger, fw: FrameworkState, role: str, agent: AgentState) -> bool:
    if not fw.active or role in fw.suppressed or role not in fw.offer_roles:
        return False
    if ledger.filters.expires_at(fw.framework_id, role, agent.agent_id) is not None:
        return False
    if fw.uses_demand:  # only a demand the lent resources could serve
        pool = (agent.free + agent.lent).allocatable_to(role).scalars()
        return any(
            d.unmet() > 0 and d.role == role and units_that_fit(pool, d.shape_scalars, 1) == 1 for d in fw.demands
        )
    return True


def enforce(ledger: Ledger, agent: AgentState, reason: str, out: list[Decision], reclaim: bool = False) -> None:
    """Bring revocable use back within its backing (all of ``lent`` when ``reclaim``):
    rescind revocable offers first, then revoke revocable tasks."""
    backing = agent.usage_slack if reclaim else agent.usage_slack + agent.lent.flatten()
    used = agent.rev_offered + agent.rev_allocated
    if backing.contains(used):
        return
    for oid in list(agent.offers):
        o = ledger.offers[oid]
        if o.revocable:
            decision = take_back(ledger, o, f"revocable offer rescinded: {reason}", regular=False)
            if decision is not None:
                out.append(decision)
    if backing.contains(agent.rev_allocated):
        ledger.settle_lent(agent)
        return
    over = agent.rev_allocated - backing
    candidates = [
        ledger.tasks[k] for k in agent.tasks if ledger.tasks[k].revocable and not ledger.tasks[k].revoking
    ]
    chosen = ledger.config.victims.choose(candidates, over)  # the hook (``victims.py``)
    by_fw: dict[str, list[str]] = {}
    for task in chosen:
        task.revoking = True
        by_fw.setdefault(task.framework_id, []).append(task.task_id)
    for fid, tids in by_fw.items():
        out.append(Revoke(fid, agent.agent_id, tuple(tids), ledger.config.revocation_grace_seconds, reason))
