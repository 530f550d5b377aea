"""MasterState driven without a network: bad ACCEPTs (S2, S5), restart windows (R11, R13),
reusable offers, demand, partitions (N1, N2, N4), messages and task groups."""

from __future__ import annotations

from master import registry_ops as ops
from master.events import AgentConnectionLost, StreamClosed
from master.lifecycles import AgentPhase
from master.testing import Harness, closed, events, framework_info, offers, persisted, task, to_agent, updates
from protocol import agent_channel as ac
from protocol import codec, mesos
from protocol.resources import Resources
from protocol.task_states import TaskState

ET = mesos.EventType
TS = TaskState


def accept(fid: str, offer_ids: list[mesos.OfferID], *tasks: mesos.TaskInfo) -> mesos.Call:
    op = mesos.Operation(type=mesos.OperationType.LAUNCH, launch=mesos.Launch(task_infos=tasks))
    return mesos.Call.make_accept(mesos.FrameworkID(fid), tuple(offer_ids), (op,))


def test_s2_duplicate_foreign_and_mixed_offers_reject_the_whole_accept() -> None:
    h = Harness()
    fa, sa = h.subscribe(framework_info("a"))
    fb, sb = h.subscribe(framework_info("b"))
    h.agent("cpus:2;mem:1024", hostname="h1")
    h.agent("cpus:2;mem:1024", hostname="h2")
    fx = h.allocate()
    oa, ob = offers(fx, sa), offers(fx, sb)
    assert oa and ob
    # the same offer twice
    fx = h.call(fa, sa, accept(fa, [oa[0].id, oa[0].id], task("d1")))
    assert [(s.task_id.value, s.state) for s in updates(fx, sa)] == [("d1", TS.TASK_LOST)]
    assert to_agent(fx, ac.RunTasks) == []
    # another framework's offer
    fx = h.call(fa, sa, accept(fa, [ob[0].id], task("d2")))
    assert [s.state for s in updates(fx, sa)] == [TS.TASK_LOST] and to_agent(fx, ac.RunTasks) == []
    assert h.alloc.offer(ob[0].id.value) is not None  # b's offer is untouched
    # offers of two agents (b holds both after re-offers)
    fx = h.advance(6)
    all_b = [o for o in offers(h.effects, sb)] + offers(fx, sb)
    agents = {o.agent_id.value: o for o in all_b if h.alloc.offer(o.id.value) is not None}
    if len(agents) == 2:
        fx = h.call(fb, sb, accept(fb, [o.id for o in agents.values()], task("d3")))
        assert [s.state for s in updates(fx, sb)] == [TS.TASK_LOST] and to_agent(fx, ac.RunTasks) == []


def test_s5_task_ids_unsafe_as_paths() -> None:
    h = Harness()
    fid, sid = h.subscribe()
    h.agent()
    (offer,) = offers(h.allocate(), sid)
    bad = ["a/b", "..", ".hidden", "x" * 201, "nul\x00", ""]
    fx = h.call(fid, sid, accept(fid, [offer.id], *(task(t) for t in bad)))
    st = updates(fx, sid)
    assert len(st) == len(bad) and all(s.state is TS.TASK_ERROR for s in st)
    assert all("invalid task ID" in (s.message or "") for s in st)
    assert to_agent(fx, ac.RunTasks) == []


def test_s4_bad_quantities_never_reach_the_allocator() -> None:
    h = Harness()
    fid, sid = h.subscribe()
    h.agent()
    (offer,) = offers(h.allocate(), sid)
    cases = {"neg": -1.0, "zero": 0.0, "nan": float("nan"), "inf": float("inf"), "huge": 1e300}
    tasks = [
        mesos.TaskInfo(name=k, task_id=mesos.TaskID(k), command=mesos.CommandInfo(value="x"), resources=(
            mesos.Resource(name="cpus", type=mesos.ValueType.SCALAR, scalar=mesos.Scalar(v)),))
        for k, v in cases.items()
    ]
    fx = h.call(fid, sid, accept(fid, [offer.id], *tasks))
    assert {s.task_id.value: s.state for s in updates(fx, sid)} == dict.fromkeys(cases, TS.TASK_ERROR)
    assert h.alloc.tasks() == ()


