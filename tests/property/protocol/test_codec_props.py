"""Codec round-trips in both encodings for every Mesos message, with strategies built from the schema."""

from __future__ import annotations

import enum
import json
import typing
from typing import Any

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protocol import agent_channel as ac
from protocol import mesos as m
from protocol import mesos_common as mc
from protocol.codec import (
    decode_json,
    decode_msgpack,
    encode_json,
    encode_msgpack,
    from_builtins,
    to_builtins,
)

MAX_DEPTH = 4  # below this, optional fields stay unset and repeated fields empty (keeps examples small)

TEXT = st.text(alphabet=st.characters(codec="utf-8"), max_size=12)
# an id (``__codec_id__``) has no control character (the codec refuses one: Mesos' validateID)
ID_TEXT = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cc",)), max_size=12)
PRIMITIVES: dict[Any, st.SearchStrategy[Any]] = {
    str: TEXT,
    int: st.integers(min_value=-(2**63), max_value=2**64 - 1),
    float: st.floats(allow_nan=False),
    bool: st.booleans(),
    bytes: st.binary(max_size=24),
}


def strategy_for(tp: Any, depth: int = 0) -> st.SearchStrategy[Any]:
    """A strategy for any type form the codec supports, derived generically from type hints."""
    if tp in PRIMITIVES:
        return PRIMITIVES[tp]
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return st.sampled_from(list(tp))
    if isinstance(tp, type) and getattr(tp, "__codec_id__", False):
        return st.builds(tp, ID_TEXT)
    if isinstance(tp, type) and attrs.has(tp):
        hints = typing.get_type_hints(tp)
        kwargs: dict[str, st.SearchStrategy[Any]] = {}
        for a in attrs.fields(tp):
            if a.default is attrs.NOTHING or depth < MAX_DEPTH:
                kwargs[a.name] = strategy_for(hints[a.name], depth + 1)
        return st.builds(tp, **kwargs)
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is tuple:
        return st.lists(strategy_for(args[0], depth), max_size=2 if depth < MAX_DEPTH else 0).map(tuple)
    if origin is dict:
        return st.dictionaries(TEXT, strategy_for(args[1], depth), max_size=2 if depth < MAX_DEPTH else 0)
    if type(None) in args:
        (inner,) = (a for a in args if a is not type(None))
        return st.none() | strategy_for(inner, depth)
    raise TypeError(f"no strategy for {tp!r}")


CLASSES = [
    m.Call,
    m.Event,
    m.TaskStatus,
    m.TaskInfo,
    m.Offer,
    m.FrameworkInfo,
    m.ExecutorCall,
    m.ExecutorEvent,
    m.OperatorCall,
    m.OperatorResponse,
    m.Task,
]

STRATEGIES = {c: strategy_for(c) for c in CLASSES}
CASES = st.sampled_from(CLASSES).flatmap(lambda c: st.tuples(st.just(c), STRATEGIES[c]))

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@given(CASES)
@SETTINGS
def test_json_round_trip(case: tuple[type, Any]) -> None:
    cls, obj = case
    raw = encode_json(obj)
    assert raw.isascii() and b"\n" not in raw
    assert decode_json(cls, raw) == obj
    assert from_builtins(cls, json.loads(raw)) == obj


@given(CASES)
@SETTINGS
def test_msgpack_round_trip(case: tuple[type, Any]) -> None:
    cls, obj = case
    assert decode_msgpack(cls, encode_msgpack(obj)) == obj
    assert from_builtins(cls, to_builtins(obj, binary=True), binary=True) == obj


@given(st.lists(STRATEGIES[m.TaskStatus], max_size=4).map(tuple))
@settings(max_examples=30, deadline=None)
def test_batched_frames_round_trip(batch: tuple[m.TaskStatus, ...]) -> None:
    assert decode_msgpack(tuple[m.TaskStatus, ...], encode_msgpack(batch)) == batch
    assert decode_json(tuple[m.TaskStatus, ...], encode_json(batch)) == batch


@given(STRATEGIES[m.Event])
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_json_and_msgpack_agree_on_structure(ev: m.Event) -> None:
    """The two encodings are one schema: same keys everywhere, only bytes differ."""
    a = json.loads(encode_json(ev))
    b = to_builtins(ev, binary=True)

    def shape(x: Any) -> Any:
        if isinstance(x, dict):
            return {k: shape(v) for k, v in x.items()}
        if isinstance(x, list):
            return [shape(v) for v in x]
        return None

    assert shape(a) == shape(b)


def _catalogue() -> list[type]:
    """Every message class of the schema: Mesos (the names ``protocol.mesos`` exports), the shared
    Mesos types and the agent channel (the classes those two modules define)."""
    exported = [getattr(m, name) for name in m.__all__]
    own = [obj for mod in (mc, ac) for obj in vars(mod).values() if getattr(obj, "__module__", None) == mod.__name__]
    found = {obj for obj in (*exported, *own) if isinstance(obj, type) and attrs.has(obj)}
    return sorted(found, key=lambda c: (c.__module__, c.__qualname__))


CATALOGUE = _catalogue()
CATALOGUE_SETTINGS = settings(
    max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
MINIMAL_SETTINGS = settings(CATALOGUE_SETTINGS, max_examples=3)  # (little varies: required fields only)


def _round_trips(cls: type, obj: Any) -> None:
    assert decode_json(cls, encode_json(obj)) == obj
    assert decode_msgpack(cls, encode_msgpack(obj)) == obj
    assert from_builtins(cls, to_builtins(obj, binary=True), binary=True) == obj


def test_catalogue_covers_the_agent_channel() -> None:
    assert {ac.Frame, ac.AgentMessage, ac.Revoke, ac.RunTasks, m.Call, mc.TaskID} <= set(CATALOGUE)


@pytest.mark.parametrize("cls", CATALOGUE, ids=lambda c: f"{c.__module__.rsplit('.', 1)[-1]}.{c.__qualname__}")
@given(data=st.data())
@CATALOGUE_SETTINGS
def test_every_message_round_trips(cls: type, data: st.DataObject) -> None:
    _round_trips(cls, data.draw(strategy_for(cls, 2)))


@pytest.mark.parametrize("cls", CATALOGUE, ids=lambda c: f"{c.__module__.rsplit('.', 1)[-1]}.{c.__qualname__}")
@given(data=st.data())
@MINIMAL_SETTINGS
def test_every_message_round_trips_with_only_its_required_fields(cls: type, data: st.DataObject) -> None:
    """Optional fields unset, repeated fields empty -- required ones too (``Frame(messages=())``,
    ``Revoke(task_ids=())``): the encoder omits an empty repeated field, so the decoder must read
    it back as empty."""
    _round_trips(cls, data.draw(strategy_for(cls, MAX_DEPTH)))
