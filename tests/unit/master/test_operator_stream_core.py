"""The operator event feed of the pure core (``master.operator_events``): the right
``PublishOperatorEvent`` effects come out of the facts, in order, numbered, and none while no
operator stream is open."""

from __future__ import annotations

from collections.abc import Sequence

from master.events import (
    AgentConnectionLost,
    Effect,
    OperatorStreamClosed,
    OperatorStreamOpened,
    PublishOperatorEvent,
    StreamClosed,
    TeardownRequested,
)
from master.testing import Harness, framework_info, offers, task
from protocol import agent_channel as ac
from protocol import mesos
from protocol.task_states import TaskState

TS = TaskState
ET = mesos.OperatorEventType


def published(fx: Sequence[Effect]) -> list[mesos.OperatorEvent]:
    return [e.event for e in fx if isinstance(e, PublishOperatorEvent)]


def kinds(fx: Sequence[Effect]) -> list[ET | None]:
    return [e.type for e in published(fx)]


def watched(**cfg: float) -> Harness:
    h = Harness(**cfg)
    h.feed(OperatorStreamOpened("op1"))
    return h


def launch(h: Harness, fid: str, sid: str, offer: mesos.Offer, *tids: str) -> list[Effect]:
    op = mesos.Operation.make_launch(*(task(t) for t in tids))
    return h.call(fid, sid, mesos.Call.make_accept(mesos.FrameworkID(fid), (offer.id,), (op,)))


def test_nothing_is_published_while_no_operator_stream_is_open() -> None:
    h = Harness()
    fid, sid = h.subscribe()
    _, conn = h.agent()
    (o,) = offers(h.allocate(), sid)
    launch(h, fid, sid, o, "t1")
    h.status(conn, fid, "t1", TS.TASK_RUNNING)
    assert published(h.effects) == []
    assert h.state.operator_seq == 0


def test_framework_added_updated_removed() -> None:
    h = watched()
    fid, sid = h.subscribe(framework_info("fw", failover_timeout=60.0))
    (added,) = published(h.effects)
    assert added.type is ET.FRAMEWORK_ADDED
    assert added.framework_added is not None
    rec = added.framework_added.framework
    assert rec.framework_info.id == mesos.FrameworkID(fid)
    assert rec.framework_info.name == "fw"
    assert (rec.active, rec.connected, rec.recovered) == (True, True, False)

    # its stream drops: updated (disconnected); it comes back: updated (connected)
    fx = h.feed(StreamClosed(sid))
    (upd,) = published(fx)
    assert upd.type is ET.FRAMEWORK_UPDATED and upd.framework_updated is not None
    assert (upd.framework_updated.framework.active, upd.framework_updated.framework.connected) == (False, False)
    fid2, _ = h.subscribe(framework_info("fw", fid=fid, failover_timeout=60.0))
    assert fid2 == fid
    back = published(h.effects)[-1]
    assert back.type is ET.FRAMEWORK_UPDATED and back.framework_updated is not None
    assert back.framework_updated.framework.connected

    # the operator tears it down: removed, with its FrameworkInfo
    fx = h.feed(TeardownRequested(fid))
    (rem,) = published(fx)
    assert rem.type is ET.FRAMEWORK_REMOVED and rem.framework_removed is not None
    assert rem.framework_removed.framework_info.id == mesos.FrameworkID(fid)


def test_task_launch_and_updates() -> None:
    h = watched()
    fid, sid = h.subscribe()
    aid, conn = h.agent()
    (o,) = offers(h.allocate(), sid)
    fx = launch(h, fid, sid, o, "t1", "t2")
    adds = published(fx)
    assert [e.type for e in adds] == [ET.TASK_ADDED, ET.TASK_ADDED]
    t1 = adds[0].task_added
    assert t1 is not None
    assert (t1.task.task_id.value, t1.task.framework_id.value, t1.task.agent_id.value) == ("t1", fid, aid)
    assert t1.task.state is TS.TASK_STAGING
    assert t1.task.resources  # in Mesos form

    fx = h.status(conn, fid, "t1", TS.TASK_RUNNING, uuid=b"1" * 16)
    (run,) = published(fx)
    assert run.type is ET.TASK_UPDATED and run.task_updated is not None
    assert run.task_updated.framework_id.value == fid
    assert run.task_updated.state is TS.TASK_RUNNING
    assert run.task_updated.status.state is TS.TASK_RUNNING
    assert run.task_updated.status.uuid == b"1" * 16

    # a repeated update (same state) is not a change
    assert published(h.status(conn, fid, "t1", TS.TASK_RUNNING, uuid=b"1" * 16)) == []

    fx = h.status(conn, fid, "t1", TS.TASK_FINISHED, uuid=b"2" * 16)
    (fin,) = published(fx)
    assert fin.task_updated is not None and fin.task_updated.state is TS.TASK_FINISHED

    # the framework goes: its live task is KILLED first, then the framework is removed
    fx = h.feed(TeardownRequested(fid))
    evs = published(fx)
    assert [e.type for e in evs] == [ET.TASK_UPDATED, ET.FRAMEWORK_REMOVED]
    assert evs[0].task_updated is not None
    assert evs[0].task_updated.status.task_id.value == "t2"
    assert evs[0].task_updated.state is TS.TASK_KILLED


