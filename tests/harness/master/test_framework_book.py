"""The framework book (``master.framework_book.FrameworkBook``, the core's ``framework_book``)
through its own API: SUBSCRIBE (new, refused), the FrameworkInfo checks, the stream closing,
UPDATE_FRAMEWORK's checks and removal, with exact effects. The cluster around it is built through
``MasterState.handle`` (``Harness``)."""

from __future__ import annotations

import attrs

from master import registry_ops as ops
from master.events import CloseStream, Effect, Persist, SendEvent, SubscribeReceived
from master.lifecycles import FrameworkPhase
from master.testing import Harness, framework_info, master_info, offers, persisted, task, to_agent, updates
from protocol import agent_channel as ac
from protocol import codec, mesos
from protocol.ids import new_framework_id
from protocol.task_states import TaskState

TS = TaskState


def test_a_new_framework_is_persisted_then_subscribed_with_a_heartbeat() -> None:
    h = Harness(heartbeat_interval=15.0)
    book, st = h.state.framework_book, h.state
    fx: list[Effect] = []
    info = framework_info("fw", failover_timeout=30.0)
    book.subscribe(SubscribeReceived("s1", mesos.Subscribe(framework_info=info)), h.now, fx)
    fid = new_framework_id("m1", 0)
    stored = attrs.evolve(info, id=mesos.FrameworkID(fid))
    assert fx == [
        Persist((ops.FrameworkAdded(fid, codec.encode_msgpack(stored), 30.0, h.now),)),
        SendEvent("s1", mesos.Event.make_subscribed(mesos.FrameworkID(fid), master_info(), 15.0)),
        SendEvent("s1", mesos.Event.make_heartbeat()),
    ]
    fw = st.frameworks[fid]
    assert (fw.phase, fw.stream_id, fw.roles, st.streams) == (FrameworkPhase.SUBSCRIBED, "s1", ("*",), {"s1": fid})
    assert st.calls == {"SUBSCRIBE": 1} and st.framework_seq == 1


def test_a_bad_framework_info_gets_an_error_event_and_the_stream_closes() -> None:
    h = Harness()
    fx: list[Effect] = []
    bad = attrs.evolve(framework_info("fw"), roles=("a", "a"))
    h.state.framework_book.subscribe(SubscribeReceived("s1", mesos.Subscribe(framework_info=bad)), h.now, fx)
    msg = "'FrameworkInfo.roles' contains duplicates"
    assert fx == [SendEvent("s1", mesos.Event.make_error(msg)), CloseStream("s1", msg)]
    assert h.state.frameworks == {} and h.state.framework_seq == 0


def test_check_info_names_each_problem() -> None:
    book = Harness().state.framework_book
    single = mesos.FrameworkInfo(user="u", name="n", roles=("a",))
    assert book.check_info(single) == "'FrameworkInfo.roles' requires the MULTI_ROLE capability"
    assert book.check_info(attrs.evolve(framework_info("fw"), failover_timeout=-1.0)) == (
        "'FrameworkInfo.failover_timeout' must be a finite non-negative number"
    )
    assert book.check_info(framework_info("fw", fid="../x")) == "invalid framework ID"
    assert book.check_info(framework_info("fw")) is None


def test_a_closed_stream_leaves_the_framework_disconnected_until_its_failover_deadline() -> None:
    h = Harness()
    fid, sid = h.subscribe(framework_info("fw", failover_timeout=60.0))
    fx: list[Effect] = []
    h.state.framework_book.stream_closed(sid, h.now, fx)
    fw = h.state.frameworks[fid]
    assert persisted(fx) == [ops.FrameworkDisconnected(fid, h.now + 60.0)]
    assert (fw.phase, fw.stream_id, fw.last_stream_id, fw.deadline) == (FrameworkPhase.DISCONNECTED, None, sid, h.now + 60.0)
    assert h.state.streams == {} and h.state.housekeeping_at == h.now + 60.0
    fx = []
    h.state.framework_book.stream_closed(sid, h.now, fx)  # (a second close of the same stream: nothing)
    assert fx == []


def test_update_problem_refuses_a_changed_principal() -> None:
    h = Harness()
    fid, _sid = h.subscribe(framework_info("fw", principal="p"))
    fw = h.state.frameworks[fid]
    other = framework_info("fw", principal="q")
    assert h.state.framework_book.update_problem(fw, other) == "Updating 'FrameworkInfo.principal' is unsupported"
    assert h.state.framework_book.update_problem(fw, framework_info("fw2", principal="p")) is None


def test_removal_kills_the_tasks_shuts_the_framework_down_on_its_agents_and_closes_the_stream() -> None:
    h = Harness(ping_interval=1e9, ping_timeout=1e9)
    fid, sid = h.subscribe(framework_info("fw"))
    aid, _conn = h.agent()
    (offer,) = offers(h.allocate(), sid)
    op = mesos.Operation(type=mesos.OperationType.LAUNCH, launch=mesos.Launch(task_infos=(task("t1"),)))
    h.call(fid, sid, mesos.Call.make_accept(mesos.FrameworkID(fid), (offer.id,), (op,)))
    fw = h.state.frameworks[fid]
    fx: list[Effect] = []
    h.state.framework_book.remove(fw, h.now, "gone", fx)
    assert persisted(fx) == [ops.FrameworkRemoved(fid, h.now)]
    assert CloseStream(sid, "gone") in fx
    assert to_agent(fx, ac.ShutdownFramework) == [ac.ShutdownFramework(framework_id=mesos.FrameworkID(fid))]
    assert updates(fx) == []  # (its stream is closed first: the KILLED it would get is not sent)
    assert fw.phase is FrameworkPhase.REMOVED and fw.completed["t1"].state is TS.TASK_KILLED
    assert fid not in h.state.frameworks and h.state.removed_framework_ids == {fid}
    assert list(h.state.completed_frameworks) == [fw] and h.state.counters["frameworks_removed"] == 1
    assert h.state.agents[aid].tasks == set()
    view = h.alloc.agent_view(aid)
    assert view is not None and view.free == h.state.agents[aid].total


def test_recovered_frameworks_keep_their_persisted_deadline_or_get_their_failover_timeout() -> None:
    h = Harness(agent_reregister_timeout=60.0)
    book, st = h.state.framework_book, h.state
    info = framework_info("fw", failover_timeout=300.0)
    book.recover((
        ops.FrameworkEntry("f1", codec.encode_msgpack(info), 300.0, registered_at=5.0),
        ops.FrameworkEntry("f2", codec.encode_msgpack(info), 10.0, registered_at=6.0, deadline=1234.0),
        ops.FrameworkEntry("f3", b"\xc1", 0.0),  # (undecodable: skipped)
    ), ("old",), h.now)
    assert sorted(st.frameworks) == ["f1", "f2"]
    f1, f2 = st.frameworks["f1"], st.frameworks["f2"]
    assert (f1.phase, f1.deadline, f1.registered_time, f1.info.id) == (
        FrameworkPhase.RECOVERED, h.now + 300.0, 5.0, mesos.FrameworkID("f1"))
    assert (f2.phase, f2.deadline) == (FrameworkPhase.RECOVERED, 1234.0)
    assert st.removed_framework_ids == {"old"}
