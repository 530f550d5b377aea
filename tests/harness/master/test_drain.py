"""Automatic agent draining as Mesos does it, on the pure core.

DRAIN_AGENT kills every task on the agent (TASK_KILLED, REASON_AGENT_DRAINING) with at most the
drain's grace, at once if the agent is reachable, else when it comes back; the agent is DRAINING
until every task has ended and its update is acknowledged, then DRAINED (and gone with
``mark_gone``). DEACTIVATE_AGENT only stops offers. REACTIVATE_AGENT ends either. The mode is
persisted: a restarted master keeps DRAINING/DRAINED and kills what a draining agent still runs
when it re-registers."""

from __future__ import annotations

from pathlib import Path

import attrs

from master import registry
from master import registry_ops as ops
from master.events import AgentConnected, AgentDrainRequested, CloseAgent, Effect
from master.lifecycles import AgentPhase
from master.testing import Harness, framework_info, offers, persisted, task, to_agent, updates
from protocol import agent_channel as ac
from protocol import mesos
from protocol.resources import Resources
from protocol.task_states import TaskState

S = TaskState
DRAINING = "REASON_AGENT_DRAINING"


def drain(aid: str, grace: float | None = None, mark_gone: bool = False) -> AgentDrainRequested:
    return AgentDrainRequested(aid, True, kill=True, max_grace=grace, mark_gone=mark_gone)


def deactivate(aid: str) -> AgentDrainRequested:
    return AgentDrainRequested(aid, True)


def reactivate(aid: str) -> AgentDrainRequested:
    return AgentDrainRequested(aid, False)


def kills(fx: list[Effect]) -> list[tuple[str, float | None, str | None]]:
    return [(k.task_id.value, k.grace_seconds, k.reason) for k in to_agent(fx, ac.KillTask)]


def drain_state(h: Harness, aid: str) -> str | None:
    info = h.state.agents[aid].drain_info()
    return info.state.value if info is not None else None


class Cluster:
    """One framework, one agent running ``tids`` (RUNNING, acknowledged)."""

    def __init__(self, *tids: str, grace_of: dict[str, float] | None = None) -> None:
        self.h = h = Harness()
        self.fid, self.sid = h.subscribe(framework_info("batch", "PARTITION_AWARE"))
        self.aid, self.conn = h.agent()
        (offer,) = offers(h.allocate(), self.sid)
        infos = []
        for tid in tids:
            g = (grace_of or {}).get(tid)
            kp = mesos.KillPolicy(grace_period=mesos.DurationInfo(int(g * 1e9))) if g is not None else None
            infos.append(task(tid, kill_policy=kp))
        op = mesos.Operation(type=mesos.OperationType.LAUNCH, launch=mesos.Launch(task_infos=tuple(infos)))
        h.call(self.fid, self.sid, mesos.Call.make_accept(mesos.FrameworkID(self.fid), (offer.id,), (op,)))
        for i, tid in enumerate(tids):
            self.update(tid, S.TASK_RUNNING, bytes([i]) * 16)
            self.ack(tid, bytes([i]) * 16)

    def update(self, tid: str, state: TaskState, uuid: bytes) -> list[Effect]:
        return self.h.status(self.conn, self.fid, tid, state, uuid=uuid)

    def ack(self, tid: str, uuid: bytes) -> list[Effect]:
        st = mesos.TaskStatus(task_id=mesos.TaskID(tid), state=S.TASK_RUNNING, agent_id=mesos.AgentID(self.aid), uuid=uuid)
        return self.h.call(self.fid, self.sid, mesos.Call.make_acknowledge(mesos.FrameworkID(self.fid), st))


