"""The drain book (``master.drain_book.DrainBook``, the core's ``drain_book``) through its own API:
a drain request on a reachable agent (persisted, deactivated, its live task killed with the
drain's grace), progress (DRAINED only once the task ended and its update was acknowledged), and
``gone`` for a drained agent with ``mark_gone``, with exact effects. The cluster around it is
built through ``MasterState.handle`` (``Harness``)."""

from __future__ import annotations

from master import registry_ops as ops
from master.drain_book import DRAINING_REASON
from master.events import AgentDrainRequested, Effect, Persist, SendToAgent
from master.lifecycles import AgentPhase
from master.testing import Harness, framework_info, offers, task
from protocol import agent_channel as ac
from protocol import mesos
from protocol.task_states import TaskState

TS = TaskState


def running() -> tuple[Harness, str, str, int]:
    """One PARTITION_AWARE framework running ``t1`` on one agent."""
    h = Harness(ping_interval=1e9, ping_timeout=1e9)
    fid, sid = h.subscribe(framework_info("fw", "PARTITION_AWARE"))
    aid, conn = h.agent("cpus:4;mem:4096")
    (offer,) = offers(h.allocate(), sid)
    op = mesos.Operation(type=mesos.OperationType.LAUNCH, launch=mesos.Launch(task_infos=(task("t1"),)))
    h.call(fid, sid, mesos.Call.make_accept(mesos.FrameworkID(fid), (offer.id,), (op,)))
    h.status(conn, fid, "t1", TS.TASK_RUNNING)
    return h, fid, aid, conn


def test_a_drain_is_persisted_then_the_live_task_is_killed_and_drained_once_acknowledged() -> None:
    h, fid, aid, conn = running()
    book, st = h.state.drain_book, h.state
    fx: list[Effect] = []
    book.request(AgentDrainRequested(aid, True, kill=True, max_grace=2.0, mark_gone=True), h.now, fx)
    assert fx[0] == Persist((ops.AgentDrainSet(aid, True, kill=True, max_grace=2.0, mark_gone=True, drained=False),))
    assert [e for e in fx if isinstance(e, SendToAgent)] == [
        SendToAgent(conn, ac.KillTask(framework_id=mesos.FrameworkID(fid), task_id=mesos.TaskID("t1"),
                                      grace_seconds=2.0, reason=DRAINING_REASON)),
    ]
    ag = st.agents[aid]
    assert (ag.phase, ag.drain_pending, book.gone(ag)) == (AgentPhase.DRAINING, {(fid, "t1")}, False)
    h.status(conn, fid, "t1", TS.TASK_KILLED, uuid=b"k" * 16)
    assert not ag.drained  # ended, not yet acknowledged
    fx = []
    book.check(aid, h.now, fx)
    assert fx == [] and not ag.drained
    st.task_book.acknowledge(
        st.frameworks[fid],
        mesos.Acknowledge(agent_id=mesos.AgentID(aid), task_id=mesos.TaskID("t1"), uuid=b"k" * 16), h.now, fx,
    )
    assert fx[0] == SendToAgent(conn, ac.AcknowledgeMsg(framework_id=mesos.FrameworkID(fid), task_id=mesos.TaskID("t1"), uuid=b"k" * 16))
    assert fx[1] == Persist((ops.AgentDrainSet(aid, True, kill=True, max_grace=2.0, mark_gone=True, drained=True),))
    assert fx[2] == Persist((ops.AgentMarkedUnreachable(aid, h.now),))
    assert ag.drained and ag.phase is AgentPhase.UNREACHABLE and book.gone(ag)
