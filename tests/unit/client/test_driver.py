"""The scheduler driver against the fake master: subscribe, offers, launch, reusable regrowth,
acknowledgements, reconnect/failover with the same id, reconciliation, events iterator."""

from __future__ import annotations

import asyncio

import attrs
import pytest

from frameworks.client.demand import demand, gang
from frameworks.client.driver import Disconnected, Scheduler, SchedulerDriver
from frameworks.client.fake import FakeMaster
from frameworks.client.offers import InsufficientResources
from frameworks.client.transport import NotConnected
from protocol.backoff import Backoff
from protocol.mesos import (
    CallType,
    CapabilityType,
    CommandInfo,
    Event,
    EventType,
    ExecutorInfo,
    ExecutorType,
    Offer,
    Operation,
    Reason,
    TaskInfo,
    TaskStatus,
)
from protocol.mesos_common import AgentID, ExecutorID, TaskID
from protocol.resources import Resources
from protocol.task_states import TaskState

from .conftest import DriverFactory, framework_info

REUSE = CapabilityType.REUSABLE_OFFERS


def task(tid: str, res: str = "cpus:1;mem:128") -> TaskInfo:
    return TaskInfo(
        name=tid, task_id=TaskID(tid), resources=Resources.parse(res).to_mesos(), command=CommandInfo(value="true")
    )


class Recorder(Scheduler):
    def __init__(self) -> None:
        self.calls: list[str] = []
        self.statuses: list[TaskStatus] = []
        self.offer_batches: list[list[Offer]] = []

    async def subscribed(self, driver: SchedulerDriver, framework_id: str, master_info: object) -> None:
        self.calls.append(f"subscribed:{framework_id}")

    def offers(self, driver: SchedulerDriver, offers: list[Offer]) -> None:
        self.offer_batches.append(offers)

    def update(self, driver: SchedulerDriver, status: TaskStatus) -> None:
        self.statuses.append(status)

    def disconnected(self, driver: SchedulerDriver) -> None:
        self.calls.append("disconnected")

    def error(self, driver: SchedulerDriver, message: str) -> None:
        self.calls.append(f"error:{message}")


async def test_subscribe_and_offers_fill_the_cache(master: FakeMaster, make_driver: DriverFactory) -> None:
    master.add_agent("cpus:4;mem:4096", attributes="rack:r1")
    rec = Recorder()
    d = make_driver(scheduler=rec)
    await d.start()
    fid = await d.wait_subscribed(5)
    await master.wait_for(lambda: len(d.offers) == 1)
    assert rec.calls == [f"subscribed:{fid}"]
    (offer,) = list(d.offers)
    assert offer.resources == Resources.parse("cpus:4;mem:4096")
    assert offer.attributes == {"rack": "r1"}
    # reconciliation after subscribing: implicit (no tasks known yet)
    await master.wait_for(lambda: master.calls_of(CallType.RECONCILE))


async def test_launch_runs_and_updates_are_acknowledged(master: FakeMaster, make_driver: DriverFactory) -> None:
    master.add_agent("cpus:2;mem:1024")
    rec = Recorder()
    d = make_driver(scheduler=rec)
    await d.start()
    await d.wait_subscribed(5)
    await master.wait_for(lambda: len(d.offers) == 1)
    (offer,) = list(d.offers)
    await d.launch(offer.offer_id, [task("t1")])
    assert offer.offer_id not in d.offers  # classic: the offer is consumed
    await master.wait_for(lambda: any(s.state is TaskState.TASK_RUNNING for s in rec.statuses))
    assert master.tasks["t1"].state is TaskState.TASK_RUNNING
    await master.wait_for(lambda: not master.unacknowledged)
    assert d.tasks["t1"].state is TaskState.TASK_RUNNING
    master.finish_task("t1")
    await master.wait_for(lambda: "t1" not in d.tasks)
    await master.wait_for(lambda: not master.unacknowledged)
    assert [a[0] for a in master.acks] == ["t1", "t1"]


async def test_reusable_offer_survives_accept_and_grows_back(master: FakeMaster, make_driver: DriverFactory) -> None:
    master.add_agent("cpus:2;mem:1024")
    d = make_driver(REUSE)
    await d.start()
    await d.wait_subscribed(5)
    await master.wait_for(lambda: len(d.offers) == 1)
    (offer,) = list(d.offers)
    oid = offer.offer_id
    await d.launch(oid, [task("t1"), task("t2")])
    assert d.offers.get(oid).resources == Resources.parse("mem:768")
    with pytest.raises(InsufficientResources):
        await d.launch(oid, [task("t3")])
    await master.wait_for(lambda: len(master.running()) == 2)
    master.finish_task("t1")
    await master.wait_for(lambda: d.offers.get(oid).resources.scalar("cpus") == 1)
    # the next task goes on the same offer id, no new allocation round
    await d.launch(oid, [task("t3")])
    await master.wait_for(lambda: master.tasks.get("t3") is not None and master.tasks["t3"].state is TaskState.TASK_RUNNING)
    assert master.tasks["t3"].offer_id == oid
    assert len(master.calls_of(CallType.DECLINE)) == 0


