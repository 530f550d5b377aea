"""``master.maintenance``: schedule and machine-list validation with Mesos' messages, machine
matching, the book's registry value, and the inverse offer book (pure, exact outcomes)."""

from __future__ import annotations

from pathlib import Path

import pytest

from master import registry_ops as ops
from master.maintenance import (
    InverseOfferBook,
    Machine,
    MaintenanceBook,
    MaintenanceError,
    Mode,
    Schedule,
    Window,
    parse_machines,
    parse_schedule,
)
from master.registry import Registry
from master.registry_zk import Mirror, fold, snapshot_of
from protocol import codec, mesos

IO = mesos.InverseOfferStatusValue


def sched(body: str) -> mesos.MaintenanceSchedule:
    return codec.decode_json(mesos.MaintenanceSchedule, body.encode())


def mid(hostname: str | None = None, ip: str | None = None) -> mesos.MachineID:
    return mesos.MachineID(hostname=hostname, ip=ip)


def test_a_valid_schedule_is_normalised() -> None:
    s = parse_schedule(sched(
        '{"windows": [{"machine_ids": [{"hostname": "Machine1", "ip": "10.0.0.1"}, {"ip": "10.0.0.2"}],'
        ' "unavailability": {"start": {"nanoseconds": 5}, "duration": {"nanoseconds": 7}}},'
        ' {"machine_ids": [{"hostname": "m3"}], "unavailability": {"start": {"nanoseconds": 9}}}]}'))
    assert s == Schedule((
        Window((Machine("machine1", "10.0.0.1"), Machine("", "10.0.0.2")), 5, 7),
        Window((Machine("m3", ""),), 9, None),
    ))
    assert parse_schedule(sched("{}")) == Schedule()
    assert s.to_mesos().windows[1].unavailability == mesos.Unavailability(mesos.TimeInfo(9))


@pytest.mark.parametrize(("body", "message"), [
    ('{"windows": [{"machine_ids": [], "unavailability": {"start": {"nanoseconds": 1}}}]}',
     "List of machines in the maintenance window is empty"),
    ('{"windows": [{"machine_ids": [{"hostname": "a"}]}]}',
     "Expecting 'unavailability' to be present in a maintenance window"),
    ('{"windows": [{"machine_ids": [{"hostname": "a"}],'
     ' "unavailability": {"start": {"nanoseconds": 1}, "duration": {"nanoseconds": -1}}}]}',
     "Unavailability 'duration' is negative"),
    ('{"windows": [{"machine_ids": [{}], "unavailability": {"start": {"nanoseconds": 1}}}]}',
     "Both 'hostname' and 'ip' for a machine are empty"),
    ('{"windows": [{"machine_ids": [{"ip": "10.0.0.300"}], "unavailability": {"start": {"nanoseconds": 1}}}]}',
     "Failed to parse IP address '10.0.0.300' of a machine: not an IPv4 address"),
    ('{"windows": [{"machine_ids": [{"hostname": "A"}], "unavailability": {"start": {"nanoseconds": 1}}},'
     ' {"machine_ids": [{"hostname": "a"}], "unavailability": {"start": {"nanoseconds": 2}}}]}',
     "Machine '{\"hostname\":\"a\"}' appears more than once in the schedule"),
])
def test_bad_schedules_are_refused_with_mesos_words(body: str, message: str) -> None:
    with pytest.raises(MaintenanceError) as e:
        parse_schedule(sched(body))
    assert str(e.value) == message


def test_machine_lists() -> None:
    assert parse_machines((mid("A", "1.2.3.4"), mid(ip="1.2.3.5"))) == (Machine("a", "1.2.3.4"), Machine("", "1.2.3.5"))
    for ids, message in [
        ((), "List of machines is empty"),
        ((mid("a"), mid("A")), "Machine '{\"hostname\":\"a\"}' appears more than once in the schedule"),
        ((mid(),), "Both 'hostname' and 'ip' for a machine are empty"),
    ]:
        with pytest.raises(MaintenanceError) as e:
            parse_machines(ids)
        assert str(e.value) == message


