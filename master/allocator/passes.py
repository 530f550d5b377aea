"""The regular allocation stages: quota guarantees first, then weighted DRF.

Both are agent-major (as in Mesos): for each agent to visit, pick the neediest eligible
(role, framework) and offer it what that role may use on the agent, shaped by quota limits and
by the headroom unmet guarantees need; repeat on the same agent while something is left.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable

from master.allocator.decisions import Decision, OfferCreated
from master.allocator.eligibility import (
    DRF,
    DRF_UNSHAPED,
    QUOTA,
    available_to,
    excluded,
    filtered,
    gpu_blocked,
    minimum_for,
    why_not,
)
from master.allocator.filters import Filter
from master.allocator.ledger import Ledger
from master.allocator.offering import give
from master.allocator.quantities import meets_minimum, shrink
from master.allocator.roles import ancestors
from master.allocator.sorter import Scalars
from master.allocator.state import EMPTY, AgentState, FrameworkState
from protocol.resources import Resources

__pure__ = True

_new_record = tuple.__new__  # OfferCreated(...) without its Python-level __new__ (hot path)


class Headroom:
    """Unallocated unreserved resources that unmet quota guarantees still need: a role beyond
    its guarantee is offered only what leaves this much free in the cluster."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger
        self.required: Scalars = ledger.roles.unmet_guarantees()
        self.available: Scalars = {}
        if self.required:
            names = tuple(self.required)
            avail = self.available
            for agent in ledger.agents.values():
                if agent.active and agent.free:
                    for name, value in agent.free.unreserved().only(*names).scalars().items():
                        avail[name] = avail.get(name, 0.0) + value

    @property
    def active(self) -> bool:
        return bool(self.required)

    def own_deficit(self, role: str) -> Scalars:
        out: Scalars = {}
        for path in ancestors(role):
            node = self.ledger.roles.nodes.get(path)
            if node is not None and node.guarantee:
                for name, value in node.deficit().items():
                    out[name] = max(out.get(name, 0.0), value)
        return out

    def room_for(self, role: str) -> Scalars | None:
        if not self.required:
            return None
        own = self.own_deficit(role)
        return {
            name: self.available.get(name, 0.0) - need + own.get(name, 0.0)
            for name, need in self.required.items()
        }

    def consume(self, given_unreserved: Scalars, deficit_before: Scalars) -> None:
        if not self.required:
            return
        for name, value in given_unreserved.items():
            if name in self.available:
                self.available[name] -= value
            if name in self.required:
                cut = min(value, deficit_before.get(name, 0.0))
                left = self.required[name] - cut
                if left > 1e-9:
                    self.required[name] = left
                else:
                    del self.required[name]


def _limit(ledger: Ledger, role: str, candidate: Resources) -> Resources:
    room = ledger.roles.headroom_limit(role)
    return shrink(candidate, room) if room else candidate


def _shape(
    ledger: Ledger, headroom: Headroom, role: str, agent: AgentState, candidate: Resources
) -> tuple[Resources, bool]:
    """Apply quota limit and headroom to a candidate offer; also tell if headroom held some."""
    candidate = _limit(ledger, role, candidate)
    if not headroom.active:
        return candidate, False
    room = headroom.room_for(role)
    if not room:
        return candidate, False
    unreserved = candidate.unreserved()
    kept = shrink(unreserved, room)
    if kept == unreserved:
        return candidate, False
    return candidate.reserved() + kept, True


