"""The task book (``master.task_book.TaskBook``, the core's ``task_book``) through its own API:
status updates, master-generated updates, KILL, ACKNOWLEDGE, reconciliation and the counts, with
exact effects. The cluster around it is built through ``MasterState.handle`` (``Harness``)."""

from __future__ import annotations

from master.events import Effect, SendEvent, SendToAgent
from master.testing import Harness, framework_info, offers, task, to_agent, updates
from protocol import agent_channel as ac
from protocol import mesos
from protocol.resources import Resources
from protocol.task_states import TaskState

TS = TaskState
R = mesos.Reason


def launched(*caps: str, tids: tuple[str, ...] = ("t1",)) -> tuple[Harness, str, str, str, int]:
    """One framework with ``tids`` launched (STAGING) on one agent."""
    h = Harness(ping_interval=1e9, ping_timeout=1e9)
    fid, sid = h.subscribe(framework_info("fw", *caps))
    aid, conn = h.agent("cpus:4;mem:4096")
    (offer,) = offers(h.allocate(), sid)
    op = mesos.Operation(type=mesos.OperationType.LAUNCH, launch=mesos.Launch(task_infos=tuple(task(t) for t in tids)))
    h.call(fid, sid, mesos.Call.make_accept(mesos.FrameworkID(fid), (offer.id,), (op,)))
    return h, fid, sid, aid, conn


def status_msg(fid: str, tid: str, state: TaskState, uuid: bytes) -> ac.StatusUpdateMsg:
    st = mesos.TaskStatus(task_id=mesos.TaskID(tid), state=state, source=mesos.Source.SOURCE_EXECUTOR, uuid=uuid)
    return ac.StatusUpdateMsg(framework_id=mesos.FrameworkID(fid), status=st)


def test_status_updates_move_the_task_then_finish_it_and_recover_its_resources() -> None:
    h, fid, sid, aid, _conn = launched()
    book, st = h.state.task_book, h.state
    ag, fw = st.agents[aid], st.frameworks[fid]
    fx: list[Effect] = []
    book.status_update(ag, status_msg(fid, "t1", TS.TASK_RUNNING, b"a" * 16), h.now, fx)
    assert [(type(e), e.stream_id) for e in fx if isinstance(e, SendEvent)] == [(SendEvent, sid)]
    (up,) = updates(fx, sid)
    assert (up.state, up.uuid, up.agent_id) == (TS.TASK_RUNNING, b"a" * 16, mesos.AgentID(aid))
    assert fw.tasks["t1"].state is TS.TASK_RUNNING and st.counters["valid_status_updates"] == 1
    assert st.used_resources() == Resources.parse("cpus:0.1;mem:32")

    fx = []
    book.status_update(ag, status_msg(fid, "t1", TS.TASK_FINISHED, b"b" * 16), h.now, fx)
    assert [(u.state, u.uuid) for u in updates(fx, sid)] == [(TS.TASK_FINISHED, b"b" * 16)]
    assert "t1" not in fw.tasks and fw.completed["t1"].state is TS.TASK_FINISHED
    assert ag.tasks == set() and st.finished_counts == {TS.TASK_FINISHED: 1}
    assert book.counts()[TS.TASK_FINISHED] == 1 and book.used_resources() == Resources()
    view = h.alloc.agent_view(aid)
    assert view is not None and view.free == Resources.parse("cpus:4;mem:4096")  # recovered


def test_an_update_against_the_table_leaves_the_task_as_it_was_and_is_counted_invalid() -> None:
    h, fid, sid, aid, _conn = launched()
    book, st = h.state.task_book, h.state
    fx: list[Effect] = []
    book.status_update(st.agents[aid], status_msg(fid, "t1", TS.TASK_RUNNING, b"a" * 16), h.now, fx)
    book.status_update(st.agents[aid], status_msg(fid, "t1", TS.TASK_STAGING, b"c" * 16), h.now, fx)
    # (the agent's update still reaches the framework, as Mesos forwards it; the master's record holds)
    assert [u.state for u in updates(fx, sid)] == [TS.TASK_RUNNING, TS.TASK_STAGING]
    assert (st.counters["valid_status_updates"], st.counters["invalid_status_updates"]) == (1, 1)
    assert st.frameworks[fid].tasks["t1"].state is TS.TASK_RUNNING


def test_an_update_for_a_gone_framework_is_acknowledged_on_its_behalf() -> None:
    h, _fid, _sid, aid, conn = launched()
    fx: list[Effect] = []
    h.state.task_book.status_update(h.state.agents[aid], status_msg("nobody", "x", TS.TASK_RUNNING, b"d" * 16), h.now, fx)
    assert fx == [SendToAgent(conn, ac.AcknowledgeMsg(framework_id=mesos.FrameworkID("nobody"),
                                                      task_id=mesos.TaskID("x"), uuid=b"d" * 16))]