def test_matching_modes_and_the_registry_value() -> None:
    a, b, c = Machine("a", "10.0.0.1"), Machine("", "10.0.0.2"), Machine("c", "")
    book = MaintenanceBook(Schedule((Window((a, b), 1, 2), Window((c,), 3, None))))
    assert book.machine_of("A", "10.0.0.1") == (a, book.schedule.windows[0])
    assert book.machine_of("a", "10.0.0.9") is None  # both given: both must match
    assert book.machine_of("anything", "10.0.0.2") == (b, book.schedule.windows[0])
    assert book.machine_of("c", "10.9.9.9") == (c, book.schedule.windows[1])
    assert [book.mode(m) for m in (a, b, c, Machine("z"))] == [Mode.DRAINING] * 3 + [Mode.UP]
    assert book.down_problem([Machine("z")]) == "Machine '{\"hostname\":\"z\"}' is not part of a maintenance schedule"
    book.start([a])
    assert book.mode(a) is Mode.DOWN and book.is_down("a", "10.0.0.1") == a and book.is_down("c", "") is None
    assert book.up_problem([b]) == "Machine '{\"ip\":\"10.0.0.2\"}' is not in DOWN mode and cannot be brought up"
    assert MaintenanceBook.decode(book.encode()) == book
    assert MaintenanceBook.decode("") == MaintenanceBook()
    book.stop([a])
    assert book == MaintenanceBook(Schedule((Window((b,), 1, 2), Window((c,), 3, None))))
    assert book.status([(b, [])]) == mesos.ClusterStatus(
        draining_machines=(mesos.DrainingMachine(b.to_mesos()), mesos.DrainingMachine(c.to_mesos())))


def test_inverse_offer_book() -> None:
    u = mesos.Unavailability(mesos.TimeInfo(1))
    book = InverseOfferBook(prefix="io")
    made = book.make([("a1", "f1", u), ("a1", "f2", u)], now=10.0)
    assert [(r.offer_id, r.agent_id, r.framework_id) for r in made] == [("io-1", "a1", "f1"), ("io-2", "a1", "f2")]
    assert book.make([("a1", "f1", u)], now=11.0) == []  # one outstanding per agent and framework
    assert book.answer("f2", ["io-1"], IO.ACCEPT, 5.0, now=12.0) == []  # not f2's
    assert [r.offer_id for r in book.answer("f1", ["io-1", "io-9"], IO.DECLINE, 5.0, now=12.0)] == ["io-1"]
    assert book.next_deadline(12.0) == 17.0
    assert book.make([("a1", "f1", u)], now=16.9) == []
    assert [r.offer_id for r in book.make([("a1", "f1", u)], now=17.0)] == ["io-3"]
    assert [(s.status, s.framework_id.value) for s in book.agent_statuses("a1")] == [(IO.DECLINE, "f1"), (IO.UNKNOWN, "f2")]
    assert [r.offer_id for r in book.drop_framework("f2", forget=True)] == ["io-2"]
    assert [s.framework_id.value for s in book.agent_statuses("a1")] == ["f1"]
    assert [r.offer_id for r in book.drop_agent("a1")] == ["io-3"]
    assert book.agent_statuses("a1") == [] and book.outstanding == {} and book.by_pair == {}


async def test_the_book_is_one_registry_value_in_sqlite_and_zookeepers_mirror(tmp_path: Path) -> None:
    book = MaintenanceBook(Schedule((Window((Machine("h1", "10.0.0.1"),), 5, None),)), {Machine("h1", "10.0.0.1")})
    reg = await Registry.open(tmp_path)
    assert reg.snapshot.maintenance == ""
    await reg.apply([ops.MaintenanceSet(MaintenanceBook().encode()), ops.MaintenanceSet(book.encode())])
    await reg.close()
    reg = await Registry.open(tmp_path)
    assert MaintenanceBook.decode(reg.snapshot.maintenance) == book
    await reg.close()
    mirror: Mirror = {}
    assert fold(mirror, [ops.MaintenanceSet(book.encode())]) == {("maintenance", "state")}
    assert MaintenanceBook.decode(snapshot_of(mirror, 1).maintenance) == book
