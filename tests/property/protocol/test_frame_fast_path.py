"""``agent_channel.encode_frame`` / ``decode_frame`` (no envelope objects) agree with the codec's
generic ``Frame`` encoding: the same bytes, the same bodies, the same errors."""

from __future__ import annotations

from typing import Any

import msgpack
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protocol import agent_channel as ac
from protocol import codec

from .test_codec_props import strategy_for

BODY_TYPES = list(ac._TYPE_OF)  # every body class the channel carries
BODIES = st.sampled_from(BODY_TYPES).flatmap(lambda c: strategy_for(c, 2))
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def generic(data: bytes) -> tuple[int, list[Any]] | str:
    try:
        f = codec.decode_msgpack(ac.Frame, data)
    except codec.DecodeError as e:
        return str(e)
    return f.epoch, [m.body() for m in f.messages]


def fast(data: bytes) -> tuple[int, list[Any]] | str:
    try:
        return ac.decode_frame(data)
    except codec.DecodeError as e:
        return str(e)


@given(st.lists(BODIES, min_size=0, max_size=4), st.integers(min_value=0, max_value=2**40))
@SETTINGS
def test_same_bytes_and_same_bodies(bodies: list[Any], epoch: int) -> None:
    data = ac.encode_frame(bodies, epoch)
    assert data == codec.encode_msgpack(ac.frame(*bodies, epoch=epoch))
    got = generic(data)
    assert fast(data) == got
    assert got == (epoch, bodies)  # (empty repeated fields included: omitted, read back empty)


@pytest.mark.parametrize(
    "bodies",
    [
        [],  # an empty frame: ``messages`` omitted
        [ac.Revoke(framework_id=ac.FrameworkID("f"), task_ids=(), grace_seconds=1.0)],
        [ac.Ping(seq=1), ac.Revoke(framework_id=ac.FrameworkID("f"), task_ids=(), grace_seconds=0.0)],
    ],
)
def test_empty_required_repeated_fields_come_back_alike(bodies: list[Any]) -> None:
    data = ac.encode_frame(bodies, 7)
    assert data == codec.encode_msgpack(ac.frame(*bodies, epoch=7))
    assert fast(data) == generic(data) == (7, bodies)
    assert codec.decode_msgpack(ac.Frame, data) == ac.frame(*bodies, epoch=7)


PING = {"type": "PING", "ping": {"seq": 1}}
MALFORMED: list[Any] = [
    [],
    {"epoch": 1},  # an empty frame (``messages`` omitted: empty)
    {"messages": None, "epoch": 1},
    {"messages": [PING], "epoch": -1},
    {"messages": [PING], "epoch": "1"},
    {"messages": [PING], "extra": 1},
    {"messages": {"a": 1}},
    {"messages": [PING, {"type": "PING"}]},  # body missing: a None body, refused by the master
    {"messages": [{"type": "PING", "ping": None}]},
    {"messages": [{"type": "PING", "pong": {"seq": 1}}]},  # the wrong body for its type
    {"messages": [{"type": "PING", "ping": {"seq": 1}, "pong": {"seq": 2}}]},  # an extra body
    {"messages": [{"type": "PING", "ping": {"seq": 1}, "pong": {"seq": "x"}}]},  # a bad extra body
    {"messages": [{"type": "NOPE", "ping": {"seq": 1}}]},
    {"messages": [{"type": "PING", "ping": {"seq": "x"}}]},
    {"messages": [{"type": "PING", "ping": {"seq": 1, "more": 2}}]},
    {"messages": [{"type": "STATUS_UPDATE", "status_update": {"framework_id": {"value": "f"}, "status": {"task_id": {"value": "t"}}}}]},
    {"messages": [{"type": "STATUS_UPDATE", "status_update": {"framework_id": {"value": "f"}, "status": {"task_id": {"value": "t"}, "state": "TASK_NOPE"}}}]},
    {"messages": [{"type": "STATUS_UPDATE", "status_update": {"framework_id": {"value": "f"}, "status": {"task_id": {"value": "t"}, "state": "TASK_RUNNING", "source": "SOURCE_NEW"}}}]},
    {"messages": [{"type": "RUN_TASKS", "run_tasks": {"framework_id": {"value": "f"}, "framework_info": {"user": "u", "name": "n"}, "tasks": [{"name": "t", "task_id": {"value": "t"}, "agent_id": {"value": "a"}, "labels": {"labels": [{"key": "k"}]}}]}}]},
]


@pytest.mark.parametrize("raw", MALFORMED)
def test_odd_frames_decode_or_fail_the_same_way(raw: Any) -> None:
    data = msgpack.packb(raw, use_bin_type=True)
    assert fast(data) == generic(data)


def test_nesting_limit_counts_the_envelope() -> None:
    limits = codec.Limits(max_depth=6)
    body = {"framework_id": {"value": "f"}, "status": {"task_id": {"value": "t"}, "state": "TASK_RUNNING"}}
    data = msgpack.packb({"messages": [{"type": "STATUS_UPDATE", "status_update": body}]}, use_bin_type=True)
    for depth in (5, 6, 7):
        lim = codec.Limits(max_depth=depth)
        try:
            want: Any = codec.decode_msgpack(ac.Frame, data, lim).messages[0].body()
        except codec.DecodeError as e:
            want = str(e)
        try:
            got: Any = ac.decode_frame(data, lim)[1][0]
        except codec.DecodeError as e:
            got = str(e)
        assert got == want
    assert ac.decode_frame(data, limits)[1][0] is not None