def test_events_are_numbered_in_order() -> None:
    h = watched()
    fid, sid = h.subscribe()
    h.agent()
    (o,) = offers(h.allocate(), sid)
    launch(h, fid, sid, o, "t1")
    seqs = [e.seq for e in h.effects if isinstance(e, PublishOperatorEvent)]
    assert seqs == list(range(1, len(seqs) + 1)) and len(seqs) == 3
    assert h.state.operator_seq == 3


def test_agent_added_and_removed_when_unreachable() -> None:
    h = watched(ping_interval=1, ping_timeout=3)
    fid, sid = h.subscribe(framework_info("fw", "PARTITION_AWARE"))
    fx_before = len(h.effects)
    aid, conn = h.agent("cpus:2;mem:1024", hostname="node-7")
    (add,) = published(h.effects[fx_before:])
    assert add.type is ET.AGENT_ADDED and add.agent_added is not None
    rec = add.agent_added.agent
    assert rec.agent_info.id == mesos.AgentID(aid)
    assert rec.agent_info.hostname == "node-7"
    assert rec.active
    assert {r.name for r in rec.total_resources} == {"cpus", "mem"}

    (o,) = offers(h.allocate(), sid)
    launch(h, fid, sid, o, "t1")
    h.status(conn, fid, "t1", TS.TASK_RUNNING)
    h.feed(AgentConnectionLost(conn))
    fx = h.advance(5)
    evs = published(fx)
    assert [e.type for e in evs] == [ET.AGENT_REMOVED, ET.TASK_UPDATED]
    assert evs[0].agent_removed is not None and evs[0].agent_removed.agent_id.value == aid
    assert evs[1].task_updated is not None and evs[1].task_updated.state is TS.TASK_UNREACHABLE

    # it comes back with its task: added again, the task running again
    rt = ac.RunningTask(
        framework_id=mesos.FrameworkID(fid), task_id=mesos.TaskID("t1"), state=TS.TASK_RUNNING, name="t1"
    )
    before = len(h.effects)
    h.agent("cpus:2;mem:1024", agent_id=aid, tasks=(rt,), hostname="node-7")
    evs = published(h.effects[before:])
    assert [e.type for e in evs] == [ET.AGENT_ADDED, ET.TASK_UPDATED]
    assert evs[1].task_updated is not None and evs[1].task_updated.state is TS.TASK_RUNNING


def test_agent_reregistering_after_failover_adds_its_tasks_and_framework() -> None:
    h = watched()
    rt = ac.RunningTask(
        framework_id=mesos.FrameworkID("F9"), task_id=mesos.TaskID("t9"), state=TS.TASK_RUNNING, name="t9"
    )
    h.agent(agent_id="A9", tasks=(rt,))
    evs = published(h.effects)
    assert [e.type for e in evs] == [ET.AGENT_ADDED, ET.FRAMEWORK_ADDED, ET.TASK_ADDED]
    assert evs[1].framework_added is not None and evs[1].framework_added.framework.recovered
    assert evs[2].task_added is not None and evs[2].task_added.task.state is TS.TASK_RUNNING


def test_closing_the_last_stream_stops_publishing() -> None:
    h = watched()
    h.feed(OperatorStreamOpened("op2"))
    h.feed(OperatorStreamClosed("op1"))
    h.subscribe()
    assert kinds(h.effects) == [ET.FRAMEWORK_ADDED]
    h.feed(OperatorStreamClosed("op2"))
    h.feed(OperatorStreamClosed("op2"))  # idempotent
    h.subscribe()
    assert kinds(h.effects) == [ET.FRAMEWORK_ADDED]
    assert h.state.feed.streams == set()
