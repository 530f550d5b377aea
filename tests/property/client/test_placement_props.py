"""Placement invariants: tentative placements never exceed an offer; gangs are all or nothing;
picked entries always come from the offer and cover the shape."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from frameworks.client.offers import OfferCache
from frameworks.client.placement import STRATEGIES, Ask, pick, place_all
from protocol.resources import Resources

amount = st.integers(min_value=0, max_value=8).map(lambda n: n / 2)
offer_res = st.builds(
    lambda c, m, rc, rr: Resources.of(cpus=c, mem=m * 100) + Resources.of(cpus=rc, role="ml")
    + Resources.of(cpus=rr, revocable=True),
    amount, amount, amount, amount,
)
ask = st.builds(
    lambda c, m, rev: Ask(Resources.of(cpus=c, mem=m * 100), role="ml", allow_revocable=rev),
    st.integers(min_value=1, max_value=4).map(lambda n: n / 2), amount, st.booleans(),
)


@settings(max_examples=60, deadline=None)
@given(st.lists(offer_res, min_size=1, max_size=4), st.lists(ask, max_size=8), st.booleans(),
       st.sampled_from(sorted(STRATEGIES)))
def test_place_all_never_overcommits(offers: list[Resources], asks: list[Ask], is_gang: bool, strategy: str) -> None:
    c = OfferCache()
    for i, r in enumerate(offers):
        c.put(f"o{i}", f"a{i}", "h", r, now=0)
    placed = place_all(list(c), asks, STRATEGIES[strategy], gang=is_gang)
    if is_gang:
        assert len(placed) in (0, len(asks))
    used: dict[str, Resources] = {}
    for p in placed:
        used[p.offer_id] = used.get(p.offer_id, Resources.empty()) + p.resources
    for oid, u in used.items():
        assert c.get(oid).resources.contains(u)
    if is_gang and placed:  # all placed, in ask order
        for p, a in zip(placed, asks, strict=True):
            assert p.resources.flatten().contains(a.shape.flatten())
            if not a.allow_revocable:
                assert not p.resources.revocable()


@settings(max_examples=80, deadline=None)
@given(offer_res, ask)
def test_pick_covers_shape_from_available(avail: Resources, a: Ask) -> None:
    got = pick(avail, a.shape, a.role, a.allow_revocable)
    if got is None:
        return
    assert avail.contains(got)
    assert got.flatten() == a.shape.flatten()
    if not a.allow_revocable:
        assert not got.revocable()
