"""A fake master for testing frameworks without a network.

``FakeMaster`` is an in-process scheduler-API master: fake agents with resources (and optional
revocable capacity), offers (classic, or reusable leases for frameworks with REUSABLE_OFFERS),
filters, REVIVE/SUPPRESS, REQUEST recording, reliable status updates with uuids and
acknowledgements, reconciliation, kills and teardown. Launching marks tasks RUNNING at once;
the test decides when tasks finish or fail (``finish_task``), revokes revocable tasks, rescinds
offers and breaks connections (``disconnect``) to exercise failover.

Frameworks reach it through ``master.transport()`` (a ``Transport``); calls and events travel
through the msgpack codec unless ``wire=False``, so schema mistakes show up here as well.

    master = FakeMaster()
    master.add_agent("cpus:4;mem:4096", attributes="rack:r1")
    driver = SchedulerDriver(framework_info, master.transport(), MyScheduler())
    async with driver:
        await master.wait_for(lambda: master.tasks_in(TaskState.TASK_RUNNING))
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable, Iterable
from typing import Any

import attrs

from frameworks.client.memory import MemoryStream, MemoryTransport
from frameworks.client.transport import CallRejected
from protocol.clock import Clock, SystemClock
from protocol.mesos import (
    Call,
    CallType,
    CapabilityType,
    Event,
    EventType,
    FrameworkInfo,
    MasterCapability,
    MasterCapabilityType,
    MasterInfo,
    Offer,
    Operation,
    OperationType,
    Reason,
    Request,
    Source,
    TaskInfo,
    TaskStatus,
    validate_call,
)
from protocol.mesos_common import AgentID, ExecutorID, FrameworkID, OfferID, TaskID
from protocol.resources import Resources, attributes_to_mesos, parse_attributes
from protocol.task_states import TaskState, is_terminal


@attrs.define
class FakeAgent:
    agent_id: str
    hostname: str
    total: Resources  # regular and revocable entries
    attributes: dict[str, str | float]
    active: bool = True


@attrs.define
class FakeTask:
    task_id: str
    framework_id: str
    agent_id: str
    resources: Resources
    state: TaskState
    info: TaskInfo
    offer_id: str | None = None
    statuses: list[TaskStatus] = attrs.field(factory=list)


@attrs.define
class FakeOffer:
    offer_id: str
    framework_id: str
    agent_id: str
    resources: Resources
    created: float


@attrs.define
class FakeFramework:
    framework_id: str
    info: FrameworkInfo
    stream: MemoryStream | None = None
    suppressed: bool = False
    filters: dict[str, float] = attrs.field(factory=dict)  # agent id -> refused until
    requests: tuple[Request, ...] = ()
    messages: list[tuple[str, str, bytes]] = attrs.field(factory=list)
    subscriptions: int = 0

    @property
    def connected(self) -> bool:
        return self.stream is not None and not self.stream.closed

    def capable(self, cap: CapabilityType) -> bool:
        return any(c.type is cap for c in self.info.capabilities)

    @property
    def reusable(self) -> bool:
        return self.capable(CapabilityType.REUSABLE_OFFERS)

    @property
    def revocable(self) -> bool:
        return self.capable(CapabilityType.REVOCABLE_RESOURCES)


class FakeMaster:
    def __init__(
        self,
        clock: Clock | None = None,
        wire: bool = True,
        heartbeat_interval: float = 15.0,
        acknowledge_many: bool = True,
        advertise_acknowledge_many: bool | None = None,
    ) -> None:
        """``acknowledge_many=False`` makes the fake answer ACKNOWLEDGE_MANY with 400 like a Mesos
        master; ``advertise_acknowledge_many`` (default: the same) whether SUBSCRIBED says so."""
        self.clock: Clock = clock or SystemClock()
        self.acknowledge_many = acknowledge_many
        self.wire = wire
        self.heartbeat_interval = heartbeat_interval
        self.agents: dict[str, FakeAgent] = {}
        self.frameworks: dict[str, FakeFramework] = {}
        self.tasks: dict[str, FakeTask] = {}
        self.offers: dict[str, FakeOffer] = {}
        self.calls: list[Call] = []
        self.acks: list[tuple[str, bytes]] = []
        self.unacknowledged: dict[bytes, str] = {}  # status uuid -> task id
        self.down = False
        self._ids = itertools.count(1)
        self._waiters: list[asyncio.Future[None]] = []
        advertise = acknowledge_many if advertise_acknowledge_many is None else advertise_acknowledge_many
        self.master_info = MasterInfo(
            id="fake-master",
            ip=0x0100007F,
            port=5050,
            hostname="localhost",
            version="1.11.0",
            capabilities=(MasterCapability(type=MasterCapabilityType.ACKNOWLEDGE_MANY),) if advertise else (),
        )

    # --- wiring --------------------------------------------------------------------------------

    def transport(self) -> MemoryTransport:
        return MemoryTransport(self, self.wire)

    def _next(self, prefix: str) -> str:
        return f"{prefix}{next(self._ids)}"

    def _notify(self) -> None:
        waiters, self._waiters = self._waiters, []
        for w in waiters:
            if not w.done():
                w.set_result(None)

    async def wait_for(self, predicate: Callable[[], Any], within: float = 30.0) -> Any:
        """Wait until ``predicate()`` is truthy (re-checked after every master change)."""
        async with asyncio.timeout(within):
            while True:
                value = predicate()
                if value:
                    return value
                fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
                self._waiters.append(fut)
                await fut

    # --- test controls --------------------------------------------------------------------------

    def add_agent(
        self,
        resources: Resources | str,
        hostname: str | None = None,
        attributes: dict[str, str | float] | str | None = None,
        revocable: Resources | str | None = None,
    ) -> str:
        agent_id = self._next("agent-")
        total = Resources.parse(resources) if isinstance(resources, str) else resources
        if revocable is not None:
            rev = Resources.parse(revocable) if isinstance(revocable, str) else revocable
            total = total + rev.as_revocable()
        attrs_ = parse_attributes(attributes) if isinstance(attributes, str) else dict(attributes or {})
        self.agents[agent_id] = FakeAgent(agent_id, hostname or f"host-{agent_id}", total, attrs_)
        self.allocate()
        return agent_id

    def remove_agent(self, agent_id: str) -> None:
        """The agent is lost: its offers are rescinded, its tasks become TASK_LOST, FAILURE is sent."""
        agent = self.agents.pop(agent_id)
        for o in [o for o in self.offers.values() if o.agent_id == agent.agent_id]:
            self.rescind(o.offer_id)
        for t in [t for t in self.tasks.values() if t.agent_id == agent_id and not is_terminal(t.state)]:
            self._transition(t, TaskState.TASK_LOST, reason=Reason.REASON_AGENT_REMOVED, reliable=False)
        for fw in self.frameworks.values():
            if fw.connected:
                assert fw.stream is not None
                fw.stream.push(Event.make_failure(AgentID(agent_id)))
        self._notify()

    def finish_task(
        self,
        task_id: str,
        state: TaskState = TaskState.TASK_FINISHED,
        message: str | None = None,
        reason: Reason | None = None,
    ) -> None:
        t = self.tasks[task_id]
        if not is_terminal(state):
            raise ValueError(f"{state} is not terminal; use set_state")
        self._transition(t, state, message=message, reason=reason)

    def fail_task(self, task_id: str, message: str = "exited with status 1") -> None:
        self.finish_task(task_id, TaskState.TASK_FAILED, message)

    def set_state(self, task_id: str, state: TaskState, message: str | None = None) -> None:
        self._transition(self.tasks[task_id], state, message=message)

    def revoke(self, task_id: str) -> None:
        """Evict a task on revocable resources (TASK_KILLED, REASON_CONTAINER_PREEMPTED)."""
        t = self.tasks[task_id]
        self._transition(t, TaskState.TASK_KILLED, message="revocable resources reclaimed",
                         reason=Reason.REASON_CONTAINER_PREEMPTED)

    def rescind(self, offer_id: str) -> None:
        o = self.offers.pop(offer_id)
        fw = self.frameworks.get(o.framework_id)
        if fw is not None and fw.connected:
            assert fw.stream is not None
            fw.stream.push(Event.make_rescind(OfferID(offer_id)))
        self._notify()

    def disconnect(self, framework_id: str | None = None) -> None:
        """Break the event stream(s); the framework stays registered (failover keeps its tasks)."""
        for fw in self.frameworks.values():
            if framework_id in (None, fw.framework_id) and fw.stream is not None:
                self._detach(fw)
        self._notify()

    def send_error(self, framework_id: str, message: str) -> None:
        fw = self.frameworks[framework_id]
        if fw.stream is not None:
            fw.stream.push(Event.make_error(message))
            self._detach(fw)
        self._notify()

    def heartbeat(self) -> None:
        for fw in self.frameworks.values():
            if fw.stream is not None:
                fw.stream.push(Event(type=EventType.HEARTBEAT))

    # --- views ------------------------------------------------------------------------------------

    def framework(self, framework_id: str | None = None) -> FakeFramework:
        if framework_id is None:
            if len(self.frameworks) != 1:
                raise KeyError(f"{len(self.frameworks)} frameworks; name one")
            return next(iter(self.frameworks.values()))
        return self.frameworks[framework_id]

    def tasks_in(self, *states: TaskState) -> list[FakeTask]:
        return [t for t in self.tasks.values() if t.state in states]

    def running(self) -> list[FakeTask]:
        return self.tasks_in(TaskState.TASK_RUNNING)

    def calls_of(self, t: CallType) -> list[Call]:
        return [c for c in self.calls if c.type is t]

    def offers_of(self, framework_id: str) -> list[FakeOffer]:
        return [o for o in self.offers.values() if o.framework_id == framework_id]

    def used(self, agent_id: str) -> Resources:
        return Resources.sum(
            t.resources for t in self.tasks.values() if t.agent_id == agent_id and not is_terminal(t.state)
        )

    def offered(self, agent_id: str) -> Resources:
        return Resources.sum(o.resources for o in self.offers.values() if o.agent_id == agent_id)

    def free(self, agent_id: str) -> Resources:
        return self.agents[agent_id].total - self.used(agent_id) - self.offered(agent_id)

    # --- allocation ---------------------------------------------------------------------------------

    def allocate(self) -> None:
        """Offer every agent's free resources to subscribed, unsuppressed, unfiltered frameworks
        (round-robin across frameworks per agent)."""
        now = self.clock.now()
        fws = [f for f in self.frameworks.values() if f.connected and not f.suppressed]
        if not fws:
            self._notify()
            return
        for i, agent in enumerate(list(self.agents.values())):
            free = self.free(agent.agent_id)
            if not free:
                continue
            order = fws[i % len(fws):] + fws[: i % len(fws)]
            for fw in order:
                until = fw.filters.get(agent.agent_id)
                if until is not None and until > now:
                    continue
                share = free if fw.revocable else free.non_revocable()
                if not share:
                    continue
                self._make_offer(fw, agent, share, now)
                free = free - share
                if not free:
                    break
        self._notify()

    def _make_offer(self, fw: FakeFramework, agent: FakeAgent, res: Resources, now: float) -> None:
        existing = [o for o in self.offers_of(fw.framework_id) if o.agent_id == agent.agent_id] if fw.reusable else []
        if existing:
            o = existing[0]
            o.resources = o.resources + res
        else:
            o = FakeOffer(self._next("offer-"), fw.framework_id, agent.agent_id, res, now)
            self.offers[o.offer_id] = o
        self._send_offer(fw, o)

    def _send_offer(self, fw: FakeFramework, o: FakeOffer) -> None:
        if fw.stream is None:
            return
        agent = self.agents[o.agent_id]
        fw.stream.push(
            Event.make_offers(
                (
                    Offer(
                        id=OfferID(o.offer_id),
                        framework_id=FrameworkID(fw.framework_id),
                        agent_id=AgentID(o.agent_id),
                        hostname=agent.hostname,
                        resources=o.resources.to_mesos(),
                        attributes=attributes_to_mesos(agent.attributes),
                    ),
                )
            )
        )

    # --- the scheduler API --------------------------------------------------------------------------

    def subscribe(self, call: Call, wire: bool = True) -> MemoryStream:
        self.calls.append(call)
        problem = validate_call(call)
        if problem:
            raise CallRejected(400, f"Failed to validate scheduler::Call: {problem}")
        assert call.subscribe is not None
        info = call.subscribe.framework_info
        fid = info.id.value if info.id is not None else self._next("fake-fw-")
        fw = self.frameworks.get(fid)
        if fw is None:
            fw = FakeFramework(fid, attrs.evolve(info, id=FrameworkID(fid)))
            self.frameworks[fid] = fw
        else:
            fw.info = attrs.evolve(info, id=FrameworkID(fid))
            if fw.stream is not None:
                self._detach(fw)
        fw.subscriptions += 1
        fw.suppressed = bool(call.subscribe.suppressed_roles)
        stream = MemoryStream(self._next("stream-"), wire, self._notify)
        fw.stream = stream
        stream.push(Event.make_subscribed(FrameworkID(fid), self.master_info, self.heartbeat_interval))
        self.heartbeat()
        self.allocate()
        return stream

    def _detach(self, fw: FakeFramework) -> None:
        if fw.stream is not None:
            fw.stream.end()
            fw.stream = None
        for o in self.offers_of(fw.framework_id):
            del self.offers[o.offer_id]  # a disconnected framework's offers go back to the pool

    def handle(self, call: Call, stream_id: str | None) -> None:
        self.calls.append(call)
        if call.type is CallType.ACKNOWLEDGE_MANY and not self.acknowledge_many:
            raise CallRejected(400, "Failed to convert JSON into Call protobuf: unknown enum name 'ACKNOWLEDGE_MANY'")
        problem = validate_call(call)
        if problem:
            raise CallRejected(400, f"Failed to validate scheduler::Call: {problem}")
        assert call.framework_id is not None
        fw = self.frameworks.get(call.framework_id.value)
        if fw is None:
            raise CallRejected(400, "Framework cannot be found")
        if not fw.connected:
            raise CallRejected(403, "Framework is not subscribed")
        assert fw.stream is not None
        if stream_id != fw.stream.stream_id:
            raise CallRejected(400, f"The stream ID '{stream_id}' included in this request didn't match")
        handler = getattr(self, f"_on_{call.type.name.lower()}" if call.type else "", None)
        if handler is not None:
            handler(fw, call)
        self._notify()

    def _on_teardown(self, fw: FakeFramework, call: Call) -> None:
        for t in self.tasks.values():
            if t.framework_id == fw.framework_id and not is_terminal(t.state):
                t.state = TaskState.TASK_KILLED
        self._detach(fw)
        del self.frameworks[fw.framework_id]
        self.allocate()

    def _on_accept(self, fw: FakeFramework, call: Call) -> None:
        """Operations apply in order against the pooled offers (all on one agent): LAUNCH task by
        task, LAUNCH_GROUP all or nothing (with its executor's resources), RESERVE/UNRESERVE turn
        unreserved resources into dynamically reserved ones (and back) on the agent too."""
        assert call.accept is not None
        acc = call.accept
        offers = [self.offers.get(o.value) for o in acc.offer_ids]
        valid = (
            bool(offers)
            and all(o is not None and o.framework_id == fw.framework_id for o in offers)
            and len({o.agent_id for o in offers if o is not None}) == 1
        )
        if not valid:
            for op in acc.operations:
                for t in _tasks_of(op):
                    self._error(fw, t, Reason.REASON_INVALID_OFFERS, "offer is invalid, rescinded or gone")
            return
        live = [o for o in offers if o is not None]
        pool = Resources.sum(o.resources for o in live)
        agent_id = live[0].agent_id
        agent = self.agents[agent_id]
        home = live[0]
        for op in acc.operations:
            if op.type is OperationType.RESERVE and op.reserve is not None:
                res = Resources.from_mesos(op.reserve.resources)
                if pool.contains(res.unreserve()):
                    pool = pool - res.unreserve() + res
                    agent.total = agent.total - res.unreserve() + res
            elif op.type is OperationType.UNRESERVE and op.unreserve is not None:
                res = Resources.from_mesos(op.unreserve.resources)
                if pool.contains(res):
                    pool = pool - res + res.unreserve()
                    agent.total = agent.total - res + res.unreserve()
            elif op.type is OperationType.LAUNCH_GROUP and op.launch_group is not None:
                group = op.launch_group
                tasks = group.task_group.tasks
                need_all = Resources.from_mesos(group.executor.resources) + Resources.sum(
                    Resources.from_mesos(t.resources) for t in tasks
                )
                bad = self._check_tasks(tasks, agent_id) or (
                    None if pool.contains(need_all) else f"task group uses more than the offer holds: {need_all}"
                )
                if bad:
                    for t in tasks:
                        self._error(fw, t, Reason.REASON_TASK_GROUP_INVALID, bad)
                    continue
                pool = pool - need_all
                for k, t in enumerate(tasks):
                    extra = Resources.from_mesos(group.executor.resources) if k == 0 else Resources.empty()
                    self._start(fw, t, agent_id, home.offer_id, Resources.from_mesos(t.resources) + extra)
            elif op.type is OperationType.LAUNCH and op.launch is not None:
                for t in op.launch.task_infos:
                    need = Resources.from_mesos(t.resources)
                    if t.executor is not None:
                        need = need + Resources.from_mesos(t.executor.resources)
                    bad = self._check_tasks((t,), agent_id) or (
                        None if need and pool.contains(need) else f"task uses more than the offer holds: {need}"
                    )
                    if bad:
                        self._error(fw, t, Reason.REASON_TASK_INVALID, bad)
                        continue
                    pool = pool - need
                    self._start(fw, t, agent_id, home.offer_id, need)
        for o in live[1:]:
            del self.offers[o.offer_id]
        if fw.reusable:
            home.resources = pool  # the lease survives with its remainder (as the real allocator:
            self._send_offer(fw, home)  # an OFFERS event repeating the id with what is left)
        else:
            del self.offers[home.offer_id]
            refuse = acc.filters.effective_refuse_seconds() if acc.filters is not None else 5.0
            if pool and refuse > 0:
                fw.filters[agent_id] = self.clock.now() + refuse
            self.allocate()

    def _check_tasks(self, tasks: Iterable[TaskInfo], agent_id: str) -> str | None:
        for t in tasks:
            if t.task_id.value in self.tasks and not is_terminal(self.tasks[t.task_id.value].state):
                return f"task {t.task_id.value} already exists"
            if t.agent_id is not None and t.agent_id.value != agent_id:
                return "task agent_id does not match the offer"
        return None

    def _start(self, fw: FakeFramework, t: TaskInfo, agent_id: str, offer_id: str, res: Resources) -> None:
        task = FakeTask(t.task_id.value, fw.framework_id, agent_id, res, TaskState.TASK_STAGING, t, offer_id=offer_id)
        self.tasks[task.task_id] = task
        self._transition(task, TaskState.TASK_RUNNING)

    def _error(self, fw: FakeFramework, t: TaskInfo, reason: Reason, message: str) -> None:
        status = TaskStatus(
            task_id=t.task_id, state=TaskState.TASK_ERROR, message=message, source=Source.SOURCE_MASTER,
            reason=reason, agent_id=t.agent_id, timestamp=self.clock.now(),
        )
        if fw.stream is not None:
            fw.stream.push(Event.make_update(status))

    def _on_decline(self, fw: FakeFramework, call: Call) -> None:
        assert call.decline is not None
        refuse = call.decline.filters.effective_refuse_seconds() if call.decline.filters else 5.0
        for oid in call.decline.offer_ids:
            o = self.offers.get(oid.value)
            if o is None or o.framework_id != fw.framework_id:
                continue
            del self.offers[o.offer_id]
            if refuse > 0:
                fw.filters[o.agent_id] = self.clock.now() + refuse
        self.allocate()

    def _on_revive(self, fw: FakeFramework, call: Call) -> None:
        fw.filters.clear()
        fw.suppressed = False
        self.allocate()

    def _on_suppress(self, fw: FakeFramework, call: Call) -> None:
        fw.suppressed = True

    def _on_kill(self, fw: FakeFramework, call: Call) -> None:
        assert call.kill is not None
        t = self.tasks.get(call.kill.task_id.value)
        if t is None or t.framework_id != fw.framework_id:
            assert fw.stream is not None
            fw.stream.push(Event.make_update(TaskStatus(
                task_id=call.kill.task_id, state=TaskState.TASK_LOST, source=Source.SOURCE_MASTER,
                reason=Reason.REASON_RECONCILIATION, message="unknown task", timestamp=self.clock.now(),
            )))
            return
        if not is_terminal(t.state):
            self._transition(t, TaskState.TASK_KILLED, message="killed by the framework")

    def _on_acknowledge(self, fw: FakeFramework, call: Call) -> None:
        assert call.acknowledge is not None
        self.acks.append((call.acknowledge.task_id.value, call.acknowledge.uuid))
        self.unacknowledged.pop(call.acknowledge.uuid, None)

    def _on_acknowledge_many(self, fw: FakeFramework, call: Call) -> None:
        assert call.acknowledge_many is not None
        for ack in call.acknowledge_many.acknowledgements:
            self.acks.append((ack.task_id.value, ack.uuid))
            self.unacknowledged.pop(ack.uuid, None)

    def _on_reconcile(self, fw: FakeFramework, call: Call) -> None:
        assert call.reconcile is not None and fw.stream is not None
        asked = call.reconcile.tasks
        if not asked:
            mine = [t for t in self.tasks.values() if t.framework_id == fw.framework_id and not is_terminal(t.state)]
            for t in mine:
                fw.stream.push(Event.make_update(self._reconcile_status(t)))
            return
        for rt in asked:
            known = self.tasks.get(rt.task_id.value)
            if known is not None and known.framework_id == fw.framework_id:
                fw.stream.push(Event.make_update(self._reconcile_status(known)))
            else:
                fw.stream.push(Event.make_update(TaskStatus(
                    task_id=rt.task_id, state=TaskState.TASK_LOST, source=Source.SOURCE_MASTER,
                    reason=Reason.REASON_RECONCILIATION, agent_id=rt.agent_id, timestamp=self.clock.now(),
                    message="task unknown to the master",
                )))

    def _reconcile_status(self, t: FakeTask) -> TaskStatus:
        return TaskStatus(
            task_id=TaskID(t.task_id), state=t.state, source=Source.SOURCE_MASTER,
            reason=Reason.REASON_RECONCILIATION, agent_id=AgentID(t.agent_id), timestamp=self.clock.now(),
        )

    def _on_request(self, fw: FakeFramework, call: Call) -> None:
        fw.requests = call.all_requests()

    def _on_message(self, fw: FakeFramework, call: Call) -> None:
        assert call.message is not None
        m = call.message
        fw.messages.append((m.agent_id.value, m.executor_id.value, m.data))

    def send_executor_message(self, framework_id: str, agent_id: str, executor_id: str, data: bytes) -> None:
        fw = self.frameworks[framework_id]
        if fw.stream is not None:
            fw.stream.push(Event.make_message(AgentID(agent_id), ExecutorID(executor_id), data))

    # --- task transitions ------------------------------------------------------------------------------

    def _transition(
        self,
        t: FakeTask,
        state: TaskState,
        message: str | None = None,
        reason: Reason | None = None,
        reliable: bool = True,
    ) -> None:
        t.state = state
        status_uuid = self._next("uuid-").encode().ljust(16, b"\0")[:16] if reliable else None
        status = TaskStatus(
            task_id=TaskID(t.task_id),
            state=state,
            message=message,
            source=Source.SOURCE_EXECUTOR if reliable else Source.SOURCE_MASTER,
            reason=reason,
            agent_id=AgentID(t.agent_id),
            executor_id=ExecutorID(t.task_id),
            timestamp=self.clock.now(),
            uuid=status_uuid,
        )
        t.statuses.append(status)
        if status_uuid is not None:
            self.unacknowledged[status_uuid] = t.task_id
        fw = self.frameworks.get(t.framework_id)
        if fw is not None and fw.stream is not None:
            fw.stream.push(Event.make_update(status))
        if is_terminal(state):
            self._release(t)
        self._notify()

    def _release(self, t: FakeTask) -> None:
        """A finished task's resources flow back into the lease it came from, if still held."""
        fw = self.frameworks.get(t.framework_id)
        home = self.offers.get(t.offer_id) if t.offer_id else None
        if fw is not None and fw.reusable and home is not None and t.agent_id in self.agents:
            home.resources = home.resources + t.resources
            self._send_offer(fw, home)
        else:
            self.allocate()


def _tasks_of(op: Operation) -> tuple[TaskInfo, ...]:
    if op.launch is not None:
        return op.launch.task_infos
    if op.launch_group is not None:
        return op.launch_group.task_group.tasks
    return ()


def tasks_of(master: FakeMaster, framework_id: str) -> Iterable[FakeTask]:
    return (t for t in master.tasks.values() if t.framework_id == framework_id)
