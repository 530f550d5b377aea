"""protocol.codec: the Mesos JSON rules, the msgpack rules and strict decoding."""

from __future__ import annotations

import enum
import json

import attrs
import msgpack
import pytest

from protocol import codec
from protocol.codec import DecodeError, Limits, decode_json, decode_msgpack, encode_json, encode_msgpack
from protocol.mesos_common import (
    Label,
    Labels,
    Range,
    Ranges,
    ReservationInfo,
    ReservationType,
    Resource,
    RevocableInfo,
    Scalar,
    TaskID,
    ValueType,
)


class Color(enum.Enum):
    RED = "RED"
    BLUE = "BLUE"


@attrs.frozen
class Inner:
    id: str
    blob: bytes | None = None


@attrs.frozen
class Sample:
    name: str
    count: int
    ratio: float
    flag: bool
    color: Color
    maybe_color: Color | None = None
    colors: tuple[Color, ...] = ()
    data: bytes | None = None
    inner: Inner | None = None
    inners: tuple[Inner, ...] = ()
    tags: dict[str, str] = attrs.field(factory=dict)
    by_name: dict[str, Inner] = attrs.field(factory=dict)


@attrs.frozen
class Node:
    """A recursive schema."""

    name: str
    children: tuple[Node, ...] = ()


@attrs.frozen
class Empty:
    pass


def sample() -> Sample:
    return Sample(
        name="héllo\nworld",
        count=3,
        ratio=0.5,
        flag=False,
        color=Color.RED,
        maybe_color=Color.BLUE,
        colors=(Color.RED, Color.BLUE),
        data=b"payload",
        inner=Inner("i", b"\x00\xff"),
        inners=(Inner("a"), Inner("b")),
        tags={"k": "v"},
        by_name={"x": Inner("x")},
    )


def err(fn: object, *args: object) -> DecodeError:
    with pytest.raises(DecodeError) as info:
        fn(*args)  # type: ignore[operator]
    return info.value


# --- JSON shape ------------------------------------------------------------------------------


def test_json_shape_follows_mesos_rules() -> None:
    raw = encode_json(sample())
    assert raw.isascii() and b"\n" not in raw and b" " not in raw
    assert json.loads(raw) == {
        "name": "héllo\nworld",
        "count": 3,
        "ratio": 0.5,
        "flag": False,
        "color": "RED",
        "maybe_color": "BLUE",
        "colors": ["RED", "BLUE"],
        "data": "cGF5bG9hZA==",
        "inner": {"id": "i", "blob": "AP8="},
        "inners": [{"id": "a"}, {"id": "b"}],
        "tags": {"k": "v"},
        "by_name": {"x": {"id": "x"}},
    }
    assert decode_json(Sample, raw) == sample()


def test_none_and_empty_are_omitted_and_empty_message_is_object() -> None:
    assert json.loads(encode_json(Sample("n", 0, 0.0, True, Color.RED))) == {
        "name": "n",
        "count": 0,
        "ratio": 0.0,
        "flag": True,
        "color": "RED",
    }
    assert encode_json(Empty()) == b"{}"
    r = Resource(name="cpus", type=ValueType.SCALAR, scalar=Scalar(1.0), revocable=RevocableInfo())
    assert json.loads(encode_json(r))["revocable"] == {}
    assert decode_json(Resource, encode_json(r)).revocable == RevocableInfo()


def test_floats_are_numbers_ints_and_strings_accepted() -> None:
    raw = encode_json(Scalar(4))  # an int given for a float field is written as a float
    assert raw == b'{"value":4.0}'
    assert decode_json(Scalar, b'{"value":32}') == Scalar(32.0)
    assert isinstance(decode_json(Scalar, b'{"value":32}').value, float)
    assert decode_json(Scalar, b'{"value":"Infinity"}').value == float("inf")
    assert decode_json(Scalar, b'{"value":"-Infinity"}').value == float("-inf")
    assert decode_json(Scalar, b'{"value":"1.25"}').value == 1.25
    assert encode_json(Scalar(float("inf"))) == b'{"value":"Infinity"}'
    assert err(decode_json, Scalar, b'{"value":"abc"}').path == "value"
    assert err(decode_json, Scalar, b'{"value":true}').path == "value"
    assert err(decode_json, Scalar, b'{"value":NaN}').path == ""  # bare literals are not JSON


