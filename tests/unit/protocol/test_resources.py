"""Unit tests for protocol.resources: parsing, arithmetic, roles, revocable, Mesos conversion, errors."""

from __future__ import annotations

import math
import pickle

import pytest

from protocol.mesos_common import (
    AllocationInfo,
    Attribute,
    DiskInfo,
    Label,
    Labels,
    Persistence,
    Range,
    Ranges,
    ReservationInfo,
    ReservationType,
    Resource,
    ResourceProviderID,
    RevocableInfo,
    Scalar,
    SharedInfo,
    Text,
    ValueSet,
    ValueType,
    Volume,
    VolumeMode,
)
from protocol.resources import (
    Reservation,
    ResourceError,
    ResourceKey,
    Resources,
    attributes_from_mesos,
    attributes_to_mesos,
    check_role,
    is_subrole,
    parse_attributes,
    role_ancestors,
)

FULL = "cpus:4;mem:4096;ports:[31000-32000,32005-32010];gpus:1;cpus(ml):2;disk(*):100;zones:{a,b}"


# --- parsing ----------------------------------------------------------------------------------


def test_parse_the_mesos_string() -> None:
    r = Resources.parse(FULL)
    assert r.scalar("cpus") == 6.0
    assert r.unreserved().scalar("cpus") == 4.0
    assert r.reserved("ml").scalar("cpus") == 2.0
    assert r.scalar("mem") == 4096.0
    assert r.scalar("disk") == 100.0
    assert r.scalar("gpus") == 1.0
    assert r.ports() == ((31000, 32000), (32005, 32010))
    assert r.set_items("zones") == frozenset({"a", "b"})
    assert r.names() == frozenset({"cpus", "mem", "disk", "gpus", "ports", "zones"})
    assert r.roles() == frozenset({"*", "ml"})


def test_parse_tolerates_spaces_trailing_separators_and_repeats() -> None:
    r = Resources.parse(" cpus : 1 ; cpus:1.5;; mem:10 ; ports:[ 1-2 , 3-5 ];ports:[10-10];")
    assert r == Resources.of(cpus=2.5, mem=10, ports=[(1, 5), (10, 10)])
    assert Resources.parse("") == Resources() == Resources.empty()


def test_ranges_are_normalized_and_merged() -> None:
    r = Resources.parse("ports:[10-20,5-9,15-30,40-41,42-42,50-60]")
    assert r.ports() == ((5, 30), (40, 42), (50, 60))
    assert Resources.parse("ports:[]").is_empty()


def test_str_is_mesos_like_and_round_trips() -> None:
    r = Resources.parse(FULL)
    text = str(r)
    assert (
        text
        == "cpus:4; cpus(ml):2; disk:100; gpus:1; mem:4096; ports:[31000-32000, 32005-32010]; zones:{a, b}"
    )
    assert Resources.parse(text) == r
    assert repr(r) == f"Resources({text!r})"


def test_str_of_dynamic_revocable_refined_reservations_round_trips() -> None:
    r = (
        Resources.parse("cpus(eng):2;mem:64")
        .reserve("eng/ml", "alice", labels={"k": "v,1;x", "flag": None})
        .as_revocable()
    )
    text = str(r)
    assert "cpus(reservations: [(STATIC,eng),(DYNAMIC,eng/ml,alice,{flag,k=v%2C1%3Bx})]){REV}:2" in text
    assert Resources.parse(text) == r


