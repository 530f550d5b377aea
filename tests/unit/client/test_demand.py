"""REQUEST helpers: demand and gang shapes, validation, the demand book's change tracking."""

from __future__ import annotations

import pytest

from frameworks.client.demand import Demand, DemandBook, DemandError, demand, gang
from protocol import codec
from protocol.mesos import Request
from protocol.resources import Resources


def test_demand_to_request_and_back() -> None:
    d = demand("cpus:1;mem:256", 4, priority=3, role="ml", revocable_ok=True)
    r = d.to_request()
    assert r.count == 4 and r.priority == 3 and r.role == "ml" and r.revocable_ok is True
    assert r.gang_id is None and r.gang_min is None
    wire = codec.decode_msgpack(Request, codec.encode_msgpack(r))
    assert Demand.from_request(wire) == d
    assert d.total == Resources.of(cpus=4, mem=1024)
    g = gang("job-1", "cpus:1", 3, ports=2)
    assert g.to_request().ports == 2 and d.to_request().ports is None
    assert Demand.from_request(codec.decode_msgpack(Request, codec.encode_msgpack(g.to_request()))) == g


def test_gang_defaults_to_all_or_nothing() -> None:
    g = gang("g1", Resources.of(cpus=1, gpus=1), 8)
    assert (g.to_request().gang_id, g.to_request().gang_min) == ("g1", 8)
    assert gang("g2", "cpus:1", 8, min_size=6).to_request().gang_min == 6


@pytest.mark.parametrize(
    "kw",
    [
        {"shape": Resources.empty()},
        {"count": 0},
        {"count": True},
        {"gang_min": 2},
        {"gang_id": "g", "gang_min": 9, "count": 8},
        {"ports": -1},
        {"ports": 70_000},
    ],
)
def test_bad_demands_are_typed_errors(kw: dict[str, object]) -> None:
    args: dict[str, object] = {"shape": Resources.of(cpus=1), "count": 8}
    args.update(kw)
    with pytest.raises(DemandError):
        Demand(**args)  # type: ignore[arg-type]


def test_book_sends_only_changes() -> None:
    b = DemandBook()
    assert b.take_changes() is None
    b.set("j1", demand("cpus:1", 2))
    assert [r.count for r in b.take_changes() or ()] == [2]
    b.set("j1", demand("cpus:1", 2))
    assert b.take_changes() is None
    b.remove("j1")
    assert b.take_changes() == ()
    b.replace([("a", demand("cpus:1")), ("b", demand("mem:10", 3))])
    assert len(b) == 2 and b.total() == Resources.parse("cpus:1;mem:30")
    assert b.take_changes() is not None
    b.mark_dirty()
    assert b.take_changes() is not None
    b.clear()
    assert b.take_changes() == ()
