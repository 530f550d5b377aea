"""Demand-aware allocation (REQUEST): shaped offers, whole-or-nothing gangs, and taking idle
offers back from frameworks above their fair share when a role below it waits.

Unmet demands are served before plain DRF, in a stable order: higher priority first; at equal
priority gangs before single units, gangs by age, others by their role's DRF share then age. A
gang that cannot get ``gang_min`` units at once gets nothing (its ``protocol.placement.Tentative``
plan is discarded), so
two gangs never each hold part of what both need.
"""

from __future__ import annotations

from collections.abc import Iterable

from master.allocator.decisions import Decision
from master.allocator.eligibility import DEMAND, GPU_REASON, available_to, why_not
from master.allocator.ledger import Ledger
from master.allocator.offering import give, take_back
from master.allocator.passes import Headroom
from master.allocator.quantities import add_into, port_count, shrink, take, take_ports, units_that_fit
from master.allocator.sorter import Scalars
from master.allocator.state import EMPTY, AgentState, DemandState, OfferState
from protocol.placement import Tentative
from protocol.resources import Resources

__pure__ = True


def unmet_demands(ledger: Ledger) -> list[DemandState]:
    out: list[DemandState] = []
    for fw in ledger.frameworks.values():
        if not fw.uses_demand or not fw.active:
            continue
        for d in fw.demands:
            if d.unmet() > 0 and d.role not in fw.suppressed:
                out.append(d)
    roles = ledger.roles

    def key(d: DemandState) -> tuple[int, int, float, int]:
        if d.gang_id is not None:
            return (-d.priority, 0, 0.0, d.seq)
        return (-d.priority, 1, roles.share(d.role), d.seq)

    out.sort(key=key)
    return out