def test_r11_window_then_unreachable_and_r13_deadline_across_restart() -> None:
    h = Harness(agent_reregister_timeout=10)
    info = framework_info("f", "PARTITION_AWARE", fid="F1", failover_timeout=100)
    snap = ops.RegistrySnapshot(
        master_seq=2,
        agents=(ops.AgentEntry("A1", "h1", 5051, "cpus:4;mem:4096"), ops.AgentEntry("A2", "h2", 5051, "cpus:4;mem:4096")),
        frameworks=(
            ops.FrameworkEntry("F1", codec.encode_msgpack(info), 100.0, deadline=None),
            ops.FrameworkEntry("F2", codec.encode_msgpack(framework_info("g", fid="F2")), 5.0, deadline=h.now + 3),
        ),
        removed_frameworks=frozenset({"F0"}),
    )
    h.state.recover(snap, h.now)
    assert h.state.recovering()
    fid, sid = h.subscribe(info)
    assert fid == "F1"
    # A1 comes back with its task; A2 does not
    h.agent(agent_id="A1", tasks=[ac.RunningTask(framework_id=mesos.FrameworkID("F1"), task_id=mesos.TaskID("t1"),
                                                 state=TS.TASK_RUNNING, resources=task("t1").resources)])
    fx = h.call(fid, sid, mesos.Call.make_reconcile(mesos.FrameworkID(fid), (
        mesos.ReconcileTask(mesos.TaskID("t1")), mesos.ReconcileTask(mesos.TaskID("t2")),
        mesos.ReconcileTask(mesos.TaskID("t3"), mesos.AgentID("A2")))))
    assert [(s.task_id.value, s.state) for s in updates(fx, sid)] == [("t1", TS.TASK_RUNNING)]  # no answer for t2/t3
    # R13: F2's failover deadline (persisted before the crash) still holds
    fx = h.advance(4)
    assert "F2" not in h.state.frameworks and "F2" in h.state.removed_framework_ids
    # the window closes: A2 is marked unreachable (registry first), now t3 gets an answer
    fx = h.advance(10)
    assert any(isinstance(o, ops.AgentMarkedUnreachable) and o.agent_id == "A2" for o in persisted(fx))
    assert h.state.agents["A2"].phase is AgentPhase.UNREACHABLE and not h.state.recovering()
    fx = h.call(fid, sid, mesos.Call.make_reconcile(mesos.FrameworkID(fid), (
        mesos.ReconcileTask(mesos.TaskID("t3"), mesos.AgentID("A2")), mesos.ReconcileTask(mesos.TaskID("t2")))))
    assert [(s.task_id.value, s.state) for s in updates(fx, sid)] == [
        ("t3", TS.TASK_UNREACHABLE), ("t2", TS.TASK_UNKNOWN)]
    # a removed framework id cannot subscribe
    from master.events import SubscribeReceived

    fx = h.feed(SubscribeReceived("zz", mesos.Subscribe(framework_info=framework_info(fid="F0"))))
    assert events(fx, "zz")[0].type is ET.ERROR and closed(fx) == ["zz"]


def test_reusable_offer_is_resent_with_the_same_id() -> None:
    h = Harness()
    fid, sid = h.subscribe(framework_info("r", "REUSABLE_OFFERS"))
    _, conn = h.agent("cpus:4;mem:4096")
    (offer,) = offers(h.allocate(), sid)
    fx = h.call(fid, sid, accept(fid, [offer.id], task("t1", cpus=1, mem=128)))
    assert to_agent(fx, ac.RunTasks)
    again = offers(fx, sid)
    assert [o.id for o in again] == [offer.id]  # the remainder stays in the lease (same id)
    assert Resources.from_mesos(again[0].resources).scalar("cpus") == 3.0
    fx = h.status(conn, fid, "t1", TS.TASK_FINISHED)
    fx += h.allocate()
    grown = offers(fx, sid)
    assert grown and all(o.id == offer.id for o in grown)
    assert Resources.from_mesos(grown[-1].resources).scalar("cpus") == 4.0


