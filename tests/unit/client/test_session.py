"""The scheduler session (frameworks/client/session.py) fed facts by hand: exact outputs, no I/O,
no clock, no event loop."""

from __future__ import annotations

import pytest

from frameworks.client.demand import demand
from frameworks.client.errors import NotConnected
from frameworks.client.offers import UnknownOffer
from frameworks.client.session import (
    ACKS_PER_CALL,
    SILENT_MASTER,
    STREAM_ENDED,
    Acknowledge,
    BadFrame,
    Deliver,
    Disconnected,
    EventFrames,
    GiveUp,
    Reconnect,
    Resync,
    SchedulerSession,
)
from protocol import codec, recordio
from protocol.backoff import Backoff
from protocol.mesos import (
    Call,
    CallType,
    Capability,
    CapabilityType,
    CommandInfo,
    Event,
    FrameworkInfo,
    MasterCapability,
    MasterCapabilityType,
    MasterInfo,
    Offer,
    Reason,
    TaskInfo,
    TaskStatus,
)
from protocol.mesos_common import AgentID, FrameworkID, OfferID, TaskID
from protocol.resources import Resources
from protocol.task_states import TaskState

FID = "fw-1"
AGORA = MasterInfo(
    id="m1", ip=16777343, port=5050, capabilities=(MasterCapability(MasterCapabilityType.ACKNOWLEDGE_MANY),)
)


def session(*caps: CapabilityType, **kw: object) -> SchedulerSession:
    info = FrameworkInfo(user="u", name="t", roles=("*",), capabilities=tuple(Capability(type=c) for c in caps))
    backoff = Backoff(initial=1.0, maximum=4.0, jitter=0.0)
    return SchedulerSession(info, backoff, **kw)  # type: ignore[arg-type]


def subscribed(master: MasterInfo | None = None, heartbeat: float = 10.0) -> Event:
    return Event.make_subscribed(FrameworkID(FID), master, heartbeat)


def live(s: SchedulerSession, master: MasterInfo | None = None) -> Event:
    s.subscribe_call()
    s.stream_opened("stream-1")
    ev = subscribed(master)
    s.receive(ev, 0.0)
    return ev


def offer(oid: str, res: str, agent: str = "a1") -> Offer:
    return Offer(
        id=OfferID(oid),
        framework_id=FrameworkID(FID),
        agent_id=AgentID(agent),
        hostname="h",
        resources=Resources.parse(res).to_mesos(),
    )


def update(tid: str, state: TaskState, uuid: bytes | None = b"u" * 16, reason: Reason | None = None) -> TaskStatus:
    return TaskStatus(task_id=TaskID(tid), state=state, agent_id=AgentID("a1"), uuid=uuid, reason=reason)


def task(tid: str, res: str = "cpus:1;mem:64") -> TaskInfo:
    return TaskInfo(name=tid, task_id=TaskID(tid), resources=Resources.parse(res).to_mesos(), command=CommandInfo(value="true"))


# --- subscription -------------------------------------------------------------------------------


def test_subscribe_then_subscribed_delivers_and_resyncs() -> None:
    s = session()
    first = s.subscribe_call()
    assert first.type is CallType.SUBSCRIBE and first.framework_id is None
    assert first.subscribe is not None and first.subscribe.framework_info.failover_timeout == 60.0
    s.stream_opened("stream-1")
    assert not s.connected and s.stream_id is None
    ev = subscribed(AGORA)
    assert s.receive(ev, 0.0) == [Deliver(ev, "subscribed", (FID, AGORA)), Resync(True)]
    assert (s.connected, s.framework_id, s.stream_id, s.subscriptions) == (True, FID, "stream-1", 1)
    assert s.acknowledge_many_supported
    # nothing known yet: implicit reconciliation only; the demand (empty: it clears any the master
    # kept from before) goes once per subscription
    assert s.reconcile_calls() == [Call.make_reconcile(FrameworkID(FID))]
    assert s.demand_call() == Call.make_request(FrameworkID(FID), ())
    assert s.demand_call() is None
    s.demands.set("j", demand("cpus:1", 2))
    call = s.demand_call()
    assert call is not None and call.type is CallType.REQUEST
    assert s.demand_call() is None  # sent: unchanged since
    s.demand_unsent()  # the REQUEST failed: it goes again
    assert s.demand_call() == call


