"""The agent book (``master.agents.AgentBook``, the core's ``agent_book``) through its own API:
registration, refusals, messages from unknown connections, a lost connection, unreachability,
removal and the reservation checks, with exact effects. The cluster around it is built through
``MasterState.handle`` (``Harness``)."""

from __future__ import annotations

from master import registry_ops as ops
from master.events import CloseAgent, Effect, Persist, SendEvent, SendToAgent
from master.lifecycles import AgentPhase
from master.testing import Harness, framework_info, offers, persisted, task, to_agent, updates
from protocol import agent_channel as ac
from protocol import mesos
from protocol.ids import new_agent_id
from protocol.resources import Resources
from protocol.task_states import TaskState

TS = TaskState
R = mesos.Reason


def register_msg(agent_id: str | None = None, resources: str = "cpus:4;mem:4096") -> ac.Register:
    return ac.Register(hostname="h1", port=5051, resources=Resources.parse(resources).to_mesos(),
                       agent_id=mesos.AgentID(agent_id) if agent_id is not None else None)


def running(*caps: str) -> tuple[Harness, str, str, str, int]:
    """One framework running ``t1`` on one agent."""
    h = Harness(ping_interval=1e9, ping_timeout=1e9)
    fid, sid = h.subscribe(framework_info("fw", *caps))
    aid, conn = h.agent("cpus:4;mem:4096")
    (offer,) = offers(h.allocate(), sid)
    op = mesos.Operation(type=mesos.OperationType.LAUNCH, launch=mesos.Launch(task_infos=(task("t1"),)))
    h.call(fid, sid, mesos.Call.make_accept(mesos.FrameworkID(fid), (offer.id,), (op,)))
    h.status(conn, fid, "t1", TS.TASK_RUNNING)
    return h, fid, sid, aid, conn


def test_a_new_agent_is_persisted_then_told_its_id_and_counted() -> None:
    h = Harness(ping_interval=5.0, ping_timeout=15.0)
    book, st = h.state.agent_book, h.state
    fx: list[Effect] = []
    book.register(7, register_msg(), h.now, fx)
    aid = new_agent_id("m1", 0)
    assert persisted(fx) == [ops.AgentAdmitted(aid, "h1", 5051, "cpus:4; mem:4096", "", h.now)]
    assert to_agent(fx, ac.Registered) == [
        ac.Registered(agent_id=mesos.AgentID(aid), master_id="m1", epoch=1, ping_interval=5.0, ping_timeout=15.0)
    ]
    assert [type(e) for e in fx] == [Persist, SendToAgent]  # (no framework yet: no offer)
    ag = st.agents[aid]
    assert (ag.phase, ag.conn_id, ag.next_ping, st.conns) == (AgentPhase.REGISTERED, 7, h.now + 5.0, {7: aid})
    assert st.counters["slave_registrations"] == 1 and st.housekeeping_at == h.now + 5.0
    assert book.of_conn(7) is ag and book.of_conn(8) is None


def test_an_empty_agent_id_and_bad_resources_are_refused_before_anything_changes() -> None:
    h = Harness()
    book, st = h.state.agent_book, h.state
    fx: list[Effect] = []
    book.register(3, register_msg(agent_id=""), h.now, fx)
    assert fx == [SendToAgent(3, ac.Refused(message="empty agent id")), CloseAgent(3, "empty agent id")]
    fx = []
    bad = ac.Register(hostname="h1", port=5051, resources=(mesos.Resource(name="cpus", type=mesos.ValueType.SCALAR),))
    book.register(4, bad, h.now, fx)
    assert [type(e) for e in fx] == [SendToAgent, CloseAgent]
    assert fx[1] == CloseAgent(4, "invalid resources")
    assert st.agents == {} and st.conns == {}


def test_a_message_from_an_unknown_connection_is_dropped() -> None:
    h = Harness()
    fx: list[Effect] = []
    h.state.agent_book.message(99, ac.Pong(seq=1), h.now, fx)
    assert fx == [] and h.state.counters["dropped_messages"] == 1


def test_a_lost_connection_keeps_the_agent_registered_until_its_ping_timeout() -> None:
    h, _fid, _sid, aid, conn = running()
    fx: list[Effect] = []
    h.state.agent_book.conn_lost(conn, h.now, fx)
    ag = h.state.agents[aid]
    assert fx == [] and ag.conn_id is None and ag.phase is AgentPhase.REGISTERED
    assert conn not in h.state.conns


