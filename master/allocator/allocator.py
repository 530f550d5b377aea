"""The allocator: single owner of the offer book, DRF sorters, filters, quota, reservations,
demands and revocable pools. A pure core: ``handle(event, now)`` for facts, ``accept`` for the
typed ACCEPT result, ``allocate(now)`` for a pass, ``next_deadline(now)`` for the shell's timer.
See README.md for the pipeline and vocabulary.
"""

from __future__ import annotations

import heapq

from master.allocator.accept import accept as accept_offers
from master.allocator.config import AllocatorConfig
from master.allocator.decisions import AcceptResult, Decision, Offer
from master.allocator.demand import demand_stage, fairness_rescind
from master.allocator.eligibility import (
    CONSTRAINT_REASON,
    GPU_REASON,
    HELD_CONSTRAINTS,
    HELD_GPU,
    available_to,
    fully_filtered,
    refresh_all,
    refresh_some,
    why_not,
)
from master.allocator.errors import AllocatorError
from master.allocator.events import Event, OffersAccepted
from master.allocator.handlers import HANDLERS
from master.allocator.ledger import Ledger
from master.allocator.offering import take_back
from master.allocator.passes import Headroom, quota_stage, regular_stage
from master.allocator.revocable import enforce, owner_wants, revocable_stage
from master.allocator.starvation import held_too_long
from master.allocator.state import AgentState, DemandState, OfferState
from master.allocator.views import AgentView, FrameworkView, PassStats, TaskView

__pure__ = True