async def test_rescind_removes_offer(master: FakeMaster, make_driver: DriverFactory) -> None:
    master.add_agent("cpus:2;mem:1024")
    d = make_driver(REUSE)
    await d.start()
    await d.wait_subscribed(5)
    await master.wait_for(lambda: len(d.offers) == 1)
    (offer,) = list(d.offers)
    master.rescind(offer.offer_id)
    await master.wait_for(lambda: len(d.offers) == 0)


async def test_reconnect_fails_over_with_same_id_and_reconciles(
    master: FakeMaster, make_driver: DriverFactory
) -> None:
    master.add_agent("cpus:2;mem:1024")
    rec = Recorder()
    d = make_driver(scheduler=rec)
    events = d.events()
    await d.start()
    fid = await d.wait_subscribed(5)
    await master.wait_for(lambda: len(d.offers) == 1)
    (offer,) = list(d.offers)
    await d.launch(offer.offer_id, [task("t1")])
    await master.wait_for(lambda: not master.unacknowledged and master.tasks["t1"].state is TaskState.TASK_RUNNING)
    n_reconcile = len(master.calls_of(CallType.RECONCILE))

    master.disconnect()
    await master.wait_for(lambda: master.framework(fid).subscriptions == 2 and d.connected)
    assert d.framework_id == fid
    assert rec.calls == [f"subscribed:{fid}", "disconnected", f"subscribed:{fid}"]
    subs = master.calls_of(CallType.SUBSCRIBE)
    assert subs[-1].framework_id is not None and subs[-1].framework_id.value == fid
    await master.wait_for(lambda: len(master.calls_of(CallType.RECONCILE)) >= n_reconcile + 2)
    explicit, implicit = master.calls_of(CallType.RECONCILE)[-2:]
    assert explicit.reconcile is not None and [t.task_id.value for t in explicit.reconcile.tasks] == ["t1"]
    assert implicit.reconcile is not None and implicit.reconcile.tasks == ()
    await master.wait_for(
        lambda: any(s.reason is Reason.REASON_RECONCILIATION and s.uuid is None for s in rec.statuses)
    )
    assert d.tasks["t1"].state is TaskState.TASK_RUNNING

    kinds: list[str] = []
    async with asyncio.timeout(5):
        async for ev in events:
            kinds.append("DISCONNECTED" if isinstance(ev, Disconnected) else str(ev.type.name if ev.type else ""))
            if kinds.count("SUBSCRIBED") == 2:
                break
    assert kinds[0] == "SUBSCRIBED" and "DISCONNECTED" in kinds and "OFFERS" in kinds


async def test_master_down_then_up(master: FakeMaster, make_driver: DriverFactory) -> None:
    master.down = True
    d = make_driver()
    await d.start()
    with pytest.raises(TimeoutError):
        await d.wait_subscribed(0.05)
    with pytest.raises(NotConnected):
        await d.revive()
    master.down = False
    await d.wait_subscribed(5)


async def test_error_event_ends_the_driver(master: FakeMaster, make_driver: DriverFactory) -> None:
    rec = Recorder()
    d = make_driver(scheduler=rec)
    await d.start()
    fid = await d.wait_subscribed(5)
    master.send_error(fid, "Framework has been removed")
    async with asyncio.timeout(5):
        await d.join()
    assert rec.calls[-2:] == ["error:Framework has been removed", "disconnected"]
    assert d.error_message == "Framework has been removed"
    assert len(master.calls_of(CallType.SUBSCRIBE)) == 1