def test_scalars_are_rounded_to_thousandths_exactly() -> None:
    tenth = Resources.of(cpus=0.1)
    assert tenth * 3 == Resources.of(cpus=0.3) == 3 * tenth
    assert tenth + tenth + tenth == Resources.of(cpus=0.3)
    assert Resources.sum([tenth] * 10) == Resources.of(cpus=1)
    assert Resources.parse("cpus:0.0004").is_empty()
    assert Resources.parse("cpus:0.0005").milli("cpus") == 1
    assert Resources.parse("cpus:1.2345").milli("cpus") == 1235
    assert Resources.parse("mem:1e3").scalar("mem") == 1000.0
    assert str(Resources.of(cpus=0.25)) == "cpus:0.25"


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("cpus", "cpus"),
        ("cpus:", "cpus:"),
        ("cpus:-1", "cpus:-1"),
        ("cpus:nan", "cpus:nan"),
        ("cpus:inf", "cpus:inf"),
        ("cpus:1e16", "cpus:1e16"),
        ("cpus:abc", "cpus:abc"),
        ("mem:4;ports:[5-1]", "ports:[5-1]"),
        ("ports:[1-2", "ports:[1-2"),
        ("ports:[a-b]", "ports:[a-b]"),
        ("ports:7", "ports:7"),
        ("cpus:[1-2]", "cpus:[1-2]"),
        ("zones:{a,,b}", "zones:{a,,b}"),
        ("cpus(%):1", "cpus(%):1"),
        ("cpus(a//b):1", "cpus(a//b):1"),
        ("cpus(reservations: [(WEIRD,eng)]):1", "WEIRD"),
        ("cpus(reservations: [(DYNAMIC,eng),(DYNAMIC,ops)]):1", "cpus(reservations"),
        ("c p u s:1", "c p u s:1"),
        ("foo:1;foo:[1-2]", "foo"),
    ],
)
def test_bad_strings_name_the_offending_token(text: str, fragment: str) -> None:
    with pytest.raises(ResourceError) as err:
        Resources.parse(text)
    assert fragment in str(err.value)


# --- construction errors ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs",
    [
        {"cpus": math.nan},
        {"cpus": math.inf},
        {"mem": -1},
        {"disk": 2e15},
        {"gpus": "1"},
        {"cpus": True},
        {"cpus": None},
        {"ports": [(5, 1)]},
        {"ports": [(-1, 3)]},
        {"ports": [(1.5, 3)]},
        {"ports": [(0, 2**64)]},
    ],
)
def test_of_rejects_bad_quantities_naming_the_resource(kwargs: dict[str, object]) -> None:
    with pytest.raises(ResourceError) as err:
        Resources.of(**kwargs)  # type: ignore[arg-type]
    assert next(iter(kwargs)) in str(err.value)


def test_custom_names_and_kinds() -> None:
    r = Resources.of(cpus=1, fpgas=2)
    assert r.scalars() == {"cpus": 1.0, "fpgas": 2.0}
    assert Resources.set_entry("zones", ["a"]) + Resources.set_entry("zones", ["b"]) == Resources.parse(
        "zones:{a,b}"
    )
    assert Resources.ranges_entry("slots", [(1, 3)]).ranges("slots") == ((1, 3),)
    with pytest.raises(ResourceError, match="bad name"):
        Resources.scalar_entry("bad name", 1)
    with pytest.raises(ResourceError, match="foo"):
        Resources.scalar_entry("foo", 1) + Resources.ranges_entry("foo", [(1, 2)])
    with pytest.raises(ResourceError):
        Resources.set_entry("zones", [""])


def test_zero_entries_vanish_and_empty_is_falsy() -> None:
    assert not Resources()
    assert Resources.of().is_empty()
    assert not Resources.of(cpus=0, mem=0)
    assert Resources.of(cpus=1)
    assert (Resources.of(cpus=1) - Resources.of(cpus=1)).is_empty()
    assert Resources.of(cpus=1) * 0 == Resources()


def test_resources_are_immutable_hashable_and_picklable() -> None:
    r = Resources.parse(FULL)
    with pytest.raises(AttributeError):
        r._d = {}
    with pytest.raises(AttributeError):
        r.foo = 1
    assert hash(r) == hash(Resources.parse(str(r)))
    assert len({r, Resources.parse(FULL), Resources.of(cpus=1)}) == 2
    assert pickle.loads(pickle.dumps(r)) == r


# --- algebra ----------------------------------------------------------------------------------


