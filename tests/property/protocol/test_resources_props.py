"""Hypothesis properties of the Resources algebra (associativity, a + b - b == a,
contains consistent with -, never negative, string and Mesos round-trips)."""

from __future__ import annotations

import itertools
import pickle

from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.resources import Reservation, Resources

SETTINGS = settings(max_examples=200, deadline=None)

SCALAR_NAMES = ["cpus", "mem", "disk", "gpus", "fpgas"]

reservation_stacks = st.sampled_from(
    [
        (),
        (Reservation("eng"),),
        (Reservation("eng", True, "alice"),),
        (Reservation("eng"), Reservation("eng/ml", True, "bob", (("k", "v"),))),
        (Reservation("ops", True, None, (("team", None),)),),
    ]
)
revocable = st.booleans()
# Milli-units up to 1e12 keep float round trips (to_mesos) exact.
milli = st.integers(min_value=0, max_value=10**12)


@st.composite
def scalar_entry(draw: st.DrawFn) -> Resources:
    return Resources.scalar_entry(
        draw(st.sampled_from(SCALAR_NAMES)),
        draw(milli) / 1000,
        reservations=draw(reservation_stacks),
        revocable=draw(revocable),
    )


@st.composite
def ranges_entry(draw: st.DrawFn) -> Resources:
    spans = draw(
        st.lists(
            st.tuples(st.integers(0, 120), st.integers(0, 12)).map(lambda t: (t[0], t[0] + t[1])), max_size=4
        )
    )
    return Resources.ranges_entry(
        "ports", spans, reservations=draw(reservation_stacks), revocable=draw(revocable)
    )


@st.composite
def set_entry(draw: st.DrawFn) -> Resources:
    items = draw(st.sets(st.sampled_from(["a", "b", "c", "d", "x y", "p,q"]), max_size=4))
    return Resources.set_entry(
        "zones", items, reservations=draw(reservation_stacks), revocable=draw(revocable)
    )


scalar_resources = st.lists(scalar_entry(), max_size=6).map(Resources.sum)
mixed_resources = st.lists(st.one_of(scalar_entry(), ranges_entry(), set_entry()), max_size=8).map(
    Resources.sum
)
any_resources = st.one_of(scalar_resources, mixed_resources)


def non_scalar(r: Resources) -> Resources:
    return r.only("ports", "zones")


@SETTINGS
@given(any_resources, any_resources, any_resources)
def test_add_is_associative_and_commutative(a: Resources, b: Resources, c: Resources) -> None:
    assert a + b == b + a
    assert (a + b) + c == a + (b + c)
    assert Resources.sum([a, b, c]) == a + b + c
    assert a + Resources() == a


@SETTINGS
@given(scalar_resources, scalar_resources)
def test_add_then_subtract_is_identity_for_scalars(a: Resources, b: Resources) -> None:
    assert a + b - b == a
    assert (a + b).contains(a) and (a + b).contains(b)


@SETTINGS
@given(mixed_resources, mixed_resources)
def test_add_then_subtract_is_identity_for_disjoint_ranges_and_sets(a: Resources, b: Resources) -> None:
    # Ranges and sets add as unions, so only parts disjoint from `a` come back out unchanged.
    b = b - non_scalar(a)
    assert a + b - b == a


@SETTINGS
@given(scalar_resources, scalar_resources)
def test_contains_iff_subtract_then_add_restores_scalars(a: Resources, b: Resources) -> None:
    assert a.contains(b) == ((a - b) + b == a) == (b <= a)


@SETTINGS
@given(mixed_resources, mixed_resources)
def test_contains_iff_subtract_then_add_restores_mixed(a: Resources, b: Resources) -> None:
    assert a.contains(b) == ((a - b) + b == a) == (b <= a)
    # A part of `a` is always contained in it.
    part = a - b
    assert a.contains(part)


@SETTINGS
@given(any_resources, any_resources)
def test_never_negative_and_never_zero_entries(a: Resources, b: Resources) -> None:
    for r in (a - b, b - a, a + b):
        for _key, value in r.entries():
            if isinstance(value, int):
                assert value > 0
            else:
                assert len(value) > 0
        for total in r.scalars().values():
            assert total > 0
        # The scalar-only fast path must never be taken for values holding ranges or sets.
        if r._simple:
            assert all(isinstance(v, int) for _k, v in r.entries())
    assert (a - b).is_empty() == b.contains(a)


@SETTINGS
@given(any_resources)
def test_string_round_trip(r: Resources) -> None:
    assert Resources.parse(str(r)) == r


@SETTINGS
@given(any_resources, st.sampled_from([None, "*", "eng", "eng/ml"]))
def test_mesos_round_trip(r: Resources, allocation_role: str | None) -> None:
    assert Resources.from_mesos(r.to_mesos(allocation_role)) == r
    assert pickle.loads(pickle.dumps(r)) == r


@SETTINGS
@given(any_resources, any_resources)
def test_equality_and_hash_agree(a: Resources, b: Resources) -> None:
    c = Resources.parse(str(a))
    assert hash(c) == hash(a)
    if a == b:
        assert hash(a) == hash(b)


@SETTINGS
@given(any_resources, st.sampled_from(["eng", "eng/ml", "eng/ml/x", "ops", "other"]))
def test_filters_partition_the_resources(r: Resources, role: str) -> None:
    assert r.unreserved() + r.reserved() == r
    assert r.revocable() + r.non_revocable() == r
    assert r.as_revocable().revocable() == r.as_revocable()
    allocatable = r.allocatable_to(role)
    assert r.contains(allocatable)
    assert allocatable.contains(r.unreserved())
    assert allocatable.contains(r.reserved(role))
    assert r.flatten().scalars().keys() == r.scalars().keys()
    for name, total in r.scalars().items():
        assert r.flatten().milli(name) == r.milli(name)
        assert abs(total - r.flatten().scalar(name)) < 1e-9


def _points(ranges: tuple[tuple[int, int], ...]) -> set[int]:
    return {p for b, e in ranges for p in range(b, e + 1)}


@SETTINGS
@given(ranges_entry(), ranges_entry())
def test_ranges_match_a_set_of_points_model(a: Resources, b: Resources) -> None:
    a, b = a.flatten(), b.flatten()
    pa, pb = _points(a.ports()), _points(b.ports())
    assert _points((a + b).ports()) == pa | pb
    assert _points((a - b).ports()) == pa - pb
    assert a.contains(b) == (pb <= pa)
    # Normalized: sorted, disjoint and not adjacent.
    ports = (a + b).ports()
    for (_, e1), (b2, _) in itertools.pairwise(ports):
        assert b2 > e1 + 1


@SETTINGS
@given(scalar_resources, st.integers(0, 5))
def test_multiplication_is_repeated_addition(r: Resources, k: int) -> None:
    assert r * k == Resources.sum([r] * k)
