"""``agora maintenance``'s pure parts: machines, durations and start times, editing a schedule,
and the rows ``status`` prints."""

from __future__ import annotations

import pytest

from frameworks.cli.common import CliError
from frameworks.cli.maintenance import (
    parse_duration,
    parse_machine,
    parse_start,
    rows,
    with_window,
    without,
)

NS = 1_000_000_000


def test_machines_durations_and_starts() -> None:
    assert parse_machine("H1") == {"hostname": "h1"}
    assert parse_machine("h1@10.0.0.1") == {"hostname": "h1", "ip": "10.0.0.1"}
    assert parse_machine("@10.0.0.1") == {"ip": "10.0.0.1"}
    with pytest.raises(CliError):
        parse_machine("@")
    assert [parse_duration(t) for t in ("90", "90s", "30m", "2h", "1d", "1.5h")] == [
        90 * NS, 90 * NS, 1800 * NS, 7200 * NS, 86400 * NS, 5400 * NS]
    with pytest.raises(CliError):
        parse_duration("soon")
    assert parse_start("now", 100.5) == 100_500_000_000
    assert parse_start("+1m", 100.0) == 160 * NS
    assert parse_start("2030-03-17T17:46:40Z", 0.0) == 1_900_000_000 * NS
    assert parse_start("2030-03-17T17:46:40", 0.0) == 1_900_000_000 * NS  # UTC when no zone
    with pytest.raises(CliError):
        parse_start("tomorrow", 0.0)


def test_editing_the_schedule() -> None:
    a, b = {"hostname": "a"}, {"hostname": "b", "ip": "10.0.0.2"}
    one = with_window({}, [a, b], 5 * NS, None)
    assert one == {"windows": [{"machine_ids": [a, b], "unavailability": {"start": {"nanoseconds": 5 * NS}}}]}
    two = with_window(one, [b], 7 * NS, 60 * NS)  # b moves to its own window
    assert two == {"windows": [
        {"machine_ids": [a], "unavailability": {"start": {"nanoseconds": 5 * NS}}},
        {"machine_ids": [b], "unavailability": {"start": {"nanoseconds": 7 * NS}, "duration": {"nanoseconds": 60 * NS}}},
    ]}
    assert without(two, [a]) == {"windows": [two["windows"][1]]}
    assert without(two, [a, b]) == {}


def test_status_rows() -> None:
    a, b = {"hostname": "a"}, {"hostname": "b", "ip": "10.0.0.2"}
    schedule = with_window(with_window({}, [a], 5 * NS, 60 * NS), [b], 7 * NS, None)
    status = {"draining_machines": [{"id": a, "statuses": [
        {"status": "ACCEPT", "framework_id": {"value": "f1"}, "timestamp": {"nanoseconds": 1}},
        {"status": "UNKNOWN", "framework_id": {"value": "f2"}, "timestamp": {"nanoseconds": 1}}]}],
        "down_machines": [b]}
    assert rows(schedule, status) == [
        {"machine": "a", "mode": "draining", "start": 5.0, "duration": 60.0, "answers": {"f1": "ACCEPT", "f2": "UNKNOWN"}},
        {"machine": "b@10.0.0.2", "mode": "down", "start": 7.0, "duration": None, "answers": {}},
    ]