def test_drain_kills_every_task_with_the_grace_then_drained_after_the_last_acknowledgement() -> None:
    c = Cluster("t1", "t2", grace_of={"t1": 1.0, "t2": 30.0})
    h, aid = c.h, c.aid
    fx = h.feed(AgentDrainRequested(aid, True, reason="kernel upgrade", kill=True, max_grace=5.0))
    assert persisted(fx) == [ops.AgentDrainSet(aid, True, kill=True, max_grace=5.0)]
    # each task's own kill policy, capped at the drain's max_grace_period (Mesos)
    assert kills(fx) == [("t1", 1.0, DRAINING), ("t2", 5.0, DRAINING)]
    assert h.state.agents[aid].phase is AgentPhase.DRAINING and drain_state(h, aid) == "DRAINING"
    assert offers(h.advance(2.0), c.sid) == []  # nothing new is offered there
    fx = c.update("t1", S.TASK_KILLED, b"k1" * 8)
    (st,) = updates(fx, c.sid)
    assert st.state is S.TASK_KILLED
    fx = c.update("t2", S.TASK_KILLED, b"k2" * 8)
    assert drain_state(h, aid) == "DRAINING"  # every task is terminal, not all acknowledged yet
    c.ack("t1", b"k1" * 8)
    assert drain_state(h, aid) == "DRAINING"
    fx = c.ack("t2", b"k2" * 8)
    assert drain_state(h, aid) == "DRAINED"
    assert persisted(fx) == [ops.AgentDrainSet(aid, True, kill=True, max_grace=5.0, drained=True)]
    info = h.state.agents[aid].drain_info()
    assert info is not None and info.config == mesos.DrainConfig(mesos.DurationInfo(5_000_000_000), False)
    assert h.state.agents[aid].drain_reason == "kernel upgrade"


def test_deactivate_only_stops_offers_and_reactivate_ends_a_drain() -> None:
    c = Cluster("t1")
    h, aid = c.h, c.aid
    fx = h.feed(deactivate(aid))
    assert kills(fx) == [] and persisted(fx) == [ops.AgentDrainSet(aid, True)]
    assert h.state.agents[aid].phase is AgentPhase.DRAINING and drain_state(h, aid) is None
    # DRAIN_AGENT of a deactivated agent kills; DEACTIVATE_AGENT of a draining one keeps draining
    assert kills(h.feed(drain(aid, 0.0))) == [("t1", 0.0, DRAINING)]
    fx = h.feed(deactivate(aid))
    assert drain_state(h, aid) == "DRAINING" and kills(fx) == [("t1", 0.0, DRAINING)]
    fx = h.feed(reactivate(aid))
    assert persisted(fx) == [ops.AgentDrainSet(aid, False)]
    assert h.state.agents[aid].phase is AgentPhase.REGISTERED and drain_state(h, aid) is None
    c.update("t1", S.TASK_FINISHED, b"f" * 16)
    assert offers(h.advance(6.0), c.sid)  # back in service


def test_draining_an_agent_without_tasks_is_drained_at_once_and_mark_gone_keeps_it_out() -> None:
    h = Harness()
    _, sid = h.subscribe()
    aid, conn = h.agent()
    fx = h.feed(drain(aid, mark_gone=True))
    assert persisted(fx) == [
        ops.AgentDrainSet(aid, True, kill=True, mark_gone=True),
        ops.AgentDrainSet(aid, True, kill=True, mark_gone=True, drained=True),
        ops.AgentMarkedUnreachable(aid, h.now),
    ]
    assert [e.conn_id for e in fx if isinstance(e, CloseAgent)] == [conn]
    assert h.state.agents[aid].phase is AgentPhase.UNREACHABLE and drain_state(h, aid) == "DRAINED"
    # a gone agent may not register again ...
    reg = ac.Register(hostname="h1", port=5051, resources=Resources.parse("cpus:4;mem:4096").to_mesos(),
                      agent_id=mesos.AgentID(aid))
    fx = h.feed(AgentConnected(999, reg))
    assert to_agent(fx, ac.Refused) and not to_agent(fx, ac.Registered)
    # ... until the operator reactivates it
    h.feed(reactivate(aid))
    h.agent(agent_id=aid)
    assert h.state.agents[aid].phase is AgentPhase.REGISTERED and offers(h.allocate(), sid)