def test_request_becomes_allocator_demand() -> None:
    h = Harness()
    fid, sid = h.subscribe()
    req = mesos.Request(resources=Resources.of(cpus=1, mem=64).to_mesos(), count=3)
    h.call(fid, sid, mesos.Call.make_request(mesos.FrameworkID(fid), (req,)))
    view = h.alloc.framework_view(fid)
    assert view is not None and view.uses_demand


def test_n2_reconnect_within_timeout_changes_nothing_and_n1_partition() -> None:
    h = Harness(ping_interval=1, ping_timeout=5)
    fid, sid = h.subscribe(framework_info("pa", "PARTITION_AWARE"))
    aid, conn = h.agent()
    (offer,) = offers(h.allocate(), sid)
    h.call(fid, sid, accept(fid, [offer.id], task("t", cmd="sleep 9")))
    h.status(conn, fid, "t", TS.TASK_RUNNING)
    fx = h.feed(AgentConnectionLost(conn))
    fx += h.advance(2)
    rt = ac.RunningTask(framework_id=mesos.FrameworkID(fid), task_id=mesos.TaskID("t"), state=TS.TASK_RUNNING,
                        resources=task("t").resources)
    aid2, _ = h.agent(agent_id=aid, tasks=[rt])
    fx += h.advance(1)
    assert aid2 == aid and updates(fx, sid) == [] and to_agent(fx, ac.KillTask) == []
    assert h.state.frameworks[fid].tasks["t"].state is TS.TASK_RUNNING
    # N1: it stops answering -> unreachable; partition-aware sees UNREACHABLE; heals -> RUNNING again
    fx = h.advance(6)
    assert [(s.state, s.uuid) for s in updates(fx, sid)] == [(TS.TASK_UNREACHABLE, None)]
    mark = len(h.effects)
    h.agent(agent_id=aid, tasks=[rt])
    fx = h.effects[mark:]
    assert [s.state for s in updates(fx, sid)] == [TS.TASK_RUNNING] and to_agent(fx, ac.KillTask) == []
    assert h.alloc.task_view(fid, "t") is not None  # allocation recovered


def test_n4_removals_are_rate_limited() -> None:
    h = Harness(ping_interval=1, ping_timeout=3, agent_removal_rate=1.0, agent_removal_burst=2)
    for i in range(6):
        h.agent(hostname=f"h{i}")
    marked: list[float] = []
    for _ in range(48):
        fx = h.advance(0.25)
        marked += [h.now for o in persisted(fx) if isinstance(o, ops.AgentMarkedUnreachable)]
    assert len(marked) == 6
    assert marked[-1] - marked[0] >= 3  # 2 at once, then 1 per second


