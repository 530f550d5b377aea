"""Maintenance schedules, machine modes and inverse offers on the pure core (Mesos' maintenance
primitives): exact outcomes on virtual time.

Two agents, ``h1`` (10.0.0.1) and ``h2`` (10.0.0.2); one framework running ``t1`` on h1. A
schedule naming h1 makes it DRAINING: offers of h1 carry the unavailability, the framework gets one
inverse offer for h1, answers it (recorded, filtered for ``refuse_seconds``). START_MAINTENANCE
shuts h1's agent down and removes it (TASK_LOST, FAILURE), refuses it while DOWN; STOP_MAINTENANCE
brings it back UP and out of the schedule. The book is persisted and recovered."""

from __future__ import annotations

import attrs

from master import registry_ops as ops
from master.events import (
    AgentConnected,
    CloseAgent,
    Effect,
    MaintenanceScheduleUpdated,
    MaintenanceStarted,
    MaintenanceStopped,
)
from master.maintenance import Machine, MaintenanceBook, Schedule, Window
from master.state import MasterState
from master.testing import (
    Harness,
    events,
    framework_info,
    master_info,
    offers,
    persisted,
    task,
    to_agent,
    updates,
)
from protocol import agent_channel as ac
from protocol import mesos
from protocol.resources import Resources
from protocol.task_states import TaskState

ET = mesos.EventType
IO = mesos.InverseOfferStatusValue
H1 = Machine("h1", "10.0.0.1")
H2 = Machine("h2", "10.0.0.2")
START = 2_000_000_000_000_000_000
HOUR = 3_600_000_000_000


def schedule(*machines: Machine, start: int = START, duration: int | None = HOUR) -> MaintenanceScheduleUpdated:
    return MaintenanceScheduleUpdated(Schedule((Window(machines, start, duration),) if machines else ()))


def unavailability(start: int = START, duration: int | None = HOUR) -> mesos.Unavailability:
    return mesos.Unavailability(mesos.TimeInfo(start), mesos.DurationInfo(duration) if duration is not None else None)


def inverse_offers(fx: list[Effect], sid: str) -> list[mesos.InverseOffer]:
    return [io for ev in events(fx, sid, ET.INVERSE_OFFERS) if ev.inverse_offers for io in ev.inverse_offers.inverse_offers]


def rescinded_inverse(fx: list[Effect], sid: str) -> list[str]:
    return [ev.rescind_inverse_offer.inverse_offer_id.value for ev in events(fx, sid, ET.RESCIND_INVERSE_OFFER)
            if ev.rescind_inverse_offer]


def register(h: Harness, conn: int, hostname: str, ip: str, agent_id: str | None = None,
             tasks: tuple[ac.RunningTask, ...] = ()) -> list[Effect]:
    reg = ac.Register(hostname=hostname, port=5051, resources=Resources.parse("cpus:4;mem:4096").to_mesos(),
                      agent_id=mesos.AgentID(agent_id) if agent_id else None, tasks=tasks)
    return h.feed(AgentConnected(conn, reg, ip=ip))


class Cluster:
    def __init__(self, *caps: str) -> None:
        self.h = h = Harness(ping_timeout=10_000.0, ping_interval=1000.0)  # (the test agents send no pongs)
        self.fid, self.sid = h.subscribe(framework_info("fw", *caps))
        register(h, 1, "h1", "10.0.0.1")
        register(h, 2, "H2", "::ffff:10.0.0.2")  # hostnames are case-insensitive; IPv4-mapped unwrapped
        self.a1, self.a2 = h.state.conns[1], h.state.conns[2]
        got = {o.agent_id.value: o for o in offers(h.allocate(), self.sid)}
        op = mesos.Operation(type=mesos.OperationType.LAUNCH, launch=mesos.Launch(task_infos=(task("t1"),)))
        h.call(self.fid, self.sid, mesos.Call.make_accept(mesos.FrameworkID(self.fid), (got[self.a1].id,), (op,)))
        h.status(1, self.fid, "t1", TaskState.TASK_RUNNING)

    def answer(self, ids: list[str], accept: bool, refuse: float | None = None) -> list[Effect]:
        filters = mesos.Filters(refuse_seconds=refuse) if refuse is not None else None
        oids = tuple(mesos.OfferID(i) for i in ids)
        call = (
            mesos.Call(type=mesos.CallType.ACCEPT_INVERSE_OFFERS, framework_id=mesos.FrameworkID(self.fid),
                       accept_inverse_offers=mesos.AcceptInverseOffers(oids, filters))
            if accept else
            mesos.Call(type=mesos.CallType.DECLINE_INVERSE_OFFERS, framework_id=mesos.FrameworkID(self.fid),
                       decline_inverse_offers=mesos.DeclineInverseOffers(oids, filters))
        )
        return self.h.call(self.fid, self.sid, call)