def demand_stage(
    ledger: Ledger,
    agents: list[AgentState],
    now: float,
    out: list[Decision],
    why: dict[str, str],
    headroom: Headroom | None = None,
    gang_pool: list[AgentState] | None = None,
) -> list[DemandState]:
    """Offer shaped resources to unmet demands; returns the demands still unmet. Quota limits
    and the headroom of unmet guarantees are respected. Gangs are placed over ``gang_pool``
    when given (every agent with free resources: capacity appeared somewhere while a gang
    waited), other demands over ``agents``. Sets ``ledger.gangs_waiting``."""
    still: list[DemandState] = []
    gangs_waiting = False
    for d in unmet_demands(ledger):
        fw = ledger.frameworks[d.framework_id]
        need = d.unmet()
        gang_need = d.gang_needed()
        room = ledger.roles.headroom_limit(d.role)
        room = dict(room) if room else None
        quota_room = headroom.room_for(d.role) if headroom is not None and headroom.active else None
        # the units placed on agents, tentatively: a gang short of gang_min discards them all
        plan: Tentative[str, tuple[AgentState, int]] = Tentative({})
        held = _held_units(ledger, d, need) if gang_need else []
        planned = sum(k for _, k in held)
        gpu_skipped = 0  # agents passed over because they have GPUs the framework cannot take
        pool = gang_pool if gang_pool is not None and d.gang_id is not None else agents
        for agent in pool if planned < need else ():
            if not agent.active or not agent.free:
                continue
            reason = why_not(DEMAND, ledger, fw, d.role, agent)  # the triple's checks
            if reason is not None:
                if reason is GPU_REASON:
                    gpu_skipped += 1
                continue
            avail = available_to(agent, d.role)
            if not avail:
                continue
            if room is not None:
                avail = shrink(avail, room)
            if quota_room is not None:
                avail = avail.reserved() + shrink(avail.unreserved(), quota_room)
            k = units_that_fit(avail.scalars(), d.shape_scalars, need - planned)
            if k <= 0:
                continue
            if d.shape.names() - set(d.shape_scalars):  # non-scalar parts (ports): one unit if it fits
                k = 1 if avail.contains(d.shape) else 0
                if k == 0:
                    continue
            if d.ports:  # so many ports per unit, from the agent's ranges
                k = min(k, port_count(avail) // d.ports)
                if k <= 0:
                    continue
            units = _shaped(avail, d, k)
            if why_not(DEMAND, ledger, fw, d.role, agent, units, triple=False) is not None:
                continue
            plan.place(agent.agent_id, units, (agent, k), units=k)
            planned += k
            if room is not None:
                add_into(room, {n: v * k for n, v in d.shape_scalars.items()}, -1.0)
            if quota_room is not None:
                add_into(quota_room, {n: v * k for n, v in d.shape_scalars.items() if n in quota_room}, -1.0)
            if planned >= need:
                break
        gpu_note = f"; {gpu_skipped} agent(s) skipped: {GPU_REASON}" if gpu_skipped else ""
        if gang_need and planned < gang_need:
            plan.discard()
            held_note = f", {planned - plan.units} of them in offers it holds" if held else ""
            why[fw.framework_id] = (
                f"gang {d.gang_id}: insufficient resources ({planned} of {gang_need} units placeable at once"
                f"{held_note})" + gpu_note
            )
            still.append(d)
            gangs_waiting = True
            continue
        for o, k in held:  # the held units now belong to the gang (a launch from them consumes one)
            if o.demand_units is None:
                o.demand_units = {}
            o.demand_units[d.seq] = o.demand_units.get(d.seq, 0) + k
            d.in_offers += k
        for agent, k in plan.commit():
            exact = _shaped(available_to(agent, d.role), d, k)
            if headroom is not None and headroom.active:
                headroom.consume(exact.unreserved().scalars(), headroom.own_deficit(d.role))
            label = f"gang {d.gang_id}" if d.gang_id is not None else "demand"
            out.append(give(ledger, fw, d.role, agent, exact, EMPTY, now, f"{label}: {k} x {d.shape}", d, k))
        if d.unmet() > 0:
            why.setdefault(
                fw.framework_id, f"demand: {d.unmet()} of {d.count} units of {d.shape} unplaced" + gpu_note
            )
            still.append(d)
    ledger.gangs_waiting = gangs_waiting
    return still


def _held_units(ledger: Ledger, d: DemandState, cap: int) -> list[tuple[OfferState, int]]:
    """Units of a gang's shape that fit in the idle regular part of the offers its framework
    already holds in the gang's role (beyond the units those offers carry for its demands), at
    most ``cap`` in all. They count toward ``gang_min``: a framework holding 4 units on one agent
    is offered just the missing unit elsewhere, not 5 whole ones (which could never come while it
    holds the 4). Only the holder's own offers count, so a gang held by nobody still gets all of
    ``gang_min`` at once or nothing. Scalar shapes only."""
    if cap <= 0 or d.shape.names() - set(d.shape_scalars):
        return []
    fw = ledger.frameworks[d.framework_id]
    out: list[tuple[OfferState, int]] = []
    total = 0
    for oid in fw.offers:
        o = ledger.offers[oid]
        if o.role != d.role or not o.regular:
            continue
        agent = ledger.agents.get(o.agent_id)
        if agent is None or not agent.active:
            continue
        idle = dict(o.regular.scalars())
        idle_ports = port_count(o.regular)
        if o.demand_units:
            for seq, units in o.demand_units.items():
                other = ledger.demand_by_seq(fw.framework_id, seq)
                if other is not None and units > 0:
                    add_into(idle, {n: v * units for n, v in other.shape_scalars.items()}, -1.0)
                    idle_ports -= other.ports * units
        k = units_that_fit(idle, d.shape_scalars, cap - total)
        if d.ports:
            k = min(k, max(idle_ports, 0) // d.ports)
        if k > 0:
            out.append((o, k))
            total += k
            if total >= cap:
                break
    return out


def _shaped(avail: Resources, d: DemandState, k: int) -> Resources:
    """``k`` units of the demand's shape taken out of ``avail`` (exact entries)."""
    want: Scalars = {n: v * k for n, v in d.shape_scalars.items()}
    exact = take(avail, want)
    if d.shape.names() - set(d.shape_scalars):
        exact = exact + d.shape.without(*d.shape_scalars)
    if d.ports:
        exact = exact + take_ports(avail, d.ports * k)
    return exact


def fairness_rescind(
    ledger: Ledger, starving: Iterable[DemandState], out: list[Decision]
) -> list[AgentState]:
    """Take back idle offered resources from frameworks whose role is above its fair share,
    most over-share first, while a role below its fair share waits with unmet demand. Fair share
    of a top-level role = its weight / the weight of all top-level roles in use. Returns the
    agents where resources were freed."""
    roles = ledger.roles
    in_use: set[str] = set()
    for fw in ledger.frameworks.values():
        if fw.active:
            for r in fw.offer_roles:
                in_use.add(r.split("/", 1)[0])
    for node in roles.nodes.values():
        if node.parent is roles.root and node.alloc:
            in_use.add(node.name)
    active_weight = sum(roles.nodes[r].weight for r in in_use if r in roles.nodes)
    if active_weight <= 0:
        return []

    def top(role: str) -> str:
        return role.split("/", 1)[0]

    def over(role: str) -> float:
        """How far the role's top-level ancestor is above (+) or below (-) its fair share."""
        node = roles.nodes[top(role)]
        return roles.share(node.name) - node.weight / active_weight

    waiting = [d for d in starving if over(d.role) < 0]
    if not waiting:
        return []
    candidates = [o for o in ledger.offers.values() if o.regular and over(o.role) > 0]
    candidates.sort(key=lambda o: (-over(o.role), o.created, o.offer_id))
    freed: dict[str, AgentState] = {}
    for d in waiting:
        want: Scalars = {n: v * d.unmet() for n, v in d.shape_scalars.items()}
        got: Scalars = {}
        for o in candidates:
            if all(got.get(n, 0.0) >= v - 1e-9 for n, v in want.items()):
                break
            if o.offer_id not in ledger.offers or not o.regular or top(o.role) == top(d.role):
                continue
            if over(o.role) <= 0:
                continue
            add_into(got, o.regular.scalars())
            decision = take_back(
                ledger, o, f"idle part taken back: role {o.role} above its fair share, role {d.role} waiting",
                revocable=False,
            )
            if decision is not None:
                out.append(decision)
                freed[o.agent_id] = ledger.agents[o.agent_id]
    return list(freed.values())
