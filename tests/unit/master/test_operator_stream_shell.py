"""The operator streams' fan-out (``master.operator_stream``): each event goes to the streams whose
snapshot predates it, encoded once per media type; a stream whose reader is stuck is closed and
its connection aborted when its queue is full, while ``publish`` never waits and the other
streams keep getting everything."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any, cast

from master.auth import MasterAuth
from master.events import PublishOperatorEvent
from master.operator_stream import OperatorStreams, OperatorSubscriber
from master.ports import OperatorPort
from protocol import codec, mesos, recordio

JSON, MSGPACK = codec.JSON, codec.MSGPACK


class FakeTransport:
    def __init__(self) -> None:
        self.aborted = False
        self.on_abort: list[asyncio.Future[None]] = []

    def abort(self) -> None:
        self.aborted = True
        for f in self.on_abort:
            if not f.done():
                f.set_exception(ConnectionResetError("aborted"))

    def is_closing(self) -> bool:
        return self.aborted


class Response:
    """Records what is written; ``stuck``: the first write never completes (a reader that stopped
    reading with full socket buffers) until the transport is aborted."""

    def __init__(self, transport: FakeTransport, stuck: bool = False) -> None:
        self.transport = transport
        self.stuck = stuck
        self.records: list[bytes] = []
        self.wrote = asyncio.Event()

    async def write(self, records: Sequence[bytes]) -> None:
        for data in records:  # each one whole record (one HTTP chunk)
            (record,) = recordio.RecordIODecoder().feed(data)
            self.records.append(record)
        self.wrote.set()
        if self.stuck:
            gate: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self.transport.on_abort.append(gate)
            await gate


def streams(max_queue: int) -> OperatorStreams:
    svc = SimpleNamespace(config=SimpleNamespace(max_framework_queue=max_queue), auth=MasterAuth())  # no read ACLs
    return OperatorStreams(cast(OperatorPort, svc))


def attach(ops: OperatorStreams, sid: str, media: str, after: int, stuck: bool = False) -> tuple[OperatorSubscriber, Response]:
    sub = OperatorSubscriber(sid, media, after, ops.max_queue)
    transport = FakeTransport()
    sub.transport = cast(Any, transport)
    ops.subscribers[sid] = sub
    return sub, Response(transport, stuck)


def removed(n: int) -> PublishOperatorEvent:
    return PublishOperatorEvent(n, mesos.OperatorEvent.make_agent_removed(mesos.AgentID(f"a{n}")))


def agent_ids(records: list[bytes], media: str) -> list[str]:
    out = []
    for r in records:
        ev = codec.decode(mesos.OperatorEvent, r, media)
        if ev.agent_removed is not None:
            out.append(ev.agent_removed.agent_id.value)
    return out


async def test_a_stuck_subscriber_is_dropped_and_the_others_get_everything() -> None:
    ops = streams(max_queue=5)
    slow, slow_resp = attach(ops, "slow", JSON, 0, stuck=True)
    fast, fast_resp = attach(ops, "fast", MSGPACK, 0)
    hb = recordio.encode(codec.encode_json(mesos.OperatorEvent.make_heartbeat()))
    slow_run = asyncio.create_task(slow.run(cast(Any, slow_resp), 60.0, hb))
    fast_run = asyncio.create_task(fast.run(cast(Any, fast_resp), 60.0, hb))

    ops.publish(removed(1))
    async with asyncio.timeout(5):
        await slow_resp.wrote.wait()  # its writer took event 1 and is stuck writing it
    assert slow.transport is not None and not cast(Any, slow.transport).aborted
    for n in range(2, 12):
        ops.publish(removed(n))  # synchronous: never waits for a reader
        async with asyncio.timeout(5):  # the fast reader keeps up
            while len(fast_resp.records) < n:
                fast_resp.wrote.clear()
                await fast_resp.wrote.wait()
    # events 2..6 filled the slow queue (5); event 7 closed the stream and aborted its connection
    assert "slow" not in ops.subscribers and ops.dropped == 1
    assert slow.closed and "overflow" in slow.close_reason
    assert cast(Any, slow.transport).aborted
    async with asyncio.timeout(5):
        with contextlib.suppress(ConnectionResetError):
            await slow_run
    assert agent_ids(slow_resp.records, JSON) == ["a1"]

    assert agent_ids(fast_resp.records, MSGPACK) == [f"a{n}" for n in range(1, 12)]
    fast.close()
    async with asyncio.timeout(5):
        await fast_run
    assert ops.subscribers == {"fast": fast}  # (the shell's handler removes it when its run ends)


async def test_only_events_after_the_snapshot_are_sent() -> None:
    ops = streams(max_queue=100)
    early, _ = attach(ops, "early", JSON, 0)
    late, _ = attach(ops, "late", JSON, 3)
    for n in range(1, 6):
        ops.publish(removed(n))
    assert agent_ids(recordio.RecordIODecoder().feed(b"".join(early.queue)), JSON) == ["a1", "a2", "a3", "a4", "a5"]
    assert agent_ids(recordio.RecordIODecoder().feed(b"".join(late.queue)), JSON) == ["a4", "a5"]
    # the same bytes object serves every stream of one media type (encoded once)
    assert early.queue[-1] is late.queue[-1]


async def test_an_idle_stream_gets_heartbeats() -> None:
    ops = streams(max_queue=10)
    sub, resp = attach(ops, "idle", JSON, 0)
    hb = recordio.encode(codec.encode_json(mesos.OperatorEvent.make_heartbeat()))
    run = asyncio.create_task(sub.run(cast(Any, resp), 0.01, hb))
    async with asyncio.timeout(5):
        while len(resp.records) < 2:
            resp.wrote.clear()
            await resp.wrote.wait()
    assert {codec.decode_json(mesos.OperatorEvent, r).type for r in resp.records} == {mesos.OperatorEventType.HEARTBEAT}
    sub.close()
    async with asyncio.timeout(5):
        await run


def test_publish_without_subscribers_does_nothing() -> None:
    ops = streams(max_queue=1)
    ops.publish(removed(1))
    assert ops.published == 0 and ops.dropped == 0