def test_a_draining_agent_back_from_unreachable_gets_its_tasks_killed() -> None:
    c = Cluster("t1")
    h, aid = c.h, c.aid
    h.advance(h.state.cfg.ping_timeout + h.state.cfg.ping_interval + 1)  # no pongs: unreachable
    assert h.state.agents[aid].phase is AgentPhase.UNREACHABLE
    fx = h.feed(drain(aid, 2.0))
    assert persisted(fx) == [ops.AgentDrainSet(aid, True, kill=True, max_grace=2.0)] and kills(fx) == []
    running = ac.RunningTask(mesos.FrameworkID(c.fid), mesos.TaskID("t1"), S.TASK_RUNNING)
    seen = len(h.effects)
    _, conn = h.agent(agent_id=aid, tasks=(running,))
    assert kills(h.effects[seen:]) == [("t1", 2.0, DRAINING)]
    assert h.state.agents[aid].phase is AgentPhase.DRAINING and drain_state(h, aid) == "DRAINING"
    c.conn = conn
    c.update("t1", S.TASK_KILLED, b"k" * 16)
    c.ack("t1", b"k" * 16)
    assert drain_state(h, aid) == "DRAINED"


def test_drain_survives_a_master_restart_through_the_registry(tmp_path: Path) -> None:
    c = Cluster("t1", "t2")
    h, aid = c.h, c.aid
    h.feed(drain(aid, 3.0))
    c.update("t1", S.TASK_KILLED, b"k" * 16)  # t2 still runs when the master dies
    conn, snap = registry.open_sync(tmp_path / registry.FILENAME)
    registry.apply_sync(conn, persisted(h.effects))
    conn.close()
    conn, snap = registry.open_sync(tmp_path / registry.FILENAME)  # the restarted master reads it back
    conn.close()
    (entry,) = snap.agents
    assert (entry.draining, entry.drain_kill, entry.drain_max_grace, entry.drained) == (True, True, 3.0, False)

    h2 = Harness()
    h2.state.recover(snap, h2.now)
    assert h2.state.agents[aid].phase is AgentPhase.RECOVERED and drain_state(h2, aid) == "DRAINING"
    # the framework comes back; the agent re-registers still running t2: it is killed now
    h2.subscribe(framework_info("batch", "PARTITION_AWARE", fid=c.fid))
    running = ac.RunningTask(mesos.FrameworkID(c.fid), mesos.TaskID("t2"), S.TASK_RUNNING)
    _, conn2 = h2.agent(agent_id=aid, tasks=(running,))
    assert kills(h2.effects) == [("t2", 3.0, DRAINING)]
    assert h2.state.agents[aid].phase is AgentPhase.DRAINING
    fx = h2.status(conn2, c.fid, "t2", S.TASK_KILLED, uuid=b"z" * 16)
    (st,) = updates(fx)
    h2.call(c.fid, h2.state.frameworks[c.fid].stream_id or "", mesos.Call.make_acknowledge(mesos.FrameworkID(c.fid), st))
    assert drain_state(h2, aid) == "DRAINED"

    # DRAINED is persisted too: a third master shows it before the agent is back
    h3 = Harness()
    h3.state.recover(ops.RegistrySnapshot(agents=(attrs.evolve(entry, drained=True),)), h3.now)
    assert drain_state(h3, aid) == "DRAINED"


def test_teardown_of_the_last_framework_drains_the_agent() -> None:
    c = Cluster("t1")
    h, aid = c.h, c.aid
    h.feed(drain(aid))
    c.update("t1", S.TASK_KILLED, b"k" * 16)  # never acknowledged ...
    assert drain_state(h, aid) == "DRAINING"
    h.call(c.fid, c.sid, mesos.Call.make_teardown(mesos.FrameworkID(c.fid)))
    assert drain_state(h, aid) == "DRAINED"  # ... but its framework is gone