def test_calls_before_subscribing_raise_not_connected() -> None:
    s = session()
    for make in (lambda: s.revive(), lambda: s.kill("t"), lambda: s.reconcile(), lambda: s.teardown()):
        with pytest.raises(NotConnected):
            make()
    assert s.demand_call() is None


def test_refused_subscription_is_the_end() -> None:
    s = session()
    s.subscribe_call()
    assert s.refused("HTTP 403: denied") == [Deliver(None, "error", ("subscription refused: HTTP 403: denied",))]
    assert s.terminal and s.error_message == "subscription refused: HTTP 403: denied"
    assert s.connection_lost() == []  # no reconnect


def test_error_event_ends_the_session_without_reconnect() -> None:
    s = session()
    live(s)
    ev = Event.make_error("Framework has been removed")
    assert s.receive(ev, 1.0) == [Deliver(ev, "error", ("Framework has been removed",))]
    assert s.terminal
    assert s.connection_lost() == [Deliver(Disconnected(STREAM_ENDED), "disconnected")]


# --- heartbeats, reconnect, backoff, failover ---------------------------------------------------------


def test_silence_deadline_follows_the_heartbeat() -> None:
    s = session(heartbeat_misses=3.0, first_event_timeout=30.0)
    s.subscribe_call()
    s.stream_opened("stream-1")
    assert s.silence_limit == 30.0 and s.deadline(100.0) == 130.0  # before SUBSCRIBED
    s.receive(subscribed(heartbeat=10.0), 100.0)
    assert s.silence_limit == 30.0 and s.deadline(200.0) == 230.0  # 3 missed heartbeats of 10 s
    s.receive(Event.make_heartbeat(), 205.0)
    assert s.deadline(205.0) == 235.0
    s.connection_lost()
    s.receive(subscribed(heartbeat=0.0), 300.0)
    assert s.silence_limit is None and s.deadline(300.0) is None  # a master without heartbeats


def test_heartbeat_timeout_reconnects_with_backoff_and_fails_over_under_the_same_id() -> None:
    s = session()
    live(s)
    s.suppressed(["*"])
    s.receive(Event.make_offers((offer("o1", "cpus:2"),)), 1.0)
    assert len(s.offers) == 1
    assert s.connection_lost(SILENT_MASTER) == [
        Deliver(Disconnected(SILENT_MASTER), "disconnected"),
        Reconnect(1.0, SILENT_MASTER),
    ]
    assert not s.connected and s.stream_id is None and len(s.offers) == 0  # offers do not survive
    # the master stays away: each failed attempt doubles the delay, up to the maximum
    assert [s.connection_lost("refused") for _ in range(3)] == [
        [Reconnect(2.0, "refused")],
        [Reconnect(4.0, "refused")],
        [Reconnect(4.0, "refused")],
    ]
    again = s.subscribe_call()
    assert again.framework_id == FrameworkID(FID)  # failover: the same framework, its tasks kept
    assert again.subscribe is not None and again.subscribe.framework_info.id == FrameworkID(FID)
    assert again.subscribe.suppressed_roles == ("*",)
    s.stream_opened("stream-2")
    s.receive(subscribed(), 50.0)
    assert (s.framework_id, s.stream_id, s.subscriptions) == (FID, "stream-2", 2)
    # a live subscription resets the backoff
    assert s.connection_lost() == [Deliver(Disconnected(STREAM_ENDED), "disconnected"), Reconnect(1.0, STREAM_ENDED)]


def test_max_reconnects_gives_up() -> None:
    s = session(max_reconnects=2)
    s.subscribe_call()
    assert s.connection_lost("down") == [Reconnect(1.0, "down")]
    assert s.connection_lost("down") == [Reconnect(2.0, "down")]
    assert s.connection_lost("down") == [GiveUp("gave up after 2 reconnects: down")]
    assert s.terminal and s.error_message == "gave up after 2 reconnects: down"