def test_a_schedule_makes_the_machine_draining_its_framework_gets_one_inverse_offer_and_offers_carry_unavailability() -> None:
    c = Cluster()
    h = c.h
    t0 = h.now
    fx = h.feed(schedule(H1))
    assert persisted(fx) == [ops.MaintenanceSet(MaintenanceBook(Schedule((Window((H1,), START, HOUR),))).encode())]
    (io,) = inverse_offers(fx, c.sid)
    assert io.framework_id.value == c.fid and io.agent_id is not None and io.agent_id.value == c.a1
    assert io.unavailability == unavailability()
    assert io.url is not None and io.url.address.hostname == "h1" and io.resources == ()
    # offers of h1 carry the unavailability (once the accept's filter let it be offered again); h2's not
    fx = h.advance(6.0)
    by_agent = {o.agent_id.value: o for o in offers(fx, c.sid)}
    assert by_agent[c.a1].unavailability == unavailability()
    assert c.a2 not in by_agent or by_agent[c.a2].unavailability is None
    # one inverse offer outstanding per agent and framework: none more on later passes
    assert inverse_offers(h.advance(30), c.sid) == []
    status = h.state.maintenance_status()
    assert status == mesos.ClusterStatus(
        draining_machines=(mesos.DrainingMachine(
            id=H1.to_mesos(),
            statuses=(mesos.InverseOfferStatus(IO.UNKNOWN, mesos.FrameworkID(c.fid), mesos.TimeInfo(int(t0 * 1e9))),),
        ),),
    )
    assert h.state.inverse_offers_of(c.fid) == (io,)


def test_accept_is_recorded_and_filters_the_agent_for_the_default_five_seconds() -> None:
    c = Cluster()
    h = c.h
    (io,) = inverse_offers(h.feed(schedule(H1)), c.sid)
    h.advance(1.0)
    c.answer([io.id.value], accept=True)
    (dm,) = h.state.maintenance_status().draining_machines
    assert [(s.status, s.framework_id.value, s.timestamp.nanoseconds) for s in dm.statuses] == [
        (IO.ACCEPT, c.fid, int(h.now * 1e9))]
    assert h.state.inverse_offers_of(c.fid) == ()
    assert inverse_offers(h.advance(4.9), c.sid) == []
    (again,) = inverse_offers(h.advance(0.2), c.sid)  # Mesos asks again once the filter expires
    assert again.id != io.id and again.agent_id == io.agent_id
    # the answer stays until the framework answers the new one
    assert h.state.maintenance_status().draining_machines[0].statuses[0].status is IO.ACCEPT


def test_decline_with_a_filter_is_recorded_and_no_inverse_offer_comes_before_it_expires() -> None:
    c = Cluster()
    h = c.h
    (io,) = inverse_offers(h.feed(schedule(H1)), c.sid)
    c.answer([io.id.value, "not-an-inverse-offer"], accept=False, refuse=60.0)
    assert h.state.maintenance_status().draining_machines[0].statuses[0].status is IO.DECLINE
    assert inverse_offers(h.advance(59.0), c.sid) == []
    assert len(inverse_offers(h.advance(1.5), c.sid)) == 1


def test_a_new_unavailability_rescinds_the_inverse_offer_forgets_the_answer_and_asks_again() -> None:
    c = Cluster()
    h = c.h
    (io,) = inverse_offers(h.feed(schedule(H1)), c.sid)
    c.answer([io.id.value], accept=False)
    (io2,) = inverse_offers(h.advance(6.0), c.sid)
    fx = h.feed(schedule(H1, start=START + HOUR, duration=None))
    assert rescinded_inverse(fx, c.sid) == [io2.id.value]
    (io3,) = inverse_offers(fx, c.sid)
    assert io3.unavailability == unavailability(START + HOUR, None)
    assert [s.status for s in h.state.maintenance_status().draining_machines[0].statuses] == [IO.UNKNOWN]
    # an empty schedule: h1 is UP again, its inverse offer rescinded, its offers plain again
    fx = h.feed(schedule())
    assert rescinded_inverse(fx, c.sid) == [io3.id.value]
    assert h.state.maintenance_status() == mesos.ClusterStatus()
    assert all(o.unavailability is None for o in offers(h.allocate(), c.sid))