async def test_calls_decline_kill_revive_suppress_request_message(
    master: FakeMaster, make_driver: DriverFactory
) -> None:
    agent = master.add_agent("cpus:2;mem:1024")
    d = make_driver()
    await d.start()
    fid = await d.wait_subscribed(5)
    await master.wait_for(lambda: len(d.offers) == 1)
    (offer,) = list(d.offers)
    await d.decline([offer.offer_id], refuse_seconds=3600)
    assert len(d.offers) == 0
    assert agent in master.framework(fid).filters
    await d.revive()
    await master.wait_for(lambda: len(d.offers) == 1)
    await d.suppress()
    assert master.framework(fid).suppressed
    d.demands.set("job-1", demand("cpus:1;mem:128", 4))
    d.demands.set("gang-1", gang("g1", "cpus:1;gpus:1", 8, min_size=6, revocable_ok=False))
    assert await d.send_demand()
    assert not await d.send_demand()  # unchanged: not sent again
    reqs = master.framework(fid).requests
    assert [(r.count, r.gang_id, r.gang_min) for r in reqs] == [(8, "g1", 6), (4, None, None)]
    (offer,) = list(d.offers)
    await d.launch(offer.offer_id, [task("t1")])
    await master.wait_for(lambda: "t1" in master.tasks and master.tasks["t1"].state is TaskState.TASK_RUNNING)
    await d.kill("t1")
    await master.wait_for(lambda: master.tasks["t1"].state is TaskState.TASK_KILLED)
    await d.kill("nope")
    await d.message(agent, "exec-1", b"\x00hello")
    assert master.framework(fid).messages == [(agent, "exec-1", b"\x00hello")]
    await d.teardown()
    assert fid not in master.frameworks


async def test_bad_launch_gets_task_error_not_an_exception(master: FakeMaster, make_driver: DriverFactory) -> None:
    master.add_agent("cpus:1;mem:256")
    rec = Recorder()
    d = make_driver(scheduler=rec)
    await d.start()
    await d.wait_subscribed(5)
    await master.wait_for(lambda: len(d.offers) == 1)
    # an offer id the master does not know, through the raw ACCEPT (launch() refuses it locally)
    bad = TaskInfo(name="t1", task_id=TaskID("t1"), agent_id=AgentID("x"), resources=Resources.parse("cpus:1").to_mesos())
    await d.accept(["no-such-offer"], [Operation.make_launch(bad)])
    await master.wait_for(lambda: any(s.state is TaskState.TASK_ERROR for s in rec.statuses))
    err = next(s for s in rec.statuses if s.state is TaskState.TASK_ERROR)
    assert err.reason is Reason.REASON_INVALID_OFFERS


async def test_revocable_offers_only_with_capability(master: FakeMaster, make_driver: DriverFactory) -> None:
    master.add_agent("cpus:1;mem:256", revocable="cpus:4")
    plain = make_driver(name="plain")
    rev = make_driver(CapabilityType.REVOCABLE_RESOURCES, REUSE, name="rev")
    await plain.start()
    await plain.wait_subscribed(5)
    await master.wait_for(lambda: len(plain.offers) == 1)
    assert not next(iter(plain.offers)).resources.revocable()
    await rev.start()
    await rev.wait_subscribed(5)
    await master.wait_for(lambda: len(rev.offers) == 1)
    (o,) = list(rev.offers)
    assert o.resources == Resources.of(cpus=4, revocable=True)
    await rev.launch(o.offer_id, [task("r1", "cpus:2").__class__(
        name="r1", task_id=TaskID("r1"), resources=Resources.of(cpus=2, revocable=True).to_mesos())])
    await master.wait_for(lambda: "r1" in master.tasks and master.tasks["r1"].state is TaskState.TASK_RUNNING)
    master.revoke("r1")
    await master.wait_for(lambda: "r1" not in rev.tasks)
    assert master.tasks["r1"].statuses[-1].reason is Reason.REASON_CONTAINER_PREEMPTED


async def test_iterator_only_api(master: FakeMaster, make_driver: DriverFactory) -> None:
    master.add_agent("cpus:1;mem:256")
    d = make_driver(REUSE)
    seen: list[Event] = []
    async with d:
        async with asyncio.timeout(5):
            async for ev in d.events():
                assert isinstance(ev, Event)
                seen.append(ev)
                if ev.type is EventType.OFFERS:
                    assert ev.offers is not None
                    await d.launch(ev.offers.offers[0].id.value, [task("only", "cpus:1;mem:256")])
                if ev.type is EventType.UPDATE and ev.update is not None and ev.update.status.state is TaskState.TASK_RUNNING:
                    break
    assert seen[0].type is EventType.SUBSCRIBED


async def test_silent_master_is_a_disconnect_after_missed_heartbeats() -> None:
    master = FakeMaster(heartbeat_interval=0.02)
    d = SchedulerDriver(framework_info(), master.transport(), heartbeat_misses=3, backoff=Backoff(0.001, 0.001))
    async with d:
        fid = await d.wait_subscribed(5)
        # the fake sends no further heartbeats: after ~3 intervals the driver resubscribes
        await master.wait_for(lambda: master.framework(fid).subscriptions >= 2, 5)
        assert d.framework_id == fid