def test_known_tasks_are_reconciled_explicitly_after_failover() -> None:
    s = session()
    live(s)
    s.receive(Event.make_update(update("t1", TaskState.TASK_RUNNING)), 1.0)
    s.connection_lost()
    s.stream_opened("stream-2")
    s.receive(subscribed(), 2.0)
    explicit, implicit = s.reconcile_calls()
    assert explicit.reconcile is not None and [(t.task_id.value, t.agent_id) for t in explicit.reconcile.tasks] == [
        ("t1", AgentID("a1"))
    ]
    assert implicit.reconcile is not None and implicit.reconcile.tasks == ()


# --- acknowledgements -----------------------------------------------------------------------------------


def test_reliable_updates_are_acknowledged_after_delivery() -> None:
    s = session()
    live(s)
    reliable = update("t1", TaskState.TASK_RUNNING)
    ev = Event.make_update(reliable)
    assert s.receive(ev, 1.0) == [Deliver(ev, "update", (reliable,)), Acknowledge(reliable)]
    assert s.tasks["t1"].state is TaskState.TASK_RUNNING
    # a reconciliation answer carries no uuid: nothing to acknowledge
    unreliable = update("t1", TaskState.TASK_RUNNING, uuid=None, reason=Reason.REASON_RECONCILIATION)
    ev2 = Event.make_update(unreliable)
    assert s.receive(ev2, 2.0) == [Deliver(ev2, "update", (unreliable,))]
    done = update("t1", TaskState.TASK_FINISHED)
    s.receive(Event.make_update(done), 3.0)
    assert "t1" not in s.tasks


def test_no_acknowledge_output_when_the_framework_acknowledges_itself() -> None:
    s = session(auto_acknowledge=False)
    live(s)
    st = update("t1", TaskState.TASK_RUNNING)
    ev = Event.make_update(st)
    assert s.receive(ev, 1.0) == [Deliver(ev, "update", (st,))]


def test_acknowledgements_batch_when_the_master_advertises_it_and_fall_back_on_400() -> None:
    s = session()
    live(s, AGORA)
    statuses = [update(f"t{i}", TaskState.TASK_RUNNING) for i in range(ACKS_PER_CALL + 2)]
    calls = s.acknowledgements(statuses)
    assert [c.type for c in calls] == [CallType.ACKNOWLEDGE_MANY, CallType.ACKNOWLEDGE_MANY]
    assert calls[1].acknowledge_many is not None and len(calls[1].acknowledge_many.acknowledgements) == 2
    assert (s.ack_calls, s.acks_sent) == (2, ACKS_PER_CALL + 2)
    # the master answered 400 to the second one: those two go one by one, batching stops
    singles = s.acknowledge_many_refused(calls[1:])
    assert [c.type for c in singles] == [CallType.ACKNOWLEDGE, CallType.ACKNOWLEDGE]
    assert [c.acknowledge.task_id.value for c in singles if c.acknowledge] == [f"t{ACKS_PER_CALL}", f"t{ACKS_PER_CALL + 1}"]
    assert (s.ack_calls, s.acks_sent, s.acknowledge_many_supported) == (4, ACKS_PER_CALL + 2, False)
    assert [c.type for c in s.acknowledgements(statuses[:2])] == [CallType.ACKNOWLEDGE, CallType.ACKNOWLEDGE]


def test_a_mesos_master_gets_one_acknowledge_per_update() -> None:
    s = session()
    live(s, MasterInfo(id="m", ip=0, port=5050))
    assert not s.acknowledge_many_supported
    calls = s.acknowledgements([update("a", TaskState.TASK_RUNNING), update("b", TaskState.TASK_RUNNING)])
    assert [c.type for c in calls] == [CallType.ACKNOWLEDGE, CallType.ACKNOWLEDGE]


# --- offers --------------------------------------------------------------------------------------------


