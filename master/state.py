"""``MasterState``: the master's pure core.

Facts come in (``master.events``: a call received, an agent registered, a status update, a ping
missed, time passed) and effects come out (send an event to a framework, a message to an agent,
persist a registry operation, close a connection). The allocator (``master.allocator``) is owned
by this core and driven synchronously; its decisions become OFFERS / RESCIND events and agent
REVOKE messages (``master.offer_book``).

Rules kept by the core (Mesos semantics, and the durability rules of ``docs/operations.md``
"Guarantees"):

* Semantic problems are never HTTP errors: an invalid ACCEPT produces TASK_ERROR / TASK_DROPPED /
  TASK_LOST updates (``source: SOURCE_MASTER``, no uuid; DROPPED only to PARTITION_AWARE
  frameworks).
* Write first, then act: a ``Persist`` effect precedes the effects that depend on it; the shell
  executes effects in order and awaits each ``Persist``.
* Every ACCEPT is validated against the allocator's offer book; a replayed ACCEPT launches
  nothing twice (offers are single use; task ids are unique per framework).
* Timers are deadlines: ``next_deadline()`` says when to deliver the next ``Tick``.

``MasterState`` holds the records (``master.core_base.CoreData``) and routes each fact to the book
of its subject, every book appending its effects to the one list the fact returns:

=====================  ============================  =============================================
book                   module                        subject
=====================  ============================  =============================================
``framework_book``     ``master.framework_book``     SUBSCRIBE, UPDATE_FRAMEWORK, REQUEST,
                                                     disconnection, removal
``task_book``          ``master.task_book``          launch, status updates, KILL, ACKNOWLEDGE,
                                                     RECONCILE, master-generated updates
``agent_book``         ``master.agents``             registration, agent messages,
                                                     unreachability, removal, reservations,
                                                     pings and ping timeouts
``drain_book``         ``master.drain_book``         DRAIN_AGENT, DEACTIVATE_AGENT,
                                                     REACTIVATE_AGENT
``offer_book``         ``master.offer_book``         the allocator's facts and decisions: OFFERS,
                                                     RESCIND, REVOKE
``maintenance_rules``  ``master.maintenance_rules``  schedules, machines DOWN/UP, inverse offers
``accepts``            ``master.accept``             ACCEPT (the check chain)
``feed``               ``master.operator_events``    the operator event stream
=====================  ============================  =============================================

Each book holds the core as a narrow port (the ``...Host`` protocol of its module: the records
it reads and the books it tells); no book inherits from another. What stays here: the routing of
facts and scheduler calls, recovery from the registry, when the timers run (the books decide what
is due: ``framework_book.tick`` for failover deadlines, then ``agent_book.tick`` for pings, ping
timeouts, the re-registration window and unreachable agents' removal; here the allocation batch
and the order), and the two ways to send (``_send`` to a framework's stream, ``_to_agent`` to an
agent's connection).
"""

from __future__ import annotations

import attrs

from master import registry_ops as ops
from master.accept import AcceptBook
from master.accept_checks import sane_refuse
from master.agents import PING_BATCH, AgentBook
from master.alloc_port import AllocatorPort
from master.allocator import events as ae
from master.core_base import CT, CoreData, StateConfig
from master.drain_book import DrainBook
from master.events import (
    AclsReplaced,
    AgentConnected,
    AgentConnectionLost,
    AgentDrainRequested,
    AgentMessageReceived,
    AgentMessagesReceived,
    CallReceived,
    Effect,
    MaintenanceScheduleUpdated,
    MaintenanceStarted,
    MaintenanceStopped,
    MasterEvent,
    OperatorStreamClosed,
    OperatorStreamOpened,
    Persist,
    QuotaUpdated,
    ReservationRequested,
    SendEvent,
    SendToAgent,
    StreamClosed,
    SubscribeReceived,
    TeardownRequested,
    Tick,
    WeightUpdated,
)
from master.framework_book import FrameworkBook
from master.lifecycles import AgentPhase, FrameworkPhase
from master.maintenance_rules import MaintenanceRules
from master.offer_book import OfferBook
from master.operator_events import OperatorFeed
from master.read_model import FrameworkView, MaintenanceEvent
from master.records import FrameworkRec
from master.task_book import TaskBook
from protocol import agent_channel as ac
from protocol import mesos
from protocol.mesos.scheduler import OfferConstraints
from protocol.resources import ResourceError, Resources
from protocol.task_states import TaskState

