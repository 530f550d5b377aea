"""``MasterState``: the master's pure core.

Facts come in (``master.events``: a call received, an agent registered, a status update, a ping
missed, time passed) and effects come out (send an event to a framework, a message to an agent,
persist a registry operation, close a connection). The allocator (``master.allocator``) is owned
by this core and driven synchronously; its decisions become OFFERS / RESCIND events and agent
REVOKE messages here.

Rules kept here (see MESOS_COMPAT.md and RELIABILITY.md):

* Semantic problems are never HTTP errors: an invalid ACCEPT produces TASK_ERROR / TASK_DROPPED /
  TASK_LOST updates (``source: SOURCE_MASTER``, no uuid; DROPPED only to PARTITION_AWARE
  frameworks).
* Write first, then act: a ``Persist`` effect precedes the effects that depend on it; the shell
  executes effects in order and awaits each ``Persist``.
* Every ACCEPT is validated against the allocator's offer book; a replayed ACCEPT launches
  nothing twice (offers are single use; task ids are unique per framework).
* Timers are deadlines: ``next_deadline()`` says when to deliver the next ``Tick``.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable
from typing import Any

import attrs

from master import registry_ops as ops
from master.alloc_port import AllocatorPort
from master.allocator import decisions as ad
from master.allocator import events as ae
from master.allocator.allocator import AllocatorError
from master.events import (
    AgentConnected,
    AgentConnectionLost,
    AgentDrainRequested,
    AgentMessageReceived,
    CallReceived,
    CloseAgent,
    CloseStream,
    Effect,
    MasterEvent,
    Persist,
    QuotaUpdated,
    SendEvent,
    SendToAgent,
    StreamClosed,
    SubscribeReceived,
    TeardownRequested,
    Tick,
    WeightUpdated,
)
from master.lifecycles import AgentPhase, FrameworkPhase, check_agent, check_framework
from master.ratelimit import TokenBucket
from master.records import AgentRec, FrameworkRec, TaskRec
from master.validation import check_executor, check_task, task_resources
from protocol import agent_channel as ac
from protocol import codec, mesos
from protocol.ids import new_agent_id, new_framework_id, role_error
from protocol.resources import ResourceError, Resources, parse_attributes
from protocol.task_states import TaskState, can_transition, for_framework, is_terminal

__pure__ = True

TS = TaskState
S = mesos.Source
R = mesos.Reason
CT = mesos.CallType
MT = ac.MessageType
EMPTY = Resources()
OFFER_PROBLEMS = frozenset(
    {
        ad.RejectCode.UNKNOWN_FRAMEWORK,
        ad.RejectCode.NO_OFFERS,
        ad.RejectCode.UNKNOWN_OFFER,
        ad.RejectCode.NOT_OWNER,
        ad.RejectCode.DUPLICATE_OFFER,
        ad.RejectCode.DIFFERENT_AGENTS,
    }
)


@attrs.frozen
class StateConfig:
    heartbeat_interval: float = 15.0
    ping_interval: float = 5.0
    ping_timeout: float = 15.0
    agent_reregister_timeout: float = 60.0
    agent_removal_rate: float = 1.0
    agent_removal_burst: int = 5
    allocation_batch: float = 0.005
    completed_tasks_per_framework: int = 1000
    completed_frameworks: int = 50
    unreachable_gc: float = 14 * 24 * 3600.0  # an unreachable agent is removed for good after this


def _attr_dict(attrs_: Iterable[mesos.Attribute]) -> dict[str, str | float]:
    out: dict[str, str | float] = {}
    for a in attrs_:
        if a.scalar is not None:
            out[a.name] = float(a.scalar.value)
        elif a.text is not None:
            out[a.name] = a.text.value
        elif a.set is not None:
            out[a.name] = "{" + ",".join(a.set.item) + "}"
        elif a.ranges is not None:
            out[a.name] = "[" + ",".join(f"{r.begin}-{r.end}" for r in a.ranges.range) + "]"
    return out


def _attrs_string(attrs_: Iterable[mesos.Attribute]) -> str:
    return ";".join(f"{k}:{v}" for k, v in _attr_dict(attrs_).items())


def _attrs_from_string(text: str) -> tuple[mesos.Attribute, ...]:
    if not text:
        return ()
    try:
        parsed = parse_attributes(text)
    except (ValueError, TypeError):
        return ()
    out: list[mesos.Attribute] = []
    for k, v in parsed.items():
        if isinstance(v, float):
            out.append(mesos.Attribute(name=k, type=mesos.ValueType.SCALAR, scalar=mesos.Scalar(v)))
        else:
            out.append(mesos.Attribute(name=k, type=mesos.ValueType.TEXT, text=mesos.Text(str(v))))
    return tuple(out)


class MasterState:
    """The master's frameworks, agents and tasks, and the rules that change them."""

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
        self.master_id = master_id
        self.epoch = epoch
        self.master_info = master_info
        self.alloc = allocator
        self.cfg = config or StateConfig()
        self.start_time = now
        self.frameworks: dict[str, FrameworkRec] = {}
        self.completed_frameworks: deque[FrameworkRec] = deque(maxlen=self.cfg.completed_frameworks)
        self.removed_framework_ids: set[str] = set()
        self.removed_agent_ids: set[str] = set()  # removed for good; their tasks were reported GONE
        self.agents: dict[str, AgentRec] = {}
        self.conns: dict[int, str] = {}  # agent connection -> agent id
        self.streams: dict[str, str] = {}  # stream id -> framework id
        self.framework_seq = 0
        self.agent_seq = 0
        self.recovery_deadline: float | None = None
        self.removal_bucket = TokenBucket(self.cfg.agent_removal_rate, float(self.cfg.agent_removal_burst))
        self.allocation_due: float | None = now
        self.quotas: dict[str, tuple[Resources, Resources | None]] = {}
        self.weights: dict[str, float] = {}
        self.counters: dict[str, int] = {
            "valid_status_updates": 0,
            "invalid_status_updates": 0,
            "slave_registrations": 0,
            "slave_reregistrations": 0,
            "slave_removals": 0,
            "slave_unreachable_scheduled": 0,
            "dropped_messages": 0,
            "tasks_error": 0,
            "tasks_dropped": 0,
            "tasks_lost": 0,
            "frameworks_removed": 0,
            "invalid_offers": 0,
        }
        self.calls: dict[str, int] = {}
        self.allocator_errors: list[str] = []
        self.finished_counts: dict[TaskState, int] = {}

    # --- recovery -------------------------------------------------------------------------------

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
        for q in snap.quotas:
            try:
                self._set_quota(q.role, Resources.parse(q.guarantee), Resources.parse(q.limit) if q.limit else None, now)
            except ResourceError:
                continue
        for w in snap.weights:
            self._set_weight(w.role, w.weight, now)
        return fx

    # --- public entry points --------------------------------------------------------------------

    def handle(self, event: MasterEvent, now: float) -> list[Effect]:
        fx: list[Effect] = []
        match event:
            case SubscribeReceived():
                self._subscribe(event, now, fx)
            case CallReceived():
                self._call(event, now, fx)
            case StreamClosed():
                self._stream_closed(event.stream_id, now, fx)
            case AgentConnected():
                self._agent_register(event.conn_id, event.register, now, fx)
            case AgentMessageReceived():
                self._agent_message(event.conn_id, event.message, now, fx)
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
                self._drain(event.agent_id, event.draining, now, fx)
            case TeardownRequested():
                fw = self.frameworks.get(event.framework_id)
                if fw is not None:
                    self._remove_framework(fw, now, "Framework torn down by the operator", fx)
        self._schedule_allocation(now)
        return fx

    def _schedule_allocation(self, now: float) -> None:
        d = self.alloc.next_deadline(now)
        if d is not None and (self.allocation_due is None or d < self.allocation_due):
            self.allocation_due = d

    def next_deadline(self) -> float | None:
        ds: list[float] = []
        if self.allocation_due is not None:
            ds.append(self.allocation_due)
        removal_ok = self.removal_bucket.available_at()  # markings are rate limited
        if self.recovery_deadline is not None:
            ds.append(max(self.recovery_deadline, removal_ok))
        for ag in self.agents.values():
            if ag.reachable:
                if ag.conn_id is not None:
                    ds.append(ag.next_ping)
                ds.append(max(ag.last_seen + self.cfg.ping_timeout, removal_ok))
        for fw in self.frameworks.values():
            if fw.deadline is not None and fw.phase in (FrameworkPhase.DISCONNECTED, FrameworkPhase.RECOVERED):
                ds.append(fw.deadline)
        for ag in self.agents.values():
            if ag.phase is AgentPhase.UNREACHABLE and ag.unreachable_since is not None:
                ds.append(ag.unreachable_since + self.cfg.unreachable_gc)
        return min(ds) if ds else None

    # --- queries used by the shells --------------------------------------------------------------

    def framework_of_stream(self, stream_id: str) -> str | None:
        return self.streams.get(stream_id)

    def recovering(self) -> bool:
        return any(a.phase is AgentPhase.RECOVERED for a in self.agents.values())

    # --- helpers --------------------------------------------------------------------------------

    def _new_framework(
        self, fid: str, info: mesos.FrameworkInfo, phase: FrameworkPhase, now: float, deadline: float | None = None
    ) -> FrameworkRec:
        roles = self._roles_of(info)
        caps = frozenset(c.type.value for c in info.capabilities if c.type is not None)
        return FrameworkRec(
            framework_id=fid,
            info=attrs.evolve(info, id=mesos.FrameworkID(fid)),
            phase=phase,
            roles=roles,
            capabilities=caps,
            registered_time=now,
            principal=info.principal,
            deadline=deadline,
        )

    @staticmethod
    def _roles_of(info: mesos.FrameworkInfo) -> tuple[str, ...]:
        multi = any(c.type is mesos.CapabilityType.MULTI_ROLE for c in info.capabilities)
        if multi:
            return tuple(dict.fromkeys(info.roles)) or ("*",)
        return (info.role or "*",)

    def _alloc_event(self, ev: ae.Event, now: float, fx: list[Effect]) -> None:
        try:
            decisions = self.alloc.handle(ev, now)
        except AllocatorError as e:
            # the allocator refused a fact (e.g. a role it rejects); its state is unchanged
            self.allocator_errors.append(f"{type(ev).__name__}: {e}")
            del self.allocator_errors[:-20]
            return
        self._decisions(decisions, now, fx)

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

    def _master_update(
        self,
        fw: FrameworkRec,
        task_id: str,
        state: TaskState,
        reason: mesos.Reason | None,
        message: str,
        now: float,
        fx: list[Effect],
        agent_id: str | None = None,
        executor_id: str | None = None,
    ) -> mesos.TaskStatus:
        """A master-generated update: SOURCE_MASTER, no uuid (never acknowledged)."""
        shown = for_framework(state, fw.partition_aware)
        status = mesos.TaskStatus(
            task_id=mesos.TaskID(task_id),
            state=shown,
            message=message or None,
            source=S.SOURCE_MASTER,
            reason=reason,
            agent_id=mesos.AgentID(agent_id) if agent_id else None,
            executor_id=mesos.ExecutorID(executor_id) if executor_id else None,
            timestamp=now,
        )
        if shown is TS.TASK_ERROR:
            self.counters["tasks_error"] += 1
        elif shown is TS.TASK_DROPPED:
            self.counters["tasks_dropped"] += 1
        elif shown is TS.TASK_LOST:
            self.counters["tasks_lost"] += 1
        self._send(fw, mesos.Event.make_update(status), fx)
        return status

    def _decisions(self, decisions: Iterable[ad.Decision], now: float, fx: list[Effect]) -> None:
        offers: dict[str, list[mesos.Offer]] = {}
        for d in decisions:
            match d:
                case ad.OfferCreated() | ad.OfferUpdated():
                    fw = self.frameworks.get(d.offer.framework_id)
                    if fw is None or not fw.connected:
                        continue
                    offers.setdefault(fw.framework_id, []).append(self._mesos_offer(d.offer, fw))
                case ad.OfferRescinded():
                    fw = self.frameworks.get(d.framework_id)
                    if fw is not None and fw.connected:
                        # an offer made in this same batch and rescinded at once is simply not sent
                        pending = offers.get(fw.framework_id)
                        if pending and any(o.id.value == d.offer_id for o in pending):
                            offers[fw.framework_id] = [o for o in pending if o.id.value != d.offer_id]
                        else:
                            self._send(fw, mesos.Event.make_rescind(mesos.OfferID(d.offer_id)), fx)
                case ad.Revoke():
                    self._to_agent(
                        d.agent_id,
                        ac.Revoke(
                            framework_id=mesos.FrameworkID(d.framework_id),
                            task_ids=tuple(mesos.TaskID(t) for t in d.task_ids),
                            grace_seconds=d.grace_seconds,
                            reason=d.reason,
                        ),
                        fx,
                    )
        for fid, lst in offers.items():
            if lst:
                self._send(self.frameworks[fid], mesos.Event.make_offers(tuple(lst)), fx)

    def _mesos_offer(self, o: ad.Offer, fw: FrameworkRec) -> mesos.Offer:
        ag = self.agents.get(o.agent_id)
        executor_ids = tuple(mesos.ExecutorID(eid) for (aid, eid) in fw.executors if aid == o.agent_id)
        url = None
        if ag is not None:
            url = mesos.URL(scheme="http", address=mesos.Address(port=ag.port, hostname=ag.hostname), path="/slave(1)")
        return mesos.Offer(
            id=mesos.OfferID(o.offer_id),
            framework_id=mesos.FrameworkID(o.framework_id),
            agent_id=mesos.AgentID(o.agent_id),
            hostname=o.hostname,
            url=url,
            resources=o.resources.to_mesos(allocation_role=o.role),
            attributes=ag.attributes if ag is not None else (),
            executor_ids=executor_ids,
            allocation_info=mesos.AllocationInfo(role=o.role),
        )

    def _set_quota(
        self, role: str, guarantee: Resources, limit: Resources | None, now: float, fx: list[Effect] | None = None
    ) -> None:
        self.quotas[role] = (guarantee, limit)
        self._alloc_event(ae.QuotaSet(role=role, guarantee=guarantee, limit=limit), now, fx if fx is not None else [])

    def _set_weight(self, role: str, weight: float, now: float, fx: list[Effect] | None = None) -> None:
        self.weights[role] = weight
        self._alloc_event(ae.WeightSet(role=role, weight=weight), now, fx if fx is not None else [])

    # --- frameworks -----------------------------------------------------------------------------

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
        if fw is not None and fw.principal != info.principal and fw.phase is not FrameworkPhase.RECOVERED:
            self._subscribe_error(ev.stream_id, "Framework principal changed on re-subscription", fx)
            return
        if fid is None:
            fid = new_framework_id(self.master_id, self.framework_seq)
            self.framework_seq += 1
        info = attrs.evolve(info, id=mesos.FrameworkID(fid))
        failover = float(info.failover_timeout or 0.0)
        fx.append(Persist((ops.FrameworkAdded(fid, codec.encode_msgpack(info), failover, now),)))
        if fw is None:
            fw = self._new_framework(fid, info, FrameworkPhase.SUBSCRIBED, now)
            self.frameworks[fid] = fw
        else:
            check_framework(fw.phase, FrameworkPhase.SUBSCRIBED)
            if fw.stream_id is not None:
                # failover: the superseded stream is closed; its calls no longer match
                self.streams.pop(fw.stream_id, None)
                fx.append(CloseStream(fw.stream_id, "framework failed over to a new connection"))
            fresh = self._new_framework(fid, info, FrameworkPhase.SUBSCRIBED, fw.registered_time)
            fw.info, fw.roles, fw.capabilities, fw.principal = fresh.info, fresh.roles, fresh.capabilities, fresh.principal
            fw.phase = FrameworkPhase.SUBSCRIBED
            fw.reregistered_time = now
            fw.deadline = None
        fw.stream_id = ev.stream_id
        self.streams[ev.stream_id] = fid
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
        check_framework(fw.phase, FrameworkPhase.DISCONNECTED)
        fw.phase = FrameworkPhase.DISCONNECTED
        fw.stream_id = None
        fw.unregistered_time = now
        fw.deadline = now + fw.failover_timeout
        fx.append(Persist((ops.FrameworkDisconnected(fid, fw.deadline),)))
        self._alloc_event(ae.FrameworkDeactivated(framework_id=fid), now, fx)

    def _remove_framework(self, fw: FrameworkRec, now: float, reason: str, fx: list[Effect]) -> None:
        fid = fw.framework_id
        fx.append(Persist((ops.FrameworkRemoved(fid, now),)))
        check_framework(fw.phase, FrameworkPhase.REMOVED)
        if fw.stream_id is not None:
            self.streams.pop(fw.stream_id, None)
            fx.append(CloseStream(fw.stream_id, reason))
            fw.stream_id = None
        fw.phase = FrameworkPhase.REMOVED
        fw.unregistered_time = now
        fw.deadline = None
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

    # --- scheduler calls ------------------------------------------------------------------------

    def _call(self, ev: CallReceived, now: float, fx: list[Effect]) -> None:
        call = ev.call
        fw = self.frameworks.get(ev.framework_id)
        if fw is None or not fw.connected or fw.stream_id != ev.stream_id:
            # superseded connection (failover) or a call racing a teardown: ignored (R14)
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
                self._accept(fw, call.accept, now, fx)
            case CT.DECLINE:
                assert call.decline is not None
                refuse = call.decline.filters.refuse_seconds if call.decline.filters else None
                self._alloc_event(
                    ae.OffersDeclined(
                        framework_id=fw.framework_id,
                        offer_ids=tuple(dict.fromkeys(o.value for o in call.decline.offer_ids)),
                        refuse_seconds=_sane_refuse(refuse),
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
                self._acknowledge(fw, call.acknowledge, fx)
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
            case _:
                # ACCEPT/DECLINE_INVERSE_OFFERS, ACKNOWLEDGE_OPERATION_STATUS, RECONCILE_OPERATIONS,
                # UPDATE_FRAMEWORK: accepted, nothing to do.
                pass

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
            demands.append(
                ae.Demand(
                    shape=shape,
                    count=count,
                    gang_id=r.gang_id,
                    gang_min=r.gang_min,
                    revocable_ok=bool(r.revocable_ok),
                    priority=r.priority or 0,
                    role=r.role if r.role in fw.roles else None,
                )
            )
        self._alloc_event(ae.DemandDeclared(framework_id=fw.framework_id, demands=tuple(demands)), now, fx)

    def _kill(self, fw: FrameworkRec, kill: mesos.Kill, now: float, fx: list[Effect]) -> None:
        tid = kill.task_id.value
        task = fw.tasks.get(tid)
        if task is None:
            done = fw.completed.get(tid)
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

    def _acknowledge(self, fw: FrameworkRec, ack: mesos.Acknowledge, fx: list[Effect]) -> None:
        tid = ack.task_id.value
        task = fw.tasks.get(tid) or fw.completed.get(tid)
        if task is None or task.agent_id != ack.agent_id.value:
            self.counters["dropped_messages"] += 1
            return  # not this framework's task on that agent (S17): ignored
        self._to_agent(
            task.agent_id,
            ac.AcknowledgeMsg(framework_id=mesos.FrameworkID(fw.framework_id), task_id=ack.task_id, uuid=ack.uuid),
            fx,
        )

    def _unknown_task_pending(self, agent_id: str | None) -> bool:
        """During the re-registration window, a task we do not know may live on an agent that has
        not come back yet: give no answer about it."""
        if agent_id is not None:
            ag = self.agents.get(agent_id)
            return ag is not None and ag.phase is AgentPhase.RECOVERED
        return self.recovering()

    def _reconcile(self, fw: FrameworkRec, tasks: Iterable[mesos.ReconcileTask], now: float, fx: list[Effect]) -> None:
        wanted = list(tasks)
        if not wanted:  # implicit: every task the master knows for this framework
            for task in fw.tasks.values():
                self._reconcile_known(fw, task, now, fx)
            return
        for rt in wanted:
            tid = rt.task_id.value
            known = fw.tasks.get(tid) or fw.completed.get(tid)
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

    def _accept(self, fw: FrameworkRec, accept: mesos.Accept, now: float, fx: list[Effect]) -> None:
        fid = fw.framework_id
        offer_ids = tuple(o.value for o in accept.offer_ids)
        refuse = _sane_refuse(accept.filters.refuse_seconds if accept.filters else None)
        book = [self.alloc.offer(oid) for oid in offer_ids]
        offers_valid = bool(offer_ids) and all(o is not None and o.framework_id == fid for o in book)
        offer_agent = book[0].agent_id if offers_valid and book[0] is not None else None
        if offer_agent is not None:
            ag_ = self.agents.get(offer_agent)
            if ag_ is None or not ag_.reachable or ag_.conn_id is None:
                offers_valid, offer_agent = False, None  # the agent is gone: like a stale offer
        offered = Resources.sum(o.resources for o in book if o is not None) if offers_valid else EMPTY

        seen: set[str] = set()
        new_execs: set[str] = set()  # executors started by this ACCEPT (their resources count once)
        alloc_ops: list[ae.Operation] = []
        # (operation index, tasks, executor for LAUNCH_GROUP, group?)
        launches: list[tuple[list[mesos.TaskInfo], mesos.ExecutorInfo | None, bool]] = []
        all_tasks: list[mesos.TaskInfo] = []
        has_reservation_ops = False
        remaining = offered

        def error(task: mesos.TaskInfo, msg: str) -> None:
            self._master_update(fw, task.task_id.value, TS.TASK_ERROR, R.REASON_TASK_INVALID, msg, now, fx, offer_agent)

        for op in accept.operations:
            t = op.type
            if t is mesos.OperationType.LAUNCH and op.launch is not None:
                all_tasks.extend(op.launch.task_infos)
            elif t is mesos.OperationType.LAUNCH_GROUP and op.launch_group is not None:
                all_tasks.extend(op.launch_group.task_group.tasks)
            elif t in (mesos.OperationType.RESERVE, mesos.OperationType.UNRESERVE):
                has_reservation_ops = True

        if not offers_valid:
            # invalid, stale, foreign, duplicate or mixed offers: the allocator rejects the whole
            # ACCEPT (and returns the resources); every task is DROPPED (LOST if not partition-aware)
            result = self.alloc.accept(
                ae.OffersAccepted(framework_id=fid, offer_ids=offer_ids, operations=(), refuse_seconds=refuse), now
            )
            reason = result.reason if isinstance(result, ad.Rejected) else "Offer is no longer valid"
            self._decisions(result.decisions, now, fx)
            self.counters["invalid_offers"] += 1
            for task in all_tasks:
                self._master_update(
                    fw, task.task_id.value, TS.TASK_DROPPED, R.REASON_INVALID_OFFERS, f"Invalid offers: {reason}", now, fx
                )
            return

        for op in accept.operations:
            t = op.type
            if t is mesos.OperationType.LAUNCH and op.launch is not None:
                good: list[mesos.TaskInfo] = []
                for task in op.launch.task_infos:
                    msg = self._check_launch(fw, task, offer_agent, seen, in_group=False)
                    if msg is None and not has_reservation_ops:
                        need = self._need(fw, offer_agent, task, new_execs)
                        if not remaining.contains(need):
                            msg = f"Task uses more resources ({need}) than offered and unused ({remaining})"
                        else:
                            remaining = remaining - need
                    if msg is not None:
                        error(task, msg)
                        continue
                    seen.add(task.task_id.value)
                    good.append(task)
                if good:
                    launches.append((good, None, False))
                    counted: set[str] = set()
                    alloc_ops.extend(
                        ae.Launch(task_id=tk.task_id.value, resources=self._need(fw, offer_agent, tk, counted))
                        for tk in good
                    )
            elif t is mesos.OperationType.LAUNCH_GROUP and op.launch_group is not None:
                lg = op.launch_group
                tasks = list(lg.task_group.tasks)
                msg = check_executor(lg.executor)
                if msg is None and not tasks:
                    msg = "task group is empty"
                for task in tasks:
                    if msg is not None:
                        break
                    msg = self._check_launch(fw, task, offer_agent, seen, in_group=True)
                    seen.add(task.task_id.value)
                if msg is None and not has_reservation_ops:
                    need = Resources.sum(task_resources(tk) for tk in tasks) + Resources.from_mesos(lg.executor.resources)
                    if not remaining.contains(need):
                        msg = f"Task group uses more resources ({need}) than offered and unused ({remaining})"
                    else:
                        remaining = remaining - need
                if msg is not None:
                    for task in tasks:
                        error(task, msg)
                    continue
                launches.append((tasks, lg.executor, True))
                ex_res = Resources.from_mesos(lg.executor.resources)
                for i, tk in enumerate(tasks):
                    res = task_resources(tk) + (ex_res if i == 0 else EMPTY)
                    alloc_ops.append(ae.Launch(task_id=tk.task_id.value, resources=res))
            elif t is mesos.OperationType.RESERVE and op.reserve is not None:
                try:
                    alloc_ops.append(ae.Reserve(resources=Resources.from_mesos(op.reserve.resources)))
                except (ResourceError, TypeError, ValueError):
                    continue
            elif t is mesos.OperationType.UNRESERVE and op.unreserve is not None:
                try:
                    alloc_ops.append(ae.Unreserve(resources=Resources.from_mesos(op.unreserve.resources)))
                except (ResourceError, TypeError, ValueError):
                    continue
            # CREATE/DESTROY and others: not supported, ignored

        result = self.alloc.accept(
            ae.OffersAccepted(framework_id=fid, offer_ids=offer_ids, operations=tuple(alloc_ops), refuse_seconds=refuse),
            now,
        )
        if isinstance(result, ad.Rejected):
            self._decisions(result.decisions, now, fx)
            if result.code in OFFER_PROBLEMS:
                state, why = TS.TASK_DROPPED, R.REASON_INVALID_OFFERS
            else:
                state, why = TS.TASK_ERROR, R.REASON_TASK_INVALID
            for tasks, _, _ in launches:
                for task in tasks:
                    self._master_update(fw, task.task_id.value, state, why, result.reason, now, fx, offer_agent)
            return
        assert offer_agent is not None
        self._decisions(result.decisions, now, fx)
        ag = self.agents[offer_agent]
        if result.reserved or result.unreserved:
            res = ag.reservations
            for r in result.reserved:
                res = res + r
            for r in result.unreserved:
                res = res - r
            ag.reservations = res
            fx.append(Persist((ops.ReservationsSet(offer_agent, str(res)),)))
        res_of = {lt.task_id: lt.resources for lt in result.launched}
        launched_ids = set(res_of)
        for tasks, executor, group in launches:
            tasks = [tk for tk in tasks if tk.task_id.value in launched_ids]
            if not tasks:
                continue
            for tk in tasks:
                self._add_task(fw, ag, tk, executor, now, res_of.get(tk.task_id.value))
            # the agent is connected (checked above, nothing in between can disconnect it)
            self._to_agent(
                offer_agent,
                ac.RunTasks(
                    framework_id=mesos.FrameworkID(fid),
                    framework_info=fw.info,
                    tasks=tuple(attrs.evolve(tk, agent_id=mesos.AgentID(offer_agent)) for tk in tasks),
                    executor=executor,
                    group=group,
                ),
                fx,
            )

    def _need(self, fw: FrameworkRec, agent_id: str | None, task: mesos.TaskInfo, started: set[str]) -> Resources:
        """What ``task`` takes from the offer: its resources, plus its executor's when that executor
        is not running on the agent yet and not started earlier in this ACCEPT (``started``)."""
        need = Resources.from_mesos(task.resources)
        ex = task.executor
        if ex is not None and ex.resources:
            eid = ex.executor_id.value
            if (str(agent_id), eid) not in fw.executors and eid not in started:
                need = need + Resources.from_mesos(ex.resources)
            started.add(eid)
        return need

    def _check_launch(
        self, fw: FrameworkRec, task: mesos.TaskInfo, offer_agent: str | None, seen: set[str], *, in_group: bool
    ) -> str | None:
        msg = check_task(task, in_group=in_group)
        if msg is not None:
            return msg
        tid = task.task_id.value
        if tid in fw.tasks or tid in seen:
            return f"Task has duplicate ID: {tid}"
        if tid in fw.completed:
            # a replayed ACCEPT on a fresh offer must not run a finished task again (I2)
            return f"Task has duplicate ID: {tid} (a task with this ID already ran)"
        if task.agent_id is not None and task.agent_id.value != offer_agent:
            return f"Task uses agent {task.agent_id.value} but the offers are for agent {offer_agent}"
        for r in (task.resources, task.executor.resources if task.executor else ()):
            for res in r:
                if res.allocation_info is not None and res.allocation_info.role not in fw.roles:
                    return f"Task uses resources allocated to role {res.allocation_info.role!r} not held by the framework"
        return None

    def _add_task(
        self,
        fw: FrameworkRec,
        ag: AgentRec,
        tk: mesos.TaskInfo,
        group_executor: mesos.ExecutorInfo | None,
        now: float,
        resources: Resources | None = None,
    ) -> None:
        executor = group_executor or tk.executor
        role = "*"
        for r in tk.resources:
            if r.allocation_info is not None and r.allocation_info.role:
                role = r.allocation_info.role
                break
        else:
            role = fw.roles[0]
        rec = TaskRec(
            framework_id=fw.framework_id,
            task_id=tk.task_id.value,
            agent_id=ag.agent_id,
            name=tk.name,
            state=TS.TASK_STAGING,
            resources=resources if resources is not None else task_resources(tk),
            role=role,
            executor_id=executor.executor_id.value if executor else None,
            info=attrs.evolve(tk, agent_id=mesos.AgentID(ag.agent_id)),
        )
        fw.tasks[rec.task_id] = rec
        ag.tasks.add((fw.framework_id, rec.task_id))
        if executor is not None:
            fw.executors[(ag.agent_id, executor.executor_id.value)] = executor

    def _finish_task(
        self,
        fw: FrameworkRec,
        task: TaskRec,
        state: TaskState,
        now: float,
        fx: list[Effect],
        *,
        recover: bool,
        reason: mesos.Reason | None = None,
        message: str = "",
        status: mesos.TaskStatus | None = None,
    ) -> None:
        """Move a task to its terminal state and out of the live set."""
        task.state = state
        if status is None:
            status = mesos.TaskStatus(
                task_id=mesos.TaskID(task.task_id),
                state=state,
                source=S.SOURCE_MASTER,
                reason=reason,
                message=message or None,
                agent_id=mesos.AgentID(task.agent_id),
                timestamp=now,
            )
            task.statuses.append(status)
        fw.tasks.pop(task.task_id, None)
        fw.completed[task.task_id] = task
        while len(fw.completed) > self.cfg.completed_tasks_per_framework:
            fw.completed.popitem(last=False)
        ag = self.agents.get(task.agent_id)
        if ag is not None:
            ag.tasks.discard((fw.framework_id, task.task_id))
        self.finished_counts[state] = self.finished_counts.get(state, 0) + 1
        if recover:
            self._alloc_event(
                ae.ResourcesRecovered(
                    framework_id=fw.framework_id, agent_id=task.agent_id, task_id=task.task_id, resources=task.resources
                ),
                now,
                fx,
            )

    # --- agents -----------------------------------------------------------------------------------

    def _drain(self, agent_id: str, draining: bool, now: float, fx: list[Effect]) -> None:
        ag = self.agents.get(agent_id)
        if ag is None or ag.phase in (AgentPhase.REMOVED, AgentPhase.UNREACHABLE):
            return
        fx.append(Persist((ops.AgentDrainSet(agent_id, draining),)))
        ag.draining = draining
        if ag.phase is AgentPhase.RECOVERED:
            return  # applied when it re-registers
        new = AgentPhase.DRAINING if draining else AgentPhase.REGISTERED
        check_agent(ag.phase, new)
        ag.phase = new
        if ag.in_allocator:
            ev: ae.Event = (
                ae.AgentDeactivated(agent_id=agent_id, reason="agent draining (maintenance)")
                if draining
                else ae.AgentReactivated(agent_id=agent_id)
            )
            self._alloc_event(ev, now, fx)

    def _agent_register(self, conn_id: int, reg: ac.Register, now: float, fx: list[Effect]) -> None:
        try:
            total = Resources.from_mesos(reg.resources)
        except (ResourceError, TypeError, ValueError) as e:
            fx.append(SendToAgent(conn_id, ac.Refused(message=f"invalid resources: {e}")))
            fx.append(CloseAgent(conn_id, "invalid resources"))
            return
        if reg.agent_id is not None and not reg.agent_id.value:
            fx.append(SendToAgent(conn_id, ac.Refused(message="empty agent id")))
            fx.append(CloseAgent(conn_id, "empty agent id"))
            return
        aid = reg.agent_id.value if reg.agent_id is not None else None
        ag = self.agents.get(aid) if aid is not None else None
        if aid is None:
            aid = new_agent_id(self.master_id, self.agent_seq)
            self.agent_seq += 1
        fx.append(
            Persist(
                (ops.AgentAdmitted(aid, reg.hostname, reg.port, str(total), _attrs_string(reg.attributes), now),)
            )
        )
        if ag is None:
            ag = AgentRec(
                agent_id=aid,
                hostname=reg.hostname,
                port=reg.port,
                total=total,
                phase=AgentPhase.REGISTERED,
                registered_time=now,
                attributes=reg.attributes,
            )
            self.agents[aid] = ag
            self.counters["slave_registrations"] += 1
            was_unreachable = False
            same_conn = False
        else:
            check_agent(ag.phase, AgentPhase.REGISTERED)
            was_unreachable = ag.phase is AgentPhase.UNREACHABLE
            same_conn = ag.conn_id == conn_id
            if ag.conn_id is not None and ag.conn_id != conn_id:
                self.conns.pop(ag.conn_id, None)
                fx.append(CloseAgent(ag.conn_id, "agent re-registered on a new connection"))
            ag.phase = AgentPhase.REGISTERED
            ag.hostname, ag.port, ag.total, ag.attributes = reg.hostname, reg.port, total, reg.attributes
            ag.reregistered_time = now
            ag.unreachable_since = None
            self.counters["slave_reregistrations"] += 1
        ag.conn_id = conn_id
        ag.last_seen = now
        ag.next_ping = now + self.cfg.ping_interval
        ag.version = reg.version
        ag.capabilities = reg.capabilities
        self.conns[conn_id] = aid
        fx.append(
            SendToAgent(
                conn_id,
                ac.Registered(
                    agent_id=mesos.AgentID(aid),
                    master_id=self.master_id,
                    epoch=self.epoch,
                    ping_interval=self.cfg.ping_interval,
                    ping_timeout=self.cfg.ping_timeout,
                ),
            )
        )
        if ag.in_allocator:
            self._alloc_event(ae.AgentRemoved(agent_id=aid, reason="agent re-registered"), now, fx)
        self._alloc_event(
            ae.AgentAdded(agent_id=aid, hostname=ag.hostname, total=self._alloc_total(ag), attributes=_attr_dict(ag.attributes)),
            now,
            fx,
        )
        ag.in_allocator = True
        if ag.draining:
            ag.phase = AgentPhase.DRAINING
            self._alloc_event(ae.AgentDeactivated(agent_id=aid, reason="agent draining (maintenance)"), now, fx)
        self._merge_tasks(ag, reg, was_unreachable, same_conn, now, fx)
        if self.recovery_deadline is not None and not self.recovering():
            self.recovery_deadline = None

    def _alloc_total(self, ag: AgentRec) -> Resources:
        if ag.reservations.is_empty():
            return ag.total
        base = ag.total - ag.reservations.unreserve()
        return base + ag.reservations

    def _merge_tasks(
        self, ag: AgentRec, reg: ac.Register, was_unreachable: bool, same_conn: bool, now: float, fx: list[Effect]
    ) -> None:
        """A re-registering agent's tasks are merged back; their allocations are recovered."""
        infos = {fi.id.value: fi for fi in reg.frameworks if fi.id is not None}
        reported: set[tuple[str, str]] = set()
        shutdown: set[str] = set()
        late = ag.agent_id in self.removed_agent_ids
        for rt in reg.tasks:
            fid, tid = rt.framework_id.value, rt.task_id.value
            if fid in self.removed_framework_ids:
                shutdown.add(fid)
                continue
            if late:
                # the agent was removed and its tasks reported GONE: they must not run on (policy)
                if not is_terminal(rt.state):
                    self._to_agent(ag.agent_id, ac.KillTask(framework_id=rt.framework_id, task_id=rt.task_id), fx)
                continue
            fw = self.frameworks.get(fid)
            if fw is None:
                info = infos.get(fid) or mesos.FrameworkInfo(user="", name="", id=rt.framework_id)
                deadline = now + max(float(info.failover_timeout or 0.0), self.cfg.agent_reregister_timeout)
                fw = self._new_framework(fid, info, FrameworkPhase.RECOVERED, now, deadline)
                self.frameworks[fid] = fw
            try:
                res = Resources.from_mesos(rt.resources)
            except (ResourceError, TypeError, ValueError):
                res = EMPTY
            reported.add((fid, tid))
            if is_terminal(rt.state):
                continue
            task = fw.tasks.get(tid)
            if task is None:
                task = TaskRec(
                    framework_id=fid,
                    task_id=tid,
                    agent_id=ag.agent_id,
                    name=rt.name or tid,
                    state=rt.state,
                    resources=res,
                    role=fw.roles[0],
                    executor_id=rt.executor_id.value if rt.executor_id else None,
                )
                fw.tasks[tid] = task
            elif task.state is TS.TASK_UNREACHABLE:
                if not fw.partition_aware:
                    # it was reported LOST already: kill it (Mesos policy for non-partition-aware)
                    self._to_agent(ag.agent_id, ac.KillTask(framework_id=rt.framework_id, task_id=rt.task_id), fx)
                task.state = rt.state
                if fw.partition_aware:
                    self._master_update(
                        fw, tid, rt.state, R.REASON_AGENT_REREGISTERED, "Agent re-registered", now, fx, ag.agent_id, task.executor_id
                    )
            else:
                task.state = rt.state
            if rt.status is not None:
                task.statuses.append(rt.status)
            if rt.executor_id is not None:
                fw.executors.setdefault(
                    (ag.agent_id, rt.executor_id.value), mesos.ExecutorInfo(executor_id=rt.executor_id)
                )
            ag.tasks.add((fid, tid))
            self._alloc_event(
                ae.AllocationRecovered(
                    framework_id=fid, agent_id=ag.agent_id, task_id=tid, resources=task.resources, role=task.role
                ),
                now,
                fx,
            )
        # tasks the master thought were here but the agent no longer has: lost
        for fid, tid in sorted(ag.tasks - reported):
            fw = self.frameworks.get(fid)
            task = fw.tasks.get(tid) if fw else None
            if fw is None or task is None:
                ag.tasks.discard((fid, tid))
                continue
            if task.state is TS.TASK_STAGING and same_conn:
                # a launch sent on this same connection may still be in flight (ReconcileRace):
                # keep the task and its allocation
                self._alloc_event(
                    ae.AllocationRecovered(
                        framework_id=fid, agent_id=ag.agent_id, task_id=tid, resources=task.resources, role=task.role
                    ),
                    now,
                    fx,
                )
                continue
            self._master_update(fw, tid, TS.TASK_GONE, R.REASON_AGENT_REREGISTERED, "Task not on the agent", now, fx, ag.agent_id)
            self._finish_task(fw, task, TS.TASK_LOST, now, fx, recover=False)
        for fid in sorted(shutdown):
            self._to_agent(ag.agent_id, ac.ShutdownFramework(framework_id=mesos.FrameworkID(fid)), fx)
        self.removed_agent_ids.discard(ag.agent_id)

    def _agent_of_conn(self, conn_id: int) -> AgentRec | None:
        aid = self.conns.get(conn_id)
        if aid is None:
            return None
        ag = self.agents.get(aid)
        if ag is None or ag.conn_id != conn_id:
            return None
        return ag

    def _agent_conn_lost(self, conn_id: int, now: float, fx: list[Effect]) -> None:
        ag = self._agent_of_conn(conn_id)
        self.conns.pop(conn_id, None)
        if ag is None:
            return
        ag.conn_id = None
        # keep it registered until the ping timeout: it will likely reconnect (N2)
        if ag.in_allocator:
            self._alloc_event(ae.AgentDeactivated(agent_id=ag.agent_id, reason="agent disconnected"), now, fx)

    def _agent_message(self, conn_id: int, msg: ac.AgentMessage, now: float, fx: list[Effect]) -> None:
        ag = self._agent_of_conn(conn_id)
        if ag is None:
            self.counters["dropped_messages"] += 1
            return
        ag.last_seen = now
        body = msg.body()
        match body:
            case ac.Pong():
                pass
            case ac.StatusUpdateMsg():
                self._status_update(ag, body, now, fx)
            case ac.SlackEstimate():
                try:
                    slack = Resources.from_mesos(body.resources).flatten()
                except (ResourceError, TypeError, ValueError):
                    return
                ag.slack = slack
                self._alloc_event(ae.AgentSlackEstimated(agent_id=ag.agent_id, slack=slack), now, fx)
            case ac.ExecutorMessageMsg():
                fw = self.frameworks.get(body.framework_id.value)
                if fw is not None:
                    self._send(fw, mesos.Event.make_message(mesos.AgentID(ag.agent_id), body.executor_id, body.data), fx)
            case ac.ExecutorExited():
                fw = self.frameworks.get(body.framework_id.value)
                if fw is not None:
                    fw.executors.pop((ag.agent_id, body.executor_id.value), None)
                    self._send(
                        fw, mesos.Event.make_failure(mesos.AgentID(ag.agent_id), body.executor_id, body.status), fx
                    )
            case ac.Register():
                self._agent_register(conn_id, body, now, fx)
            case _:
                self.counters["dropped_messages"] += 1

    def _status_update(self, ag: AgentRec, upd: ac.StatusUpdateMsg, now: float, fx: list[Effect]) -> None:
        fid = upd.framework_id.value
        status = attrs.evolve(upd.status, agent_id=mesos.AgentID(ag.agent_id))
        tid = status.task_id.value
        fw = self.frameworks.get(fid)
        if fw is None:
            # the framework is gone: acknowledge on its behalf so the agent stops resending
            if status.uuid is not None:
                fx.append(SendToAgent(ag.conn_id, ac.AcknowledgeMsg(framework_id=upd.framework_id, task_id=status.task_id, uuid=status.uuid)))  # type: ignore[arg-type]
            return
        new_state = upd.latest_state or status.state
        task = fw.tasks.get(tid)
        if task is None and tid in fw.completed:
            task = fw.completed[tid]
        if task is None:
            task = TaskRec(
                framework_id=fid,
                task_id=tid,
                agent_id=ag.agent_id,
                name=tid,
                state=TS.TASK_STAGING,
                resources=EMPTY,
                role=fw.roles[0],
                executor_id=status.executor_id.value if status.executor_id else None,
            )
            fw.tasks[tid] = task
            ag.tasks.add((fid, tid))
        if task.task_id in fw.tasks and task.state is not new_state:
            if can_transition(task.state, new_state):
                self.counters["valid_status_updates"] += 1
                task.statuses.append(status)
                if is_terminal(new_state):
                    self._finish_task(fw, task, new_state, now, fx, recover=True, status=status)
                else:
                    task.state = new_state
            else:
                self.counters["invalid_status_updates"] += 1
        else:
            self.counters["valid_status_updates"] += 1
            if not task.statuses or task.statuses[-1].uuid != status.uuid:
                task.statuses.append(status)
        task.status_update_state = status.state
        task.status_update_uuid = status.uuid
        shown = for_framework(status.state, fw.partition_aware)
        if shown is TS.TASK_KILLING and "TASK_KILLING_STATE" not in fw.capabilities:
            # frameworks without TASK_KILLING_STATE never see it; acknowledge on their behalf
            if status.uuid is not None:
                self._to_agent(ag.agent_id, ac.AcknowledgeMsg(framework_id=upd.framework_id, task_id=status.task_id, uuid=status.uuid), fx)
            return
        self._send(fw, mesos.Event.make_update(attrs.evolve(status, state=shown)), fx)

    # --- time -------------------------------------------------------------------------------------

    def _tick(self, now: float, fx: list[Effect]) -> None:
        # framework failover deadlines
        for fw in list(self.frameworks.values()):
            if (
                fw.deadline is not None
                and fw.deadline <= now
                and fw.phase in (FrameworkPhase.DISCONNECTED, FrameworkPhase.RECOVERED)
            ):
                self._remove_framework(fw, now, "Framework failover timeout", fx)
        # pings and ping timeouts
        for ag in self.agents.values():
            if not ag.reachable:
                continue
            if ag.conn_id is not None and now >= ag.next_ping:
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
        # allocation (batched: the deadline was set when the events arrived)
        due = self.allocation_due
        if due is not None and due <= now:
            self.allocation_due = None
            self._decisions(self.alloc.allocate(now), now, fx)
            self.allocation_due = self.alloc.next_deadline(now)

    def _remove_agent(self, ag: AgentRec, now: float, fx: list[Effect]) -> None:
        fx.append(Persist((ops.AgentRemoved(ag.agent_id),)))
        check_agent(ag.phase, AgentPhase.REMOVED)
        ag.phase = AgentPhase.REMOVED
        for fid, tid in sorted(ag.tasks):
            fw = self.frameworks.get(fid)
            task = fw.tasks.get(tid) if fw else None
            if fw is None or task is None:
                continue
            self._master_update(fw, tid, TS.TASK_GONE, R.REASON_AGENT_REMOVED, "Agent removed", now, fx, ag.agent_id)
            self._finish_task(fw, task, TS.TASK_GONE, now, fx, recover=False)
        del self.agents[ag.agent_id]
        self.removed_agent_ids.add(ag.agent_id)

    def _mark_unreachable(self, ag: AgentRec, now: float, reason: str, fx: list[Effect]) -> None:
        fx.append(Persist((ops.AgentMarkedUnreachable(ag.agent_id, now),)))
        check_agent(ag.phase, AgentPhase.UNREACHABLE)
        ag.phase = AgentPhase.UNREACHABLE
        ag.unreachable_since = now
        self.counters["slave_removals"] += 1
        if ag.conn_id is not None:
            self.conns.pop(ag.conn_id, None)
            fx.append(CloseAgent(ag.conn_id, reason))
            ag.conn_id = None
        if ag.in_allocator:
            self._alloc_event(ae.AgentRemoved(agent_id=ag.agent_id, reason=reason), now, fx)
            ag.in_allocator = False
        for fid, tid in sorted(ag.tasks):
            fw = self.frameworks.get(fid)
            task = fw.tasks.get(tid) if fw else None
            if fw is None or task is None or task.state is TS.TASK_UNREACHABLE:
                continue
            task.state = TS.TASK_UNREACHABLE
            self._master_update(fw, tid, TS.TASK_UNREACHABLE, R.REASON_AGENT_REMOVED, f"Agent {ag.agent_id} is unreachable: {reason}", now, fx, ag.agent_id, task.executor_id)
        for fw in self.frameworks.values():
            if fw.connected:
                self._send(fw, mesos.Event.make_failure(mesos.AgentID(ag.agent_id)), fx)

    # --- views used by the operator endpoints ------------------------------------------------------

    def task_counts(self) -> dict[TaskState, int]:
        counts: dict[TaskState, int] = dict.fromkeys(TaskState, 0)
        for fw in self.frameworks.values():
            for t in fw.tasks.values():
                counts[t.state] += 1
        for st, n in self.finished_counts.items():
            counts[st] += n
        return counts

    def used_resources(self) -> Resources:
        return Resources.sum(t.resources for fw in self.frameworks.values() for t in fw.tasks.values() if t.state is not TS.TASK_UNREACHABLE)

    def snapshot_counts(self) -> dict[str, Any]:
        return dict(self.counters)


def _sane_refuse(value: float | None) -> float | None:
    if value is None:
        return None
    if not math.isfinite(value) or value < 0:
        return None
    return min(value, 365 * 24 * 3600.0)