def test_add_subtract_contains() -> None:
    a = Resources.parse("cpus:4;mem:1024;ports:[1-10]")
    b = Resources.parse("cpus:1.5;mem:24;ports:[3-4]")
    assert a + b == Resources.parse("cpus:5.5;mem:1048;ports:[1-10]")
    assert a - b == Resources.parse("cpus:2.5;mem:1000;ports:[1-2,5-10]")
    assert a.contains(b) and b <= a and a >= b and b < a and a > b
    assert not b.contains(a)
    assert (a - b) + b == a
    assert a.contains(Resources())
    assert a <= a and not a < a


def test_subtraction_saturates() -> None:
    a = Resources.of(cpus=1, mem=10)
    assert a - Resources.of(cpus=5) == Resources.of(mem=10)
    assert a - Resources.of(gpus=1) == a
    assert Resources() - a == Resources()
    assert Resources.parse("ports:[1-5]") - Resources.parse("ports:[0-100]") == Resources()
    assert Resources.parse("zones:{a,b}") - Resources.parse("zones:{b,c}") == Resources.parse("zones:{a}")


def test_reserved_resources_do_not_satisfy_unreserved_demand() -> None:
    offered = Resources.parse("cpus(ml):4")
    assert not offered.contains(Resources.of(cpus=1))
    assert offered.contains(Resources.of(cpus=1, role="ml"))
    assert offered.flatten().contains(Resources.of(cpus=1))


def test_operations_with_other_types_are_rejected() -> None:
    r = Resources.of(cpus=1)
    with pytest.raises(TypeError):
        r + 1
    with pytest.raises(TypeError):
        r * 1.5
    with pytest.raises(ResourceError):
        r * -1
    assert r != "cpus:1"


# --- roles and reservations -------------------------------------------------------------------


def test_role_helpers() -> None:
    assert is_subrole("eng/ml", "eng") and not is_subrole("eng", "eng") and not is_subrole("engx", "eng")
    assert role_ancestors("a/b/c") == ("a", "a/b") and role_ancestors("a") == ()
    assert check_role("*") == "*"
    for bad in ["", ".", "..", "a/", "/a", "a//b", "-a", "a b", "a/./b", "x*"]:
        with pytest.raises(ResourceError):
            check_role(bad)
    with pytest.raises(ResourceError):
        check_role("*", allow_unreserved=False)


def test_filters_by_role_and_allocatable_to_follows_the_role_tree() -> None:
    r = Resources.parse("cpus:1;cpus(eng):2;cpus(eng/ml):4;cpus(ops):8")
    assert r.unreserved() == Resources.of(cpus=1)
    assert r.reserved().scalar("cpus") == 14
    assert r.reserved("eng") == Resources.parse("cpus(eng):2")
    assert r.allocatable_to("eng/ml") == Resources.parse("cpus:1;cpus(eng):2;cpus(eng/ml):4")
    assert r.allocatable_to("eng") == Resources.parse("cpus:1;cpus(eng):2")
    assert r.allocatable_to("eng/ml/x").scalar("cpus") == 7
    assert r.allocatable_to("other") == Resources.of(cpus=1)
    plain = Resources.of(cpus=1)
    assert plain.allocatable_to("x") is plain and plain.unreserved() is plain


def test_reserve_and_unreserve() -> None:
    r = Resources.of(cpus=2, mem=10)
    dyn = r.reserve("eng", "alice")
    key = dyn.entries()[0][0]
    assert key == ResourceKey("cpus", (Reservation("eng", True, "alice"),), False)
    assert key.role == "eng"
    assert dyn.reserved("eng") == dyn and not dyn.unreserved()
    refined = dyn.reserve("eng/ml")
    assert refined.reserved("eng/ml") == refined
    assert refined.unreserve() == dyn
    assert refined.unreserve().unreserve() == r
    assert r.unreserve() == r
    with pytest.raises(ResourceError, match="strict subrole"):
        dyn.reserve("ops")
    with pytest.raises(ResourceError):
        r.reserve("*")
    static = r.reserve("eng", dynamic=False)
    assert static == Resources.of(cpus=2, mem=10, role="eng")