def test_unreachable_tasks_are_unreachable_to_partition_aware_frameworks_and_every_framework_hears_failure() -> None:
    h, fid, sid, aid, conn = running("PARTITION_AWARE")
    fx: list[Effect] = []
    h.state.agent_book.mark_unreachable(h.state.agents[aid], h.now, "cut off", fx)
    assert persisted(fx) == [ops.AgentMarkedUnreachable(aid, h.now)]
    assert CloseAgent(conn, "cut off") in fx
    assert [(u.task_id.value, u.state, u.reason, u.message) for u in updates(fx, sid)] == [
        ("t1", TS.TASK_UNREACHABLE, R.REASON_AGENT_REMOVED, f"Agent {aid} is unreachable: cut off")
    ]
    failures = [e.event for e in fx if isinstance(e, SendEvent) and e.event.type is mesos.EventType.FAILURE]
    assert failures == [mesos.Event.make_failure(mesos.AgentID(aid))]
    ag = h.state.agents[aid]
    assert (ag.phase, ag.unreachable_since, ag.in_allocator) == (AgentPhase.UNREACHABLE, h.now, False)
    assert h.state.frameworks[fid].tasks["t1"].state is TS.TASK_UNREACHABLE
    assert h.state.counters["slave_removals"] == 1


def test_removal_ends_the_tasks_gone_and_forgets_the_agent() -> None:
    h, fid, sid, aid, _conn = running("PARTITION_AWARE")
    fx: list[Effect] = []
    h.state.agent_book.remove(h.state.agents[aid], h.now, fx)
    assert persisted(fx) == [ops.AgentRemoved(aid)]
    assert [(u.task_id.value, u.state, u.reason) for u in updates(fx, sid)] == [
        ("t1", TS.TASK_GONE, R.REASON_AGENT_REMOVED)
    ]
    fw = h.state.frameworks[fid]
    assert fw.tasks == {} and fw.completed["t1"].state is TS.TASK_GONE
    assert aid not in h.state.agents and h.state.removed_agent_ids == {aid}


def test_reservation_problems_name_what_is_wrong() -> None:
    h, _fid, _sid, aid, _conn = running()
    book = h.state.agent_book
    dyn = Resources.parse("cpus(ops):1")
    assert book.reservation_problem("nope", dyn, True) == "Agent nope is not registered"
    assert book.reservation_problem(aid, Resources.parse("cpus:1"), True) == "Resources must all carry a dynamic reservation"
    assert book.reservation_problem(aid, Resources.parse("cpus(ops):9"), True) == f"Agent {aid} has no free unreserved cpus:9"
    assert book.reservation_problem(aid, dyn, True) is None
    assert book.reservation_problem(aid, dyn, False) == f"{dyn} is not reserved and free on agent {aid}"


def test_recovered_agents_wait_for_re_registration_and_unreachable_ones_stay_unreachable() -> None:
    h = Harness(agent_reregister_timeout=60.0)
    book, st = h.state.agent_book, h.state
    book.recover((
        ops.AgentEntry("a1", "h1", 5051, "cpus:2;mem:512", attributes="rack:r1", registered_at=10.0, draining=True,
                       drain_kill=True, drain_max_grace=5.0),
        ops.AgentEntry("a2", "h2", 5051, "cpus:1;mem:256", unreachable_since=900.0),
        ops.AgentEntry("a3", "h3", 5051, "not resources"),
    ), (("a1", "p1"),), h.now)
    a1, a2, a3 = st.agents["a1"], st.agents["a2"], st.agents["a3"]
    assert (a1.phase, a1.total, a1.registered_time, a1.draining) == (
        AgentPhase.RECOVERED, Resources.parse("cpus:2;mem:512"), 10.0, True)
    assert a1.drain is not None and (a1.drain.max_grace, a1.drain.mark_gone) == (5.0, False)
    assert [(a.name, a.text.value if a.text else None) for a in a1.attributes] == [("rack", "r1")]
    assert (a2.phase, a2.unreachable_since) == (AgentPhase.UNREACHABLE, 900.0)
    assert a3.total == Resources()  # (a damaged entry: no resources rather than no agent)
    assert st.recovery_deadline == h.now + 60.0 and st.agent_principals == {"a1": "p1"}
    assert st.recovering()
