"""The master side of the agent channel: ``GET /api/v1/agent`` WebSocket server.

One connection per agent; binary frames hold one msgpack ``protocol.agent_channel.Frame`` each
(a batch of messages). The first message must be REGISTER. Messages the core sends to an agent
within one loop tick are coalesced into one frame. A malformed frame (bad msgpack, wrong shape,
unknown type, a body missing) closes that agent's connection only (code 1007) and counts
``invalid_messages_total``; a frame above ``max_frame_bytes`` is refused by aiohttp before it is
buffered (close 1009).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import typing
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from aiohttp import WSCloseCode, WSMessage, WSMsgType, web

from master.auth import principal_of
from master.events import AgentConnected, AgentConnectionLost, AgentMessageReceived, AgentMessagesReceived
from protocol import agent_channel as ac
from protocol import codec

if TYPE_CHECKING:
    from master.ports import AgentEdgePort

log = logging.getLogger(__name__)

CLOSE_INVALID = WSCloseCode.INVALID_TEXT  # 1007: invalid payload data
CLOSE_POLICY = WSCloseCode.POLICY_VIOLATION  # 1008


async def _chain(first: WSMessage | None, ws: web.WebSocketResponse) -> AsyncIterator[WSMessage]:
    """``first`` then the rest of the socket's messages (until it closes)."""
    if first is None:
        return
    if first.type in (WSMsgType.CLOSE, WSMsgType.CLOSING, WSMsgType.CLOSED):
        return
    yield first
    async for msg in ws:
        yield msg


class AgentConn:
    def __init__(self, conn_id: int, ws: web.WebSocketResponse, epoch: int, max_frame: int) -> None:
        self.conn_id = conn_id
        self.ws = ws
        self.epoch = epoch
        self.max_frame = max_frame
        self.pending: list[ac.Body] = []
        self.wake = asyncio.Event()
        self.closing: str | None = None
        self.frames_sent = 0
        self.encode_errors = 0
        self.last_frame = 0.0  # clock time of the last frame received

    def push(self, body: ac.Body) -> None:
        if self.closing is None:
            if not self.pending:  # (bodies already pending have woken the writer)
                self.wake.set()
            self.pending.append(body)

    def close(self, reason: str) -> None:
        if self.closing is None:
            self.closing = reason or "closed by master"
            self.wake.set()

    def _frames(self, bodies: list[ac.Body]) -> list[bytes]:
        """``bodies`` as frames under the size cap. A message that cannot be encoded is that
        message's error (logged once, dropped); the others still go out."""
        try:
            data = ac.encode_frame(bodies, self.epoch)
        except codec.EncodeError as e:
            if len(bodies) == 1:
                self.encode_errors += 1
                log.error("agent connection %d: dropping a %s that cannot be encoded: %s",
                          self.conn_id, type(bodies[0]).__name__, e)
                return []
            data = b""  # split until the culprit is alone
        if data and (len(data) <= self.max_frame or len(bodies) == 1):
            return [data]
        mid = len(bodies) // 2
        return self._frames(bodies[:mid]) + self._frames(bodies[mid:])

    async def writer(self) -> None:
        """Send what accumulated during a loop tick as one frame; then close if asked. Should it
        fail on anything unforeseen, the connection is closed (the agent reconnects and
        re-registers) rather than left open with nobody writing to it."""
        try:
            await self._write_loop()
        except Exception:
            log.exception("agent connection %d: writer failed; closing the connection", self.conn_id)
            self.closing = self.closing or "master writer failed"
            with contextlib.suppress(ConnectionError, RuntimeError):
                await self.ws.close(code=WSCloseCode.INTERNAL_ERROR, message=b"master writer failed")

    async def _write_loop(self) -> None:
        while True:
            await self.wake.wait()
            await asyncio.sleep(0)  # let the rest of this tick's messages join the batch
            self.wake.clear()
            bodies, self.pending = self.pending, []
            if bodies and not self.ws.closed:
                for data in self._frames(bodies):
                    try:
                        await self.ws.send_bytes(data)
                    except (ConnectionError, RuntimeError):
                        return
                    self.frames_sent += 1
            if self.closing is not None:
                with contextlib.suppress(ConnectionError, RuntimeError):
                    await self.ws.close(code=WSCloseCode.GOING_AWAY, message=self.closing.encode()[:120])
                return


