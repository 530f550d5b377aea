"""The in-memory ``Transport``: a framework's driver talking to an in-process master (the
fake master of ``fake.py``) without a network. Calls and events go through the msgpack codec
unless ``wire=False``, so messages that do not fit the schema fail here as they would on the wire.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Protocol

from frameworks.client.transport import MasterUnavailable
from protocol import codec
from protocol.mesos import Call, Event

_EOF = object()


class InProcessMaster(Protocol):
    """What the in-memory transport needs from a master."""

    down: bool

    def subscribe(self, call: Call, wire: bool = True) -> MemoryStream: ...

    def handle(self, call: Call, stream_id: str | None) -> None: ...


class MemoryStream:
    """The event stream of one subscription (an ``EventStream``)."""

    def __init__(self, stream_id: str, wire: bool, on_consumed: Callable[[], None] = lambda: None) -> None:
        self.stream_id = stream_id
        self._on_consumed = on_consumed
        self.closed = False
        self._wire = wire
        self._q: asyncio.Queue[object] = asyncio.Queue()

    def push(self, ev: Event) -> None:
        if self.closed:
            return
        self._q.put_nowait(codec.encode_msgpack(ev) if self._wire else ev)

    def end(self, error: Exception | None = None) -> None:
        if not self.closed:
            self.closed = True
            self._q.put_nowait(error if error is not None else _EOF)

    async def __aiter__(self) -> AsyncIterator[Event]:
        while True:
            self._on_consumed()  # the consumer handled everything so far: waiters re-check
            item = await self._q.get()
            if item is _EOF:
                return
            if isinstance(item, Exception):
                raise item
            if isinstance(item, bytes):
                yield codec.decode_msgpack(Event, item)
            else:
                assert isinstance(item, Event)
                yield item

    async def close(self) -> None:
        self.end()


class MemoryTransport:
    """A ``Transport`` into an in-process master (calls round-trip through the codec when ``wire``)."""

    media_type = codec.MSGPACK

    def __init__(self, master: InProcessMaster, wire: bool = True) -> None:
        self.master = master
        self.wire = wire
        self.closed = False

    def _rt(self, call: Call) -> Call:
        return codec.decode_msgpack(Call, codec.encode_msgpack(call)) if self.wire else call

    async def subscribe(self, call: Call) -> MemoryStream:
        await asyncio.sleep(0)
        if self.master.down:
            raise MasterUnavailable("fake master is down")
        return self.master.subscribe(self._rt(call), self.wire)

    async def send(self, call: Call, stream_id: str | None) -> None:
        await asyncio.sleep(0)
        if self.master.down:
            raise MasterUnavailable("fake master is down")
        self.master.handle(self._rt(call), stream_id)

    async def close(self) -> None:
        self.closed = True