def quota_stage(ledger: Ledger, agents: Iterable[AgentState], now: float, out: list[Decision]) -> None:
    """Offer to roles below their guarantee, lowest share first, up to the guarantee."""
    roles = ledger.roles
    heap: list[tuple[float, int, str]] = []
    for seq, role in enumerate(sorted(roles.quota_roles)):
        node = roles.nodes[role]
        if node.deficit() and next(roles.iter_frameworks(node), None) is not None:
            heap.append((roles.share(role), seq, role))
    if not heap:
        return
    heapq.heapify(heap)
    minimum = ledger.config.min_allocatable
    own = bool(ledger.own_minimum)  # then each framework's minimum is checked when it is chosen
    fast = ledger.config.fast_paths
    unmet_names = set(roles.unmet_guarantees())
    for agent in agents:
        if not heap:
            return
        if not agent.active or not agent.free:
            continue
        deferred: list[tuple[float, int, str]] = []
        while heap and agent.free:
            entry = heapq.heappop(heap)
            role = entry[2]
            node = roles.nodes[role]
            deficit = node.deficit()
            if not deficit:
                continue
            avail = available_to(agent, role)
            others = unmet_names.difference(deficit)
            if others:
                avail = avail.without(*others)
            candidate = _limit(ledger, role, shrink(avail, deficit))
            scal = candidate.scalars()
            if not candidate or (not own and not meets_minimum(scal, minimum)) or not any(n in deficit for n in scal):
                deferred.append(entry)
                continue
            chosen = None
            for fw_role, fid in roles.iter_frameworks(node):  # the role's subtree, in DRF order
                fw = ledger.frameworks[fid]
                if not fast:  # the eligibility chain, as written
                    if why_not(QUOTA, ledger, fw, fw_role, agent, candidate) is None:
                        chosen = (fw_role, fw)
                        break
                    continue
                # the chain compiled: the sorter lists only active frameworks of an offered,
                # unsuppressed role without demand, and the role's candidate is not empty
                if (not gpu_blocked(fw, agent) and not excluded(fw, fw_role, agent.agent_id)
                        and not filtered(ledger, fw, fw_role, agent, candidate)
                        and (not own or meets_minimum(scal, minimum_for(ledger, fw, fw_role)))):
                    chosen = (fw_role, fw)
                    break
            if chosen is None:
                deferred.append(entry)
                continue
            out.append(
                give(ledger, chosen[1], chosen[0], agent, candidate, EMPTY, now, f"quota guarantee of role {role}")
            )
            if node.deficit():
                heapq.heappush(heap, (roles.share(role), entry[1], role))
        for entry in deferred:
            heapq.heappush(heap, entry)


_DRF_REASON = "DRF: lowest weighted dominant share"
_NO_FILTERS: dict[str, dict[str, Filter]] = {}


def regular_stage(
    ledger: Ledger, agents: Iterable[AgentState], now: float, out: list[Decision], headroom: Headroom
) -> None:
    """Weighted DRF: each agent's free resources go to the neediest eligible framework."""
    roles = ledger.roles
    frameworks = ledger.frameworks
    minimum = ledger.config.min_allocatable
    filters_of = ledger.filters.of
    hr_active = headroom.active
    shaping = bool(ledger.roles.limited_roles) or hr_active
    single = roles.single_leaf()
    # (frameworks with offer constraints or offer filters take the general path: the fast one
    # never tests them)
    if (single is not None and not shaping and ledger.config.fast_paths and not ledger.constrained
            and not ledger.own_minimum):
        _regular_one_role(ledger, single.name, agents, now, out)
        return
    held = False
    chained = not ledger.config.fast_paths

    def try_offer(agent: AgentState, role: str, fid: str) -> bool:
        nonlocal held
        fw = frameworks[fid]
        if chained:
            return try_chain(agent, role, fw)
        if agent.has_gpus and not fw.gpu_ok:
            return False
        if fw.excluded and excluded(fw, role, agent.agent_id):
            return False
        avail = agent.free.allocatable_to(role) if agent.has_reserved else agent.free
        if not avail:
            return False
        flt = filters_of(fid, role)
        if flt:
            f = flt.get(agent.agent_id)
            if f is not None and (f.resources is avail or f.resources.contains(avail)):
                return False
        if shaping:
            candidate, was_held = _shape(ledger, headroom, role, agent, avail)
            held = held or was_held
            if not candidate:
                return False
            if candidate is not avail and flt:
                f = flt.get(agent.agent_id)
                if f is not None and f.resources.contains(candidate):
                    return False
        else:
            candidate = avail
        cache = agent.free_scalars
        scal = cache[1] if cache is not None and cache[0] is candidate else candidate.scalars()
        if not meets_minimum(scal, minimum_for(ledger, fw, role) if fw.min_allocatable else minimum):
            return False
        deficit = headroom.own_deficit(role) if hr_active else {}
        out.append(give(ledger, fw, role, agent, candidate, EMPTY, now, _DRF_REASON, scalars=scal))
        if hr_active:
            headroom.consume(candidate.unreserved().scalars(), deficit)
        return True

    def try_chain(agent: AgentState, role: str, fw: FrameworkState) -> bool:
        """``try_offer`` through the eligibility chain: what the role may get here, then the
        candidate shaped by quota limits and headroom."""
        nonlocal held
        avail = available_to(agent, role)
        if why_not(DRF_UNSHAPED, ledger, fw, role, agent, avail) is not None:
            return False  # (the minimum is judged on the shaped candidate)
        candidate = avail
        if shaping:
            candidate, was_held = _shape(ledger, headroom, role, agent, avail)
            held = held or was_held
        if why_not(DRF, ledger, fw, role, agent, candidate, triple=False) is not None:
            return False
        cache = agent.free_scalars
        scal = cache[1] if cache is not None and cache[0] is candidate else candidate.scalars()
        deficit = headroom.own_deficit(role) if hr_active else {}
        out.append(give(ledger, fw, role, agent, candidate, EMPTY, now, _DRF_REASON, scalars=scal))
        if hr_active:
            headroom.consume(candidate.unreserved().scalars(), deficit)
        return True

    for agent in agents:
        if not agent.active or not agent.free:
            continue
        served: set[tuple[str, str]] = set()  # (role, framework) already offered on this agent
        held = False
        while agent.free:
            made = False
            if single is not None:
                role = single.name
                for key in single.frameworks.first_keys():
                    fid = key[2]
                    if (role, fid) not in served and try_offer(agent, role, fid):
                        served.add((role, fid))
                        made = True
                        break
            else:
                for role, fid in roles.iter_frameworks():
                    if (role, fid) not in served and try_offer(agent, role, fid):
                        served.add((role, fid))
                        made = True
                        break
            if not made:
                break
        if held:
            agent.quota_held = agent.free.unreserved().flatten().only(*headroom.required)
        elif agent.quota_held:
            agent.quota_held = EMPTY