class AgentChannelServer:
    def __init__(self, service: AgentEdgePort) -> None:
        self.svc = service
        self.conns: dict[int, AgentConn] = {}
        self._ids = itertools.count(1)

    def routes(self) -> list[web.RouteDef]:
        return [web.get(ac.PATH, self.handle)]

    def send(self, conn_id: int, body: ac.Body) -> None:
        c = self.conns.get(conn_id)
        if c is not None:
            c.push(body)

    def close(self, conn_id: int, reason: str) -> None:
        c = self.conns.get(conn_id)
        if c is not None:
            c.close(reason)

    def close_all(self) -> None:
        for c in list(self.conns.values()):
            c.close("master stopping")

    def liveness(self) -> tuple[tuple[int, float], ...]:
        """When a frame last arrived on each connection (for ``Tick.seen``)."""
        return tuple((cid, c.last_frame) for cid, c in self.conns.items() if c.last_frame)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        svc = self.svc
        cfg = svc.config
        guard = svc.guard
        if guard is not None and not guard.admit_agent(request.transport):
            # the agent pool is full: the agent retries with backoff
            return web.Response(status=503, text="Too many agent connections")
        ws = web.WebSocketResponse(max_msg_size=cfg.max_frame_bytes, autoping=True, heartbeat=None)
        await ws.prepare(request)
        conn_id = next(self._ids)
        conn = AgentConn(conn_id, ws, svc.epoch, cfg.max_frame_bytes)
        self.conns[conn_id] = conn
        writer = asyncio.get_running_loop().create_task(conn.writer(), name=f"agent-writer-{conn_id}")
        registered = False
        try:
            # REGISTER must come within read_timeout; after that, pings police the connection
            try:
                first = await ws.receive(timeout=cfg.read_timeout)
            except TimeoutError:
                await ws.close(code=CLOSE_POLICY, message=b"no REGISTER within the read timeout")
                first = None
            async for msg in _chain(first, ws):
                conn.last_frame = svc.clock.now()
                if msg.type is WSMsgType.BINARY:
                    try:
                        _, got = ac.decode_frame(msg.data)
                        if any(b is None for b in got):
                            raise codec.DecodeError("", "message body missing for its type")
                        bodies = typing.cast(list[ac.Body], got)
                    except codec.DecodeError as e:
                        svc.metrics_inc("invalid_messages_total")
                        log.warning("agent connection %d: malformed frame: %s", conn_id, e)
                        await ws.close(code=CLOSE_INVALID, message=b"malformed frame")
                        break
                    rest = bodies
                    if not registered:
                        # (an empty frame decodes -- its repeated field is omitted -- but the first
                        # frame must still carry REGISTER: no idle unregistered connections)
                        body = bodies[0] if bodies else None
                        if not isinstance(body, ac.Register):
                            svc.metrics_inc("invalid_messages_total")
                            await ws.close(code=CLOSE_POLICY, message=b"first message must be REGISTER")
                            break
                        registered = True
                        await svc.dispatch(AgentConnected(
                            conn_id=conn_id, register=body, principal=principal_of(request), ip=request.remote))
                        rest = rest[1:]
                    if len(rest) == 1:
                        await svc.dispatch(AgentMessageReceived(conn_id=conn_id, body=rest[0]))
                    elif rest:
                        # the rest of the frame is one fact: its offer updates coalesce
                        await svc.dispatch(AgentMessagesReceived(conn_id=conn_id, bodies=tuple(rest)))
                    if ws.closed:
                        break
                elif msg.type is WSMsgType.TEXT:
                    svc.metrics_inc("invalid_messages_total")
                    await ws.close(code=CLOSE_INVALID, message=b"binary msgpack frames only")
                    break
                elif msg.type is WSMsgType.ERROR:
                    svc.metrics_inc("invalid_messages_total")
                    break
                if conn.closing is not None:
                    break
        finally:
            self.conns.pop(conn_id, None)
            if conn.closing is None:
                conn.close("connection ended")
            done, _ = await asyncio.wait({writer}, timeout=2.0)
            if not done:
                writer.cancel()
                await asyncio.gather(writer, return_exceptions=True)
            if registered and svc.running:
                await svc.dispatch(AgentConnectionLost(conn_id=conn_id))
        return ws
