"""The allocator: single owner of the offer book, DRF sorters, filters, quota, reservations,
demands and revocable pools. A pure core: ``handle(event, now)`` for facts, ``accept`` for the
typed ACCEPT result, ``allocate(now)`` for a pass, ``next_deadline(now)`` for the shell's timer.
See README.md for the pipeline and vocabulary.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import Any

from master.allocator.accept import accept as accept_offers
from master.allocator.config import AllocatorConfig
from master.allocator.decisions import AcceptResult, Decision, Offer, OfferRescinded, OfferUpdated
from master.allocator.demand import demand_stage, fairness_rescind
from master.allocator.eligibility import fully_filtered, refresh_activity, refresh_all
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
    Event,
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
from master.allocator.passes import Headroom, quota_stage, regular_stage
from master.allocator.revocable import enforce, owner_wants, revocable_stage
from master.allocator.roles import check_role
from master.allocator.state import EMPTY, AgentState, DemandState, FrameworkState, OfferState, TaskAlloc
from master.allocator.views import AgentView, FrameworkView, PassStats, TaskView

__pure__ = True


class Allocator:
    """Drive with ``handle``/``accept`` for every fact and ``allocate`` when ``next_deadline``
    says so (the shell coalesces events for ``config.batch_window`` before calling it)."""

    def __init__(self, config: AllocatorConfig | None = None) -> None:
        self.config = config if config is not None else AllocatorConfig()
        self._l = Ledger(self.config)
        self._full = True
        self._next_sweep: float | None = None
        self._why: dict[str, str] = {}
        self.passes = 0
        self.last_pass = PassStats(0, False, 0, 0)

    # ================================================================ events ====

    def handle(self, event: Event, now: float) -> list[Decision]:
        """Apply one fact; returns the decisions it causes at once (rescinds, revocations,
        lease updates). New offers come only from ``allocate``."""
        handler = _HANDLERS.get(type(event))
        if handler is None:
            raise AllocatorError(f"unknown allocator event {type(event).__name__}")
        return handler(self, event, now)

    def accept(self, event: OffersAccepted, now: float) -> AcceptResult:
        """Validate and apply an ACCEPT against the offer book (typed result)."""
        return accept_offers(self._l, event, now)

    # --- agents -------------------------------------------------------------------------

    def _agent_added(self, ev: AgentAdded, now: float) -> list[Decision]:
        l_ = self._l
        agent = l_.agents.get(ev.agent_id)
        if agent is not None:  # re-registration
            agent.hostname = ev.hostname
            agent.attributes = dict(ev.attributes)
            out = self._agent_updated(AgentUpdated(ev.agent_id, ev.total), now)
            if not agent.active:
                agent.active = True
                l_.active_agents += 1
            l_.mark_dirty(ev.agent_id)
            return out
        agent = AgentState(ev.agent_id, ev.hostname, ev.total, dict(ev.attributes), l_.next_agent_seq())
        l_.agents[ev.agent_id] = agent
        l_.active_agents += 1
        l_.totals.add(agent.total_scalars)
        l_.mark_dirty(ev.agent_id)
        l_.activity_dirty = True
        return []

    def _agent_removed(self, ev: AgentRemoved, now: float) -> list[Decision]:
        l_ = self._l
        agent = l_.agents.get(ev.agent_id)
        if agent is None:
            return []
        out = self._drop_offers_on(agent, ev.reason)
        for key in list(agent.tasks):
            task = l_.tasks.get(key)
            if task is not None:
                l_.task_end(task)
        l_.filters.remove_agent(ev.agent_id)
        l_.totals.add(agent.total_scalars, -1.0)
        if agent.active:
            l_.active_agents -= 1
        del l_.agents[ev.agent_id]
        l_.dirty.pop(ev.agent_id, None)
        l_.activity_dirty = True
        return out

    def _agent_updated(self, ev: AgentUpdated, now: float) -> list[Decision]:
        l_ = self._l
        agent = self._agent(ev.agent_id)
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
        l_.mark_dirty(agent.agent_id)
        return out

    def _agent_slack(self, ev: AgentSlackEstimated, now: float) -> list[Decision]:
        l_ = self._l
        agent = self._agent(ev.agent_id)
        agent.usage_slack = ev.slack.flatten().only(*self.config.revocable_names)
        out: list[Decision] = []
        enforce(l_, agent, "usage slack estimate shrank", out)
        l_.mark_dirty(agent.agent_id)
        return out

    def _agent_deactivated(self, ev: AgentDeactivated, now: float) -> list[Decision]:
        agent = self._agent(ev.agent_id)
        if not agent.active:
            return []
        agent.active = False
        self._l.active_agents -= 1
        return self._drop_offers_on(agent, ev.reason)

    def _agent_reactivated(self, ev: AgentReactivated, now: float) -> list[Decision]:
        agent = self._agent(ev.agent_id)
        if not agent.active:
            agent.active = True
            self._l.active_agents += 1
        self._l.mark_dirty(agent.agent_id)
        return []

    def _drop_offers_on(self, agent: AgentState, reason: str) -> list[Decision]:
        out: list[Decision] = []
        for oid in list(agent.offers):
            o = self._l.offers[oid]
            self._l.offer_drop(o)
            out.append(OfferRescinded(oid, o.framework_id, o.agent_id, reason))
        return out

    # --- frameworks ---------------------------------------------------------------------

    def _framework_added(self, ev: FrameworkAdded, now: float) -> list[Decision]:
        l_ = self._l
        roles = tuple(check_role(r) for r in (ev.roles or ("*",)))
        fw = l_.frameworks.get(ev.framework_id)
        if fw is None:
            fw = FrameworkState(ev.framework_id, roles, ev.capabilities, ev.active, l_.next_framework_seq())
            l_.frameworks[ev.framework_id] = fw
        else:  # re-subscription (or a placeholder from recovered allocations)
            fw.roles = tuple(dict.fromkeys(fw.roles + roles))
            fw.offer_roles = roles
            fw.capabilities = ev.capabilities
            fw.reusable = "REUSABLE_OFFERS" in ev.capabilities
            fw.revocable_ok = "REVOCABLE_RESOURCES" in ev.capabilities
            fw.active = ev.active
        fw.suppressed = set(ev.suppressed_roles)
        for role in fw.roles:
            l_.roles.add_framework(role, fw.framework_id)
        if fw.revocable_ok:
            l_.rev_sorter.add(fw.framework_id)
        refresh_activity(l_, fw)
        self._full = True
        return []

    def _framework_removed(self, ev: FrameworkRemoved, now: float) -> list[Decision]:
        l_ = self._l
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
        for agent_id in l_.filters.clear(fw.framework_id):
            l_.mark_dirty(agent_id)
        del l_.frameworks[fw.framework_id]
        self._why.pop(fw.framework_id, None)
        return out

    def _framework_activated(self, ev: FrameworkActivated, now: float) -> list[Decision]:
        fw = self._framework(ev.framework_id)
        fw.active = True
        refresh_activity(self._l, fw)
        self._full = True
        return []

    def _framework_deactivated(self, ev: FrameworkDeactivated, now: float) -> list[Decision]:
        l_ = self._l
        fw = self._framework(ev.framework_id)
        fw.active = False
        out: list[Decision] = []
        for oid in list(fw.offers):
            o = l_.offers[oid]
            l_.offer_drop(o)
            out.append(OfferRescinded(oid, fw.framework_id, o.agent_id, "framework deactivated"))
        refresh_activity(l_, fw)
        return out

    # --- offers and tasks ---------------------------------------------------------------

    def _accepted(self, ev: OffersAccepted, now: float) -> list[Decision]:
        return list(self.accept(ev, now).decisions)

    def _declined(self, ev: OffersDeclined, now: float) -> list[Decision]:
        l_ = self._l
        fw = l_.frameworks.get(ev.framework_id)
        if fw is None:
            return []
        refuse = ev.refuse_seconds if ev.refuse_seconds is not None else self.config.default_refuse_seconds
        for oid in ev.offer_ids:
            o = l_.offers.get(oid)
            if o is None or o.framework_id != fw.framework_id:
                continue
            declined = o.regular
            l_.offer_drop(o)
            if refuse > 0:
                l_.filters.add(fw.framework_id, o.role, o.agent_id, declined, now + refuse)
                l_.activity_dirty = True
        return []

    def _recovered(self, ev: ResourcesRecovered, now: float) -> list[Decision]:
        l_ = self._l
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
            or not fw.active
            or agent is None
            or not agent.active
            or lease.framework_id != fw.framework_id
            or lease.role in fw.suppressed
            or not task.regular
        ):
            return []
        back = agent.free.allocatable_to(lease.role) if agent.has_reserved else agent.free
        back = back - (back - task.regular)
        if not back:
            return []
        l_.offer_grow(lease, back, EMPTY, now)
        return [OfferUpdated(l_.snapshot(lease), f"task {task.task_id} ended; its resources are back in the lease")]

    def _allocation_recovered(self, ev: AllocationRecovered, now: float) -> list[Decision]:
        l_ = self._l
        agent = self._agent(ev.agent_id)
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

    def _suppressed(self, ev: Suppressed, now: float) -> list[Decision]:
        fw = self._framework(ev.framework_id)
        fw.suppressed |= set(ev.roles or fw.offer_roles)
        refresh_activity(self._l, fw)
        return []

    def _revived(self, ev: Revived, now: float) -> list[Decision]:
        l_ = self._l
        fw = self._framework(ev.framework_id)
        roles = set(ev.roles or fw.offer_roles)
        fw.suppressed -= roles
        for agent_id in l_.filters.clear(fw.framework_id, roles):
            l_.mark_dirty(agent_id)
        refresh_activity(l_, fw)
        self._why.pop(fw.framework_id, None)
        self._full = True
        return []

    def _demand_declared(self, ev: DemandDeclared, now: float) -> list[Decision]:
        l_ = self._l
        fw = self._framework(ev.framework_id)
        if not fw.offer_roles:
            raise AllocatorError(f"framework {fw.framework_id} is not subscribed; it cannot declare demand")
        old = {(d.shape, d.gang_id, d.role): d for d in fw.demands}
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
                dem.revocable_ok, dem.priority,
            )
            prev = old.pop((dem.shape, dem.gang_id, role), None)
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
        fw.uses_demand = True
        l_.demand_dirty = True
        self._why.pop(fw.framework_id, None)
        refresh_activity(l_, fw)
        return []

    def _quota_set(self, ev: QuotaSet, now: float) -> list[Decision]:
        check_role(ev.role)
        limit = ev.limit.scalars() if ev.limit is not None else None
        self._l.roles.set_quota(ev.role, ev.guarantee.scalars(), limit)
        self._full = True
        return []

    def _weight_set(self, ev: WeightSet, now: float) -> list[Decision]:
        if not ev.weight > 0:
            raise AllocatorError(f"weight of role {ev.role} must be > 0, got {ev.weight}")
        check_role(ev.role)
        self._l.roles.set_weight(ev.role, ev.weight)
        return []

    # ================================================================ passes ====

    def allocate(self, now: float) -> list[Decision]:
        """Expire timers, then run an allocation pass over the dirty agents (all agents when a
        full sweep is due) and the frameworks whose demand changed."""
        l_ = self._l
        out: list[Decision] = []
        self._expire(now, out)
        if l_.activity_dirty:
            refresh_all(l_)
        full = self._full or self._next_sweep is None or now >= self._next_sweep
        if full:
            agents = [a for a in l_.agents.values() if a.active]
            self._next_sweep = now + self.config.sweep_interval
            self._full = False
        else:
            agents = [l_.agents[a] for a in l_.dirty if a in l_.agents]
        l_.dirty.clear()
        self.passes += 1
        # owners reclaim what was lent as revocable
        for agent in agents:
            if agent.lent:
                reason = owner_wants(l_, agent)
                if reason is not None:
                    enforce(l_, agent, reason, out, reclaim=True)
        quota_stage(l_, agents, now, out)
        why: dict[str, str] = {}
        demand_ran = False
        still: list[DemandState] = []
        headroom = Headroom(l_)
        if any(fw.uses_demand for fw in l_.frameworks.values()):
            pool = [a for a in l_.agents.values() if a.active and a.free] if (l_.demand_dirty or full) else agents
            l_.demand_dirty = False
            still = demand_stage(l_, pool, now, out, why, headroom)
            demand_ran = True
        regular_stage(l_, agents, now, out, headroom)
        if still and self.config.idle_rescind_for_fairness:
            freed = fairness_rescind(l_, still, out)
            if freed:
                headroom = Headroom(l_)
                demand_stage(l_, freed, now, out, why, headroom)
                regular_stage(l_, freed, now, out, headroom)
        revocable_stage(l_, agents, now, out)
        for agent in agents:  # what this pass changed elsewhere stays dirty for the next one
            l_.dirty.pop(agent.agent_id, None)
        if demand_ran:  # otherwise the last reasons still hold
            self._why = why
        self.last_pass = PassStats(self.passes, full, len(agents), len(out))
        return out

    def _expire(self, now: float, out: list[Decision]) -> None:
        l_ = self._l
        for _fid, _role, agent_id in l_.filters.expire(now):
            l_.mark_dirty(agent_id)
            l_.activity_dirty = True
        timers = l_.offer_timers
        while timers and timers[0][0] <= now:
            _, oid, gen = heapq.heappop(timers)
            o = l_.offers.get(oid)
            if o is None:
                continue
            if o.reusable:
                if o.idle_since is not None and o.idle_since == gen:
                    self._expire_offer(o, f"lease idle part unused for {self.config.offer_idle_timeout:g}s", now, out)
            elif o.created == gen:
                self._expire_offer(o, f"offer not used within offer_timeout {self.config.offer_timeout:g}s", now, out)

    def _expire_offer(self, o: OfferState, reason: str, now: float, out: list[Decision]) -> None:
        """Take back an unused offer (or a lease's idle part), filtered for its holder for the
        default refuse time as if declined, so the resources go to someone else first."""
        l_ = self._l
        unused = o.regular
        d = take_back(l_, o, reason)
        if d is None:
            return
        out.append(d)
        refuse = self.config.default_refuse_seconds
        if unused and refuse > 0:
            l_.filters.add(o.framework_id, o.role, o.agent_id, unused, now + refuse)
            l_.activity_dirty = True

    def next_deadline(self, now: float) -> float | None:
        """When the shell should call ``allocate`` next (None: only on new events)."""
        l_ = self._l
        candidates: list[float] = []
        if l_.dirty or l_.demand_dirty or self._full:
            candidates.append(now + self.config.batch_window)
        f = l_.filters.next_deadline()
        if f is not None:
            candidates.append(f)
        if l_.offer_timers:
            candidates.append(l_.offer_timers[0][0])
        if self._next_sweep is not None and l_.agents:
            candidates.append(self._next_sweep)
        return min(candidates) if candidates else None

    # ================================================================ queries ===

    def offer(self, offer_id: str) -> Offer | None:
        o = self._l.offers.get(offer_id)
        return self._l.snapshot(o) if o is not None else None

    def offers_of(self, framework_id: str) -> tuple[Offer, ...]:
        fw = self._l.frameworks.get(framework_id)
        if fw is None:
            return ()
        return tuple(self._l.snapshot(self._l.offers[oid]) for oid in fw.offers)

    def outstanding_offers(self) -> tuple[Offer, ...]:
        return tuple(self._l.snapshot(o) for o in self._l.offers.values())

    def agent_ids(self) -> tuple[str, ...]:
        return tuple(self._l.agents)

    def framework_ids(self) -> tuple[str, ...]:
        return tuple(self._l.frameworks)

    def agent_view(self, agent_id: str) -> AgentView | None:
        a = self._l.agents.get(agent_id)
        if a is None:
            return None
        return AgentView(
            a.agent_id, a.hostname, a.active, a.total, a.allocated, self._l.agent_offered(a), a.free, a.usage_slack, a.lent,
            a.rev_offered, a.rev_allocated,
        )

    def framework_view(self, framework_id: str) -> FrameworkView | None:
        fw = self._l.frameworks.get(framework_id)
        if fw is None:
            return None
        return FrameworkView(
            fw.framework_id, fw.offer_roles, fw.active, frozenset(fw.suppressed), fw.uses_demand,
            self._l.framework_allocated(fw), self._l.framework_offered(fw), tuple(fw.offers), tuple(fw.tasks),
        )

    def task_view(self, framework_id: str, task_id: str) -> TaskView | None:
        t = self._l.tasks.get((framework_id, task_id))
        if t is None:
            return None
        res = t.regular + t.revocable.as_revocable() if t.revocable else t.regular
        return TaskView(t.framework_id, t.task_id, t.agent_id, t.role, res, t.offer_id, t.revoking)

    def tasks(self) -> tuple[TaskView, ...]:
        out = []
        for fid, tid in self._l.tasks:
            view = self.task_view(fid, tid)
            if view is not None:
                out.append(view)
        return tuple(out)

    def role_shares(self) -> dict[str, float]:
        """Weighted dominant share of every role (allocated + offered, non-revocable)."""
        return {role: self._l.roles.share(role) for role in self._l.roles.nodes}

    def framework_share(self, framework_id: str, role: str) -> float:
        node = self._l.roles.nodes.get(role)
        return node.frameworks.share(framework_id) if node is not None else 0.0

    def quota_consumed(self, role: str) -> dict[str, float]:
        node = self._l.roles.nodes.get(role)
        return dict(node.alloc) if node is not None else {}

    def cluster_total(self) -> dict[str, float]:
        return dict(self._l.totals.values)

    def why_not_offered(self, framework_id: str) -> str:
        """A short human reason why this framework is not getting (more) offers."""
        l_ = self._l
        fw = l_.frameworks.get(framework_id)
        if fw is None:
            return "unknown framework"
        if not fw.active:
            return "framework is not connected (inactive)"
        open_roles = [r for r in fw.offer_roles if r not in fw.suppressed]
        if not open_roles:
            return "all its roles are suppressed (SUPPRESS); send REVIVE"
        if framework_id in self._why:
            return self._why[framework_id]
        if fw.uses_demand and not any(d.unmet() > 0 for d in fw.demands):
            return "no unmet demand (REQUEST) is outstanding"
        if all(fully_filtered(l_, fw, r) for r in open_roles):
            return "every agent is filtered after DECLINE/ACCEPT (refuse_seconds); send REVIVE"
        if not any(
            (a.free.allocatable_to(r) if a.has_reserved else a.free) for a in l_.agents.values() if a.active
            for r in open_roles
        ):
            return "no free resources usable by its roles; other frameworks hold them"
        if fw.offers:
            return f"holds {len(fw.offers)} outstanding offer(s)"
        return "waiting for the next allocation pass"

    # ================================================================ helpers ===

    def _agent(self, agent_id: str) -> AgentState:
        agent = self._l.agents.get(agent_id)
        if agent is None:
            raise AllocatorError(f"unknown agent {agent_id}")
        return agent

    def _framework(self, framework_id: str) -> FrameworkState:
        fw = self._l.frameworks.get(framework_id)
        if fw is None:
            raise AllocatorError(f"unknown framework {framework_id}")
        return fw

    # exposed for the property tests and the benchmark
    @property
    def ledger(self) -> Ledger:
        return self._l


_HANDLERS: dict[type, Callable[[Allocator, Any, float], list[Decision]]] = {
    AgentAdded: Allocator._agent_added,
    AgentRemoved: Allocator._agent_removed,
    AgentUpdated: Allocator._agent_updated,
    AgentSlackEstimated: Allocator._agent_slack,
    AgentDeactivated: Allocator._agent_deactivated,
    AgentReactivated: Allocator._agent_reactivated,
    FrameworkAdded: Allocator._framework_added,
    FrameworkRemoved: Allocator._framework_removed,
    FrameworkActivated: Allocator._framework_activated,
    FrameworkDeactivated: Allocator._framework_deactivated,
    OffersAccepted: Allocator._accepted,
    OffersDeclined: Allocator._declined,
    ResourcesRecovered: Allocator._recovered,
    AllocationRecovered: Allocator._allocation_recovered,
    Suppressed: Allocator._suppressed,
    Revived: Allocator._revived,
    DemandDeclared: Allocator._demand_declared,
    QuotaSet: Allocator._quota_set,
    WeightSet: Allocator._weight_set,
}