async def test_launch_group_and_reserve_unreserve(master: FakeMaster, make_driver: DriverFactory) -> None:
    agent = master.add_agent("cpus:4;mem:1024")
    d = make_driver(REUSE)
    await d.start()
    await d.wait_subscribed(5)
    await master.wait_for(lambda: len(d.offers) == 1)
    (offer,) = list(d.offers)
    oid = offer.offer_id
    executor = ExecutorInfo(executor_id=ExecutorID("grp"), type=ExecutorType.DEFAULT,
                            resources=Resources.parse("cpus:0.5;mem:64").to_mesos())
    await d.launch_group(oid, executor, [task("g1"), task("g2")])
    await master.wait_for(lambda: len(master.running()) == 2)
    assert d.offers.get(oid).resources == Resources.parse("cpus:1.5;mem:704")
    # a group that does not fit fails whole
    await d.launch_group(oid, attrs.evolve(executor, executor_id=ExecutorID("grp2")), [task("g3"), task("g4")],
                         claims=[])
    await master.wait_for(lambda: sum(1 for _ in master.calls_of(CallType.ACCEPT)) == 2)
    assert "g3" not in master.tasks and "g4" not in master.tasks
    # reserve one cpu for role ml, then give it back
    ml = Resources.of(cpus=1).reserve("ml")
    await d.reserve(oid, ml)
    await master.wait_for(lambda: master.agents[agent].total.reserved("ml") == ml)
    await d.wait_for(lambda: d.offers.get(oid).resources.reserved("ml") == ml)
    await d.unreserve(oid, ml)
    await master.wait_for(lambda: not master.agents[agent].total.reserved("ml"))



async def test_max_reconnects_gives_up_on_a_dead_master() -> None:
    master = FakeMaster()
    master.down = True
    d = SchedulerDriver(framework_info(), master.transport(), max_reconnects=3, backoff=Backoff(0.001, 0.001))
    async with d:
        async with asyncio.timeout(5):
            await d.join()
        assert d.error_message is not None and "gave up after 3 reconnects" in d.error_message
        with pytest.raises(NotConnected):
            await d.wait_subscribed(1)


async def test_decline_filter_expires_on_the_fake_clock() -> None:
    from protocol.clock import FakeClock

    clock = FakeClock()
    master = FakeMaster(clock=clock)
    master.add_agent("cpus:1;mem:128")
    d = SchedulerDriver(framework_info(), master.transport(), backoff=Backoff(0.001, 0.01))
    async with d:
        await d.wait_subscribed(5)
        await d.wait_for(lambda: len(d.offers) == 1)
        await d.decline(d.offers.offer_ids(), refuse_seconds=5)
        clock.advance(4)
        master.allocate()
        assert not master.offers
        clock.advance(2)
        master.allocate()
        await d.wait_for(lambda: len(d.offers) == 1)


async def test_suppression_survives_a_resubscription(master: FakeMaster, make_driver: DriverFactory) -> None:
    master.add_agent("cpus:1;mem:128")
    d = make_driver()
    await d.start()
    fid = await d.wait_subscribed(5)
    await d.suppress()
    assert d.suppressed_roles == {"*"}
    master.disconnect()
    await master.wait_for(lambda: master.framework(fid).subscriptions == 2)
    sub = master.calls_of(CallType.SUBSCRIBE)[-1].subscribe
    assert sub is not None and sub.suppressed_roles == ("*",)
    assert master.framework(fid).suppressed
    await d.wait_for(lambda: d.connected)
    await d.revive()
    assert not d.suppressed_roles
    await d.wait_for(lambda: len(d.offers) == 1)


async def test_a_failing_callback_is_logged_and_the_driver_keeps_going(
    master: FakeMaster, make_driver: DriverFactory, caplog: pytest.LogCaptureFixture
) -> None:
    class Broken(Scheduler):
        def offers(self, driver: SchedulerDriver, offers: list[Offer]) -> None:
            raise RuntimeError("framework bug")

    master.add_agent("cpus:1;mem:128")
    d = make_driver(scheduler=Broken())
    await d.start()
    await d.wait_subscribed(5)
    await d.wait_for(lambda: len(d.offers) == 1)
    (offer,) = list(d.offers)
    await d.launch(offer.offer_id, [task("after-bug", "cpus:1;mem:128")])
    await master.wait_for(lambda: "after-bug" in master.tasks and not master.unacknowledged)
    assert d.connected
    assert any("framework bug" in (r.exc_text or "") or "callback" in r.getMessage() for r in caplog.records)


