"""Codec speed on the master's hot messages (TaskStatus, a 10-offer OFFERS event).

The assertion is a generous ceiling that only catches a pathological regression (e.g. type hints
re-inspected per call) on a loaded CI machine. Run this file directly to print the figures:
``.venv/bin/python tests/unit/protocol/test_codec_speed.py``.
"""

from __future__ import annotations

import base64
import timeit
import uuid
from collections.abc import Callable

from protocol import mesos as m
from protocol.codec import decode_json, decode_msgpack, encode_json, encode_msgpack
from protocol.task_states import TaskState


def task_status() -> m.TaskStatus:
    return m.TaskStatus(
        task_id=m.TaskID("task-0001"),
        state=TaskState.TASK_RUNNING,
        source=m.Source.SOURCE_EXECUTOR,
        reason=m.Reason.REASON_TASK_HEALTH_CHECK_STATUS_UPDATED,
        message="running",
        data=b"payload",
        agent_id=m.AgentID("5f1c2d3e-0000-S0"),
        executor_id=m.ExecutorID("exec-0001"),
        timestamp=1700000000.123,
        uuid=uuid.UUID(int=12345).bytes,
        healthy=True,
        labels=m.Labels((m.Label("k", "v"),)),
    )


def offer(i: int) -> m.Offer:
    def scalar(name: str, value: float) -> m.Resource:
        return m.Resource(
            name=name,
            type=m.ValueType.SCALAR,
            scalar=m.Scalar(value),
            role="*",
            allocation_info=m.AllocationInfo("*"),
        )

    return m.Offer(
        id=m.OfferID(f"5f1c2d3e-O{i}"),
        framework_id=m.FrameworkID("5f1c2d3e-0000"),
        agent_id=m.AgentID(f"5f1c2d3e-S{i}"),
        hostname=f"agent-{i}.example",
        url=m.URL("http", m.Address(hostname=f"agent-{i}.example", ip="10.0.0.5", port=5051), "/slave(1)"),
        resources=(
            scalar("cpus", 32.0),
            scalar("mem", 262144.0),
            scalar("disk", 1048576.0),
            scalar("gpus", 8.0),
            m.Resource(
                name="ports",
                type=m.ValueType.RANGES,
                ranges=m.Ranges((m.Range(31000, 32000),)),
                role="*",
                allocation_info=m.AllocationInfo("*"),
            ),
        ),
        attributes=(m.Attribute("rack", m.ValueType.TEXT, text=m.Text("r1")),),
        allocation_info=m.AllocationInfo("*"),
    )


def offers_event() -> m.Event:
    return m.Event.make_offers(tuple(offer(i) for i in range(10)))


def per_call_us(fn: Callable[[], object], number: int) -> float:
    return min(timeit.repeat(fn, number=number, repeat=3)) / number * 1e6


def measure() -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for name, obj, cls, n in (
        ("TaskStatus", task_status(), m.TaskStatus, 500),
        ("OFFERS x10", offers_event(), m.Event, 50),
    ):
        j, p = encode_json(obj), encode_msgpack(obj)
        assert decode_json(cls, j) == obj and decode_msgpack(cls, p) == obj
        out[name] = {
            "encode_json": per_call_us(lambda o=obj: encode_json(o), n),  # type: ignore[misc]
            "decode_json": per_call_us(lambda c=cls, d=j: decode_json(c, d), n),  # type: ignore[misc]
            "encode_msgpack": per_call_us(lambda o=obj: encode_msgpack(o), n),  # type: ignore[misc]
            "decode_msgpack": per_call_us(lambda c=cls, d=p: decode_msgpack(c, d), n),  # type: ignore[misc]
        }
    return out


def test_codec_is_fast_enough() -> None:
    figures = measure()
    assert max(figures["TaskStatus"].values()) < 1_000  # measured ~15-20 µs
    assert max(figures["OFFERS x10"].values()) < 20_000  # measured ~0.3-0.5 ms


def test_status_update_uuid_is_24_base64_chars() -> None:
    raw = encode_json(task_status())
    assert b'"uuid":"' + base64.b64encode(uuid.UUID(int=12345).bytes) + b'"' in raw


if __name__ == "__main__":
    for name, fig in measure().items():
        print(f"{name:12s} " + "  ".join(f"{k} {v:8.1f} us" for k, v in fig.items()))