def test_revocable_filters() -> None:
    base = Resources.of(cpus=2)
    rev = Resources.of(cpus=1).as_revocable()
    both = base + rev
    assert both.scalar("cpus") == 3
    assert both.revocable() == rev == Resources.of(cpus=1, revocable=True)
    assert both.non_revocable() == base
    assert not base.contains(rev) and not rev.contains(Resources.of(cpus=1))
    assert both.flatten() == Resources.of(cpus=3)
    assert both.only("cpus") == both and both.without("cpus").is_empty()
    assert Resources.parse(FULL).only("cpus", "mem") == Resources.parse("cpus:4;cpus(ml):2;mem:4096")
    assert Resources.parse(FULL).without("ports", "zones", "disk", "gpus") == Resources.parse(
        "cpus:4;cpus(ml):2;mem:4096"
    )


def test_to_legacy_dict_flattens_roles() -> None:
    r = Resources.parse("cpus:4;cpus(ml):2;mem:4096;ports:[31000-32000];zones:{b,a}").as_revocable()
    assert r.to_legacy_dict() == {
        "cpus": 6.0,
        "mem": 4096.0,
        "disk": 0.0,
        "gpus": 0.0,
        "ports": "[31000-32000]",
        "zones": "{a, b}",
    }
    assert Resources().to_legacy_dict() == {"cpus": 0.0, "mem": 0.0, "disk": 0.0, "gpus": 0.0}


# --- Mesos conversion -------------------------------------------------------------------------


def _compat_example(**overrides: object) -> Resource:
    """The reserved, revocable-free Resource of the Mesos JSON example (RESOURCE_EXAMPLE) as a Resource object."""
    fields: dict[str, object] = {
        "name": "cpus",
        "type": ValueType.SCALAR,
        "scalar": Scalar(4.0),
        "role": "*",
        "allocation_info": AllocationInfo(role="*"),
        "reservations": (
            ReservationInfo(type=ReservationType.DYNAMIC, role="eng", principal="p", labels=Labels(())),
        ),
        "revocable": RevocableInfo(),
        "disk": DiskInfo(
            persistence=Persistence(id="v1", principal="p"), volume=Volume("data", VolumeMode.RW)
        ),
        "shared": SharedInfo(),
        "provider_id": ResourceProviderID("..."),
    }
    fields.update(overrides)
    return Resource(**fields)  # type: ignore[arg-type]


def test_from_mesos_compat_example() -> None:
    res = _compat_example(disk=None, shared=None, provider_id=None)
    r = Resources.from_mesos([res])
    assert r.entries() == ((ResourceKey("cpus", (Reservation("eng", True, "p"),), True), 4000),)
    assert r.allocatable_to("eng").scalar("cpus") == 4.0
    assert not r.allocatable_to("ops")
    (back,) = r.to_mesos(allocation_role="eng")
    assert back == Resource(
        name="cpus",
        type=ValueType.SCALAR,
        scalar=Scalar(4.0),
        role="eng",
        allocation_info=AllocationInfo(role="eng"),
        reservations=(ReservationInfo(type=ReservationType.DYNAMIC, role="eng", principal="p"),),
        revocable=RevocableInfo(),
    )


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({}, "not supported"),
        ({"shared": None, "provider_id": None}, "persistent volumes"),
        ({"disk": None, "shared": None}, "not supported"),
    ],
)
def test_from_mesos_refuses_unmodelled_features(overrides: dict[str, object], message: str) -> None:
    with pytest.raises(ResourceError, match=message):
        Resources.from_mesos([_compat_example(**overrides)])


def test_to_mesos_unreserved_shapes() -> None:
    r = Resources.parse("cpus:1.5;ports:[1-2,4-4];zones:{b,a}")
    assert r.to_mesos() == (
        Resource(name="cpus", type=ValueType.SCALAR, scalar=Scalar(1.5), role="*"),
        Resource(name="ports", type=ValueType.RANGES, ranges=Ranges((Range(1, 2), Range(4, 4))), role="*"),
        Resource(name="zones", type=ValueType.SET, set=ValueSet(("a", "b")), role="*"),
    )


