"""The ledger: every piece of allocator state and the only code that moves resources.

Regular ledger per agent: ``allocated + offered + free == total`` (non-revocable; ``allocated``
includes ``lent``, the reserved/guaranteed-but-idle resources currently lent out as revocable).
Revocable ledger per agent (flat scalars): ``rev_offered + rev_allocated`` is backed by the usage
slack estimate plus ``lent``. DRF shares count regular allocated + offered resources per
(framework, role); a separate sorter counts revocable ones. Every move goes through ``free``:
release to free, then take from free, so the sums stay exact.
"""

from __future__ import annotations

import heapq

from master.allocator.config import AllocatorConfig
from master.allocator.decisions import Offer
from master.allocator.filters import FilterIndex
from master.allocator.quantities import take
from master.allocator.roles import RoleTree
from master.allocator.sorter import Sorter, Totals
from master.allocator.state import (
    EMPTY,
    OFFER,
    AgentState,
    DemandState,
    FrameworkState,
    OfferPhase,
    OfferState,
    TaskAlloc,
)
from protocol.resources import Resources

__pure__ = True

_new_record = tuple.__new__


class Ledger:
    def __init__(self, config: AllocatorConfig) -> None:
        self.config = config
        self.totals = Totals(config.fairness_excluded)
        self.roles = RoleTree(self.totals, config.role_sorter, config.framework_sorter)
        self.rev_sorter: Sorter = config.framework_sorter(self.totals)
        self.filters = FilterIndex()
        self.agents: dict[str, AgentState] = {}
        self.frameworks: dict[str, FrameworkState] = {}
        self.tasks: dict[tuple[str, str], TaskAlloc] = {}
        self.offers: dict[str, OfferState] = {}
        self.dirty: dict[str, None] = {}
        self.full_pass = True  # the next pass visits every agent (new framework, revive, quota...)
        self.why: dict[str, str] = {}  # framework -> why its demand is not placed (last demand stage)
        self.demand_dirty = False
        # a gang was short of gang_min in the last demand stage: when capacity appears on any
        # agent, the next pass places it over every agent with free resources (all at once)
        self.gangs_waiting = False
        # sorter activity ("fully filtered") to refresh before the next pass: every framework
        # (agents came or went), or only these (their filters changed)
        self.activity_dirty = False
        self.activity_of: dict[str, None] = {}
        self.lenders: dict[str, None] = {}  # agents whose ``lent`` is not empty
        self.constrained: dict[str, None] = {}  # frameworks with offer constraints
        self.own_minimum: dict[str, None] = {}  # frameworks with offer filters (their own minimum)
        self._offer_prefix = f"{config.offer_id_prefix}-O"
        self._offer_timeout = config.offer_timeout
        self.active_agents = 0
        self._offer_seq = 0
        self._agent_seq = 0
        self._fw_seq = 0
        self.demand_seq = 0
        # timers: (deadline, offer_id, generation) for idle leases and classic offer timeouts
        self.offer_timers: list[tuple[float, str, float]] = []

    # --- ids and records ------------------------------------------------------------------

    def next_offer_id(self) -> str:
        self._offer_seq += 1
        return f"{self._offer_prefix}{self._offer_seq}"

    def next_agent_seq(self) -> int:
        self._agent_seq += 1
        return self._agent_seq

    def next_framework_seq(self) -> int:
        self._fw_seq += 1
        return self._fw_seq

    def mark_dirty(self, agent_id: str) -> None:
        self.dirty[agent_id] = None

    def free_grew(self, agent: AgentState) -> None:
        """More is free on the agent: filters that no longer cover what a role could be offered
        there are dropped (they would not filter it anyway), keeping "fully filtered" exact."""
        self.dirty[agent.agent_id] = None
        for fid, role, filtered in self.filters.on_agent(agent.agent_id):
            avail = agent.free.allocatable_to(role) if agent.has_reserved else agent.free
            if not filtered.contains(avail):
                self.filters.drop(fid, role, agent.agent_id)
                self.activity_of[fid] = None

    # --- snapshots ------------------------------------------------------------------------

    def snapshot(self, o: OfferState) -> Offer:
        agent = self.agents[o.agent_id]
        rev = o.revocable.as_revocable() if o.revocable else EMPTY
        return Offer(  # positional for speed: offer_id, framework_id, role, agent_id, hostname,
            o.offer_id,  # resources, created, idle_since, revocable, reusable
            o.framework_id,
            o.role,
            o.agent_id,
            agent.hostname,
            o.regular + rev if rev else o.regular,
            o.created,
            o.idle_since,
            rev,
            o.reusable,
        )

    # --- offers ---------------------------------------------------------------------------

    def new_offer(self, fw: FrameworkState, role: str, agent: AgentState, now: float) -> OfferState:
        o = OfferState(self.next_offer_id(), fw.framework_id, role, agent.agent_id, now, fw.reusable)
        self.offers[o.offer_id] = o
        fw.offers[o.offer_id] = None
        agent.offers[o.offer_id] = None
        if not fw.reusable and self.config.offer_timeout is not None:
            heapq.heappush(self.offer_timers, (now + self.config.offer_timeout, o.offer_id, now))
        return o  # a lease's idle timer starts when it first holds something (offer_grow)

    def create_classic(
        self, fw: FrameworkState, role: str, agent: AgentState, regular: Resources, scalars: dict[str, float],
        now: float,
    ) -> Offer:
        """Fast path of ``new_offer`` + ``offer_grow`` + ``snapshot`` for a classic offer of
        regular resources (the bulk of a DRF pass)."""
        self._offer_seq += 1
        oid = f"{self._offer_prefix}{self._offer_seq}"
        fid = fw.framework_id
        agent_id = agent.agent_id
        o = OfferState(oid, fid, role, agent_id, now, False, regular, scalars)
        self.offers[oid] = o
        fw.offers[oid] = None
        agent.offers[oid] = None
        free = agent.free
        agent.free = EMPTY if regular is free else free - regular
        self.roles.grow(role, fid, scalars)
        if self._offer_timeout is not None:
            heapq.heappush(self.offer_timers, (now + self._offer_timeout, oid, now))
        # ``tuple.__new__`` is what ``Offer(...)`` calls, minus its Python-level ``__new__``
        return _new_record(Offer, (oid, fid, role, agent_id, agent.hostname, regular, now, now, EMPTY, False))

    def lease_of(self, fw: FrameworkState, role: str, agent_id: str) -> OfferState | None:
        """The framework's reusable lease on this agent for this role, if any."""
        agent = self.agents[agent_id]
        for oid in agent.offers:
            o = self.offers[oid]
            if o.framework_id == fw.framework_id and o.role == role and o.reusable:
                return o
        return None

    def offer_grow(
        self,
        o: OfferState,
        regular: Resources,
        revocable: Resources,
        now: float,
        scalars: dict[str, float] | None = None,
    ) -> None:
        """Move ``regular`` from the agent's free pool (and ``revocable`` from its revocable
        pool) into the offer. ``scalars`` may pass ``regular.scalars()`` when already known."""
        agent = self.agents[o.agent_id]
        was_empty = not o.regular and not o.revocable
        if regular:
            free = agent.free
            agent.free = EMPTY if regular is free else free - regular
            if scalars is None:
                scalars = regular.scalars()
            if o.regular:
                o.regular = o.regular + regular
                o.scalars = None
            else:
                o.regular = regular
                o.scalars = scalars
            self.roles.grow(o.role, o.framework_id, scalars)
        if revocable:
            agent.rev_offered = agent.rev_offered + revocable
            o.revocable = o.revocable + revocable
            self.rev_sorter.update(o.framework_id, revocable.scalars(), 1.0)
        if was_empty and not o.is_empty():
            o.idle_since = now
            if o.reusable:
                heapq.heappush(self.offer_timers, (now + self.config.offer_idle_timeout, o.offer_id, now))

    def offer_shrink(self, o: OfferState, regular: Resources, revocable: Resources, settle: bool = True) -> None:
        """Return part of an offer to the agent's free (and revocable) pool."""
        agent = self.agents[o.agent_id]
        if regular:
            if regular is o.regular and o.scalars is not None:
                scalars = o.scalars
                o.regular = EMPTY
                if not agent.free:
                    agent.free_scalars = (regular, scalars)  # agent.free becomes ``regular``
            else:
                scalars = regular.scalars()
                o.regular = o.regular - regular
            o.scalars = None
            agent.free = agent.free + regular
            self.roles.update(o.role, o.framework_id, scalars, -1.0)
            self.free_grew(agent)
        if revocable:
            o.revocable = o.revocable - revocable
            agent.rev_offered = agent.rev_offered - revocable
            self.rev_sorter.update(o.framework_id, revocable.scalars(), -1.0)
            if settle:
                self.settle_lent(agent)
        if o.is_empty():
            o.idle_since = None
        self.mark_dirty(o.agent_id)

    def offer_drop(self, o: OfferState, settle: bool = True, end: OfferPhase = OfferPhase.RESCINDED) -> None:
        """Return all of an offer and remove it from the book (its lease tasks detach); it ends
        as ``end`` (``OFFER``: an offer ends once, a second end raises)."""
        o.phase = OFFER.move(o.phase, end)
        self.offer_shrink(o, o.regular, o.revocable, settle)
        self.offers.pop(o.offer_id, None)
        fw = self.frameworks.get(o.framework_id)
        if fw is not None:
            fw.offers.pop(o.offer_id, None)
        agent = self.agents.get(o.agent_id)
        if agent is not None:
            agent.offers.pop(o.offer_id, None)
        if o.tasks:
            for tid in o.tasks:
                task = self.tasks.get((o.framework_id, tid))
                if task is not None and task.offer_id == o.offer_id:
                    task.offer_id = None
            o.tasks.clear()
        if o.demand_units:
            for seq, units in o.demand_units.items():
                demand = self.demand_by_seq(o.framework_id, seq)
                if demand is not None:
                    demand.in_offers = max(0, demand.in_offers - units)
                    self.demand_dirty = True
            o.demand_units = None

    def demand_by_seq(self, framework_id: str, seq: int) -> DemandState | None:
        fw = self.frameworks.get(framework_id)
        if fw is None:
            return None
        for d in fw.demands:
            if d.seq == seq:
                return d
        return None

    # --- tasks ----------------------------------------------------------------------------

    def task_start(self, task: TaskAlloc) -> None:
        """Allocate a task's resources out of the agent's free (and revocable) pool."""
        agent = self.agents[task.agent_id]
        fw = self.frameworks[task.framework_id]
        self.tasks[(task.framework_id, task.task_id)] = task
        agent.tasks[(task.framework_id, task.task_id)] = None
        fw.tasks[task.task_id] = None
        if task.regular:
            agent.free = agent.free - task.regular
            agent.allocated = agent.allocated + task.regular
            self.roles.grow(task.role, task.framework_id, task.regular.scalars())
        if task.revocable:
            agent.rev_allocated = agent.rev_allocated + task.revocable
            self.rev_sorter.update(task.framework_id, task.revocable.scalars(), 1.0)

    def task_end(self, task: TaskAlloc) -> None:
        """Release a task's resources to the agent's free (and revocable) pool."""
        key = (task.framework_id, task.task_id)
        self.tasks.pop(key, None)
        agent = self.agents.get(task.agent_id)
        fw = self.frameworks.get(task.framework_id)
        if fw is not None:
            fw.tasks.pop(task.task_id, None)
        if task.regular:
            self.roles.update(task.role, task.framework_id, task.regular.scalars(), -1.0)
        if task.revocable:
            self.rev_sorter.update(task.framework_id, task.revocable.scalars(), -1.0)
        if agent is not None:
            agent.tasks.pop(key, None)
            if task.regular:
                agent.allocated = agent.allocated - task.regular
                agent.free = agent.free + task.regular
                self.free_grew(agent)
            if task.revocable:
                agent.rev_allocated = agent.rev_allocated - task.revocable
                self.settle_lent(agent)
            self.mark_dirty(agent.agent_id)
        if task.offer_id is not None:
            lease = self.offers.get(task.offer_id)
            if lease is not None and lease.tasks is not None:
                lease.tasks.discard(task.task_id)

    # --- lending (allocation slack) -------------------------------------------------------

    def lend(self, agent: AgentState, exact: Resources) -> None:
        """Move idle reserved/guaranteed resources from free into ``lent`` (revocable backing)."""
        if exact:
            agent.free = agent.free - exact
            agent.allocated = agent.allocated + exact
            agent.lent = agent.lent + exact
            self.lenders[agent.agent_id] = None

    def settle_lent(self, agent: AgentState) -> None:
        """Give back to free the lent resources no revocable use needs any more."""
        if not agent.lent:
            return
        used = (agent.rev_offered + agent.rev_allocated).scalars()
        slack = agent.usage_slack.scalars()
        lent = agent.lent.scalars()
        excess: dict[str, float] = {}
        for name, amount in lent.items():
            needed = max(0.0, used.get(name, 0.0) - slack.get(name, 0.0))
            if amount > needed + 1e-9:
                excess[name] = amount - needed
        if not excess:
            return
        back = take(agent.lent, excess)
        agent.lent = agent.lent - back
        if not agent.lent:
            self.lenders.pop(agent.agent_id, None)
        agent.allocated = agent.allocated - back
        agent.free = agent.free + back
        self.free_grew(agent)

    def agent_offered(self, agent: AgentState) -> Resources:
        """Regular resources in outstanding offers on the agent (from the book)."""
        return Resources.sum(self.offers[oid].regular for oid in agent.offers)

    def framework_offered(self, fw: FrameworkState) -> Resources:
        return Resources.sum(self.snapshot(self.offers[oid]).resources for oid in fw.offers)

    def framework_allocated(self, fw: FrameworkState) -> Resources:
        out = []
        for tid in fw.tasks:
            t = self.tasks[(fw.framework_id, tid)]
            out.append(t.regular + t.revocable.as_revocable() if t.revocable else t.regular)
        return Resources.sum(out)

    def revocable_capacity(self, agent: AgentState) -> Resources:
        """Flat revocable quantities backed and not yet used (usage slack + lent - used)."""
        backing = agent.usage_slack + agent.lent.flatten() if agent.lent else agent.usage_slack
        return backing - agent.rev_offered - agent.rev_allocated