def test_int_rules() -> None:
    assert decode_json(Range, b'{"begin":1,"end":"20"}') == Range(1, 20)  # proto3-style int64 string
    assert decode_json(Range, b'{"begin":1.0,"end":2}') == Range(1, 2)
    assert err(decode_json, Range, b'{"begin":1.5,"end":2}').path == "begin"
    assert err(decode_json, Range, b'{"begin":true,"end":2}').reason == "expected integer, got bool"
    e = err(decode_msgpack, Range, msgpack.packb({"begin": "1", "end": 2}))
    assert e.path == "begin"
    assert decode_json(Range, b'{"begin":-9223372036854775808,"end":18446744073709551615}').end == 2**64 - 1
    assert "64-bit" in err(decode_json, Range, b'{"begin":1,"end":18446744073709551616}').reason
    assert "64-bit" in err(decode_json, Range, b'{"begin":1,"end":"-9223372036854775809"}').reason
    assert err(decode_json, tuple[int, ...], b"[1, 2, 36893488147419103232]").path == "[2]"


def test_bool_is_not_int() -> None:
    e = err(decode_json, Sample, b'{"name":"n","count":1,"ratio":1,"flag":1,"color":"RED"}')
    assert e.path == "flag" and "bool" in e.reason


def test_bytes_base64() -> None:
    assert decode_json(Inner, b'{"id":"x","blob":"cGF5bG9hZA=="}').blob == b"payload"
    assert err(decode_json, Inner, b'{"id":"x","blob":"cGF5bG9hZA"}').path == "blob"  # padding required
    assert err(decode_json, Inner, b'{"id":"x","blob":"!!!!"}').reason == "invalid base64"


def test_unknown_keys_ignored_in_json_rejected_in_msgpack() -> None:
    assert decode_json(Inner, b'{"id":"x","slave_id":{"value":"a"}}') == Inner("x")
    e = err(decode_msgpack, Inner, msgpack.packb({"id": "x", "slave_id": 1}))
    assert "slave_id" in e.reason


def test_unknown_enum_dropped_when_optional_error_when_required() -> None:
    base = {"name": "n", "count": 1, "ratio": 1, "flag": True, "color": "RED"}
    s = decode_json(Sample, json.dumps({**base, "maybe_color": "GREEN", "colors": ["GREEN", "BLUE"]}))
    assert s.maybe_color is None and s.colors == (Color.BLUE,)
    e = err(decode_json, Sample, json.dumps({**base, "color": "GREEN"}))
    assert e.path == "color" and "GREEN" in e.reason


def test_required_fields_and_paths() -> None:
    e = err(decode_json, Sample, b'{"name":"n"}')
    assert e.path == "" and "count" in e.reason
    e = err(decode_json, Sample, b'{"name":"n","count":1,"ratio":1,"flag":true,"color":"RED","inners":[{"id":"a"},{}]}')
    assert e.path == "inners[1]" and "'id'" in e.reason
    e = err(decode_json, Sample, b'{"name":"n","count":1,"ratio":1,"flag":true,"color":"RED","by_name":{"k":{"id":3}}}')
    assert e.path == "by_name.k.id"
    assert str(e) == "by_name.k.id: expected string, got integer"
    # null means absent
    assert decode_json(Inner, b'{"id":"x","blob":null}') == Inner("x")
    assert err(decode_json, Inner, b'{"id":null}').reason == "missing required field 'id'"


@attrs.frozen
class Batch:
    """Repeated and map fields without defaults (``agent_channel.Frame.messages`` is one)."""

    items: tuple[Inner, ...]
    index: dict[str, int]
    name: str


def test_repeated_and_map_fields_are_never_required() -> None:
    empty = Batch((), {}, "b")
    assert encode_json(empty) == b'{"name":"b"}'  # empty repeated fields are omitted (stout)
    for raw in (b'{"name":"b"}', b'{"name":"b","items":null,"index":null}', b'{"name":"b","items":[]}'):
        assert decode_json(Batch, raw) == empty
    assert decode_msgpack(Batch, encode_msgpack(empty)) == empty
    assert decode_msgpack(Batch, msgpack.packb({"name": "b", "items": None})) == empty
    # a map read back empty is its own object, never one shared between messages
    a, b = decode_json(Batch, b'{"name":"b"}'), decode_json(Batch, b'{"name":"b"}')
    assert a.index is not b.index
    # the scalar next to them stays required
    assert err(decode_json, Batch, b'{"items":[]}').reason == "missing required field 'name'"


