from __future__ import annotations

from master import registry_ops as ops
from master.testing import Harness, closed, events, framework_info, offers, persisted, task, to_agent, updates
from protocol import agent_channel as ac
from protocol import mesos
from protocol.task_states import TaskState

ET = mesos.EventType


def launch_call(fid: str, offer: mesos.Offer, *tasks: mesos.TaskInfo) -> mesos.Call:
    op = mesos.Operation(type=mesos.OperationType.LAUNCH, launch=mesos.Launch(task_infos=tasks))
    return mesos.Call.make_accept(mesos.FrameworkID(fid), (offer.id,), (op,), mesos.Filters(refuse_seconds=5))


def test_subscribe_offer_launch_update_ack_finish() -> None:
    h = Harness()
    fid, sid = h.subscribe()
    fx = h.effects
    assert [e.type for e in events(fx, sid)] == [ET.SUBSCRIBED, ET.HEARTBEAT]
    assert any(isinstance(op, ops.FrameworkAdded) for op in persisted(fx))
    aid, conn = h.agent()
    fx = h.allocate()
    (offer,) = offers(fx, sid)
    assert offer.agent_id.value == aid and offer.hostname == "h1"
    fx = h.call(fid, sid, launch_call(fid, offer, task("t1"), task("t2")))
    (run,) = to_agent(fx, ac.RunTasks)
    assert [t.task_id.value for t in run.tasks] == ["t1", "t2"]
    assert all(t.agent_id is not None and t.agent_id.value == aid for t in run.tasks)
    assert updates(fx) == []
    # status update forwarded with uuid and agent_id; ack forwarded to the agent
    fx = h.status(conn, fid, "t1", TaskState.TASK_RUNNING)
    (st,) = updates(fx, sid)
    assert st.state is TaskState.TASK_RUNNING and st.uuid == b"u" * 16 and st.agent_id == mesos.AgentID(aid)
    fx = h.call(fid, sid, mesos.Call.make_acknowledge(mesos.FrameworkID(fid), st))
    (ack,) = to_agent(fx, ac.AcknowledgeMsg)
    assert ack.task_id.value == "t1" and ack.uuid == b"u" * 16
    fx = h.status(conn, fid, "t1", TaskState.TASK_FINISHED)
    assert updates(fx, sid)[0].state is TaskState.TASK_FINISHED
    assert h.state.task_counts()[TaskState.TASK_FINISHED] == 1
    # implicit reconciliation: only t2 (STAGING) is live
    fx = h.call(fid, sid, mesos.Call.make_reconcile(mesos.FrameworkID(fid)))
    rec = updates(fx, sid)
    assert [(s.task_id.value, s.state, s.uuid, s.source) for s in rec] == [
        ("t2", TaskState.TASK_STAGING, None, mesos.Source.SOURCE_MASTER)
    ]
    assert rec[0].reason is mesos.Reason.REASON_RECONCILIATION
    # explicit reconciliation of a finished and an unknown task
    fx = h.call(
        fid,
        sid,
        mesos.Call.make_reconcile(
            mesos.FrameworkID(fid),
            (mesos.ReconcileTask(mesos.TaskID("t1")), mesos.ReconcileTask(mesos.TaskID("nope"))),
        ),
    )
    assert [(s.task_id.value, s.state) for s in updates(fx, sid)] == [
        ("t1", TaskState.TASK_FINISHED),
        ("nope", TaskState.TASK_LOST),
    ]
    # kill: known -> agent; unknown -> TASK_LOST (not partition aware)
    fx = h.call(fid, sid, mesos.Call.make_kill(mesos.FrameworkID(fid), mesos.TaskID("t2")))
    assert [k.task_id.value for k in to_agent(fx, ac.KillTask)] == ["t2"]
    fx = h.call(fid, sid, mesos.Call.make_kill(mesos.FrameworkID(fid), mesos.TaskID("zz")))
    (lost,) = updates(fx, sid)
    assert lost.state is TaskState.TASK_LOST and lost.reason is mesos.Reason.REASON_RECONCILIATION
    # teardown: registry first, agent told, stream closed
    fx = h.call(fid, sid, mesos.Call.make_teardown(mesos.FrameworkID(fid)))
    assert isinstance(persisted(fx)[0], ops.FrameworkRemoved)
    assert to_agent(fx, ac.ShutdownFramework)
    assert closed(fx) == [sid]
    assert fid not in h.state.frameworks and fid in h.state.removed_framework_ids
    # re-subscribing a removed framework: ERROR then close
    h._stream += 1
    from master.events import SubscribeReceived

    fx = h.feed(SubscribeReceived("sx", mesos.Subscribe(framework_info=framework_info(fid=fid))))
    assert [e.type for e in events(fx, "sx")] == [ET.ERROR] and closed(fx) == ["sx"]