def test_master_updates_are_shown_as_lost_to_frameworks_that_are_not_partition_aware() -> None:
    h, fid, sid, aid, _conn = launched()
    fx: list[Effect] = []
    got = h.state.task_book.master_update(h.state.frameworks[fid], "t9", TS.TASK_DROPPED, R.REASON_INVALID_OFFERS,
                                          "bad offer", h.now, fx, aid)
    assert got == mesos.TaskStatus(
        task_id=mesos.TaskID("t9"), state=TS.TASK_LOST, message="bad offer", source=mesos.Source.SOURCE_MASTER,
        reason=R.REASON_INVALID_OFFERS, agent_id=mesos.AgentID(aid), timestamp=h.now,
    )
    assert fx == [SendEvent(sid, mesos.Event.make_update(got))]
    assert (h.state.counters["tasks_lost"], h.state.counters["tasks_dropped"]) == (1, 0)


def test_kill_of_a_known_task_goes_to_its_agent_and_of_an_unknown_one_answers_unknown() -> None:
    h, fid, sid, aid, conn = launched("PARTITION_AWARE")
    book, fw = h.state.task_book, h.state.frameworks[fid]
    fx: list[Effect] = []
    policy = mesos.KillPolicy(grace_period=mesos.DurationInfo(2_500_000_000))
    book.kill(fw, mesos.Kill(task_id=mesos.TaskID("t1"), kill_policy=policy), h.now, fx)
    assert fx == [SendToAgent(conn, ac.KillTask(framework_id=mesos.FrameworkID(fid), task_id=mesos.TaskID("t1"),
                                                grace_seconds=2.5))]
    fx = []
    book.kill(fw, mesos.Kill(task_id=mesos.TaskID("nope"), agent_id=mesos.AgentID(aid)), h.now, fx)
    assert [(u.task_id.value, u.state, u.reason, u.message) for u in updates(fx, sid)] == [
        ("nope", TS.TASK_UNKNOWN, R.REASON_RECONCILIATION, "Task unknown to the master")
    ]


def test_acknowledge_reaches_the_agent_only_for_the_frameworks_task_on_that_agent() -> None:
    h, fid, _sid, aid, conn = launched()
    book, st = h.state.task_book, h.state
    fx: list[Effect] = []
    book.status_update(st.agents[aid], status_msg(fid, "t1", TS.TASK_RUNNING, b"a" * 16), h.now, fx)
    fw = st.frameworks[fid]
    fx = []
    book.acknowledge(fw, mesos.Acknowledge(agent_id=mesos.AgentID("other"), task_id=mesos.TaskID("t1"), uuid=b"a" * 16),
                     h.now, fx)
    assert fx == [] and st.counters["dropped_messages"] == 1
    book.acknowledge(fw, mesos.Acknowledge(agent_id=mesos.AgentID(aid), task_id=mesos.TaskID("t1"), uuid=b"a" * 16),
                     h.now, fx)
    assert to_agent(fx, ac.AcknowledgeMsg) == [
        ac.AcknowledgeMsg(framework_id=mesos.FrameworkID(fid), task_id=mesos.TaskID("t1"), uuid=b"a" * 16)
    ]
    assert [e.conn_id for e in fx if isinstance(e, SendToAgent)] == [conn]
    assert fw.tasks["t1"].acked_uuid == b"a" * 16


def test_reconcile_answers_the_latest_state_of_known_tasks_and_gone_for_unknown_ones_on_a_live_agent() -> None:
    h, fid, sid, aid, _conn = launched(tids=("t1", "t2"))
    book, fw = h.state.task_book, h.state.frameworks[fid]
    fx: list[Effect] = []
    book.reconcile(fw, (), h.now, fx)  # implicit: every task the master knows
    assert sorted((u.task_id.value, u.state, u.message) for u in updates(fx, sid)) == [
        ("t1", TS.TASK_STAGING, "Reconciliation: latest task state"),
        ("t2", TS.TASK_STAGING, "Reconciliation: latest task state"),
    ]
    fx = []
    book.reconcile(fw, (mesos.ReconcileTask(task_id=mesos.TaskID("zz"), agent_id=mesos.AgentID(aid)),), h.now, fx)
    # a task the master does not know on a reachable agent: GONE, shown as LOST (not PARTITION_AWARE)
    assert [(u.task_id.value, u.state, u.reason) for u in updates(fx, sid)] == [
        ("zz", TS.TASK_LOST, R.REASON_RECONCILIATION)
    ]
