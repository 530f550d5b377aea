"""Shared state and helpers of the master's pure core (see ``master.state``): the records,
the allocator it drives, sending to frameworks and agents, master-generated updates, and the
task bookkeeping every rule needs."""


from __future__ import annotations

from collections import deque
from collections.abc import Iterable

import attrs

from master.accept import AcceptBook
from master.alloc_port import AllocatorPort
from master.allocator import decisions as ad
from master.allocator import events as ae
from master.allocator.allocator import AllocatorError
from master.events import (
    Effect,
    SendEvent,
    SendToAgent,
)
from master.lifecycles import AgentPhase, FrameworkPhase
from master.maintenance import InverseOfferBook, InverseOfferRec, MaintenanceBook
from master.operator_events import OperatorFeed
from master.ratelimit import TokenBucket
from master.records import AgentRec, FrameworkRec, TaskRec
from master.validation import task_resources
from protocol import agent_channel as ac
from protocol import mesos, mesos_common
from protocol.acls import Acls
from protocol.agent_channel import AGENT_HTTPS
from protocol.evolve import evolve
from protocol.resources import Resources, parse_attributes
from protocol.task_states import TaskState, for_framework

__pure__ = True

TS = TaskState
S = mesos.Source
R = mesos.Reason
CT = mesos.CallType
MT = ac.MessageType
EMPTY = Resources()
_MEMO_MAX = 4096  # entries in each of the core's small memos before they are cleared
OFFERS_PER_EVENT = 500  # offers in one OFFERS event (bounded record size)


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
    awaiting_ack_per_framework: int = 100_000
    completed_frameworks: int = 50
    # disconnected frameworks that never ran a task, kept per principal for their failover
    # timeout; beyond this the oldest is removed (abandoned subscriptions)
    abandoned_frameworks_per_principal: int = 16
    unreachable_gc: float = 14 * 24 * 3600.0  # an unreachable agent is removed for good after this
    # authorization (protocol/acls.py): the ACLs, and whether frameworks / agents must authenticate
    acls: Acls = attrs.field(factory=Acls.allow_all)
    authenticate_frameworks: bool = False
    authenticate_agents: bool = False


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



