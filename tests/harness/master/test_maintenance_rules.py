"""The maintenance rules (``master.maintenance_rules.MaintenanceRules``, the core's
``maintenance_rules``) through their own API: the mode checks, a schedule applied (persisted,
agents' unavailability), inverse offers made and answered, an agent joining a DRAINING machine,
and a machine going DOWN, with exact outcomes. The cluster around it is built through
``MasterState.handle`` (``Harness``)."""

from __future__ import annotations

from master import registry_ops as ops
from master.events import (
    AgentConnected,
    CloseAgent,
    Effect,
    MaintenanceScheduleUpdated,
    MaintenanceStarted,
    MaintenanceStopped,
    SendEvent,
    SendToAgent,
)
from master.maintenance import Machine, MaintenanceBook, Schedule, Window
from master.testing import Harness, events, framework_info, offers, persisted, task, updates
from protocol import agent_channel as ac
from protocol import mesos
from protocol.resources import Resources
from protocol.task_states import TaskState

ET = mesos.EventType
IO = mesos.InverseOfferStatusValue
H1 = Machine("h1", "10.0.0.1")
LABEL = '{"hostname":"h1","ip":"10.0.0.1"}'  # (how Mesos names a machine: its MachineID as JSON)
START = 2_000_000_000_000_000_000
HOUR = 3_600_000_000_000
UNAV = mesos.Unavailability(mesos.TimeInfo(START), mesos.DurationInfo(HOUR))


def draining_h1() -> MaintenanceScheduleUpdated:
    return MaintenanceScheduleUpdated(Schedule((Window((H1,), START, HOUR),)))


def cluster() -> tuple[Harness, str, str, str, int]:
    """One framework running ``t1`` on the agent of h1 (10.0.0.1, connection 1)."""
    h = Harness(ping_interval=1000.0, ping_timeout=10_000.0)
    fid, sid = h.subscribe(framework_info("fw"))
    reg = ac.Register(hostname="h1", port=5051, resources=Resources.parse("cpus:4;mem:4096").to_mesos())
    h.feed(AgentConnected(1, reg, ip="10.0.0.1"))
    aid = h.state.conns[1]
    (offer,) = offers(h.allocate(), sid)
    op = mesos.Operation(type=mesos.OperationType.LAUNCH, launch=mesos.Launch(task_infos=(task("t1"),)))
    h.call(fid, sid, mesos.Call.make_accept(mesos.FrameworkID(fid), (offer.id,), (op,)))
    h.status(1, fid, "t1", TaskState.TASK_RUNNING)
    return h, fid, sid, aid, 1


def test_the_mode_checks_answer_in_mesos_words() -> None:
    h, *_ = cluster()
    rules = h.state.maintenance_rules
    assert rules.problem(MaintenanceStarted((H1,))) == f"Machine '{LABEL}' is not part of a maintenance schedule"
    assert rules.problem(MaintenanceStopped((H1,))) == f"Machine '{LABEL}' is not in DOWN mode and cannot be brought up"
    assert rules.problem(draining_h1()) is None


def test_a_schedule_is_persisted_marks_the_agent_and_its_framework_gets_one_inverse_offer() -> None:
    h, fid, sid, aid, _conn = cluster()
    rules, st = h.state.maintenance_rules, h.state
    fx: list[Effect] = []
    rules.apply(draining_h1(), h.now, fx)
    assert persisted(fx) == [ops.MaintenanceSet(MaintenanceBook(Schedule((Window((H1,), START, HOUR),))).encode())]
    assert st.agent_unavailability == {aid: UNAV} and rules.unavailability_of(aid) == UNAV
    (ev,) = events(fx, sid, ET.INVERSE_OFFERS)
    assert ev.inverse_offers is not None
    (io,) = ev.inverse_offers.inverse_offers
    assert (io.framework_id.value, io.agent_id, io.unavailability) == (fid, mesos.AgentID(aid), UNAV)
    assert rules.inverse_offers_of(fid) == (io,)
    assert rules.schedule() == Schedule((Window((H1,), START, HOUR),)).to_mesos()
    # made once: the next pass makes none while it is outstanding
    fx = []
    rules.make_inverse_offers(h.now, fx)
    assert fx == []


def test_an_answer_is_recorded_and_shown_in_the_cluster_status() -> None:
    h, fid, _sid, _aid, _conn = cluster()
    rules = h.state.maintenance_rules
    fx: list[Effect] = []
    rules.apply(draining_h1(), h.now, fx)
    (io,) = rules.inverse_offers_of(fid)
    rules.inverse_answer(h.state.frameworks[fid], (io.id,), False, mesos.Filters(refuse_seconds=60.0), h.now)
    assert rules.status() == mesos.ClusterStatus(draining_machines=(mesos.DrainingMachine(
        id=H1.to_mesos(),
        statuses=(mesos.InverseOfferStatus(IO.DECLINE, mesos.FrameworkID(fid), mesos.TimeInfo(int(h.now * 1e9))),),
    ),))
    assert rules.inverse_offers_of(fid) == () and h.state.inverse_due == h.now + 60.0


def test_an_agent_joining_a_draining_machine_gets_its_unavailability() -> None:
    h, _fid, _sid, aid, _conn = cluster()
    rules, st = h.state.maintenance_rules, h.state
    st.maintenance = MaintenanceBook(Schedule((Window((H1,), START, HOUR),)))  # (as recovered from the registry)
    st.inverse_due = None
    rules.joined(st.agents[aid], h.now)
    assert st.agent_unavailability == {aid: UNAV} and st.inverse_due == h.now


def test_machine_down_shuts_the_agent_down_and_removes_it() -> None:
    h, fid, sid, aid, conn = cluster()
    rules, st = h.state.maintenance_rules, h.state
    fx: list[Effect] = []
    rules.apply(draining_h1(), h.now, fx)
    fx = []
    rules.machine_down(st.agents[aid], H1, h.now, fx)
    reason = f"Machine '{LABEL}' is DOWN for maintenance"
    assert [e for e in fx if isinstance(e, SendToAgent | CloseAgent)] == [
        SendToAgent(conn, ac.ShutdownFramework(framework_id=mesos.FrameworkID(fid))),
        SendToAgent(conn, ac.Refused(message=reason)),
        CloseAgent(conn, reason),
    ]
    assert persisted(fx) == [ops.AgentRemoved(aid)]
    assert [(u.task_id.value, u.state) for u in updates(fx, sid)] == [("t1", TaskState.TASK_LOST)]  # (not PARTITION_AWARE)
    assert [e.event.type for e in fx if isinstance(e, SendEvent)][-1] is ET.FAILURE
    assert aid not in st.agents and st.conns == {} and st.agent_unavailability == {}
    assert st.counters["slave_removals"] == 1


def test_recovered_modes_come_from_the_registry_and_a_damaged_value_is_no_schedule() -> None:
    h = Harness()
    rules, st = h.state.maintenance_rules, h.state
    book = MaintenanceBook(Schedule((Window((H1,), START, HOUR),)))
    rules.recover(book.encode())
    assert st.maintenance.schedule == book.schedule
    rules.recover("{not json")
    assert st.maintenance.empty()
