"""A task of a framework that is not partition-aware is reported TASK_LOST when its agent becomes
unreachable; when the agent comes back the task is killed, and what the agent reports about it
(the kill, or how it ended meanwhile) is acknowledged on the framework's behalf: the framework
gets exactly one terminal update."""

from __future__ import annotations

from master.events import AgentConnectionLost
from master.testing import Harness, framework_info, offers, task, to_agent, updates
from protocol import agent_channel as ac
from protocol import mesos
from protocol.task_states import TaskState

TS = TaskState


def _running_then_lost(h: Harness) -> tuple[str, str, str]:
    aid, conn = h.agent()
    fid, sid = h.subscribe(framework_info("plain"))  # not PARTITION_AWARE
    (offer,) = offers(h.allocate(), sid)
    h.call(fid, sid, mesos.Call.make_accept(mesos.FrameworkID(fid), (offer.id,), (mesos.Operation.make_launch(task("t1", cmd="sleep 100")),)))
    h.status(conn, fid, "t1", TS.TASK_RUNNING, uuid=b"r" * 16)
    h.feed(AgentConnectionLost(conn))
    fx = h.advance(30.0)  # past the ping timeout: unreachable
    assert [u.state for u in updates(fx, sid)] == [TS.TASK_LOST]
    return aid, fid, sid


def test_the_kill_on_return_is_not_a_second_terminal_update() -> None:
    h = Harness()
    aid, fid, sid = _running_then_lost(h)
    running = ac.RunningTask(framework_id=mesos.FrameworkID(fid), task_id=mesos.TaskID("t1"), state=TS.TASK_RUNNING)
    _, conn = h.agent(agent_id=aid, tasks=(running,))
    assert [k.task_id.value for k in to_agent(h.effects[-50:], ac.KillTask)] == ["t1"]
    fx = h.status(conn, fid, "t1", TS.TASK_KILLED, uuid=b"k" * 16)
    assert updates(fx, sid) == []
    assert [(a.task_id.value, a.uuid) for a in to_agent(fx, ac.AcknowledgeMsg)] == [("t1", b"k" * 16)]
    assert "t1" not in h.state.frameworks[fid].tasks


def test_a_task_that_ended_while_away_is_not_reported_again() -> None:
    h = Harness()
    aid, fid, sid = _running_then_lost(h)
    _, conn = h.agent(agent_id=aid)  # the agent comes back with the task already finished
    fx = h.status(conn, fid, "t1", TS.TASK_FINISHED, uuid=b"f" * 16)
    assert updates(fx, sid) == []
    assert "t1" not in h.state.frameworks[fid].tasks


def test_a_second_partition_before_the_kill_lands_is_not_a_second_lost() -> None:
    h = Harness()
    aid, fid, sid = _running_then_lost(h)
    running = ac.RunningTask(framework_id=mesos.FrameworkID(fid), task_id=mesos.TaskID("t1"), state=TS.TASK_RUNNING)
    _, conn = h.agent(agent_id=aid, tasks=(running,))  # back, the kill sent; then cut off again
    h.feed(AgentConnectionLost(conn))
    fx = h.advance(60.0)
    assert updates(fx, sid) == []  # the framework had its one terminal update (LOST)
    _, conn = h.agent(agent_id=aid, tasks=(running,))
    fx = h.status(conn, fid, "t1", TS.TASK_KILLED, uuid=b"k" * 16)
    assert updates(fx, sid) == []
    assert "t1" not in h.state.frameworks[fid].tasks


def test_an_agent_removed_after_the_lost_is_not_a_second_terminal_update() -> None:
    h = Harness(unreachable_gc=100.0)
    aid, _fid, sid = _running_then_lost(h)
    fx = h.advance(500.0)  # past the unreachable agents' GC: removed
    assert aid not in h.state.agents
    assert updates(fx, sid) == []