def test_top_level_type_checked() -> None:
    assert "expected Inner object" in err(decode_json, Inner, b"[1]").reason
    assert err(decode_msgpack, Inner, msgpack.packb(3)).path == ""


def test_tuple_form_for_batches() -> None:
    items = (Inner("a"), Inner("b", b"x"))
    assert decode_msgpack(tuple[Inner, ...], encode_msgpack(items)) == items
    assert decode_json(tuple[Inner, ...], encode_json(items)) == items
    assert err(decode_json, tuple[Inner, ...], b'[{"id":"a"},{"id":1}]').path == "[1].id"


def test_recursive_schema() -> None:
    tree = Node("a", (Node("b", (Node("c"),)), Node("d")))
    assert decode_json(Node, encode_json(tree)) == tree
    assert decode_msgpack(Node, encode_msgpack(tree)) == tree


def test_msgpack_round_trip_keeps_raw_bytes() -> None:
    raw = encode_msgpack(sample())
    assert msgpack.unpackb(raw)["data"] == b"payload"
    assert decode_msgpack(Sample, raw) == sample()


def test_non_ascii_is_escaped_single_line() -> None:
    raw = encode_json(Label(key="hôst", value="línea\nnueva ☃"))
    assert raw.isascii() and b"\n" not in raw
    assert decode_json(Label, raw) == Label(key="hôst", value="línea\nnueva ☃")


def test_mesos_common_resource_round_trip() -> None:
    r = Resource(
        name="ports",
        type=ValueType.RANGES,
        ranges=Ranges((Range(31000, 32000),)),
        role="eng",
        reservations=(ReservationInfo(type=ReservationType.DYNAMIC, role="eng", labels=Labels((Label("a"),))),),
    )
    assert decode_json(Resource, encode_json(r)) == r
    assert decode_msgpack(Resource, encode_msgpack(r)) == r


# --- limits ----------------------------------------------------------------------------------


def test_size_limit_checked_before_parsing() -> None:
    huge = bytes(100 * 1024 * 1024)  # 100 MB of zeros: not JSON, but refused by size first
    for fn in (decode_json, decode_msgpack):
        e = err(fn, Inner, huge)
        assert "exceeds the limit" in e.reason
    small = Limits(max_bytes=10)
    assert "exceeds" in err(decode_json, Inner, b'{"id":"abcdefgh"}', small).reason


def test_depth_list_and_string_limits() -> None:
    tree = Node("a", (Node("b", (Node("c", (Node("d"),)),)),))
    lim = Limits(max_depth=4)
    e = err(decode_json, Node, encode_json(tree), lim)
    assert "nesting deeper" in e.reason and e.path.startswith("children[0]")
    assert decode_json(Node, encode_json(tree), Limits(max_depth=16)) == tree
    e = err(decode_json, Node, encode_json(Node("a", tuple(Node(str(i)) for i in range(5)))), Limits(max_list_len=4))
    assert e.path == "children" and "limit of 4" in e.reason
    e = err(decode_msgpack, Inner, encode_msgpack(Inner("x" * 100)), Limits(max_str_len=10))
    assert e.path == ""  # msgpack refuses the long string while parsing
    e = err(decode_json, Inner, encode_json(Inner("x" * 100)), Limits(max_str_len=10))
    assert e.path == "id"


def test_deep_nesting_never_escapes_as_recursion_error() -> None:
    deep = b"[" * 100_000 + b"]" * 100_000
    assert err(decode_json, Inner, deep).path == ""
    deep_obj = b'{"a":' * 50_000 + b"1" + b"}" * 50_000
    err(decode_json, Inner, deep_obj)
    deep_mp = b"\x91" * 100_000 + b"\x01"
    err(decode_msgpack, Inner, deep_mp)