__pure__ = True

__all__ = ["PING_BATCH", "MasterState", "StateConfig"]


class MasterState(CoreData):
    """The master's frameworks, agents and tasks (the records), and the dispatcher that hands
    each fact to the book of its subject."""

    def __init__(
        self,
        *,
        master_id: str,
        epoch: int,
        master_info: mesos.MasterInfo,
        allocator: AllocatorPort,
        config: StateConfig | None = None,
        now: float = 0.0,
    ) -> None:
        super().__init__(
            master_id=master_id, epoch=epoch, master_info=master_info, allocator=allocator, config=config, now=now
        )
        self.feed = OperatorFeed(self.frameworks)  # the operator event feed (master.operator_events)
        self.offer_book = OfferBook(self)
        self.task_book = TaskBook(self)
        self.agent_book = AgentBook(self)
        self.drain_book = DrainBook(self)
        self.framework_book = FrameworkBook(self)
        self.maintenance_rules = MaintenanceRules(self)
        self.accepts = AcceptBook(self)  # ACCEPT (master/accept.py)

    @property
    def operator_seq(self) -> int:
        """The seq of the last operator event published (a new subscriber's snapshot is at it)."""
        return self.feed.seq

    # --- recovery ------------------------------------------------------------------------------

    def recover(self, snap: ops.RegistrySnapshot, now: float) -> list[Effect]:
        """Load what the registry holds after a (re)start. Agents come back as RECOVERED and have
        ``agent_reregister_timeout`` to re-register; frameworks as RECOVERED with their deadline."""
        fx: list[Effect] = []
        self.agent_book.recover(snap.agents, snap.agent_principals, now)
        self.framework_book.recover(snap.frameworks, snap.removed_frameworks, now)
        for q in snap.quotas:
            try:
                self.offer_book.set_quota(q.role, Resources.parse(q.guarantee), Resources.parse(q.limit) if q.limit else None, now)
            except ResourceError:
                continue
        for w in snap.weights:
            self.offer_book.set_weight(w.role, w.weight, now)
        self.maintenance_rules.recover(snap.maintenance)
        self.housekeeping_at = self._housekeeping_scan(now)
        return fx

    # --- facts ---------------------------------------------------------------------------------

    def handle(self, event: MasterEvent, now: float) -> list[Effect]:
        fx: list[Effect] = []
        offers = self.offer_book
        offers.batch = {}
        try:
            self._handle(event, now, fx)
        finally:
            batch, offers.batch = offers.batch, None
        offers.flush(batch, fx)
        self._schedule_allocation(now)
        return fx

    def _handle(self, event: MasterEvent, now: float, fx: list[Effect]) -> None:
        match event:
            case SubscribeReceived():
                self.framework_book.subscribe(event, now, fx)
            case CallReceived():
                self._call(event, now, fx)
            case StreamClosed():
                self.framework_book.stream_closed(event.stream_id, now, fx)
            case AgentConnected():
                self.agent_book.register(event.conn_id, event.register, now, fx, event.principal, event.ip)
            case AgentMessageReceived():
                self.agent_book.message(event.conn_id, event.body, now, fx)
            case AgentMessagesReceived():
                message = self.agent_book.message
                for body in event.bodies:
                    message(event.conn_id, body, now, fx)
            case AgentConnectionLost():
                self.agent_book.conn_lost(event.conn_id, now, fx)
            case Tick():
                for conn_id, at in event.seen:
                    ag = self.agent_book.of_conn(conn_id)
                    if ag is not None:
                        ag.last_seen = max(ag.last_seen, min(at, now))
                self._tick(now, fx)
            case QuotaUpdated():
                fx.append(Persist((ops.QuotaSet(event.role, str(event.guarantee), str(event.limit) if event.limit else None),)))
                self.offer_book.set_quota(event.role, event.guarantee, event.limit, now, fx)
            case WeightUpdated():
                fx.append(Persist((ops.WeightSet(event.role, event.weight),)))
                self.offer_book.set_weight(event.role, event.weight, now, fx)
            case AgentDrainRequested():
                self.drain_book.request(event, now, fx)
            case ReservationRequested():
                self.agent_book.operator_reservation(event.agent_id, event.resources, event.reserve, now, fx)
            case TeardownRequested():
                fw = self.frameworks.get(event.framework_id)
                if fw is not None:
                    self.framework_book.remove(fw, now, "Framework torn down by the operator", fx)
            case OperatorStreamOpened() | OperatorStreamClosed():
                self.feed.stream(event.stream_id, isinstance(event, OperatorStreamOpened))
            case AclsReplaced():
                self.cfg = attrs.evolve(self.cfg, acls=event.acls)
            case MaintenanceScheduleUpdated() | MaintenanceStarted() | MaintenanceStopped():
                self.maintenance_rules.apply(event, now, fx)

    def _schedule_allocation(self, now: float) -> None:
        d = self.alloc.next_deadline(now)
        if d is not None and (self.allocation_due is None or d < self.allocation_due):
            self.allocation_due = d

    def next_deadline(self) -> float | None:
        """When the shell should deliver the next ``Tick`` (None: only on new events)."""
        ds: list[float] = []
        if self.allocation_due is not None:
            ds.append(self.allocation_due)
        window = self.agent_book.window_deadline()
        if window is not None:
            ds.append(window)
        if self.housekeeping_at is not None:
            ds.append(self.housekeeping_at)
        if self.inverse_due is not None:
            ds.append(self.inverse_due)
        return min(ds) if ds else None

    def housekeeping_due(self, now: float) -> bool:
        """Whether the next ``Tick`` will scan agents (then the shell attaches ``Tick.seen``)."""
        return self.housekeeping_at is not None and self.housekeeping_at <= now

    def _housekeeping_scan(self, now: float) -> float | None:
        """The earliest ping, ping-timeout, agent-GC or failover deadline (each book's own scan;
        done only when housekeeping is due, never per allocation tick). Capped at one
        ``ping_interval`` ahead so a deadline added without ``_touch`` is late by at most that."""
        agents = self.agent_book.next_deadline()
        frameworks = self.framework_book.next_deadline()
        if agents is None:
            if frameworks is None:
                return None
            first = frameworks
        else:
            first = agents if frameworks is None else min(agents, frameworks)
        return min(first, now + self.cfg.ping_interval)

    # --- what every book uses: sending, deadlines ----------------------------------------------

    def _send(self, fw: FrameworkRec, event: mesos.Event, fx: list[Effect]) -> None:
        if fw.stream_id is not None and fw.phase is FrameworkPhase.SUBSCRIBED:
            fx.append(SendEvent(fw.stream_id, event))
        else:
            self.counters["dropped_messages"] += 1

    def _to_agent(self, agent_id: str, body: ac.Body, fx: list[Effect]) -> bool:
        ag = self.agents.get(agent_id)
        if ag is None or ag.conn_id is None or not ag.reachable:
            self.counters["dropped_messages"] += 1
            return False
        fx.append(SendToAgent(ag.conn_id, body))
        return True

    def recovering(self) -> bool:
        """Agents from the registry may still come back (the re-registration window)."""
        return any(a.phase is AgentPhase.RECOVERED for a in self.agents.values())

    def _touch(self, deadline: float) -> None:
        """A new housekeeping deadline exists (an agent registered, a framework disconnected...)."""
        if self.housekeeping_at is None or deadline < self.housekeeping_at:
            self.housekeeping_at = deadline

    # --- scheduler calls and timers ------------------------------------------------------------

    def _call(self, ev: CallReceived, now: float, fx: list[Effect]) -> None:
        call = ev.call
        fw = self.frameworks.get(ev.framework_id)
        if fw is None or not fw.connected or fw.stream_id != ev.stream_id:
            # superseded connection (failover) or a call racing a teardown: ignored (R14) -- except
            # an ACKNOWLEDGE from the stream that just closed while no new one exists yet (a
            # client acknowledging events it read before the close; forwarding it is harmless)
            if (
                fw is not None
                and fw.phase is FrameworkPhase.DISCONNECTED
                and ev.stream_id == fw.last_stream_id
                and ev.call.type in (CT.ACKNOWLEDGE, CT.ACKNOWLEDGE_MANY)
            ):
                if ev.call.acknowledge is not None:
                    self.task_book.acknowledge(fw, ev.call.acknowledge, now, fx)
                if ev.call.acknowledge_many is not None:
                    for ack in ev.call.acknowledge_many.acknowledgements:
                        self.task_book.acknowledge(fw, ack, now, fx)
                return
            self.counters["dropped_messages"] += 1
            return
        t = call.type
        assert t is not None
        self.calls[t.value] = self.calls.get(t.value, 0) + 1
        match t:
            case CT.TEARDOWN:
                self.framework_book.remove(fw, now, "Framework torn down", fx)
            case CT.ACCEPT:
                assert call.accept is not None
                self.accepts.accept(fw, call.accept, now, fx)
            case CT.DECLINE:
                assert call.decline is not None
                refuse = call.decline.filters.refuse_seconds if call.decline.filters else None
                self.offer_book.alloc_event(
                    ae.OffersDeclined(
                        framework_id=fw.framework_id,
                        offer_ids=tuple(dict.fromkeys(o.value for o in call.decline.offer_ids)),
                        refuse_seconds=sane_refuse(refuse),
                    ),
                    now,
                    fx,
                )
            case CT.REVIVE:
                roles = call.revive.roles if call.revive else ()
                self.offer_book.alloc_event(ae.Revived(framework_id=fw.framework_id, roles=tuple(roles)), now, fx)
            case CT.SUPPRESS:
                roles = call.suppress.roles if call.suppress else ()
                self.offer_book.alloc_event(ae.Suppressed(framework_id=fw.framework_id, roles=tuple(roles)), now, fx)
            case CT.KILL:
                assert call.kill is not None
                self.task_book.kill(fw, call.kill, now, fx)
            case CT.SHUTDOWN:
                assert call.shutdown is not None
                self._to_agent(
                    call.shutdown.agent_id.value,
                    ac.ShutdownExecutor(framework_id=mesos.FrameworkID(fw.framework_id), executor_id=call.shutdown.executor_id),
                    fx,
                )
            case CT.ACKNOWLEDGE:
                assert call.acknowledge is not None
                self.task_book.acknowledge(fw, call.acknowledge, now, fx)
            case CT.ACKNOWLEDGE_MANY:
                # Agora: each entry exactly like one ACKNOWLEDGE (one not naming this framework's
                # task on that agent is ignored, the others are forwarded; the shell's coalescing
                # sends what goes to one agent within a loop tick as one frame)
                assert call.acknowledge_many is not None
                for ack in call.acknowledge_many.acknowledgements:
                    self.task_book.acknowledge(fw, ack, now, fx)
            case CT.RECONCILE:
                self.task_book.reconcile(fw, call.reconcile.tasks if call.reconcile else (), now, fx)
            case CT.MESSAGE:
                assert call.message is not None
                self._to_agent(
                    call.message.agent_id.value,
                    ac.FrameworkMessageMsg(
                        framework_id=mesos.FrameworkID(fw.framework_id),
                        executor_id=call.message.executor_id,
                        data=call.message.data,
                    ),
                    fx,
                )
            case CT.REQUEST:
                self.framework_book.request(fw, call.all_requests(), now, fx)
            case CT.UPDATE_FRAMEWORK:
                assert call.update_framework is not None
                self.framework_book.update(fw, call.update_framework, now, fx)
            case CT.ACCEPT_INVERSE_OFFERS:
                assert call.accept_inverse_offers is not None
                aio = call.accept_inverse_offers
                self.maintenance_rules.inverse_answer(fw, aio.inverse_offer_ids, True, aio.filters, now)
            case CT.DECLINE_INVERSE_OFFERS:
                assert call.decline_inverse_offers is not None
                dio = call.decline_inverse_offers
                self.maintenance_rules.inverse_answer(fw, dio.inverse_offer_ids, False, dio.filters, now)
            case _:
                # (RECONCILE_OPERATIONS and ACKNOWLEDGE_OPERATION_STATUS are refused by the
                # shell: master/unsupported.py)
                pass

    def _tick(self, now: float, fx: list[Effect]) -> None:
        due = self.housekeeping_at is not None and self.housekeeping_at <= now
        due = due or (self.recovery_deadline is not None and self.recovery_deadline <= now)
        if due:
            self._housekeeping(now, fx)
            self.housekeeping_at = self._housekeeping_scan(now)
        # allocation (batched: the deadline was set when the events arrived)
        alloc_due = self.allocation_due
        if alloc_due is not None and alloc_due <= now:
            self.allocation_due = None
            self.offer_book.decisions(self.alloc.allocate(now), now, fx)
            self.allocation_due = self.alloc.next_deadline(now)
            if self.agent_unavailability:  # an allocation pass also makes inverse offers (Mesos)
                self.maintenance_rules.make_inverse_offers(now, fx)
        if self.inverse_due is not None and self.inverse_due <= now:
            self.maintenance_rules.make_inverse_offers(now, fx)

    def _housekeeping(self, now: float, fx: list[Effect]) -> None:
        """The books' timers, in a fixed order: framework failover deadlines first, then the
        agents' (pings, ping timeouts, the re-registration window, unreachable agents' removal)."""
        self.framework_book.tick(now, fx)
        self.agent_book.tick(now, fx)

    # --- queries used by the edges (``master.read_model.CoreView``) ----------------------------------

    def task_counts(self) -> dict[TaskState, int]:
        return self.task_book.counts()

    def used_resources(self) -> Resources:
        return self.task_book.used_resources()

    def update_framework_problem(
        self, fw: FrameworkView, info: mesos.FrameworkInfo, constraints: OfferConstraints | None = None
    ) -> str | None:
        return self.framework_book.update_problem(fw, info, constraints)

    def reservation_problem(self, agent_id: str, resources: Resources, reserve: bool) -> str | None:
        return self.agent_book.reservation_problem(agent_id, resources, reserve)

    def maintenance_problem(self, ev: MaintenanceEvent) -> str | None:
        return self.maintenance_rules.problem(ev)

    def maintenance_status(self) -> mesos.ClusterStatus:
        return self.maintenance_rules.status()

    def maintenance_schedule(self) -> mesos.MaintenanceSchedule:
        return self.maintenance_rules.schedule()

    def inverse_offers_of(self, framework_id: str) -> tuple[mesos.InverseOffer, ...]:
        return self.maintenance_rules.inverse_offers_of(framework_id)

    def unavailability_of(self, agent_id: str) -> mesos.Unavailability | None:
        return self.maintenance_rules.unavailability_of(agent_id)