def test_killing_state_hidden_messages_groups_and_cross_framework() -> None:
    h = Harness()
    fa, sa = h.subscribe(framework_info("a"))
    fb, sb = h.subscribe(framework_info("b"))
    aid, conn = h.agent("cpus:8;mem:8192")
    fx = h.allocate()
    (oa,) = offers(fx, sa)
    ex = mesos.ExecutorInfo(executor_id=mesos.ExecutorID("ex1"), type=mesos.ExecutorType.DEFAULT,
                            resources=Resources.of(cpus=0.1, mem=32).to_mesos())
    group = mesos.Operation(type=mesos.OperationType.LAUNCH_GROUP, launch_group=mesos.LaunchGroup(
        executor=ex, task_group=mesos.TaskGroupInfo(tasks=(task("g1", cmd="sleep 1"), task("g2", cmd="sleep 1")))))
    fx = h.call(fa, sa, mesos.Call.make_accept(mesos.FrameworkID(fa), (oa.id,), (group,)))
    (run,) = to_agent(fx, ac.RunTasks)
    assert run.group and run.executor == ex and len(run.tasks) == 2
    # TASK_KILLING is not shown to a framework without TASK_KILLING_STATE; the master acks it
    fx = h.status(conn, fa, "g1", TS.TASK_KILLING, uuid=b"k" * 16)
    assert updates(fx, sa) == [] and [a.uuid for a in to_agent(fx, ac.AcknowledgeMsg)] == [b"k" * 16]
    # messages both ways; SHUTDOWN; FAILURE on executor exit
    fx = h.call(fa, sa, mesos.Call.make_message(mesos.FrameworkID(fa), mesos.AgentID(aid), mesos.ExecutorID("ex1"), b"hi"))
    assert to_agent(fx, ac.FrameworkMessageMsg)[0].data == b"hi"
    fx = h.agent_says(conn, ac.ExecutorMessageMsg(framework_id=mesos.FrameworkID(fa), executor_id=mesos.ExecutorID("ex1"), data=b"yo"))
    (msg,) = events(fx, sa, ET.MESSAGE)
    assert msg.message is not None and msg.message.data == b"yo"
    fx = h.call(fa, sa, mesos.Call.make_shutdown(mesos.FrameworkID(fa), mesos.ExecutorID("ex1"), mesos.AgentID(aid)))
    assert to_agent(fx, ac.ShutdownExecutor)
    fx = h.agent_says(conn, ac.ExecutorExited(framework_id=mesos.FrameworkID(fa), executor_id=mesos.ExecutorID("ex1"), status=9))
    (fail,) = events(fx, sa, ET.FAILURE)
    assert fail.failure is not None and fail.failure.status == 9 and fail.failure.agent_id == mesos.AgentID(aid)
    # S17: b cannot kill or acknowledge a's task
    fx = h.call(fb, sb, mesos.Call.make_kill(mesos.FrameworkID(fb), mesos.TaskID("g2")))
    assert to_agent(fx, ac.KillTask) == []
    ack = mesos.Call(type=mesos.CallType.ACKNOWLEDGE, framework_id=mesos.FrameworkID(fb), acknowledge=mesos.Acknowledge(
        agent_id=mesos.AgentID(aid), task_id=mesos.TaskID("g2"), uuid=b"u" * 16))
    assert to_agent(h.call(fb, sb, ack), ac.AcknowledgeMsg) == []
    # the stream of a goes away: a is disconnected, its offers are rescinded, nothing is sent to it
    fx = h.feed(StreamClosed(sa))
    assert events(fx, sa) == []


def test_suppress_revive_and_multi_role_violation() -> None:
    h = Harness()
    fid, sid = h.subscribe()
    h.agent()
    (offer,) = offers(h.allocate(), sid)
    h.call(fid, sid, mesos.Call.make_suppress(mesos.FrameworkID(fid)))
    h.call(fid, sid, mesos.Call.make_decline(mesos.FrameworkID(fid), (offer.id,), mesos.Filters(refuse_seconds=0)))
    assert offers(h.advance(2), sid) == []
    h.call(fid, sid, mesos.Call.make_revive(mesos.FrameworkID(fid)))
    assert offers(h.allocate(), sid)
    # roles without MULTI_ROLE: ERROR then close
    from master.events import SubscribeReceived

    bad = mesos.FrameworkInfo(user="u", name="n", roles=("a", "b"))
    fx = h.feed(SubscribeReceived("bad", mesos.Subscribe(framework_info=bad)))
    assert [e.type for e in events(fx, "bad")] == [ET.ERROR] and closed(fx) == ["bad"]
    bad_role = framework_info("x", roles=("../etc",))
    fx = h.feed(SubscribeReceived("bad2", mesos.Subscribe(framework_info=bad_role)))
    assert [e.type for e in events(fx, "bad2")] == [ET.ERROR]


def test_revocable_offers_and_revocation_reach_the_agent() -> None:
    h = Harness()
    fid, sid = h.subscribe(framework_info("rev", "REVOCABLE_RESOURCES"))
    _, conn = h.agent("cpus:2;mem:1024")
    h.allocate()
    h.agent_says(conn, ac.SlackEstimate(resources=Resources.of(cpus=2, mem=512).to_mesos()))
    fx = h.allocate()
    rev = [o for o in offers(h.effects, sid) if Resources.from_mesos(o.resources).revocable()]
    assert rev, "a revocable offer is made from usage slack"
    o = rev[-1]
    rtask = mesos.TaskInfo(
        name="r", task_id=mesos.TaskID("r"), command=mesos.CommandInfo(value="sleep 9"),
        resources=Resources.of(cpus=1, mem=128, revocable=True).to_mesos(),
    )
    fx = h.call(fid, sid, accept(fid, [o.id], rtask))
    assert to_agent(fx, ac.RunTasks), updates(fx, sid)
    # the estimate collapses: the allocator revokes, the agent is told to evict
    fx = h.agent_says(conn, ac.SlackEstimate(resources=()))
    fx += h.allocate()
    revokes = to_agent(fx, ac.Revoke)
    assert revokes and revokes[0].task_ids == (mesos.TaskID("r"),)


