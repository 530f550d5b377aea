"""Placement: entry picking (roles, revocable), first/best fit, constraints, gangs."""

from __future__ import annotations

import pytest

from frameworks.client.offers import OfferCache
from frameworks.client.placement import (
    Ask,
    Constraint,
    Op,
    PlacementError,
    best_fit,
    first_fit,
    pick,
    pick_ports,
    place_all,
)
from protocol.resources import Resources

R = Resources.of


def cache(*offers: tuple[str, str, Resources, dict[str, str | float]]) -> OfferCache:
    c = OfferCache()
    for oid, agent, res, attrs_ in offers:
        c.put(oid, agent, "host-" + agent, res, now=0, attributes=attrs_)
    return c


def test_pick_prefers_reserved_then_unreserved_never_other_roles() -> None:
    avail = R(cpus=1, role="ml") + R(cpus=2) + R(cpus=4, role="web")
    got = pick(avail, R(cpus=2), role="ml")
    assert got == R(cpus=1, role="ml") + R(cpus=1)
    assert pick(avail, R(cpus=4), role="ml") is None


def test_pick_revocable_only_when_allowed() -> None:
    avail = R(cpus=1) + R(cpus=2, revocable=True)
    assert pick(avail, R(cpus=2)) is None
    got = pick(avail, R(cpus=2), allow_revocable=True)
    assert got == R(cpus=1) + R(cpus=1, revocable=True)
    assert pick(avail, R(cpus=2), only_revocable=True) == R(cpus=2, revocable=True)


def test_pick_ranges_and_ports() -> None:
    avail = Resources.parse("cpus:1;ports:[31000-31002,31010-31020]")
    assert pick(avail, Resources.parse("ports:[31010-31011]")) == Resources.parse("ports:[31010-31011]")
    assert pick(avail, Resources.parse("ports:[31003-31004]")) is None
    assert pick_ports(avail, 4) == Resources.parse("ports:[31000-31002,31010-31010]")
    assert pick_ports(avail, 100) is None


def test_first_fit_vs_best_fit() -> None:
    c = cache(("big", "a1", R(cpus=8, mem=8192), {}), ("small", "a2", R(cpus=1, mem=512), {}))
    ask = Ask(R(cpus=1, mem=256))
    assert first_fit(list(c), ask).offer_id == "big"  # type: ignore[union-attr]
    assert best_fit(list(c), ask).offer_id == "small"  # type: ignore[union-attr]
    assert first_fit(list(c), Ask(R(cpus=16))) is None


def test_non_revocable_preferred_even_if_later() -> None:
    c = cache(("rev", "a1", R(cpus=4, revocable=True), {}), ("reg", "a2", R(cpus=4), {}))
    p = first_fit(list(c), Ask(R(cpus=2), allow_revocable=True))
    assert p is not None and p.offer_id == "reg" and not p.revocable
    c.take("reg", R(cpus=4))
    p = first_fit(list(c), Ask(R(cpus=2), allow_revocable=True))
    assert p is not None and p.offer_id == "rev" and p.revocable
    assert first_fit(list(c), Ask(R(cpus=2))) is None


def test_constraints() -> None:
    c = cache(
        ("o1", "a1", R(cpus=4), {"rack": "r1", "gpus_model": "a100"}),
        ("o2", "a2", R(cpus=4), {"rack": "r2", "slots": 4.0}),
    )
    def where(text: str) -> str | None:
        p = first_fit(list(c), Ask(R(cpus=1), constraints=(Constraint.parse(text),)))
        return p.offer_id if p else None

    assert where("rack==r2") == "o2"
    assert where("rack!=r1") == "o2"
    assert where("rack~=r[0-9]") == "o1"
    assert where("gpus_model exists") == "o1"
    assert where("gpus_model absent") == "o2"
    assert where("slots==4") == "o2"
    assert where("hostname==host-a2") == "o2"
    assert where("rack==r9") is None
    assert Constraint.parse("zone != b") == Constraint("zone", Op.NE, "b")
    with pytest.raises(PlacementError):
        Constraint.parse("nonsense")
    with pytest.raises(PlacementError):
        Constraint.parse("a~=[")


def test_place_all_gang_is_all_or_nothing_and_tentative() -> None:
    c = cache(("o1", "a1", R(cpus=2), {}), ("o2", "a2", R(cpus=2), {}))
    asks = [Ask(R(cpus=1))] * 5
    assert place_all(list(c), asks, gang=True) == []
    assert len(place_all(list(c), asks)) == 4
    ps = place_all(list(c), [Ask(R(cpus=1))] * 4, gang=True)
    assert sorted(p.offer_id for p in ps) == ["o1", "o1", "o2", "o2"]
    # tentative: the cache itself is untouched
    assert c.available() == R(cpus=4)


def test_place_all_spread() -> None:
    c = cache(("o1", "a1", R(cpus=4), {}), ("o2", "a2", R(cpus=4), {}))
    ps = place_all(list(c), [Ask(R(cpus=1))] * 2, spread=True)
    assert {p.agent_id for p in ps} == {"a1", "a2"}