def test_machine_down_shuts_its_agent_down_removes_it_and_refuses_it_until_the_machine_is_up() -> None:
    c = Cluster()  # not PARTITION_AWARE: its task is reported LOST
    h = c.h
    (io,) = inverse_offers(h.feed(schedule(H1, H2)), c.sid)
    fx = h.feed(MaintenanceStarted((H1,)))
    assert persisted(fx)[0] == ops.MaintenanceSet(
        MaintenanceBook(Schedule((Window((H1, H2), START, HOUR),)), {H1}).encode())
    assert ops.AgentRemoved(c.a1) in persisted(fx)
    assert [b.framework_id.value for b in to_agent(fx, ac.ShutdownFramework)] == [c.fid]
    assert [b.message for b in to_agent(fx, ac.Refused)] == ["Machine '{\"hostname\":\"h1\",\"ip\":\"10.0.0.1\"}' is DOWN for maintenance"]
    assert [e.conn_id for e in fx if isinstance(e, CloseAgent)] == [1]
    assert [(u.task_id.value, u.state, u.reason) for u in updates(fx, c.sid)] == [
        ("t1", TaskState.TASK_LOST, mesos.Reason.REASON_AGENT_REMOVED)]
    assert [ev.failure.agent_id.value for ev in events(fx, c.sid, ET.FAILURE) if ev.failure and ev.failure.agent_id] == [c.a1]
    assert rescinded_inverse(fx, c.sid) == [io.id.value]
    assert c.a1 not in h.state.agents
    status = h.state.maintenance_status()
    assert status.down_machines == (H1.to_mesos(),)
    assert [d.id for d in status.draining_machines] == [H2.to_mesos()]
    assert all(o.agent_id.value != c.a1 for o in offers(h.advance(10), c.sid))
    # while DOWN the agent is refused, and what it still runs is shut down
    rt = ac.RunningTask(framework_id=mesos.FrameworkID(c.fid), task_id=mesos.TaskID("t1"), state=TaskState.TASK_RUNNING)
    fx = register(h, 3, "h1", "10.0.0.1", agent_id=c.a1, tasks=(rt,))
    assert [b.framework_id.value for b in to_agent(fx, ac.ShutdownFramework)] == [c.fid]
    assert len(to_agent(fx, ac.Refused)) == 1 and to_agent(fx, ac.Registered) == []
    assert c.a1 not in h.state.agents
    # rules: only a scheduled DRAINING machine goes down, only a DOWN one up, a DOWN one stays scheduled
    st = h.state
    assert st.maintenance_problem(MaintenanceStarted((H1,))) == (
        "Machine '{\"hostname\":\"h1\",\"ip\":\"10.0.0.1\"}' is not in DRAINING mode and cannot be brought down")
    assert st.maintenance_problem(MaintenanceStarted((Machine("h9"),))) == (
        "Machine '{\"hostname\":\"h9\"}' is not part of a maintenance schedule")
    assert st.maintenance_problem(MaintenanceStopped((H2,))) == (
        "Machine '{\"hostname\":\"h2\",\"ip\":\"10.0.0.2\"}' is not in DOWN mode and cannot be brought up")
    assert st.maintenance_problem(schedule(H2)) == (
        "Machine '{\"hostname\":\"h1\",\"ip\":\"10.0.0.1\"}' is deactivated and cannot be removed from the schedule")
    # UP: out of the schedule, the agent is admitted again (same id; what it reports is killed)
    fx = h.feed(MaintenanceStopped((H1,)))
    assert persisted(fx) == [ops.MaintenanceSet(MaintenanceBook(Schedule((Window((H2,), START, HOUR),))).encode())]
    fx = register(h, 4, "h1", "10.0.0.1", agent_id=c.a1, tasks=(rt,))
    assert [r.agent_id.value for r in to_agent(fx, ac.Registered)] == [c.a1]
    assert [k.task_id.value for k in to_agent(fx, ac.KillTask)] == ["t1"]
    # the kill's update is acknowledged for the framework, which had its terminal update (LOST)
    fx = h.status(4, c.fid, "t1", TaskState.TASK_KILLED, uuid=b"k" * 16)
    assert updates(fx, c.sid) == []
    assert [(a.task_id.value, a.uuid) for a in to_agent(fx, ac.AcknowledgeMsg)] == [("t1", b"k" * 16)]
    by_agent = {o.agent_id.value: o for o in offers(h.allocate(), c.sid)}
    assert c.a1 in by_agent and by_agent[c.a1].unavailability is None