def test_drain_stops_offers_and_survives_restart_and_operator_teardown() -> None:
    from master.events import AgentDrainRequested, TeardownRequested

    h = Harness()
    fid, sid = h.subscribe()
    aid, _ = h.agent()
    (offer,) = offers(h.allocate(), sid)
    fx = h.feed(AgentDrainRequested(aid, True))
    assert persisted(fx) == [ops.AgentDrainSet(aid, True)]
    assert [e.rescind.offer_id for e in events(fx, sid, ET.RESCIND) if e.rescind] == [offer.id]
    assert h.state.agents[aid].phase is AgentPhase.DRAINING
    h.call(fid, sid, mesos.Call.make_revive(mesos.FrameworkID(fid)))
    assert offers(h.advance(1), sid) == []
    h.feed(AgentDrainRequested(aid, False))
    assert offers(h.allocate(), sid)
    fx = h.feed(TeardownRequested(fid))
    assert closed(fx) == [sid] and fid not in h.state.frameworks


def test_dynamic_reservation_is_persisted_and_restored() -> None:
    h = Harness()
    fid, sid = h.subscribe(framework_info("res", roles=("ml",)))
    aid, _ = h.agent("cpus:4;mem:1024")
    (offer,) = offers(h.allocate(), sid)
    want = Resources.of(cpus=2).reserve("ml", principal="p")
    op = mesos.Operation(type=mesos.OperationType.RESERVE, reserve=mesos.Reserve(resources=want.to_mesos("ml")))
    fx = h.call(fid, sid, mesos.Call.make_accept(mesos.FrameworkID(fid), (offer.id,), (op,)))
    (rs,) = [o for o in persisted(fx) if isinstance(o, ops.ReservationsSet)]
    assert rs.agent_id == aid and Resources.parse(rs.resources) == want
    # a restarted master restores it: the agent's total in the allocator holds the reservation
    h2 = Harness()
    h2.state.recover(ops.RegistrySnapshot(agents=(ops.AgentEntry(aid, "h1", 5051, "cpus:4;mem:1024", reservations=rs.resources),)), h2.now)
    h2.agent("cpus:4;mem:1024", agent_id=aid)
    view = h2.alloc.agent_view(aid)
    assert view is not None and view.total.reserved("ml") == want


def test_custom_executor_resources_count_once() -> None:
    h = Harness()
    fid, sid = h.subscribe()
    h.agent("cpus:2;mem:1024")
    (offer,) = offers(h.allocate(), sid)
    ex = mesos.ExecutorInfo(executor_id=mesos.ExecutorID("ex"), type=mesos.ExecutorType.CUSTOM,
                            command=mesos.CommandInfo(value="./executor"),
                            resources=Resources.of(cpus=0.5, mem=64).to_mesos())

    def t(tid: str) -> mesos.TaskInfo:
        return mesos.TaskInfo(name=tid, task_id=mesos.TaskID(tid), executor=ex,
                              resources=Resources.of(cpus=0.5, mem=64).to_mesos())

    # 0.5 (executor) + 3 x 0.5 = 2.0 cpus: fits only if the executor is counted once
    fx = h.call(fid, sid, accept(fid, [offer.id], t("a"), t("b"), t("c")))
    assert updates(fx, sid) == []
    (run,) = to_agent(fx, ac.RunTasks)
    assert len(run.tasks) == 3
    used = h.state.used_resources()
    assert used.scalar("cpus") == 2.0 and used.scalar("mem") == 256


