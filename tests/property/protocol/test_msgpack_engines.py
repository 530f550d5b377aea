"""The codec's msgpack engine (msgspec's C encoder and decoder) against the reference, ``msgpack``
with the strict unpacker's options: the same bytes out, and for any input the same decoded
message or the same ``DecodeError`` (message and path) -- map keys that are not strings, the
timestamp and other extension types, truncated data, sizes past the limits included."""

from __future__ import annotations

import random
from typing import Any

import msgpack
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protocol import agent_channel as ac
from protocol import codec
from protocol import mesos as m

from .test_decoder_fuzz import MSGPACK_VALUES, TARGETS, VALID_CALL, mutate

SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

BUILTINS = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats()
    | st.text(max_size=40)
    | st.binary(max_size=40),
    lambda inner: st.lists(inner, max_size=20) | st.dictionaries(st.text(max_size=10), inner, max_size=20),
    max_leaves=60,
)


def reference(cls: Any, data: bytes, limits: codec.Limits = codec.DEFAULT_LIMITS) -> Any:
    """What decoding gave with ``msgpack.unpackb`` alone: the value or the error's text."""
    try:
        return codec.from_builtins(cls, codec.unpack_msgpack(data, limits), True, limits)
    except codec.DecodeError as e:
        return f"error at {e.path!r}: {e}"


def decoded(cls: Any, data: bytes, limits: codec.Limits = codec.DEFAULT_LIMITS) -> Any:
    try:
        return codec.decode_msgpack(cls, data, limits)
    except codec.DecodeError as e:
        return f"error at {e.path!r}: {e}"


@given(BUILTINS)
@SETTINGS
def test_packb_writes_msgpack_s_bytes(value: Any) -> None:
    assert codec.packb(value) == msgpack.packb(value, use_bin_type=True)


def test_packb_refuses_what_msgpack_refuses_with_the_same_exception_kinds() -> None:
    for bad in (2**64, -(2**63) - 1):
        with pytest.raises(OverflowError):
            codec.packb({"x": bad})
    with pytest.raises(ValueError):  # UnicodeEncodeError
        codec.packb("\udc80")
    with pytest.raises(TypeError):
        codec.packb(object())


@given(MSGPACK_VALUES, st.integers(0, 2**32), st.sampled_from(TARGETS))
@SETTINGS
def test_mutated_messages_decode_as_the_strict_unpacker_decides(garbage: Any, seed: int, cls: Any) -> None:
    doc = mutate(VALID_CALL, random.Random(seed), garbage)
    data = msgpack.packb(doc, use_bin_type=True)
    assert decoded(cls, data) == reference(cls, data)


@given(st.binary(max_size=200), st.sampled_from(TARGETS))
@SETTINGS
def test_random_bytes_decode_as_the_strict_unpacker_decides(data: bytes, cls: Any) -> None:
    assert decoded(cls, data) == reference(cls, data)


def test_what_only_the_fast_unpacker_accepts_gets_the_strict_unpacker_s_error() -> None:
    status = {"task_id": {"value": "t"}, "state": "TASK_RUNNING"}
    cases = [
        msgpack.packb({**status, 1: "x"}),  # a map key that is not a string
        msgpack.packb({**status, "timestamp": msgpack.Timestamp(1, 0)}),  # the timestamp extension
        msgpack.packb({**status, "data": msgpack.ExtType(5, b"ab")}),  # another extension
        msgpack.packb(status)[:-3],  # truncated
        msgpack.packb(status) + b"\xc0",  # trailing data
        msgpack.packb({**status, "message": "x"}).replace(b"\xa1x", b"\xa3\xed\xa0\x80"),  # a UTF-8 surrogate
    ]
    for data in cases:
        got = decoded(m.TaskStatus, data)
        assert isinstance(got, str) and got == reference(m.TaskStatus, data)
    assert "int is not allowed for map key" in decoded(m.TaskStatus, cases[0])
    assert decoded(m.TaskStatus, msgpack.packb(status)) == m.TaskStatus(task_id=m.TaskID("t"), state=m.TaskState.TASK_RUNNING)


def test_data_whose_size_does_not_bound_it_within_the_limits_goes_to_the_strict_unpacker() -> None:
    limits = codec.Limits(max_list_len=3)
    data = msgpack.packb({"task_id": {"value": "t"}, "state": "TASK_RUNNING", "labels": {"labels": [{"key": "a"}] * 4}})
    assert codec.unpack_fast(data, limits) is codec.UNPACK_FAILED
    got = decoded(m.TaskStatus, data, limits)
    assert got == reference(m.TaskStatus, data, limits) and "exceeds max_array_len" in got
    assert codec.unpack_fast(data) == msgpack.unpackb(data)


@given(MSGPACK_VALUES, st.integers(0, 2**32))
@SETTINGS
def test_agent_frames_decode_as_the_strict_unpacker_decides(garbage: Any, seed: int) -> None:
    update = ac.StatusUpdateMsg(
        framework_id=ac.FrameworkID("f"),
        status=m.TaskStatus(task_id=m.TaskID("t"), state=m.TaskState.TASK_RUNNING, uuid=b"u" * 16),
    )
    frame = msgpack.unpackb(ac.encode_frame([update, ac.Pong(seq=1)], 3))
    data = msgpack.packb(mutate(frame, random.Random(seed), garbage), use_bin_type=True)

    def strict() -> Any:
        try:
            return ac._decode_raw(codec.unpack_msgpack(data), codec.DEFAULT_LIMITS)
        except codec.DecodeError as e:
            return str(e)

    try:
        got: Any = ac.decode_frame(data)
    except codec.DecodeError as e:
        got = str(e)
    assert got == strict()