def test_replayed_and_bad_accepts() -> None:
    h = Harness()
    fid, sid = h.subscribe(framework_info("pa", "PARTITION_AWARE"))
    h.agent("cpus:2;mem:1024")
    (offer,) = offers(h.allocate(), sid)
    call = launch_call(fid, offer, task("a"))
    fx = h.call(fid, sid, call)
    assert len(to_agent(fx, ac.RunTasks)) == 1
    # S1: replay -> nothing launched, DROPPED for partition-aware
    fx = h.call(fid, sid, call)
    assert to_agent(fx, ac.RunTasks) == []
    (st,) = updates(fx, sid)
    assert (
        st.state is TaskState.TASK_DROPPED
        and st.reason is mesos.Reason.REASON_INVALID_OFFERS
        and st.uuid is None
    )


def test_overclaim_and_invalid_tasks_get_task_error() -> None:
    h = Harness()
    fid, sid = h.subscribe()
    h.agent("cpus:2;mem:1024")
    (offer,) = offers(h.allocate(), sid)
    bad_env = task("env", cmd=None)  # neither command nor executor
    fx = h.call(
        fid,
        sid,
        launch_call(
            fid,
            offer,
            task("big", cpus=4),  # S3
            task("../../etc"),  # S5
            task("ok", cpus=1),
            task("ok"),  # duplicate id in the same accept
            task("over", cpus=1.5),  # summed over tasks: 1 + 1.5 > 2
            bad_env,
            mesos.TaskInfo(
                name="e",
                task_id=mesos.TaskID("ldp"),
                resources=task("x").resources,
                command=mesos.CommandInfo(
                    value="x",
                    environment=mesos.Environment((mesos.Variable(name="LD_PRELOAD", value="/evil.so"),)),
                ),
            ),
        ),
    )
    errs = {s.task_id.value: s for s in updates(fx, sid)}
    assert set(errs) == {"big", "../../etc", "ok", "over", "env", "ldp"}
    assert all(
        s.state is TaskState.TASK_ERROR and s.source is mesos.Source.SOURCE_MASTER for s in errs.values()
    )
    assert "more resources" in (errs["big"].message or "")
    (run,) = to_agent(fx, ac.RunTasks)
    assert [t.task_id.value for t in run.tasks] == ["ok"]


def test_failover_and_timeout() -> None:
    h = Harness()
    fid, sid = h.subscribe(framework_info(failover_timeout=10))
    h.agent()
    (offer,) = offers(h.allocate(), sid)
    h.call(fid, sid, launch_call(fid, offer, task("t")))
    # failover: same id, new stream; the old stream is closed and its calls ignored
    fid2, sid2 = h.subscribe(framework_info(fid=fid, failover_timeout=10))
    assert fid2 == fid and sid in closed(h.effects)
    fx = h.call(fid, sid, mesos.Call.make_kill(mesos.FrameworkID(fid), mesos.TaskID("t")))
    assert fx == [] or to_agent(fx, ac.KillTask) == []
    # disconnect -> deadline persisted; after it the framework is removed and its tasks killed
    from master.events import StreamClosed

    fx = h.feed(StreamClosed(sid2))
    (d,) = [op for op in persisted(fx) if isinstance(op, ops.FrameworkDisconnected)]
    assert d.deadline == h.now + 10
    fx = h.advance(9)
    assert fid in h.state.frameworks
    fx = h.advance(2)
    assert fid not in h.state.frameworks
    assert to_agent(fx, ac.ShutdownFramework)


def test_agent_ping_timeout_marks_unreachable_registry_first() -> None:
    h = Harness(ping_interval=1, ping_timeout=3)
    fid, sid = h.subscribe()
    aid, _ = h.agent()
    (offer,) = offers(h.allocate(), sid)
    h.call(fid, sid, launch_call(fid, offer, task("t")))
    fx = h.advance(1.5)
    assert to_agent(fx, ac.Ping)
    fx = h.advance(2)
    ops_ = persisted(fx)
    assert [type(o) for o in ops_] == [ops.AgentMarkedUnreachable]
    (st,) = updates(fx, sid)
    assert st.state is TaskState.TASK_LOST and st.task_id.value == "t"
    # the agent comes back: re-registers with its task, which is killed (not partition aware)
    aid2, _ = h.agent(
        agent_id=aid,
        tasks=[
            ac.RunningTask(
                framework_id=mesos.FrameworkID(fid),
                task_id=mesos.TaskID("t"),
                state=TaskState.TASK_RUNNING,
                resources=task("t").resources,
            )
        ],
    )
    assert aid2 == aid
    assert [k.task_id.value for k in to_agent(h.effects[-20:], ac.KillTask)] == ["t"]
