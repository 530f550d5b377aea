"""``MasterState``: the master's pure core.

Facts come in (``master.events``: a call received, an agent registered, a status update, a ping
missed, time passed) and effects come out (send an event to a framework, a message to an agent,
persist a registry operation, close a connection). The allocator (``master.allocator``) is owned
by this core and driven synchronously; its decisions become OFFERS / RESCIND events and agent
REVOKE messages here.

Rules kept here (Mesos semantics, and the durability rules of ``docs/operations.md`` "Guarantees"):

* Semantic problems are never HTTP errors: an invalid ACCEPT produces TASK_ERROR / TASK_DROPPED /
  TASK_LOST updates (``source: SOURCE_MASTER``, no uuid; DROPPED only to PARTITION_AWARE
  frameworks).
* Write first, then act: a ``Persist`` effect precedes the effects that depend on it; the shell
  executes effects in order and awaits each ``Persist``.
* Every ACCEPT is validated against the allocator's offer book; a replayed ACCEPT launches
  nothing twice (offers are single use; task ids are unique per framework).
* Timers are deadlines: ``next_deadline()`` says when to deliver the next ``Tick``.

The rules are split by subject: framework lifecycle, scheduler calls, reconciliation and timers
here; agents in ``master.agents``; ACCEPT in ``master.accept``; shared records and helpers in
``master.core_base``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import attrs

from master import registry_ops as ops
from master.accept_checks import sane_refuse
from master.allocator import events as ae
from master.allocator.constraints import ConstraintError
from master.core_base import CT, EMPTY, TS, R, S, StateConfig, _attrs_from_string
from master.events import (
    AclsReplaced,
    AgentConnected,
    AgentConnectionLost,
    AgentDrainRequested,
    AgentMessageReceived,
    AgentMessagesReceived,
    CallReceived,
    CloseStream,
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
from master.lifecycles import AgentPhase, FrameworkPhase
from master.maintenance import MaintenanceBook
from master.maintenance_rules import MaintenanceRules
from master.offer_constraints import min_allocatable, offer_constraints
from master.read_model import FrameworkView
from master.records import AgentRec, DrainMode, FrameworkRec, TaskRec
from protocol import agent_channel as ac
from protocol import codec, mesos
from protocol.acls import subscribe_problem
from protocol.ids import new_framework_id, role_error
from protocol.mesos.scheduler import OfferConstraints
from protocol.resources import ResourceError, Resources
from protocol.task_states import for_framework

__pure__ = True

PING_BATCH = 0.1  # agents whose ping is due within this fraction of ping_interval are pinged together

__all__ = ["MasterState", "StateConfig"]


class MasterState(MaintenanceRules):
    """The master's frameworks, agents and tasks, and the rules that change them."""

    def recover(self, snap: ops.RegistrySnapshot, now: float) -> list[Effect]:
        """Load what the registry holds after a (re)start. Agents come back as RECOVERED and have
        ``agent_reregister_timeout`` to re-register; frameworks as RECOVERED with their deadline."""
        fx: list[Effect] = []
        for e in snap.agents:
            try:
                total = Resources.parse(e.resources)
                reservations = Resources.parse(e.reservations) if e.reservations else EMPTY
            except ResourceError:
                total, reservations = EMPTY, EMPTY
            phase = AgentPhase.UNREACHABLE if e.unreachable_since is not None else AgentPhase.RECOVERED
            self.agents[e.agent_id] = AgentRec(
                agent_id=e.agent_id,
                hostname=e.hostname,
                port=e.port,
                total=total,
                phase=phase,
                registered_time=e.registered_at,
                attributes=_attrs_from_string(e.attributes),
                unreachable_since=e.unreachable_since,
                reservations=reservations,
                draining=e.draining,
                drain=DrainMode(e.drain_max_grace, e.drain_mark_gone) if e.drain_kill else None,
                drained=e.drained,
            )
        if any(a.phase is AgentPhase.RECOVERED for a in self.agents.values()):
            self.recovery_deadline = now + self.cfg.agent_reregister_timeout
        grace = self.cfg.agent_reregister_timeout
        for f in snap.frameworks:
            try:
                info = codec.decode_msgpack(mesos.FrameworkInfo, f.info)
            except codec.DecodeError:
                continue
            deadline = f.deadline if f.deadline is not None else now + max(f.failover_timeout, grace)
            self.frameworks[f.framework_id] = self._new_framework(
                f.framework_id, info, FrameworkPhase.RECOVERED, f.registered_at, deadline
            )
        self.removed_framework_ids |= set(snap.removed_frameworks)
        self.agent_principals.update(snap.agent_principals)
        for q in snap.quotas:
            try:
                self._set_quota(q.role, Resources.parse(q.guarantee), Resources.parse(q.limit) if q.limit else None, now)
            except ResourceError:
                continue
        for w in snap.weights:
            self._set_weight(w.role, w.weight, now)
        try:
            self.maintenance = MaintenanceBook.decode(snap.maintenance)
        except (ValueError, KeyError, TypeError):
            self.maintenance = MaintenanceBook()  # (never written so: only a damaged registry)
        self.housekeeping_at = self._housekeeping_scan(now)
        return fx

    # --- public entry points --------------------------------------------------------------------

    def handle(self, event: MasterEvent, now: float) -> list[Effect]:
        fx: list[Effect] = []
        self._offer_batch = {}
        try:
            self._handle(event, now, fx)
        finally:
            batch, self._offer_batch = self._offer_batch, None
        self._flush_offers(batch, fx)
        self._schedule_allocation(now)
        return fx

    def _handle(self, event: MasterEvent, now: float, fx: list[Effect]) -> None:
        match event:
            case SubscribeReceived():
                self._subscribe(event, now, fx)
            case CallReceived():
                self._call(event, now, fx)
            case StreamClosed():
                self._stream_closed(event.stream_id, now, fx)
            case AgentConnected():
                self._agent_register(event.conn_id, event.register, now, fx, event.principal, event.ip)
            case AgentMessageReceived():
                self._agent_message(event.conn_id, event.body, now, fx)
            case AgentMessagesReceived():
                for body in event.bodies:
                    self._agent_message(event.conn_id, body, now, fx)
            case AgentConnectionLost():
                self._agent_conn_lost(event.conn_id, now, fx)
            case Tick():
                for conn_id, at in event.seen:
                    ag = self._agent_of_conn(conn_id)
                    if ag is not None:
                        ag.last_seen = max(ag.last_seen, min(at, now))
                self._tick(now, fx)
            case QuotaUpdated():
                fx.append(Persist((ops.QuotaSet(event.role, str(event.guarantee), str(event.limit) if event.limit else None),)))
                self._set_quota(event.role, event.guarantee, event.limit, now, fx)
            case WeightUpdated():
                fx.append(Persist((ops.WeightSet(event.role, event.weight),)))
                self._set_weight(event.role, event.weight, now, fx)
            case AgentDrainRequested():
                self._drain(event, now, fx)
            case ReservationRequested():
                self._operator_reservation(event.agent_id, event.resources, event.reserve, now, fx)
            case TeardownRequested():
                fw = self.frameworks.get(event.framework_id)
                if fw is not None:
                    self._remove_framework(fw, now, "Framework torn down by the operator", fx)
            case OperatorStreamOpened() | OperatorStreamClosed():
                self.feed.stream(event.stream_id, isinstance(event, OperatorStreamOpened))
            case AclsReplaced():
                self.cfg = attrs.evolve(self.cfg, acls=event.acls)
            case MaintenanceScheduleUpdated() | MaintenanceStarted() | MaintenanceStopped():
                self._maintenance(event, now, fx)

    def _schedule_allocation(self, now: float) -> None:
        d = self.alloc.next_deadline(now)
        if d is not None and (self.allocation_due is None or d < self.allocation_due):
            self.allocation_due = d

    def next_deadline(self) -> float | None:
        """When the shell should deliver the next ``Tick`` (None: only on new events)."""
        ds: list[float] = []
        if self.allocation_due is not None:
            ds.append(self.allocation_due)
        if self.recovery_deadline is not None:
            ds.append(max(self.recovery_deadline, self.removal_bucket.available_at()))
        if self.housekeeping_at is not None:
            ds.append(self.housekeeping_at)
        if self.inverse_due is not None:
            ds.append(self.inverse_due)
        return min(ds) if ds else None

    def housekeeping_due(self, now: float) -> bool:
        """Whether the next ``Tick`` will scan agents (then the shell attaches ``Tick.seen``)."""
        return self.housekeeping_at is not None and self.housekeeping_at <= now

    def _housekeeping_scan(self, now: float) -> float | None:
        """The earliest ping, ping-timeout, failover or agent-GC deadline (one pass over agents
        and frameworks; done only when housekeeping is due, never per allocation tick). Capped at
        one ``ping_interval`` ahead so a deadline added without ``_touch`` is late by at most that."""
        ds: list[float] = []
        removal_ok = self.removal_bucket.available_at()  # markings are rate limited
        for ag in self.agents.values():
            if ag.reachable:
                if ag.conn_id is not None:
                    ds.append(ag.next_ping)
                ds.append(max(ag.last_seen + self.cfg.ping_timeout, removal_ok))
            elif ag.phase is AgentPhase.UNREACHABLE and ag.unreachable_since is not None:
                ds.append(ag.unreachable_since + self.cfg.unreachable_gc)
        for fw in self.frameworks.values():
            if fw.deadline is not None and fw.phase in (FrameworkPhase.DISCONNECTED, FrameworkPhase.RECOVERED):
                ds.append(fw.deadline)
        if not ds:
            return None
        return min(min(ds), now + self.cfg.ping_interval)

    # --- queries used by the shells --------------------------------------------------------------

    def _subscribe_error(self, stream_id: str, message: str, fx: list[Effect]) -> None:
        fx.append(SendEvent(stream_id, mesos.Event.make_error(message)))
        fx.append(CloseStream(stream_id, message))

    def _subscribe(self, ev: SubscribeReceived, now: float, fx: list[Effect]) -> None:
        info = ev.subscribe.framework_info
        self.calls["SUBSCRIBE"] = self.calls.get("SUBSCRIBE", 0) + 1
        err = self._check_framework_info(info)
        if err:
            self._subscribe_error(ev.stream_id, err, fx)
            return
        fid = info.id.value if info.id is not None else None
        if fid is not None and fid in self.removed_framework_ids:
            self._subscribe_error(ev.stream_id, f"Framework {fid} has been removed", fx)
            return
        fw = self.frameworks.get(fid) if fid is not None else None
        problem = subscribe_problem(
            self.cfg.acls, self.cfg.authenticate_frameworks, ev.authenticated, info.principal,
            self._roles_of(info), fw.principal if fw is not None else None, fw is not None,
        )
        if problem is not None:
            self.unauthorized += 1
            self._subscribe_error(ev.stream_id, problem, fx)
            return
        if fw is not None and fw.principal != info.principal and fw.phase is not FrameworkPhase.RECOVERED:
            self._subscribe_error(ev.stream_id, "Framework principal changed on re-subscription", fx)
            return
        try:
            constraints = offer_constraints(ev.subscribe.offer_constraints, self._roles_of(info))
        except ConstraintError as e:
            self._subscribe_error(ev.stream_id, str(e), fx)
            return
        if fid is None:
            fid = new_framework_id(self.master_id, self.framework_seq)
            self.framework_seq += 1
        info = attrs.evolve(info, id=mesos.FrameworkID(fid))
        failover = float(info.failover_timeout or 0.0)
        fx.append(Persist((ops.FrameworkAdded(fid, codec.encode_msgpack(info), failover, now),)))
        added = fw is None
        if fw is None:
            fw = self._new_framework(fid, info, FrameworkPhase.SUBSCRIBED, now)
            self.frameworks[fid] = fw
        else:
            if fw.stream_id is not None:
                # failover: the superseded stream is closed; its calls no longer match
                fw.last_stream_id = fw.stream_id
                self.streams.pop(fw.stream_id, None)
                fx.append(CloseStream(fw.stream_id, "framework failed over to a new connection"))
            fresh = self._new_framework(fid, info, FrameworkPhase.SUBSCRIBED, fw.registered_time)
            fw.info, fw.roles, fw.capabilities, fw.principal = fresh.info, fresh.roles, fresh.capabilities, fresh.principal
            fw.move(FrameworkPhase.SUBSCRIBED)
            fw.reregistered_time = now
            fw.deadline = None
        fw.stream_id = ev.stream_id
        self.streams[ev.stream_id] = fid
        if self.agent_unavailability:
            # inverse offers sent to an earlier stream are void: the new one gets them again
            self._inverse_framework_gone(fw, forget=False)
            self._inverse_soon(now)
        if added:
            self.feed.framework_added(fw, fx)
        else:
            self.feed.framework_updated(fw, fx)
        fx.append(
            SendEvent(
                ev.stream_id,
                mesos.Event.make_subscribed(mesos.FrameworkID(fid), self.master_info, self.cfg.heartbeat_interval),
            )
        )
        fx.append(SendEvent(ev.stream_id, mesos.Event.make_heartbeat()))
        # (re-)adding updates roles/capabilities and activates it in the allocator; allocations of
        # tasks agents reported before the framework came back were recovered at re-registration
        self._alloc_event(
            ae.FrameworkAdded(
                framework_id=fid,
                roles=fw.roles,
                capabilities=fw.capabilities,
                active=True,
                suppressed_roles=frozenset(ev.subscribe.suppressed_roles),
                offer_constraints=constraints,
                min_allocatable=min_allocatable(info.offer_filters),
            ),
            now,
            fx,
        )

    def _check_framework_info(self, info: mesos.FrameworkInfo) -> str | None:
        multi = any(c.type is mesos.CapabilityType.MULTI_ROLE for c in info.capabilities)
        if multi and info.role is not None and info.roles:
            return "'FrameworkInfo.role' must not be set when 'FrameworkInfo.roles' is used (MULTI_ROLE)"
        if not multi and info.roles:
            return "'FrameworkInfo.roles' requires the MULTI_ROLE capability"
        for role in (info.roles if multi else (info.role or "*",)):
            err = role_error(role)
            if err:
                return f"invalid role: {err}"
        if len(set(info.roles)) != len(info.roles):
            return "'FrameworkInfo.roles' contains duplicates"
        try:
            min_allocatable(info.offer_filters)
        except ValueError as e:
            return f"'FrameworkInfo.offer_filters': {e}"
        ft = info.failover_timeout
        if ft is not None and (not math.isfinite(ft) or ft < 0):
            return "'FrameworkInfo.failover_timeout' must be a finite non-negative number"
        if info.id is not None:
            from protocol.ids import valid_path_id

            if not valid_path_id(info.id.value):
                return "invalid framework ID"
        return None

    def _stream_closed(self, stream_id: str, now: float, fx: list[Effect]) -> None:
        fid = self.streams.pop(stream_id, None)
        if fid is None:
            return
        fw = self.frameworks.get(fid)
        if fw is None or fw.stream_id != stream_id or fw.phase is not FrameworkPhase.SUBSCRIBED:
            return
        fw.move(FrameworkPhase.DISCONNECTED)
        fw.last_stream_id, fw.stream_id = fw.stream_id, None
        fw.unregistered_time = now
        fw.deadline = now + fw.failover_timeout
        self._inverse_framework_gone(fw, forget=False)
        self._touch(fw.deadline)
        fx.append(Persist((ops.FrameworkDisconnected(fid, fw.deadline),)))
        self.feed.framework_updated(fw, fx)
        self._alloc_event(ae.FrameworkDeactivated(framework_id=fid), now, fx)
        if _never_ran(fw):
            self._trim_abandoned(fw.principal, now, fx)

    def _trim_abandoned(self, principal: str | None, now: float, fx: list[Effect]) -> None:
        """Abandoned subscriptions (disconnected, never ran a task: nothing to fail over to) keep
        their ``failover_timeout`` as in Mesos, but at most ``abandoned_frameworks_per_principal``
        of them per principal (or per anonymous client) are kept: beyond that the oldest is
        removed, so a client subscribing and walking away repeatedly cannot keep hundreds of
        frameworks listed for their whole failover timeout."""
        cap = self.cfg.abandoned_frameworks_per_principal
        idle = [
            f for f in self.frameworks.values()
            if f.phase is FrameworkPhase.DISCONNECTED and f.principal == principal and _never_ran(f)
        ]
        if len(idle) <= cap:
            return
        idle.sort(key=lambda f: (f.unregistered_time or 0.0, f.framework_id))
        for f in idle[: len(idle) - cap]:
            self._remove_framework(
                f, now, f"Framework abandoned: disconnected without having run a task, beyond the {cap} kept per principal", fx,
            )

    def _remove_framework(self, fw: FrameworkRec, now: float, reason: str, fx: list[Effect]) -> None:
        fid = fw.framework_id
        fx.append(Persist((ops.FrameworkRemoved(fid, now),)))
        if fw.stream_id is not None:
            self.streams.pop(fw.stream_id, None)
            fx.append(CloseStream(fw.stream_id, reason))
            fw.stream_id = None
        fw.move(FrameworkPhase.REMOVED)
        fw.unregistered_time = now
        fw.deadline = None
        self._inverse_framework_gone(fw, forget=True)
        agents = {t.agent_id for t in fw.tasks.values()} | {aid for (aid, _) in fw.executors}
        for aid in sorted(agents):
            self._to_agent(aid, ac.ShutdownFramework(framework_id=mesos.FrameworkID(fid)), fx)
        for task in list(fw.tasks.values()):
            self._finish_task(
                fw, task, TS.TASK_KILLED, now, fx, recover=False, reason=R.REASON_FRAMEWORK_REMOVED, message=reason
            )
        fw.executors.clear()
        self._alloc_event(ae.FrameworkRemoved(framework_id=fid), now, fx)
        del self.frameworks[fid]
        self.removed_framework_ids.add(fid)
        self.completed_frameworks.append(fw)
        self.counters["frameworks_removed"] += 1
        self.feed.framework_removed(fw, fx)
        self._drain_check_all(now, fx)  # its tasks ended: a draining agent may be drained now

    # --- scheduler calls ------------------------------------------------------------------------

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
                    self._acknowledge(fw, ev.call.acknowledge, now, fx)
                if ev.call.acknowledge_many is not None:
                    for ack in ev.call.acknowledge_many.acknowledgements:
                        self._acknowledge(fw, ack, now, fx)
                return
            self.counters["dropped_messages"] += 1
            return
        t = call.type
        assert t is not None
        self.calls[t.value] = self.calls.get(t.value, 0) + 1
        match t:
            case CT.TEARDOWN:
                self._remove_framework(fw, now, "Framework torn down", fx)
            case CT.ACCEPT:
                assert call.accept is not None
                self.accepts.accept(fw, call.accept, now, fx)
            case CT.DECLINE:
                assert call.decline is not None
                refuse = call.decline.filters.refuse_seconds if call.decline.filters else None
                self._alloc_event(
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
                self._alloc_event(ae.Revived(framework_id=fw.framework_id, roles=tuple(roles)), now, fx)
            case CT.SUPPRESS:
                roles = call.suppress.roles if call.suppress else ()
                self._alloc_event(ae.Suppressed(framework_id=fw.framework_id, roles=tuple(roles)), now, fx)
            case CT.KILL:
                assert call.kill is not None
                self._kill(fw, call.kill, now, fx)
            case CT.SHUTDOWN:
                assert call.shutdown is not None
                self._to_agent(
                    call.shutdown.agent_id.value,
                    ac.ShutdownExecutor(framework_id=mesos.FrameworkID(fw.framework_id), executor_id=call.shutdown.executor_id),
                    fx,
                )
            case CT.ACKNOWLEDGE:
                assert call.acknowledge is not None
                self._acknowledge(fw, call.acknowledge, now, fx)
            case CT.ACKNOWLEDGE_MANY:
                # Agora: each entry exactly like one ACKNOWLEDGE (one not naming this framework's
                # task on that agent is ignored, the others are forwarded; the shell's coalescing
                # sends what goes to one agent within a loop tick as one frame)
                assert call.acknowledge_many is not None
                for ack in call.acknowledge_many.acknowledgements:
                    self._acknowledge(fw, ack, now, fx)
            case CT.RECONCILE:
                self._reconcile(fw, call.reconcile.tasks if call.reconcile else (), now, fx)
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
                self._request(fw, call.all_requests(), now, fx)
            case CT.UPDATE_FRAMEWORK:
                assert call.update_framework is not None
                self._update_framework(fw, call.update_framework, now, fx)
            case CT.ACCEPT_INVERSE_OFFERS:
                assert call.accept_inverse_offers is not None
                aio = call.accept_inverse_offers
                self._inverse_answer(fw, aio.inverse_offer_ids, True, aio.filters, now)
            case CT.DECLINE_INVERSE_OFFERS:
                assert call.decline_inverse_offers is not None
                dio = call.decline_inverse_offers
                self._inverse_answer(fw, dio.inverse_offer_ids, False, dio.filters, now)
            case _:
                # (RECONCILE_OPERATIONS and ACKNOWLEDGE_OPERATION_STATUS are refused by the
                # shell: master/unsupported.py)
                pass

    def update_framework_problem(
        self, fw: FrameworkView, info: mesos.FrameworkInfo, constraints: OfferConstraints | None = None
    ) -> str | None:
        """Why an UPDATE_FRAMEWORK cannot apply ``info`` and ``constraints`` (Mesos' rules: a valid
        FrameworkInfo whose principal, user and checkpoint are the ones it subscribed with, offer
        constraints the allocator can evaluate for its roles), or None."""
        err = self._check_framework_info(info)
        if err:
            return err
        try:
            offer_constraints(constraints, self._roles_of(info))
        except ConstraintError as e:
            return str(e)
        old = fw.info
        for name in ("principal", "user", "checkpoint"):
            if getattr(info, name) != getattr(old, name):
                return f"Updating 'FrameworkInfo.{name}' is unsupported"
        roles = set(self._roles_of(info))
        problem = subscribe_problem(
            self.cfg.acls, self.cfg.authenticate_frameworks, fw.principal, info.principal, tuple(sorted(roles)),
            fw.principal, True,
        )
        return problem

    def _update_framework(self, fw: FrameworkRec, uf: mesos.UpdateFramework, now: float, fx: list[Effect]) -> None:
        """UPDATE_FRAMEWORK: the new FrameworkInfo (roles, capabilities, name, failover timeout,
        labels, ...) and suppressed roles take effect without re-subscribing (the shell checked
        ``update_framework_problem``)."""
        fid = fw.framework_id
        info = attrs.evolve(uf.framework_info, id=mesos.FrameworkID(fid))
        try:
            constraints = offer_constraints(uf.offer_constraints, self._roles_of(info))
        except ConstraintError:
            return  # the shell refuses such a call (``update_framework_problem``)
        fresh = self._new_framework(fid, info, FrameworkPhase.SUBSCRIBED, fw.registered_time)
        fw.info, fw.roles, fw.capabilities = fresh.info, fresh.roles, fresh.capabilities
        fx.append(Persist((ops.FrameworkAdded(fid, codec.encode_msgpack(info), float(info.failover_timeout or 0.0), now),)))
        self.feed.framework_updated(fw, fx)
        self._alloc_event(
            ae.FrameworkAdded(
                framework_id=fid, roles=fw.roles, capabilities=fw.capabilities, active=True,
                suppressed_roles=frozenset(uf.suppressed_roles),
                offer_constraints=constraints,
                min_allocatable=min_allocatable(info.offer_filters),
            ),
            now,
            fx,
        )

    def _request(self, fw: FrameworkRec, requests: Iterable[mesos.Request], now: float, fx: list[Effect]) -> None:
        demands: list[ae.Demand] = []
        for r in requests:
            try:
                shape = Resources.from_mesos(r.resources)
            except (ResourceError, TypeError, ValueError):
                continue
            if shape.is_empty():
                continue
            count = r.count if r.count is not None and 0 < r.count <= 100_000 else 1
            ports = r.ports if isinstance(r.ports, int) and 0 < r.ports <= 65_535 else 0
            demands.append(
                ae.Demand(
                    shape=shape,
                    count=count,
                    gang_id=r.gang_id,
                    gang_min=r.gang_min,
                    revocable_ok=bool(r.revocable_ok),
                    priority=r.priority or 0,
                    role=r.role if r.role in fw.roles else None,
                    ports=ports,
                )
            )
        self._alloc_event(ae.DemandDeclared(framework_id=fw.framework_id, demands=tuple(demands)), now, fx)

    def _kill(self, fw: FrameworkRec, kill: mesos.Kill, now: float, fx: list[Effect]) -> None:
        tid = kill.task_id.value
        task = fw.tasks.get(tid)
        if task is None:
            done = fw.finished(tid)
            if done is not None:
                return  # already terminal; the framework has (or will get) its terminal update
            agent_id = kill.agent_id.value if kill.agent_id else None
            if self._unknown_task_pending(agent_id):
                return  # its agent may still come back: no answer (Mesos)
            self._master_update(fw, tid, TS.TASK_UNKNOWN, R.REASON_RECONCILIATION, "Task unknown to the master", now, fx, agent_id)
            return
        if task.state is TS.TASK_UNREACHABLE:
            return
        grace = None
        if kill.kill_policy is not None and kill.kill_policy.grace_period is not None:
            grace = max(0.0, kill.kill_policy.grace_period.nanoseconds / 1e9)
        self._to_agent(
            task.agent_id,
            ac.KillTask(framework_id=mesos.FrameworkID(fw.framework_id), task_id=kill.task_id, grace_seconds=grace),
            fx,
        )

    def _acknowledge(self, fw: FrameworkRec, ack: mesos.Acknowledge, now: float, fx: list[Effect]) -> None:
        tid = ack.task_id.value
        task = fw.tasks.get(tid) or fw.finished(tid)
        if task is None or task.agent_id != ack.agent_id.value:
            self.counters["dropped_messages"] += 1
            return  # not this framework's task on that agent (S17): ignored
        if ack.uuid == task.status_update_uuid:
            task.acked_uuid = task.status_update_uuid  # (the object already held, not a copy)
            # its last update is acknowledged: forgotten now, like an evicted completed task
            fw.awaiting_ack.pop(tid, None)
        self._to_agent(
            task.agent_id,
            ac.AcknowledgeMsg(framework_id=fw.info.id or mesos.FrameworkID(fw.framework_id), task_id=ack.task_id, uuid=ack.uuid),
            fx,
        )
        self._drain_check(task.agent_id, now, fx)  # a draining agent waits for its acknowledgements

    def _reconcile(self, fw: FrameworkRec, tasks: Iterable[mesos.ReconcileTask], now: float, fx: list[Effect]) -> None:
        wanted = list(tasks)
        if not wanted:  # implicit: every task the master knows for this framework
            for task in fw.tasks.values():
                self._reconcile_known(fw, task, now, fx)
            return
        for rt in wanted:
            tid = rt.task_id.value
            known = fw.tasks.get(tid) or fw.finished(tid)
            if known is not None:
                self._reconcile_known(fw, known, now, fx)
                continue
            agent_id = rt.agent_id.value if rt.agent_id else None
            if self._unknown_task_pending(agent_id):
                continue
            ag = self.agents.get(agent_id) if agent_id else None
            if ag is not None and ag.phase is AgentPhase.UNREACHABLE:
                state = TS.TASK_UNREACHABLE
            elif ag is not None and ag.reachable:
                state = TS.TASK_GONE
            else:
                state = TS.TASK_UNKNOWN
            self._master_update(fw, tid, state, R.REASON_RECONCILIATION, "Reconciliation: task unknown", now, fx, agent_id)

    def _reconcile_known(self, fw: FrameworkRec, task: TaskRec, now: float, fx: list[Effect]) -> None:
        latest = task.latest
        status = mesos.TaskStatus(
            task_id=mesos.TaskID(task.task_id),
            state=for_framework(task.state, fw.partition_aware),
            message="Reconciliation: latest task state",
            source=S.SOURCE_MASTER,
            reason=R.REASON_RECONCILIATION,
            agent_id=mesos.AgentID(task.agent_id),
            executor_id=mesos.ExecutorID(task.executor_id) if task.executor_id else None,
            timestamp=now,
            healthy=latest.healthy if latest else None,
            data=latest.data if latest else None,
            labels=latest.labels if latest else None,
            container_status=latest.container_status if latest else None,
        )
        self._send(fw, mesos.Event.make_update(status), fx)

    # --- ACCEPT -----------------------------------------------------------------------------------

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
            self._decisions(self.alloc.allocate(now), now, fx)
            self.allocation_due = self.alloc.next_deadline(now)
            if self.agent_unavailability:  # an allocation pass also makes inverse offers (Mesos)
                self._inverse_offers(now, fx)
        if self.inverse_due is not None and self.inverse_due <= now:
            self._inverse_offers(now, fx)

    def _housekeeping(self, now: float, fx: list[Effect]) -> None:
        # framework failover deadlines
        for fw in list(self.frameworks.values()):
            if (
                fw.deadline is not None
                and fw.deadline <= now
                and fw.phase in (FrameworkPhase.DISCONNECTED, FrameworkPhase.RECOVERED)
            ):
                self._remove_framework(fw, now, "Framework failover timeout", fx)
        # pings and ping timeouts; agents due within PING_BATCH of a ping interval are pinged now
        # too, so one scan serves them all (pings of agents that registered over a few seconds
        # would otherwise each cost a scan of every agent)
        ping_by = now + self.cfg.ping_interval * PING_BATCH
        for ag in self.agents.values():
            if not ag.reachable:
                continue
            if ag.conn_id is not None and ping_by >= ag.next_ping:
                ag.ping_seq += 1
                ag.next_ping = now + self.cfg.ping_interval
                fx.append(SendToAgent(ag.conn_id, ac.Ping(seq=ag.ping_seq)))
        overdue = [
            ag for ag in self.agents.values() if ag.reachable and now - ag.last_seen >= self.cfg.ping_timeout
        ]
        if self.recovery_deadline is not None and now >= self.recovery_deadline:
            overdue += [ag for ag in self.agents.values() if ag.phase is AgentPhase.RECOVERED]
        for ag in sorted(overdue, key=lambda a: a.last_seen):
            if not self.removal_bucket.take(now):
                self.counters["slave_unreachable_scheduled"] += 1
                break
            self._mark_unreachable(ag, now, "agent missed its pings" if ag.reachable else "agent did not re-register", fx)
        if self.recovery_deadline is not None and not self.recovering():
            self.recovery_deadline = None
        # unreachable agents that never came back are removed for good (Mesos registry_max_agent_age)
        for ag in list(self.agents.values()):
            if (
                ag.phase is AgentPhase.UNREACHABLE
                and ag.unreachable_since is not None
                and ag.unreachable_since + self.cfg.unreachable_gc <= now
            ):
                self._remove_agent(ag, now, fx)


def _never_ran(fw: FrameworkRec) -> bool:
    """The framework has no task and never had one the master remembers, nor an executor."""
    return not fw.tasks and not fw.completed and not fw.awaiting_ack and not fw.executors