def _regular_one_role(ledger: Ledger, role: str, agents: Iterable[AgentState], now: float, out: list[Decision]) -> None:
    """``regular_stage`` for the common shape — one role, no quota limits or headroom — as one
    tight loop (the 10,000-agent pass is spent here). What the role may be offered on an agent
    and the minimum test do not depend on the framework, so they are settled once per agent
    (an agent with nothing usable costs no sorter walk); a declined (framework, agent) pair is
    skipped by one lookup in the filter index."""
    sorter = ledger.roles.nodes[role].frameworks
    frameworks = ledger.frameworks
    minimum = ledger.config.min_allocatable
    by_role = ledger.filters.by_role
    create = ledger.create_classic
    append = out.append
    for agent in agents:
        if not agent.active:
            continue
        free = agent.free
        if not free:
            continue
        agent_id = agent.agent_id
        gpus = agent.has_gpus  # then only GPU_RESOURCES frameworks (``gpu_blocked``)
        of_role = by_role.get(role) or _NO_FILTERS  # framework -> agent -> filter
        served: set[str] | None = None
        while True:
            if agent.has_reserved:
                avail = free.allocatable_to(role)
                if not avail:
                    break
            else:
                avail = free
            cache = agent.free_scalars
            scal = cache[1] if cache is not None and cache[0] is avail else avail.scalars()
            if minimum:  # meets_minimum, inlined
                for alt in minimum:
                    for name, need in alt.items():
                        if scal.get(name, 0.0) + 1e-9 < need:
                            break
                    else:
                        break  # this alternative is met
                else:
                    break  # none is: nothing to offer on this agent
            made = None
            for key in sorter.first_keys():
                fid = key[2]
                if served is not None and fid in served:
                    continue
                flt = of_role.get(fid)
                if flt is not None:
                    f = flt.get(agent_id)
                    if f is not None and (f.resources is avail or f.resources.contains(avail)):
                        continue
                fw = frameworks[fid]
                if gpus and not fw.gpu_ok:
                    continue
                if fw.reusable:
                    append(give(ledger, fw, role, agent, avail, EMPTY, now, _DRF_REASON, scalars=scal))
                else:
                    append(_new_record(OfferCreated, (create(fw, role, agent, avail, scal, now), _DRF_REASON)))
                made = fid
                break
            if made is None:
                break
            free = agent.free
            if free is EMPTY or not free:  # (usually all of it was offered: EMPTY)
                break
            if served is None:
                served = set()
            served.add(made)