def test_partition_aware_frameworks_see_their_tasks_gone() -> None:
    c = Cluster("PARTITION_AWARE")
    h = c.h
    h.feed(schedule(H1))
    fx = h.feed(MaintenanceStarted((H1,)))
    assert [(u.task_id.value, u.state) for u in updates(fx, c.sid)] == [("t1", TaskState.TASK_GONE)]


def test_a_disconnected_framework_gets_its_inverse_offers_again_when_it_resubscribes() -> None:
    c = Cluster()
    h = c.h
    inverse_offers(h.feed(schedule(H1)), c.sid)
    from master.events import StreamClosed, SubscribeReceived

    h.feed(StreamClosed(c.sid))
    assert h.state.inverse_offers_of(c.fid) == ()
    info = attrs.evolve(framework_info("fw"), id=mesos.FrameworkID(c.fid), failover_timeout=60.0)
    h.feed(SubscribeReceived("s9", mesos.Subscribe(framework_info=info)))
    (io,) = inverse_offers(h.advance(0.01), "s9")
    assert io.agent_id is not None and io.agent_id.value == c.a1


def test_the_book_is_recovered_from_the_registry_and_down_machines_stay_refused() -> None:
    c = Cluster()
    c.h.feed(schedule(H1, H2))
    fx = c.h.feed(MaintenanceStarted((H1,)))
    state = [op for op in persisted(fx) if isinstance(op, ops.MaintenanceSet)][-1].state
    st = MasterState(master_id="m2", epoch=2, master_info=master_info(), allocator=Harness().alloc, now=2000.0)
    st.recover(ops.RegistrySnapshot(maintenance=state), 2000.0)
    assert st.maintenance.down == {H1}
    assert st.maintenance.schedule == Schedule((Window((H1, H2), START, HOUR),))
    reg = ac.Register(hostname="h1", port=5051, resources=Resources.parse("cpus:1;mem:64").to_mesos())
    fx = st.handle(AgentConnected(7, reg, ip="10.0.0.1"), 2000.0)
    assert len(to_agent(fx, ac.Refused)) == 1
    # an agent of the DRAINING machine is admitted and its offers carry the unavailability
    reg2 = ac.Register(hostname="h2", port=5051, resources=Resources.parse("cpus:1;mem:64").to_mesos())
    fx = st.handle(AgentConnected(8, reg2, ip="10.0.0.2"), 2000.0)
    aid = to_agent(fx, ac.Registered)[0].agent_id.value
    assert st.agent_unavailability == {aid: unavailability()}


def test_outstanding_offers_of_a_newly_draining_agent_are_rescinded_and_made_again_with_the_unavailability() -> None:
    c = Cluster()
    h = c.h
    held = [o for o in h.state.alloc.outstanding_offers() if o.agent_id == c.a2]
    assert len(held) == 1  # the framework holds h2's offer
    fx = h.feed(schedule(H2))
    assert [ev.rescind.offer_id.value for ev in events(fx, c.sid, ET.RESCIND) if ev.rescind] == [held[0].offer_id]
    assert inverse_offers(fx, c.sid) == []  # nothing of the framework runs on h2
    (again,) = [o for o in offers(h.allocate(), c.sid) if o.agent_id.value == c.a2]
    assert again.unavailability == unavailability()
    # and back: rescinded again, offered without it
    fx = h.feed(schedule())
    assert len(events(fx, c.sid, ET.RESCIND)) == 1
    (plain,) = [o for o in offers(h.allocate(), c.sid) if o.agent_id.value == c.a2]
    assert plain.unavailability is None