async def test_decline_idle_gives_back_unused_leases() -> None:
    from protocol.clock import FakeClock

    clock = FakeClock()
    master = FakeMaster(clock=clock)
    master.add_agent("cpus:1;mem:128")
    master.add_agent("cpus:1;mem:128")
    d = SchedulerDriver(framework_info("idle", REUSE), master.transport(), clock=clock, backoff=Backoff(0.001, 0.01))
    async with d:
        await d.wait_subscribed(5)
        await d.wait_for(lambda: len(d.offers) == 2)
        busy, idle = d.offers.offer_ids()
        clock.advance(10)
        await d.launch(busy, [task("t", "cpus:0.5;mem:64")])  # touches the lease
        assert await d.decline_idle(older_than=5, refuse_seconds=60) == [idle]
        assert d.offers.offer_ids() == [busy]
        assert len(master.offers) == 1


async def test_event_iterators_close_and_end(master: FakeMaster, make_driver: DriverFactory) -> None:
    d = make_driver()
    it = d.events()
    await d.start()
    await d.wait_subscribed(5)
    first = await anext(it)
    assert isinstance(first, Event) and first.type is EventType.SUBSCRIBED
    await it.aclose()
    assert not d._queues  # no longer fed
    other = d.events()
    await d.stop()
    async with asyncio.timeout(5):
        rest = [ev async for ev in other]  # ends once the driver has finished
    assert all(isinstance(ev, (Event, Disconnected)) for ev in rest)
    assert [ev async for ev in d.events()] == []  # a finished driver yields nothing


async def test_launch_refused_for_invalid_offers_gives_the_lease_back(
    master: FakeMaster, make_driver: DriverFactory
) -> None:
    master.add_agent("cpus:2;mem:256")
    d = make_driver(REUSE)
    statuses: list[TaskStatus] = []
    d.scheduler.update = lambda driver, status: statuses.append(status)  # type: ignore[method-assign]
    await d.start()
    await d.wait_subscribed(5)
    await d.wait_for(lambda: len(d.offers) == 1)
    (offer,) = list(d.offers)
    del master.offers[offer.offer_id]  # the master dropped it; the RESCIND has not arrived yet
    await d.launch(offer.offer_id, [task("doomed")])
    assert d.offers.get(offer.offer_id).available.scalar("cpus") == 1
    await d.wait_for(lambda: any(s.state is TaskState.TASK_ERROR for s in statuses))
    assert statuses[-1].reason is Reason.REASON_INVALID_OFFERS
    assert d.offers.get(offer.offer_id).available.scalar("cpus") == 2


async def test_a_regrowth_crossing_our_decline_leaves_no_zombie(master: FakeMaster, make_driver: DriverFactory) -> None:
    master.add_agent("cpus:2;mem:256")
    d = make_driver(REUSE)
    await d.start()
    await d.wait_subscribed(5)
    await d.wait_for(lambda: len(d.offers) == 1)
    (offer,) = list(d.offers)
    oid = offer.offer_id
    await d.launch(oid, [task("t1")])
    await master.wait_for(lambda: "t1" in master.tasks and not master.unacknowledged)
    await d.wait_for(lambda: d.offers.get(oid).available.scalar("cpus") == 1)
    # the task ends: the master regrows the lease; our DECLINE of it crosses that update
    master.finish_task("t1")
    await d.decline([oid], refuse_seconds=3600)
    await d.wait_for(lambda: "t1" not in d.tasks)
    await master.wait_for(lambda: not master.unacknowledged)
    assert oid not in d.offers
    assert oid not in master.offers


async def test_launch_on_an_offer_not_in_the_cache_is_refused_locally(
    master: FakeMaster, make_driver: DriverFactory
) -> None:
    from frameworks.client.offers import UnknownOffer

    master.add_agent("cpus:2;mem:256")
    d = make_driver()
    await d.start()
    await d.wait_subscribed(5)
    await d.wait_for(lambda: len(d.offers) == 1)
    (offer,) = list(d.offers)
    await d.decline([offer.offer_id])
    sent = len(master.calls)
    with pytest.raises(UnknownOffer, match="not in the offer cache"):
        await d.launch(offer.offer_id, [task("late")])
    with pytest.raises(UnknownOffer):
        await d.launch("never-offered", [task("ghost")])
    executor = ExecutorInfo(executor_id=ExecutorID("e"), type=ExecutorType.DEFAULT)
    with pytest.raises(UnknownOffer):
        await d.launch_group("never-offered", executor, [task("g")])
    assert len(master.calls) == sent  # nothing reached the master
    assert "late" not in d.tasks and "ghost" not in d.tasks