class Allocator:
    """Drive with ``handle``/``accept`` for every fact and ``allocate`` when ``next_deadline``
    says so (the shell coalesces events for ``config.batch_window`` before calling it)."""

    def __init__(self, config: AllocatorConfig | None = None) -> None:
        self.config = config if config is not None else AllocatorConfig()
        self._l = Ledger(self.config)
        self._next_sweep: float | None = None
        self._hold_check_at: float | None = None  # when to look for offers held while others starve
        self.passes = 0
        self.last_pass = PassStats(0, False, 0, 0)

    # ================================================================ events ====

    def handle(self, event: Event, now: float) -> list[Decision]:
        """Apply one fact; returns the decisions it causes at once (rescinds, revocations,
        lease updates). New offers come only from ``allocate``."""
        handler = HANDLERS.get(type(event))
        if handler is None:
            raise AllocatorError(f"unknown allocator event {type(event).__name__}")
        return handler(self._l, event, now)

    def accept(self, event: OffersAccepted, now: float) -> AcceptResult:
        """Validate and apply an ACCEPT against the offer book (typed result)."""
        return accept_offers(self._l, event, now)

    # ================================================================ passes ====

    def allocate(self, now: float) -> list[Decision]:
        """Expire timers, then run an allocation pass over the dirty agents (all agents when a
        full sweep is due) and the frameworks whose demand changed."""
        l_ = self._l
        out: list[Decision] = []
        self._expire(now, out)
        if l_.activity_dirty:
            refresh_all(l_)
        elif l_.activity_of:
            refresh_some(l_)
        full = self._l.full_pass or self._next_sweep is None or now >= self._next_sweep
        if full:
            agents = [a for a in l_.agents.values() if a.active]
            self._next_sweep = now + self.config.sweep_interval
            self._l.full_pass = False
        else:
            by_id = l_.agents
            agents = [by_id[a] for a in l_.dirty if a in by_id]
        l_.dirty.clear()
        self.passes += 1
        if len(agents) > 1:
            # start each pass at a different agent (a deterministic stand-in for Mesos' shuffle):
            # no agent is always first, and declined resources meet a different framework order
            k = (self.passes * 7919) % len(agents)
            agents = agents[k:] + agents[:k]
        # owners reclaim what was lent as revocable (anywhere, when demand changed)
        if l_.lenders:  # (every agent with something lent is in it)
            lenders = l_.agents.values() if (full or l_.demand_dirty) else agents
            for agent in [a for a in lenders if a.lent and a.active]:
                if agent.lent:
                    reason = owner_wants(l_, agent)
                    if reason is not None:
                        enforce(l_, agent, reason, out, reclaim=True)
        quota_stage(l_, agents, now, out)
        why: dict[str, str] = {}
        demand_ran = False
        still: list[DemandState] = []
        headroom = Headroom(l_)
        gang_pool: list[AgentState] | None = None
        if any(fw.uses_demand for fw in l_.frameworks.values()):
            if l_.demand_dirty or full:
                pool = [a for a in l_.agents.values() if a.active and a.free]
            else:
                pool = agents
                if l_.gangs_waiting and any(a.free for a in agents):
                    # capacity appeared: a waiting gang needs gang_min units at once, so it is
                    # placed over every agent with free resources, not only the changed ones
                    gang_pool = [a for a in l_.agents.values() if a.active and a.free]
            l_.demand_dirty = False
            still = demand_stage(l_, pool, now, out, why, headroom, gang_pool)
            demand_ran = True
        else:
            l_.gangs_waiting = False
        regular_stage(l_, agents, now, out, headroom)
        if still and self.config.idle_rescind_for_fairness:
            freed = fairness_rescind(l_, still, out)
            if freed:
                headroom = Headroom(l_)
                wide = [a for a in l_.agents.values() if a.active and a.free] if l_.gangs_waiting else None
                demand_stage(l_, freed, now, out, why, headroom, wide)
                regular_stage(l_, freed, now, out, headroom)
        bound = self.config.offer_hold_bound
        if bound is not None and (self._hold_check_at is None or now >= self._hold_check_at):
            self._starvation_pass(now, bound, out)
        revocable_stage(l_, agents, now, out)
        if l_.dirty:  # what this pass changed elsewhere stays dirty for the next one
            dirty = l_.dirty
            for agent in agents:
                dirty.pop(agent.agent_id, None)
        if demand_ran:  # otherwise the last reasons still hold
            self._l.why = why
        self.last_pass = PassStats(self.passes, full, len(agents), len(out))
        return out

    def _expire(self, now: float, out: list[Decision]) -> None:
        l_ = self._l
        for fid, _role, agent_id in l_.filters.expire(now):
            l_.mark_dirty(agent_id)
            l_.activity_of[fid] = None
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

    def _starvation_pass(self, now: float, bound: float, out: list[Decision]) -> None:
        """Take back offers held unused past ``bound`` while another framework starves, and
        offer them again at once (``starvation.py``). The holder sits out that one pass on those
        agents (a filter added and dropped around it), so the resources go to someone else first
        and the holder is not kept from them any longer than that."""
        l_ = self._l
        take, self._hold_check_at = held_too_long(l_, now, bound)
        if not take:
            return
        freed: dict[str, None] = {}
        benched: list[tuple[str, str, str]] = []
        for o, hungry in take:
            if o.offer_id not in l_.offers:
                continue
            unused, idle = o.regular, now - (o.idle_since if o.idle_since is not None else now)
            d = take_back(l_, o, f"unused for {idle:.1f}s while framework {hungry} has no offer"
                                 f" (offer_hold_bound {bound:g}s)", revocable=False)
            if d is None:
                continue
            out.append(d)
            freed[o.agent_id] = None
            key = (o.framework_id, o.role, o.agent_id)
            if key not in benched and l_.filters.expires_at(*key) is None:
                l_.filters.add(*key, unused, now + bound)
                benched.append(key)
        agents = [l_.agents[a] for a in freed if a in l_.agents]
        regular_stage(l_, agents, now, out, Headroom(l_))
        for key in benched:
            l_.filters.drop(*key)
            l_.activity_of[key[0]] = None
            l_.mark_dirty(key[2])

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
            l_.activity_of[o.framework_id] = None

    def next_deadline(self, now: float) -> float | None:
        """When the shell should call ``allocate`` next (None: only on new events)."""
        l_ = self._l
        candidates: list[float] = []
        if l_.dirty or l_.demand_dirty or self._l.full_pass:
            candidates.append(now + self.config.batch_window)
        f = l_.filters.next_deadline()
        if f is not None:
            candidates.append(f)
        if l_.offer_timers:
            candidates.append(l_.offer_timers[0][0])
        if self._next_sweep is not None and l_.agents:
            candidates.append(self._next_sweep)
        if self._hold_check_at is not None:
            candidates.append(self._hold_check_at)
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
        if framework_id in self._l.why:
            return self._l.why[framework_id]
        if fw.uses_demand and not any(d.unmet() > 0 for d in fw.demands):
            return "no unmet demand (REQUEST) is outstanding"
        if all(fully_filtered(l_, fw, r) for r in open_roles):
            return "every agent is filtered after DECLINE/ACCEPT (refuse_seconds); send REVIVE"
        # the agents' side, through the eligibility chain's checks (as the stages and the
        # take-backs of held offers ask them)
        usable = [a for a in l_.agents.values() if a.active and any(available_to(a, r) for r in open_roles)]
        active = [a for a in l_.agents.values() if a.active]
        if fw.excluded and active and all(
            why_not(HELD_CONSTRAINTS, l_, fw, r, a) is not None for a in active for r in open_roles
        ):
            return f"every agent is excluded: {CONSTRAINT_REASON} (offer_constraints)"
        role = open_roles[0]  # (the GPU check is the same in every role)
        if usable and all(why_not(HELD_GPU, l_, fw, role, a) is not None for a in usable):
            return f"every agent with free resources is excluded: {GPU_REASON} (Mesos semantics)"
        if not usable:
            if active and all(why_not(HELD_GPU, l_, fw, role, a) is not None for a in active):
                return f"every agent is excluded: {GPU_REASON} (Mesos semantics)"  # it could never be served
            return "no free resources usable by its roles; other frameworks hold them"
        if fw.offers:
            return f"holds {len(fw.offers)} outstanding offer(s)"
        return "waiting for the next allocation pass"

    def gpu_excluded(self) -> list[str]:
        """Connected frameworks that hold no offers only because every agent with free resources
        for them has GPUs and they lack ``GPU_RESOURCES`` (Mesos semantics): they would wait in
        silence, so the shell logs them and ``/state`` explains (``why_not_offered``)."""
        l_ = self._l
        if not any(a.has_gpus for a in l_.agents.values()):
            return []
        return [
            fid for fid, fw in l_.frameworks.items()
            if fw.active and not fw.gpu_ok and not fw.offers and GPU_REASON in self.why_not_offered(fid)
        ]

    # ================================================================ helpers ===


    # exposed for the property tests and the benchmark
    @property
    def ledger(self) -> Ledger:
        return self._l