def test_from_mesos_legacy_role_and_reservation() -> None:
    static = Resource(name="cpus", type=ValueType.SCALAR, scalar=Scalar(2), role="ml")
    dynamic = Resource(
        name="mem",
        type=ValueType.SCALAR,
        scalar=Scalar(64),
        role="ml",
        reservation=ReservationInfo(principal="bob", labels=Labels((Label("k", "v"),))),
    )
    r = Resources.from_mesos([static, dynamic])
    assert r.reserved("ml") == r
    keys = dict(r.entries())
    assert keys[ResourceKey("cpus", (Reservation("ml"),))] == 2000
    assert keys[ResourceKey("mem", (Reservation("ml", True, "bob", (("k", "v"),)),))] == 64000
    assert Resources.from_mesos(r.to_mesos()) == r
    # Defaults: no role at all means unreserved.
    plain = Resource(name="cpus", type=ValueType.SCALAR, scalar=Scalar(1))
    assert Resources.from_mesos([plain]) == Resources.of(cpus=1)


@pytest.mark.parametrize(
    "res",
    [
        Resource(name="cpus", type=ValueType.SCALAR),
        Resource(name="cpus", type=ValueType.SCALAR, ranges=Ranges((Range(1, 2),))),
        Resource(name="ports", type=ValueType.RANGES, scalar=Scalar(1)),
        Resource(name="zones", type=ValueType.SET),
        Resource(name="cpus", type=ValueType.TEXT),
        Resource(name="cpus", type=ValueType.SCALAR, scalar=Scalar(-1)),
        Resource(name="cpus", type=ValueType.SCALAR, scalar=Scalar(math.nan)),
        Resource(
            name="cpus", type=ValueType.SCALAR, scalar=Scalar(1), role="*", reservation=ReservationInfo()
        ),
        Resource(
            name="cpus",
            type=ValueType.SCALAR,
            scalar=Scalar(1),
            role="ops",
            reservations=(ReservationInfo(type=ReservationType.STATIC, role="eng"),),
        ),
        Resource(
            name="cpus",
            type=ValueType.SCALAR,
            scalar=Scalar(1),
            reservations=(ReservationInfo(type=ReservationType.UNKNOWN, role="eng"),),
        ),
        Resource(name="ports", type=ValueType.RANGES, ranges=Ranges((Range(9, 1),))),
    ],
)
def test_from_mesos_rejects_malformed_resources(res: Resource) -> None:
    with pytest.raises(ResourceError, match=res.name):
        Resources.from_mesos([res])


def test_from_mesos_adds_duplicate_entries() -> None:
    one = Resource(name="cpus", type=ValueType.SCALAR, scalar=Scalar(0.1))
    assert Resources.from_mesos([one, one, one]) == Resources.of(cpus=0.3)


# --- attributes -------------------------------------------------------------------------------


def test_parse_attributes() -> None:
    attrs = parse_attributes("rack:r1;zone:a;slots:4;ports:[3-3,1-2];tags:{y,x}")
    assert attrs == {"rack": "r1", "zone": "a", "slots": 4.0, "ports": "[1-3]", "tags": "{x,y}"}
    assert parse_attributes("") == {}
    for bad in ["rack", "rack:", "a:1;a:2", "p:[2-1]", "p:[1-2"]:
        with pytest.raises(ResourceError):
            parse_attributes(bad)


def test_attributes_mesos_round_trip() -> None:
    attrs = parse_attributes("rack:r1;slots:4;ports:[1-3];tags:{x,y}")
    mesos = attributes_to_mesos(attrs)
    assert mesos == (
        Attribute(name="ports", type=ValueType.RANGES, ranges=Ranges((Range(1, 3),))),
        Attribute(name="rack", type=ValueType.TEXT, text=Text("r1")),
        Attribute(name="slots", type=ValueType.SCALAR, scalar=Scalar(4.0)),
        Attribute(name="tags", type=ValueType.SET, set=ValueSet(("x", "y"))),
    )
    assert attributes_from_mesos(mesos) == attrs
    with pytest.raises(ResourceError):
        attributes_from_mesos([Attribute(name="x", type=ValueType.TEXT)])
    with pytest.raises(ResourceError):
        attributes_to_mesos({"x": math.inf})