def test_msgpack_bombs_fail_at_once() -> None:
    array32 = b"\xdd\xff\xff\xff\xff" + b"\x01" * 8
    str32 = b"\xdb\xff\xff\xff\xff" + b"a" * 8
    bin32 = b"\xc6\xff\xff\xff\xff" + b"a" * 8
    map32 = b"\xdf\xff\xff\xff\xff" + b"\xa1a\x01"
    for bomb in (array32, str32, bin32, map32):
        assert err(decode_msgpack, Inner, bomb).path == ""


def test_msgpack_rejects_non_str_keys_and_ext() -> None:
    err(decode_msgpack, Inner, msgpack.packb({1: "x"}))
    err(decode_msgpack, Inner, msgpack.packb(msgpack.ExtType(1, b"abc")))


def test_media_type_dispatch() -> None:
    i = Inner("x", b"y")
    assert codec.decode(Inner, codec.encode(i, codec.JSON), codec.JSON) == i
    assert codec.decode(Inner, codec.encode(i, codec.MSGPACK), codec.MSGPACK) == i
    with pytest.raises(codec.UnsupportedMediaType):
        codec.encode(i, "application/x-protobuf")


def test_encode_errors_are_typed() -> None:
    with pytest.raises(codec.EncodeError):
        encode_json(Inner(id="x", blob="not bytes"))  # type: ignore[arg-type]
    with pytest.raises(codec.EncodeError):
        encode_msgpack(Range(begin=2**70, end=1))


def test_to_and_from_builtins() -> None:
    b = codec.to_builtins(Inner("x", b"\x01"), binary=False)
    assert b == {"id": "x", "blob": "AQ=="}
    assert codec.from_builtins(Inner, b, binary=False) == Inner("x", b"\x01")
    assert codec.to_builtins(Inner("x", b"\x01"), binary=True) == {"id": "x", "blob": b"\x01"}
    assert codec.from_builtins(Inner, {"id": "x", "blob": b"\x01"}, binary=True) == Inner("x", b"\x01")


def test_decode_error_pickles() -> None:
    import pickle

    e = DecodeError("a.b[0]", "bad")
    e2 = pickle.loads(pickle.dumps(e))
    assert (e2.path, e2.reason, str(e2)) == ("a.b[0]", "bad", "a.b[0]: bad")


def test_map_limit() -> None:
    doc = {"name": "n", "count": 1, "ratio": 1, "flag": True, "color": "RED", "tags": {str(i): "v" for i in range(5)}}
    e = err(decode_json, Sample, json.dumps(doc), Limits(max_map_len=4))
    assert e.path == "tags" and "limit of 4" in e.reason


@attrs.frozen
class Tree:
    """A recursive schema compiled for the first time by several threads at once."""

    label: str
    kids: tuple[Tree, ...] = ()
    color: Color | None = None


def test_first_compile_from_many_threads() -> None:
    from concurrent.futures import ThreadPoolExecutor

    tree = Tree("a", (Tree("b", (Tree("c", color=Color.RED),)), Tree("d")))
    raw_json = json.dumps({"label": "a", "kids": [{"label": "b", "kids": [{"label": "c", "color": "RED"}]}, {"label": "d"}]})

    def work(i: int) -> bool:
        if i % 2:
            return decode_json(Tree, raw_json) == tree and encode_json(tree) == encode_json(tree)
        return decode_msgpack(Tree, encode_msgpack(tree)) == tree

    with ThreadPoolExecutor(8) as pool:
        assert all(pool.map(work, range(64)))


def test_ids_take_a_short_path_and_recent_ones_are_shared() -> None:
    from protocol import codec as c
    from protocol.mesos import Acknowledge
    from protocol.mesos_common import AgentID, TaskID

    raw = {"agent_id": {"value": "a1"}, "task_id": {"value": "t1"}, "uuid": b"u" * 16}
    one = c.from_builtins(Acknowledge, raw, True)
    two = c.from_builtins(Acknowledge, raw, True)
    assert one == Acknowledge(AgentID("a1"), TaskID("t1"), b"u" * 16)
    assert one.agent_id is two.agent_id  # frozen, so one object serves both
    # anything but the plain form goes the generic way, with its errors
    with pytest.raises(c.DecodeError, match="unknown field"):
        c.from_builtins(AgentID, {"value": "a", "x": 1}, True)
    with pytest.raises(c.DecodeError, match="missing required field 'value'"):
        c.from_builtins(AgentID, {"value": None}, True)
    with pytest.raises(c.DecodeError, match="expected string"):
        c.from_builtins(AgentID, {"value": 3}, True)
    assert c.from_builtins(AgentID, {"value": "a", "x": 1}) == AgentID("a")  # JSON ignores extras
    with pytest.raises(c.DecodeError, match="exceeds the limit"):
        c.from_builtins(AgentID, {"value": "a" * 20}, True, c.Limits(max_str_len=10))
    # the table is bounded
    for i in range(c.ID_CACHE_SIZE + 10):
        assert c.from_builtins(TaskID, {"value": f"t{i}"}, True).value == f"t{i}"