def test_n5_liveness_seen_at_the_socket_prevents_false_unreachable() -> None:
    from master.events import Tick

    h = Harness(ping_interval=1, ping_timeout=3)
    aid, conn = h.agent()
    # the core was slow (e.g. a registry write): no AgentMessageReceived for 5 s, but the shell
    # saw frames on the socket a moment ago
    h.now += 5
    fx = h.feed(Tick(seen=((conn, h.now - 0.5),)))
    assert not [o for o in persisted(fx) if isinstance(o, ops.AgentMarkedUnreachable)]
    assert h.state.agents[aid].phase is AgentPhase.REGISTERED
    h.now += 5
    fx = h.feed(Tick())
    assert [o.agent_id for o in persisted(fx) if isinstance(o, ops.AgentMarkedUnreachable)] == [aid]


def test_unreachable_agent_is_removed_after_gc_age() -> None:
    h = Harness(ping_interval=1, ping_timeout=2, unreachable_gc=100)
    fid, sid = h.subscribe(framework_info("pa", "PARTITION_AWARE"))
    aid, _ = h.agent()
    (offer,) = offers(h.allocate(), sid)
    h.call(fid, sid, accept(fid, [offer.id], task("t", cmd="sleep 9")))
    h.advance(3)
    assert h.state.agents[aid].phase is AgentPhase.UNREACHABLE
    fx = h.advance(101)
    assert ops.AgentRemoved(aid) in persisted(fx)
    assert [(s.task_id.value, s.state) for s in updates(fx, sid)] == [("t", TS.TASK_GONE)]
    assert aid not in h.state.agents and "t" in h.state.frameworks[fid].completed
    # a late return after removal: admitted again, but its old tasks are killed, not adopted
    rt = ac.RunningTask(framework_id=mesos.FrameworkID(fid), task_id=mesos.TaskID("t"), state=TS.TASK_RUNNING,
                        resources=task("t").resources)
    mark = len(h.effects)
    aid2, _ = h.agent(agent_id=aid, tasks=[rt])
    assert aid2 == aid and [k.task_id.value for k in to_agent(h.effects[mark:], ac.KillTask)] == ["t"]
    assert "t" not in h.state.frameworks[fid].tasks


def test_recovered_task_keeps_its_allocation_role() -> None:
    h = Harness()
    fid, _ = h.subscribe(framework_info("mr", roles=("a", "b")))
    res = Resources.of(cpus=1, mem=64).to_mesos(allocation_role="b")
    rt = ac.RunningTask(framework_id=mesos.FrameworkID(fid), task_id=mesos.TaskID("t"), state=TS.TASK_RUNNING,
                        resources=res)
    h.agent(agent_id="A9", tasks=[rt])
    view = h.alloc.task_view(fid, "t")
    assert view is not None and view.role == "b"


def test_gpu_agents_only_offered_to_gpu_frameworks() -> None:
    h = Harness()
    _, sp = h.subscribe(framework_info("plain"))
    _, sg = h.subscribe(framework_info("gpu", "GPU_RESOURCES"))
    h.agent("cpus:4;mem:4096;gpus:2", hostname="gpu-host")
    h.agent("cpus:4;mem:4096", hostname="cpu-host")
    h.advance(1)
    assert {o.hostname for o in offers(h.effects, sp)} == {"cpu-host"}
    got = offers(h.effects, sg)
    assert any(o.hostname == "gpu-host" and Resources.from_mesos(o.resources).scalar("gpus") == 2 for o in got)


def test_a_retiring_agent_is_offered_no_more() -> None:
    """UNREGISTER (the agent got SIGUSR1): its offers are rescinded at once, no new one is made,
    and the other agent goes on being offered."""
    h = Harness()
    _, sid = h.subscribe()
    _, conn = h.agent("cpus:2;mem:1024", hostname="h1")
    (offer,) = offers(h.allocate(), sid)
    fx = h.agent_says(conn, ac.Unregister())
    assert [e.rescind.offer_id for e in events(fx, sid, ET.RESCIND) if e.rescind] == [offer.id]
    assert offers(h.advance(2), sid) == []
    h.agent("cpus:2;mem:1024", hostname="h2")
    assert [o.hostname for o in offers(h.allocate(), sid)] == ["h2"]