class CoreBase:
    """Frameworks, agents, tasks and the allocator; the helpers the rules share."""

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
        self.housekeeping_at: float | None = None  # next ping/timeout/failover/GC check
        self.quotas: dict[str, tuple[Resources, Resources | None]] = {}
        # offers re-send the same few resource sets over and over (a lease shrinking and growing
        # by one task's worth): their Mesos form is built once (bounded memo, values immutable)
        self._mesos_res: dict[tuple[Resources, str], tuple[mesos_common.Resource, ...]] = {}
        self._agent_urls: dict[tuple[str, int, str], mesos.URL] = {}
        # while one fact is handled: per framework, the offers to send at its end, by id (a lease
        # updated several times is sent once, latest form); None outside ``handle``
        self._offer_batch: dict[str, dict[str, ad.Offer]] | None = None
        self._offer_created: set[str] = set()  # offers of that batch not sent before
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
        self.agent_principals: dict[str, str] = {}  # agent id -> the principal that first registered it
        self.unauthorized = 0  # refusals by the ACLs or an agent id's bound principal
        self.allocator_errors: list[str] = []
        self.finished_counts: dict[TaskState, int] = {}
        self.feed = OperatorFeed(self.frameworks)  # the operator event feed (master.operator_events)
        # maintenance (master.maintenance, master.maintenance_rules): the schedule and DOWN
        # machines, the inverse offers, and the unavailability of each agent on a DRAINING machine
        # (carried by its offers; the agents inverse offers are made for)
        self.maintenance = MaintenanceBook()
        self.inverse = InverseOfferBook(prefix=f"{master_id}-io")
        self.agent_unavailability: dict[str, mesos.Unavailability] = {}
        self.inverse_due: float | None = None  # when to look for inverse offers to make
        self.maintenance_refused = 0  # registrations refused because the agent's machine is DOWN
        self.accepts = AcceptBook(self)  # ACCEPT (master/accept.py)

    @property
    def operator_seq(self) -> int:
        """The seq of the last operator event published (a new subscriber's snapshot is at it)."""
        return self.feed.seq

    # --- recovery -------------------------------------------------------------------------------


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

    def _touch(self, deadline: float) -> None:
        """A new housekeeping deadline exists (an agent registered, a framework disconnected...)."""
        if self.housekeeping_at is None or deadline < self.housekeeping_at:
            self.housekeeping_at = deadline

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
        status = self._master_status(task_id, shown, reason, message, now, agent_id, executor_id)
        if shown is TS.TASK_ERROR:
            self.counters["tasks_error"] += 1
        elif shown is TS.TASK_DROPPED:
            self.counters["tasks_dropped"] += 1
        elif shown is TS.TASK_LOST:
            self.counters["tasks_lost"] += 1
        self._send(fw, mesos.Event.make_update(status), fx)
        return status

    @staticmethod
    def _master_status(
        task_id: str,
        shown: TaskState,
        reason: mesos.Reason | None,
        message: str,
        now: float,
        agent_id: str | None = None,
        executor_id: str | None = None,
    ) -> mesos.TaskStatus:
        """The status the master writes for a task (SOURCE_MASTER, no uuid), sent or not."""
        return mesos.TaskStatus(
            task_id=mesos.TaskID(task_id),
            state=shown,
            message=message or None,
            source=S.SOURCE_MASTER,
            reason=reason,
            agent_id=mesos.AgentID(agent_id) if agent_id else None,
            executor_id=mesos.ExecutorID(executor_id) if executor_id else None,
            timestamp=now,
            unreachable_time=mesos.TimeInfo(nanoseconds=int(now * 1e9)) if shown is TS.TASK_UNREACHABLE else None,
        )

    def _decisions(self, decisions: Iterable[ad.Decision], now: float, fx: list[Effect]) -> None:
        batch = self._offer_batch
        own = batch is None
        if batch is None:
            batch = self._offer_batch = {}
        try:
            for d in decisions:
                match d:
                    case ad.OfferCreated() | ad.OfferUpdated():
                        fw = self.frameworks.get(d.offer.framework_id)
                        if fw is None or not fw.connected:
                            continue
                        # (an agent with GPUs is never offered to a framework without
                        # GPU_RESOURCES: the allocator skips that pair, see ``gpu_blocked``)
                        oid = d.offer.offer_id
                        pending = batch.get(fw.framework_id)
                        if pending is None:
                            pending = batch[fw.framework_id] = {}
                        else:
                            pending.pop(oid, None)  # updated again: the latest, moved to the end
                        pending[oid] = d.offer  # its Mesos form is built once, when sent
                        if isinstance(d, ad.OfferCreated):
                            self._offer_created.add(oid)
                    case ad.OfferRescinded():
                        fw = self.frameworks.get(d.framework_id)
                        if fw is not None and fw.connected:
                            pending = batch.get(fw.framework_id)
                            if pending and d.offer_id in pending:
                                del pending[d.offer_id]
                                if d.offer_id in self._offer_created:
                                    # made in this same batch and rescinded at once: never sent
                                    self._offer_created.discard(d.offer_id)
                                    continue
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
        finally:
            if own:
                self._offer_batch = None
        if own:
            self._flush_offers(batch, fx)

    def _flush_offers(self, batch: dict[str, dict[str, ad.Offer]], fx: list[Effect]) -> None:
        """Send the offers a batch made or updated: OFFERS events per framework, at most
        ``OFFERS_PER_EVENT`` offers each (one event for 10,000 agents would be ~6 MB, past what a
        client decodes in one record)."""
        self._offer_created.clear()
        for fid, pending in batch.items():
            fw = self.frameworks.get(fid)
            if not pending or fw is None:
                continue
            offers = [self._mesos_offer(o, fw) for o in pending.values()]
            for i in range(0, len(offers), OFFERS_PER_EVENT):
                self._send(fw, mesos.Event.make_offers(tuple(offers[i : i + OFFERS_PER_EVENT])), fx)

    def _offer_resources(self, resources: Resources, role: str) -> tuple[mesos_common.Resource, ...]:
        key = (resources, role)
        out = self._mesos_res.get(key)
        if out is None:
            if len(self._mesos_res) >= _MEMO_MAX:
                self._mesos_res.clear()
            out = self._mesos_res[key] = resources.to_mesos(allocation_role=role)
        return out

    def _agent_url(self, ag: AgentRec) -> mesos.URL:
        key = (ag.hostname, ag.port, "https" if AGENT_HTTPS in ag.capabilities else "http")
        url = self._agent_urls.get(key)
        if url is None:
            if len(self._agent_urls) >= _MEMO_MAX:
                self._agent_urls.clear()
            url = self._agent_urls[key] = mesos.URL(
                scheme=key[2], address=mesos.Address(port=ag.port, hostname=ag.hostname), path="/slave(1)"
            )
        return url

    def _mesos_offer(self, o: ad.Offer, fw: FrameworkRec) -> mesos.Offer:
        ag = self.agents.get(o.agent_id)
        executor_ids = (
            tuple(mesos.ExecutorID(eid) for (aid, eid) in fw.executors if aid == o.agent_id) if fw.executors else ()
        )
        url = self._agent_url(ag) if ag is not None else None
        return mesos.Offer(
            id=mesos.OfferID(o.offer_id),
            framework_id=mesos.FrameworkID(o.framework_id),
            agent_id=mesos.AgentID(o.agent_id),
            hostname=o.hostname,
            url=url,
            resources=self._offer_resources(o.resources, o.role),
            attributes=ag.attributes if ag is not None else (),
            executor_ids=executor_ids,
            # an agent on a machine DRAINING for maintenance: when it will be unavailable
            unavailability=self.agent_unavailability.get(o.agent_id) if self.agent_unavailability else None,
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

    # --- maintenance (the rules are in master.maintenance_rules) -----------------------------

    def _maintenance_joined(self, ag: AgentRec, now: float) -> None:
        """An agent (re-)registered: whether it is on a DRAINING machine, and with what
        unavailability (its offers carry it; its frameworks are sent inverse offers)."""
        unav = None
        if not self.maintenance.empty():
            hit = self.maintenance.machine_of(ag.hostname, ag.ip)
            if hit is not None and hit[0] not in self.maintenance.down:
                unav = hit[1].unavailability()
        if unav is None:
            self.agent_unavailability.pop(ag.agent_id, None)
        else:
            self.agent_unavailability[ag.agent_id] = unav
            self._inverse_soon(now)

    def _inverse_soon(self, at: float | None) -> None:
        if at is not None and (self.inverse_due is None or at < self.inverse_due):
            self.inverse_due = at

    def _rescind_inverse(self, recs: Iterable[InverseOfferRec], fx: list[Effect]) -> None:
        for rec in recs:
            fw = self.frameworks.get(rec.framework_id)
            if fw is not None and fw.connected:
                self._send(fw, mesos.Event.make_rescind_inverse_offer(mesos.OfferID(rec.offer_id)), fx)

    def _inverse_agent_gone(self, agent_id: str, fx: list[Effect]) -> None:
        """The agent left the cluster (unreachable, removed): its inverse offers are rescinded."""
        if self.inverse.outstanding or self.inverse.statuses:
            self._rescind_inverse(self.inverse.drop_agent(agent_id), fx)
        self.agent_unavailability.pop(agent_id, None)

    # --- frameworks -----------------------------------------------------------------------------

    def _unknown_task_pending(self, agent_id: str | None) -> bool:
        """During the re-registration window, a task we do not know may live on an agent that has
        not come back yet: give no answer about it."""
        if agent_id is not None:
            ag = self.agents.get(agent_id)
            return ag is not None and ag.phase is AgentPhase.RECOVERED
        return self.recovering()

    def _add_task(
        self,
        fw: FrameworkRec,
        ag: AgentRec,
        tk: mesos.TaskInfo,
        group_executor: mesos.ExecutorInfo | None,
        now: float,
        fx: list[Effect],
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
            info=tk if tk.agent_id is not None else evolve(tk, agent_id=mesos.AgentID(ag.agent_id)),
        )
        fw.tasks[rec.task_id] = rec
        ag.tasks.add((fw.framework_id, rec.task_id))
        if self.agent_unavailability and ag.agent_id in self.agent_unavailability:
            self._inverse_soon(now)  # a framework newly on a DRAINING machine: an inverse offer
        if executor is not None:
            fw.executors[(ag.agent_id, executor.executor_id.value)] = executor
        self.feed.task_added(rec, fx)

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
        task.move(state)
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
        self.feed.task_updated(task, state, status, now, fx)
        fw.tasks.pop(task.task_id, None)
        fw.completed[task.task_id] = task
        while len(fw.completed) > self.cfg.completed_tasks_per_framework:
            _, old = fw.completed.popitem(last=False)
            if old.status_update_uuid is not None and old.acked_uuid != old.status_update_uuid:
                # its terminal update is not acknowledged yet: the framework's ACKNOWLEDGE must
                # still find it (else the agent resends forever); bounded separately
                fw.awaiting_ack[old.task_id] = old
                while len(fw.awaiting_ack) > self.cfg.awaiting_ack_per_framework:
                    fw.awaiting_ack.popitem(last=False)
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

    def _agent_of_conn(self, conn_id: int) -> AgentRec | None:
        aid = self.conns.get(conn_id)
        if aid is None:
            return None
        ag = self.agents.get(aid)
        if ag is None or ag.conn_id != conn_id:
            return None
        return ag

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



