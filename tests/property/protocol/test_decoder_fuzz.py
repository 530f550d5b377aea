"""Decoders under hostile input: only DecodeError ever comes out, and nothing big is allocated."""

from __future__ import annotations

import json
import random
import struct
from typing import Any

import msgpack
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protocol import mesos as m
from protocol.codec import DecodeError, decode_json, decode_msgpack, encode_json

DECODERS = (decode_json, decode_msgpack)
TARGETS = (m.Call, m.Event, m.ExecutorCall, m.OperatorCall, tuple[m.TaskStatus, ...])


def only_decode_error(data: bytes, cls: Any = m.Call) -> None:
    for decode in DECODERS:
        try:
            decode(cls, data)
        except DecodeError:
            pass


def test_ten_thousand_random_byte_strings() -> None:
    rng = random.Random(20261122)
    for i in range(10_000):
        n = rng.choice((0, 1, 2, 5, 16, 64, 300))
        data = rng.randbytes(n)
        if i % 4 == 1:  # start like msgpack maps/arrays so the parser gets further
            data = bytes([rng.choice((0x80, 0x81, 0x82, 0x8F, 0x90, 0x93, 0xDC, 0xDE))]) + data
        elif i % 4 == 2:  # start like JSON
            data = b'{"type":' + data
        only_decode_error(data)


# A valid Call, as a tree of builtins, to mutate.
VALID_CALL = json.loads(
    encode_json(
        m.Call.make_accept(
            m.FrameworkID("f"),
            (m.OfferID("o"),),
            (
                m.Operation.make_launch(
                    m.TaskInfo(
                        name="t",
                        task_id=m.TaskID("t"),
                        agent_id=m.AgentID("a"),
                        data=b"x",
                        command=m.CommandInfo(value="true", arguments=("a",)),
                        resources=(m.Resource(name="cpus", type=m.ValueType.SCALAR, scalar=m.Scalar(1.0)),),
                    )
                ),
            ),
            m.Filters(1.0),
        )
    )
)

COMMON_LEAVES = (
    st.none()
    | st.booleans()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8)
    | st.sampled_from(["SUBSCRIBE", "ACCEPT", "LAUNCH", "SCALAR", "Infinity", "AAAA", "value", "type"])
)
JSON_LEAVES = COMMON_LEAVES | st.integers(min_value=-(2**70), max_value=2**70)
JSON_VALUES = st.recursive(
    JSON_LEAVES,
    lambda inner: st.lists(inner, max_size=4)
    | st.dictionaries(st.sampled_from(["type", "value", "accept", "framework_id", "operations", "x"]) | st.text(max_size=4), inner, max_size=4),
    max_leaves=20,
)
MSGPACK_VALUES = st.recursive(
    COMMON_LEAVES | st.binary(max_size=8) | st.integers(min_value=-(2**63), max_value=2**64 - 1),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6) | st.binary(max_size=3), inner, max_size=4),
    max_leaves=20,
)


def mutate(doc: Any, rng: random.Random, garbage: Any) -> Any:
    """Replace one random subtree of ``doc`` with ``garbage``."""
    if not isinstance(doc, (dict, list)) or not doc or rng.random() < 0.2:
        return garbage
    if isinstance(doc, dict):
        key = rng.choice(sorted(doc))
        return {**doc, key: mutate(doc[key], rng, garbage)}
    i = rng.randrange(len(doc))
    return [*doc[:i], mutate(doc[i], rng, garbage), *doc[i + 1 :]]


FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@given(JSON_VALUES, st.integers(0, 2**32), st.sampled_from(TARGETS))
@FUZZ
def test_json_shaped_garbage(garbage: Any, seed: int, cls: Any) -> None:
    doc = mutate(VALID_CALL, random.Random(seed), garbage)
    try:
        decode_json(cls, json.dumps(doc))
    except DecodeError:
        pass
    try:
        decode_json(cls, json.dumps(garbage))
    except DecodeError:
        pass


@given(MSGPACK_VALUES, st.integers(0, 2**32), st.sampled_from(TARGETS))
@FUZZ
def test_msgpack_shaped_garbage(garbage: Any, seed: int, cls: Any) -> None:
    doc = mutate(VALID_CALL, random.Random(seed), garbage)
    try:
        decode_msgpack(cls, msgpack.packb(doc, use_bin_type=True))
    except DecodeError:
        pass


@given(st.binary(max_size=200))
@settings(max_examples=300, deadline=None)
def test_hypothesis_binary(data: bytes) -> None:
    only_decode_error(data)
    only_decode_error(data, m.Event)


@given(st.binary(min_size=1, max_size=64), st.integers(0, 2**32))
@settings(max_examples=200, deadline=None)
def test_truncated_and_flipped_valid_messages(noise: bytes, seed: int) -> None:
    rng = random.Random(seed)
    valid_json = json.dumps(VALID_CALL).encode()
    valid_mp = msgpack.packb(
        {**VALID_CALL, "accept": {**VALID_CALL["accept"], "operations": []}}, use_bin_type=True
    )
    for raw in (valid_json, valid_mp):
        cut = raw[: rng.randrange(len(raw))]
        pos = rng.randrange(len(raw))
        flipped = raw[:pos] + noise + raw[pos + len(noise) :]
        only_decode_error(cut)
        only_decode_error(flipped)


@pytest.mark.parametrize("cls", TARGETS)
def test_nesting_ten_thousand_deep(cls: Any) -> None:
    deep_json = [
        b"[" * 10_000 + b"]" * 10_000,
        b'{"type":' * 10_000 + b"1" + b"}" * 10_000,
        b'{"accept":' * 10_000 + b"{}" + b"}" * 10_000,  # deep inside a known field
        b'{"unknown":' * 10_000 + b"{}" + b"}" * 10_000,  # deep inside an ignored field
    ]
    for data in deep_json:
        with pytest.raises(DecodeError):
            decode_json(cls, data)
    deep_mp = [b"\x91" * 10_000 + b"\xc0", b"\x81\xa1a" * 10_000 + b"\xc0"]
    for data in deep_mp:
        with pytest.raises(DecodeError):
            decode_msgpack(cls, data)


def test_msgpack_length_bombs() -> None:
    bombs = [
        b"\xdd" + struct.pack(">I", 2**32 - 1),  # array32 declaring 2^32-1 elements
        b"\xdf" + struct.pack(">I", 2**32 - 1),  # map32
        b"\xdb" + struct.pack(">I", 2**32 - 1) + b"abc",  # str32 of 4 GiB
        b"\xc6" + struct.pack(">I", 2**32 - 1) + b"abc",  # bin32 of 4 GiB
        b"\xc9" + struct.pack(">I", 2**32 - 1) + b"\x01",  # ext32
        b"\x81\xa4type\xdd" + struct.pack(">I", 2**32 - 1),  # nested inside a map
    ]
    for bomb in bombs:
        with pytest.raises(DecodeError) as e:
            decode_msgpack(m.Call, bomb)
        assert e.value.path == ""


def test_hundred_megabytes_refused_before_parsing() -> None:
    body = bytes(100 * 1024 * 1024)
    for decode in DECODERS:
        with pytest.raises(DecodeError) as e:
            decode(m.Call, body)
        assert "exceeds the limit" in e.value.reason