def test_offers_updated_rescinded_and_declined() -> None:
    s = session(CapabilityType.REUSABLE_OFFERS)
    live(s)
    o1 = offer("o1", "cpus:2;mem:256")
    ev = Event.make_offers((o1,))
    assert s.receive(ev, 1.0) == [Deliver(ev, "offers", ([o1],))]
    launch = s.launch("o1", [task("t1")], now=2.0)
    assert launch.type is CallType.ACCEPT
    assert s.offers.get("o1").available == Resources.parse("cpus:1;mem:192")
    assert s.tasks["t1"].state is TaskState.TASK_STAGING and s.tasks["t1"].agent_id == "a1"
    # the master's remainder update (the same offer id) replaces the offer
    grown = offer("o1", "cpus:1;mem:192")
    s.receive(Event.make_offers((grown,)), 3.0)
    assert s.offers.get("o1").available == Resources.parse("cpus:1;mem:192")
    # rescinded: gone, the framework is told
    rescind = Event.make_rescind(OfferID("o1"))
    assert s.receive(rescind, 4.0) == [Deliver(rescind, "offer_rescinded", ("o1",))]
    assert "o1" not in s.offers
    with pytest.raises(UnknownOffer):
        s.launch("o1", [task("t2")], now=5.0)
    # declined: an update that crossed the DECLINE does not bring it back, nor reaches the framework
    s.receive(Event.make_offers((offer("o2", "cpus:1"),)), 6.0)
    decline = s.decline(["o2"], refuse_seconds=60)
    assert decline.decline is not None and decline.decline.filters is not None
    late = Event.make_offers((offer("o2", "cpus:2"),))
    assert s.receive(late, 7.0) == [Deliver(late)]
    assert "o2" not in s.offers


def test_an_accept_refused_for_invalid_offers_gives_the_lease_back() -> None:
    s = session(CapabilityType.REUSABLE_OFFERS)
    live(s)
    s.receive(Event.make_offers((offer("o1", "cpus:2;mem:256"),)), 1.0)
    s.launch("o1", [task("t1")], now=2.0)
    assert s.offers.get("o1").available.scalar("cpus") == 1
    s.receive(Event.make_update(update("t1", TaskState.TASK_ERROR, reason=Reason.REASON_INVALID_OFFERS)), 3.0)
    assert s.offers.get("o1").available.scalar("cpus") == 2 and "t1" not in s.tasks


def test_suppressed_roles_until_revived() -> None:
    s = session()
    live(s)
    assert s.suppress().type is CallType.SUPPRESS
    s.suppressed()
    assert s.suppressed_roles == {"*"}
    s.revived()
    assert s.suppressed_roles == set()


def test_idle_offers_and_kill_uses_the_known_agent() -> None:
    s = session(CapabilityType.REUSABLE_OFFERS)
    live(s)
    s.receive(Event.make_offers((offer("o1", "cpus:2"), offer("o2", "cpus:2", agent="a2"))), 10.0)
    s.launch("o1", [task("t1", "cpus:1")], now=20.0)
    assert s.idle_offers(now=24.0, older_than=5.0) == ["o2"]
    kill = s.kill("t1")
    assert kill.kill is not None and kill.kill.agent_id == AgentID("a1")


# --- the stream's bytes -----------------------------------------------------------------------------------


def test_frames_across_chunks_then_a_bad_frame() -> None:
    frames = EventFrames(codec.MSGPACK)
    wire = recordio.encode(codec.encode_msgpack(subscribed())) + recordio.encode(codec.encode_msgpack(Event.make_heartbeat()))
    assert list(frames.feed(wire[:7])) == []
    assert list(frames.feed(wire[7:])) == [subscribed(), Event.make_heartbeat()]
    # a good event ahead of a bad one in the same chunk still comes out
    events = frames.feed(recordio.encode(codec.encode_msgpack(Event.make_heartbeat())) + recordio.encode(b"\xc1 bad"))
    assert next(events) == Event.make_heartbeat()
    with pytest.raises(BadFrame, match="bad event from the master"):
        next(events)
    with pytest.raises(BadFrame, match="bad record header"):
        list(EventFrames(codec.JSON).feed(b"x\n{}"))


def test_a_bad_frame_is_a_lost_connection() -> None:
    s = session()
    live(s)
    with pytest.raises(BadFrame) as bad:
        list(EventFrames(codec.JSON).feed(b'7\n{"type:'))
    reason = str(bad.value)
    assert s.connection_lost(reason) == [Deliver(Disconnected(reason), "disconnected"), Reconnect(1.0, reason)]