def test_plain_scalar_resources_decode_once_and_are_shared() -> None:
    from protocol import codec as c
    from protocol.mesos_common import Resource, Scalar, ValueType

    raw = {"name": "cpus", "type": "SCALAR", "scalar": {"value": 0.5}, "role": "*"}
    one = c.from_builtins(Resource, raw, True)
    assert one == Resource(name="cpus", type=ValueType.SCALAR, scalar=Scalar(0.5), role="*")
    assert c.from_builtins(Resource, dict(raw), True) is one
    assert c.from_builtins(Resource, {"name": "cpus", "type": "SCALAR", "scalar": {"value": 0.5}}, True).role is None
    # other shapes and types take the generic path: the same results and errors as before
    assert c.from_builtins(Resource, {**raw, "scalar": {"value": 1}}, True).scalar == Scalar(1)
    for bad, why in [
        ({**raw, "type": "BOGUS"}, "unknown enum name"),
        ({**raw, "scalar": {"value": True}}, "expected"),
        ({**raw, "role": 3}, "expected string"),
        ({**raw, "scalar": [["value", 0.5]]}, "expected Scalar object"),
        ({**raw, "name": "x" * 50}, "exceeds the limit"),
    ]:
        for _ in range(2):  # a failure is never remembered as a success
            with pytest.raises(c.DecodeError, match=why):
                c.from_builtins(Resource, bad, True, c.Limits(max_str_len=40))
    many = c.from_builtins(tuple[Resource, ...], [raw] * 3, True)
    assert many[0] is many[1] is many[2]


def test_encode_after_an_encode_error_gives_clean_bytes() -> None:
    # the reused msgpack packer must not carry a failed message's partial bytes into the next one
    with pytest.raises(codec.EncodeError):
        encode_msgpack(Range(begin=2**70, end=1))
    r = Range(begin=1, end=2)
    assert encode_msgpack(r) == msgpack.packb({"begin": 1, "end": 2}, use_bin_type=True)
    assert codec.packb([1, "x", b"y"]) == msgpack.packb([1, "x", b"y"], use_bin_type=True)


@attrs.frozen
class HasId:
    task_id: TaskID | None = None


def test_id_fields_encode_as_value_objects() -> None:
    assert codec.to_builtins(HasId(TaskID("t1")), binary=True) == {"task_id": {"value": "t1"}}
    assert codec.to_builtins(HasId(TaskID("t1"))) == {"task_id": {"value": "t1"}}
    assert codec.to_builtins(HasId()) == {}
    with pytest.raises(codec.EncodeError):
        codec.to_builtins(HasId(task_id="not an id"))  # type: ignore[arg-type]


def test_id_fields_decode_the_same_from_the_id_table() -> None:
    # an id already seen comes from its decoder's table, inside the message decoder; a second
    # decoding gives the same object, and a bad or over-deep id still fails with its path
    raw = {"task_id": {"value": "t-table"}}
    first = codec.from_builtins(HasId, raw, binary=True)
    again = codec.from_builtins(HasId, {"task_id": {"value": "t-table"}}, binary=True)
    assert first == again == HasId(TaskID("t-table")) and first.task_id is again.task_id
    assert err(codec.from_builtins, HasId, {"task_id": {"value": ["t"]}}, True).path == "task_id.value"
    assert err(codec.from_builtins, HasId, {"task_id": {"value": "t-table", "x": 1}}, True).path == "task_id"
    e = err(codec.from_builtins, HasId, {"task_id": {"value": "t-table"}}, True, Limits(max_depth=1))
    assert "nesting deeper" in e.reason
