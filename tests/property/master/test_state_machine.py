"""A stateful hypothesis machine over MasterState with the real allocator: random subscribes,
ACCEPTs (fresh, replayed, over-claiming, stale), status updates, kills, agent drops and returns,
time passing, batched acknowledgements (ACKNOWLEDGE_MANY) mixing real and foreign entries.
Invariants: nothing is launched twice, agents are never over-committed, the allocator and the
master agree on live tasks, master updates carry no uuid and every reliable update carries its
agent id, an acknowledgement is forwarded only for the framework's own task on its agent, and
terminal tasks awaiting acknowledgement stay bounded."""

from __future__ import annotations

from collections import Counter

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from master.events import AgentConnectionLost, SendEvent, StreamClosed
from master.lifecycles import FrameworkPhase
from master.testing import Harness, framework_info, offers, task, to_agent
from protocol import agent_channel as ac
from protocol import mesos
from protocol.resources import Resources
from protocol.task_states import TaskState, is_terminal

TS = TaskState


class MasterMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.h = Harness(ping_interval=1, ping_timeout=4, agent_reregister_timeout=5)
        self.launches: Counter[tuple[str, str]] = Counter()
        self.frameworks: list[tuple[str, str]] = []
        self.agents: dict[str, int] = {}  # agent id -> live conn
        self.known_offers: list[mesos.Offer] = []
        self.seq = 0
        self.seen = 0
        self.reliable: dict[str, list[tuple[str, str, bytes]]] = {}  # stream -> (agent, task, uuid)
        # start from a small running cluster so most steps exercise offers and tasks
        self.subscribe(partition_aware=True, reusable=False)
        self.subscribe(partition_aware=False, reusable=True)
        self.add_agent(4)
        self.add_agent(2)
        self.time_passes(0.01)

    def _collect(self) -> None:
        fx = self.h.effects[self.seen:]
        self.seen = len(self.h.effects)
        for run in to_agent(fx, ac.RunTasks):
            for t in run.tasks:
                self.launches[(run.framework_id.value, t.task_id.value)] += 1
        self.known_offers += offers(fx)
        for e in fx:
            if isinstance(e, SendEvent) and e.event.update is not None:
                s = e.event.update.status
                if s.uuid is None:
                    assert s.source is mesos.Source.SOURCE_MASTER
                else:
                    assert s.agent_id is not None
                    self.reliable.setdefault(e.stream_id, []).append((s.agent_id.value, s.task_id.value, s.uuid))

    @rule(partition_aware=st.booleans(), reusable=st.booleans())
    def subscribe(self, partition_aware: bool, reusable: bool) -> None:
        if len(self.frameworks) >= 3:
            return
        caps = [c for c, on in (("PARTITION_AWARE", partition_aware), ("REUSABLE_OFFERS", reusable)) if on]
        self.frameworks.append(self.h.subscribe(framework_info(f"f{len(self.frameworks)}", *caps)))
        self._collect()

    @rule(cpus=st.sampled_from([2, 4]))
    def add_agent(self, cpus: int) -> None:
        if len(self.agents) >= 3:
            return
        aid, conn = self.h.agent(f"cpus:{cpus};mem:4096", hostname=f"h{len(self.agents)}")
        self.agents[aid] = conn
        self._collect()

    @rule(dt=st.sampled_from([0.01, 0.5, 2.0, 6.0]))
    def time_passes(self, dt: float) -> None:
        # live agents answer pings
        for conn in list(self.agents.values()):
            if conn > 0:
                self.h.agent_says(conn, ac.Pong(seq=0))
        self.h.advance(dt)
        self._collect()

    @rule(data=st.data(), n=st.integers(1, 3), cpus=st.sampled_from([0.5, 1.0, 3.0]), replay=st.booleans())
    def accept(self, data: st.DataObject, n: int, cpus: float, replay: bool) -> None:
        if not self.frameworks or not self.known_offers:
            return
        # mostly the newest offers (likely still valid), sometimes any (stale, replayed)
        pool = self.known_offers[-3:] if data.draw(st.booleans()) else self.known_offers
        offer = data.draw(st.sampled_from(pool))
        fw = next((f for f in self.frameworks if f[0] == offer.framework_id.value), None)
        if fw is None:
            return
        fid, sid = fw
        if replay and self.seq > 0:
            ids = [f"t{self.seq - 1}"]
        else:
            ids = [f"t{self.seq + i}" for i in range(n)]
            self.seq += n
        op = mesos.Operation(type=mesos.OperationType.LAUNCH, launch=mesos.Launch(
            task_infos=tuple(task(t, cpus=cpus, mem=64, cmd="sleep 5") for t in ids)))
        self.h.call(fid, sid, mesos.Call.make_accept(mesos.FrameworkID(fid), (offer.id,), (op,)))
        self._collect()

    @rule(data=st.data(), state=st.sampled_from([TS.TASK_RUNNING, TS.TASK_FINISHED, TS.TASK_FAILED]))
    def status(self, data: st.DataObject, state: TaskState) -> None:
        live = [(f, t) for f in self.h.state.frameworks.values() for t in f.tasks.values()
                if self.agents.get(t.agent_id, 0) > 0 and t.state is not TS.TASK_UNREACHABLE]
        if not live:
            return
        fw, t = data.draw(st.sampled_from(live))
        self.h.status(self.agents[t.agent_id], fw.framework_id, t.task_id, state, uuid=bytes([self.seq % 256]) * 16)
        self._collect()

    @rule(data=st.data())
    def kill(self, data: st.DataObject) -> None:
        if not self.frameworks:
            return
        fid, sid = data.draw(st.sampled_from(self.frameworks))
        tid = data.draw(st.sampled_from([f"t{i}" for i in range(max(1, self.seq))]))
        self.h.call(fid, sid, mesos.Call.make_kill(mesos.FrameworkID(fid), mesos.TaskID(tid)))
        self._collect()

    @rule(data=st.data())
    def agent_drops(self, data: st.DataObject) -> None:
        live = [a for a, c in self.agents.items() if c > 0]
        if not live:
            return
        aid = data.draw(st.sampled_from(live))
        self.h.feed(AgentConnectionLost(self.agents[aid]))
        self.agents[aid] = 0
        self._collect()

    @rule(data=st.data(), lose_launches=st.booleans())
    def agent_returns(self, data: st.DataObject, lose_launches: bool) -> None:
        gone = [a for a, c in self.agents.items() if c == 0]
        if not gone:
            return
        aid = data.draw(st.sampled_from(gone))
        tasks = [
            ac.RunningTask(framework_id=mesos.FrameworkID(f.framework_id), task_id=mesos.TaskID(t.task_id),
                           state=TS.TASK_RUNNING if t.state is TS.TASK_UNREACHABLE else t.state,
                           resources=t.resources.to_mesos())
            for f in self.h.state.frameworks.values() for t in f.tasks.values()
            if t.agent_id == aid and not is_terminal(t.state)
            and not (lose_launches and t.state is TS.TASK_STAGING)  # launches lost with the old connection
        ]
        _, conn = self.h.agent(agent_id=aid, tasks=tasks, hostname="back")
        self.agents[aid] = conn
        self._collect()

    @rule(data=st.data())
    def stream_drops(self, data: st.DataObject) -> None:
        if not self.frameworks:
            return
        _, sid = data.draw(st.sampled_from(self.frameworks))
        self.h.feed(StreamClosed(sid))
        self._collect()

    @rule(data=st.data(), foreign=st.booleans())
    def acknowledge_many(self, data: st.DataObject, foreign: bool) -> None:
        if not self.frameworks:
            return
        fid, sid = data.draw(st.sampled_from(self.frameworks))
        fw = self.h.state.frameworks.get(fid)
        # a fresh reliable update first (RUNNING again is a no-op transition), so there is
        # always something of this framework's to acknowledge
        live = [t for t in (fw.tasks.values() if fw is not None else ()) if self.agents.get(t.agent_id, 0) > 0
                and t.state in (TS.TASK_STAGING, TS.TASK_RUNNING)]
        if live:
            t = data.draw(st.sampled_from(live))
            self.seq += 1
            self.h.status(self.agents[t.agent_id], fid, t.task_id, TS.TASK_RUNNING, uuid=self.seq.to_bytes(16, "big"))
            self._collect()
        seen = self.reliable.get(sid, [])
        real = data.draw(st.lists(st.sampled_from(seen), max_size=4)) if seen else []
        junk = [("no-such-agent", t, u) for (_, t, u) in real[:1]] + [(a, "ghost", b"g" * 16) for (a, _, _) in real[:1]]
        entries = real + (junk if foreign else [])
        if not entries:
            return
        acks = tuple(mesos.Acknowledge(mesos.AgentID(a), mesos.TaskID(t), u) for a, t, u in entries)
        call = mesos.Call(
            type=mesos.CallType.ACKNOWLEDGE_MANY,
            framework_id=mesos.FrameworkID(fid),
            acknowledge_many=mesos.AcknowledgeMany(acknowledgements=acks),
        )
        expected = []
        if fw is not None and (
            (fw.connected and fw.stream_id == sid)
            # the stream that just closed, while no new one exists: acknowledgements still go
            or (fw.phase is FrameworkPhase.DISCONNECTED and fw.last_stream_id == sid)
        ):
            for a, t, u in real:
                task_rec = fw.tasks.get(t) or fw.finished(t)
                ag = self.h.state.agents.get(a)
                if task_rec is not None and task_rec.agent_id == a and ag is not None and ag.conn_id is not None and ag.reachable:
                    expected.append((t, u))
        fx = self.h.call(fid, sid, call)
        forwarded = [(m.task_id.value, m.uuid) for m in to_agent(fx, ac.AcknowledgeMsg)]
        assert all(m.framework_id.value == fid for m in to_agent(fx, ac.AcknowledgeMsg))
        assert forwarded == expected, (forwarded, expected)
        self._collect()

    @invariant()
    def awaiting_ack_bounded(self) -> None:
        for f in self.h.state.frameworks.values():
            assert len(f.awaiting_ack) <= self.h.state.cfg.awaiting_ack_per_framework
            assert not set(f.awaiting_ack) & set(f.completed)

    @invariant()
    def nothing_launched_twice(self) -> None:
        assert all(n == 1 for n in self.launches.values()), self.launches

    @invariant()
    def agents_not_overcommitted(self) -> None:
        for ag in self.h.state.agents.values():
            used = Resources.sum(
                self.h.state.frameworks[f].tasks[t].resources
                for (f, t) in ag.tasks
                if f in self.h.state.frameworks and t in self.h.state.frameworks[f].tasks
            )
            assert ag.effective_total.contains(used), (ag.agent_id, str(used), str(ag.total))

    @invariant()
    def allocator_agrees_on_live_tasks(self) -> None:
        master = {
            (f.framework_id, t.task_id)
            for f in self.h.state.frameworks.values()
            if f.phase is not FrameworkPhase.REMOVED
            for t in f.tasks.values()
            if t.state is not TS.TASK_UNREACHABLE and self.h.state.agents[t.agent_id].in_allocator
        }
        alloc = {(t.framework_id, t.task_id) for t in self.h.alloc.tasks()}
        assert master == alloc, (master ^ alloc)


TestMasterMachine = MasterMachine.TestCase
TestMasterMachine.settings = settings(
    max_examples=40, stateful_step_count=30, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
