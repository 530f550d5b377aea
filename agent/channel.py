"""The agent's side of the master channel (``protocol/agent_channel.py``): one WebSocket, msgpack
frames, batching, pings, reconnects, redirects and epoch fencing.

- ``send(body)`` queues a message; everything queued within one event-loop tick goes out as one
  ``Frame`` (split only at ``MAX_FRAME_BYTES``). Messages queued while disconnected are dropped:
  what must survive a disconnect (status updates) is resent by its owner after re-registration.
- ``run()`` connects to ``ws://MASTER/api/v1/agent`` (``wss://`` with an ``ssl`` context), follows an HTTP 307/302 redirect to the
  leading master, sends ``REGISTER`` (built fresh by ``build_register`` each time), waits for
  ``REGISTERED``/``REFUSED``, then dispatches frames. It answers ``PING`` itself; if no frame
  arrives for ``ping_timeout`` it drops the connection. Reconnects use jittered backoff.
- Frames whose ``epoch`` is below the highest epoch registered with are dropped (a deposed
  master); a ``REGISTERED`` with a lower epoch is refused the same way.
"""

from __future__ import annotations

import asyncio
import logging
import random
import ssl as ssl_
from collections.abc import Callable
from urllib.parse import urlsplit

import aiohttp

from protocol import codec
from protocol.agent_channel import (
    MAX_FRAME_BYTES,
    PATH,
    AgentMessage,
    Body,
    Frame,
    Ping,
    Pong,
    Refused,
    Register,
    Registered,
    envelope,
)
from protocol.backoff import Backoff
from protocol.detector import DetectorError, MasterResolver, is_zk_url

log = logging.getLogger(__name__)


class ChannelRefused(Exception):
    pass


class AgentChannel:
    def __init__(
        self,
        master: str,
        build_register: Callable[[], Register],
        on_registered: Callable[[Registered], None],
        on_message: Callable[[object], None],
        on_disconnected: Callable[[], None],
        *,
        ping_timeout: float = 15.0,
        registration_timeout: float = 10.0,
        reconnect_initial: float = 0.1,
        reconnect_max: float = 5.0,
        rng: random.Random | None = None,
        ssl: ssl_.SSLContext | None = None,
        authorization: str | None = None,
    ) -> None:
        self.master = master
        self._ssl = ssl  # TLS to the master (wss://): the pinned CA and our client certificate
        # this agent's credential (agent/auth.py), sent on every upgrade request
        self._headers = {"Authorization": authorization} if authorization else None
        self._build_register = build_register
        self._on_registered = on_registered
        self._on_message = on_message
        self._on_disconnected = on_disconnected
        self.ping_timeout = ping_timeout
        self.registration_timeout = registration_timeout
        self._backoff = Backoff(reconnect_initial, reconnect_max, jitter=0.5, rng=rng)
        self._ws: aiohttp.ClientWebSocketResponse | None = None
        self._out: list[AgentMessage] = []
        self._frames: asyncio.Queue[bytes] = asyncio.Queue()
        self._flush_scheduled = False
        # a zk:// master: the leader is looked up in ZooKeeper before every (re)connect
        self._resolver = MasterResolver(master) if is_zk_url(master) else None
        self._leader_changes = 0  # the detector's change count at the last (re)connect attempt
        self.epoch = 0
        self.registered = False
        self.connects = 0
        self.frames_sent = 0
        self.messages_sent = 0
        self.stale_frames = 0
        self.registered_event = asyncio.Event()
        self._closing = False
        self._last_frame = 0.0

    # --- outgoing ----------------------------------------------------------------------------

    def send(self, body: Body) -> bool:
        if self._ws is None or self._ws.closed or not self.registered:
            return False
        self._out.append(envelope(body))
        if not self._flush_scheduled:
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(self._flush)
        return True

    def _flush(self) -> None:
        self._flush_scheduled = False
        msgs, self._out = self._out, []
        if not msgs or self._ws is None or self._ws.closed:
            return
        for data in _frames(msgs):
            self.frames_sent += 1
            self._frames.put_nowait(data)
        self.messages_sent += len(msgs)

    async def _writer(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        while True:
            data = await self._frames.get()
            await ws.send_bytes(data)

    # --- connection loop -----------------------------------------------------------------------

    def close(self) -> None:
        """Stop reconnecting (the service is stopping and will cancel ``run``)."""
        self._closing = True

    async def run(self) -> None:
        try:
            await self._run()
        finally:
            if self._resolver is not None:
                await self._resolver.close()

    async def _run(self) -> None:
        async with aiohttp.ClientSession() as session:
            while not self._closing:
                try:
                    if self._resolver is not None:  # follow the current leader (protocol/detector.py)
                        self.master = await self._resolver.resolve(within=self.registration_timeout)
                        det = self._resolver.detector
                        self._leader_changes = det.changes if det is not None else 0
                    await self._connect_once(session)
                except asyncio.CancelledError:
                    raise
                except ChannelRefused as e:
                    log.error("master refused registration: %s", e)
                except (TimeoutError, aiohttp.ClientError, OSError, codec.DecodeError, DetectorError) as e:
                    log.info("master connection to %s failed: %s", self.master, e)
                finally:
                    await self._closed()
                if self._closing:
                    return
                await self._pause(self._backoff.next())

    async def _pause(self, delay: float) -> None:
        """The backoff before reconnecting, cut short when ZooKeeper names a new leader since the
        last attempt; the backoff then starts over (a new leader answers 503 while it recovers)."""
        det = self._resolver.detector if self._resolver is not None else None
        if det is None:
            await asyncio.sleep(delay)
            return
        seen = self._leader_changes
        try:
            await det.wait_until(lambda d: d.changes != seen, within=delay)
        except TimeoutError:
            return
        self._backoff.reset()

    async def _closed(self) -> None:
        was = self.registered
        self.registered = False
        self.registered_event.clear()
        ws, self._ws = self._ws, None
        self._out.clear()
        while not self._frames.empty():
            self._frames.get_nowait()
        if ws is not None and not ws.closed:
            await ws.close()
        if was:
            self._on_disconnected()

    async def _open(self, session: aiohttp.ClientSession) -> aiohttp.ClientWebSocketResponse:
        for _ in range(5):  # redirects
            url = f"{'wss' if self._ssl is not None else 'ws'}://{self.master}{PATH}"
            try:
                ws = await session.ws_connect(
                    url, max_msg_size=MAX_FRAME_BYTES, autoping=True, timeout=aiohttp.ClientWSTimeout(ws_close=2.0),
                    ssl=self._ssl if self._ssl is not None else True, headers=self._headers,
                )
                # aiohttp follows redirects itself: remember where we ended up (the leader)
                resp = getattr(ws, "_response", None)
                final = getattr(resp, "url", None)
                if final is not None and final.host and final.port:
                    leader = f"{final.host}:{final.port}"
                    if leader != self.master:
                        log.info("master %s redirected to %s", self.master, leader)
                        self.master = leader
                return ws
            except aiohttp.WSServerHandshakeError as e:
                headers = e.headers if e.headers is not None else {}
                location = headers.get("Location") if e.status in (301, 302, 303, 307, 308) else None
                if e.status in (401, 403):
                    raise ChannelRefused(f"the master answered {e.status}: check --credential / --token") from e
                if not location:
                    raise
                parts = urlsplit(location if "//" in location else f"//{location}")
                if not parts.netloc:
                    raise
                log.info("master %s redirected to %s", self.master, parts.netloc)
                self.master = parts.netloc
        raise aiohttp.ClientError("too many redirects")

    async def _connect_once(self, session: aiohttp.ClientSession) -> None:
        ws = await self._open(session)
        self._ws = ws
        self.connects += 1
        reg = codec.encode_msgpack(Frame(messages=(envelope(self._build_register()),)))
        await ws.send_bytes(reg)
        # asyncio.timeout, not wait_for: 3.11's wait_for can swallow a cancellation that races
        # with the inner result (the service's stop would then hang)
        async with asyncio.timeout(self.registration_timeout):
            registered, early = await self._await_registered(ws)
        self.epoch = max(self.epoch, registered.epoch)
        self.ping_timeout = registered.ping_timeout or self.ping_timeout
        self.registered = True
        self.registered_event.set()
        self._backoff.reset()
        loop = asyncio.get_running_loop()
        self._last_frame = loop.time()
        helpers = [
            loop.create_task(self._writer(ws), name="agent-channel-writer"),
            loop.create_task(self._watchdog(ws), name="agent-channel-watchdog"),
        ]
        try:
            self._on_registered(registered)
            # what came with (or before) REGISTERED -- the kills, teardowns and drains the master
            # decided while we were away -- goes through the one handler, like any later frame
            self._dispatch(early)
            await self._read_loop(ws)
        finally:
            for h in helpers:
                h.cancel()
            # gather(return_exceptions) absorbs the helpers' own ends but still lets a
            # cancellation of *this* task through (a bare ``suppress`` would swallow it)
            for result in await asyncio.gather(*helpers, return_exceptions=True):
                if isinstance(result, Exception):
                    log.info("channel helper ended: %s", result)

    async def _watchdog(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        """Close the connection when no frame arrived for ``ping_timeout`` (the master pings)."""
        loop = asyncio.get_running_loop()
        while not ws.closed:
            await asyncio.sleep(self.ping_timeout / 4)
            if loop.time() - self._last_frame > self.ping_timeout:
                log.warning("no frame from the master for %.1fs; reconnecting", self.ping_timeout)
                await ws.close()
                return

    async def _read_loop(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        loop = asyncio.get_running_loop()
        while True:
            msg = await ws.receive()
            self._last_frame = loop.time()
            if msg.type != aiohttp.WSMsgType.BINARY:
                if msg.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED, aiohttp.WSMsgType.ERROR):
                    return
                continue
            frame = self._decode(msg.data)
            if frame is None:
                continue
            self._dispatch([m.body() for m in frame.messages])

    def _dispatch(self, bodies: list[object]) -> None:
        """The one handler for every message from the master, whichever frame carried it."""
        for body in bodies:
            if body is None:
                continue
            if isinstance(body, Ping):
                self.send(Pong(seq=body.seq))
            elif isinstance(body, Refused):
                raise ChannelRefused(body.message)
            elif isinstance(body, Registered):
                continue
            else:
                try:
                    self._on_message(body)
                except Exception:
                    log.exception("handling %s failed", type(body).__name__)

    def _decode(self, data: bytes) -> Frame | None:
        try:
            frame = codec.decode_msgpack(Frame, data)
        except codec.DecodeError as e:
            log.warning("undecodable frame from the master: %s", e)
            return None
        if frame.epoch < self.epoch:
            self.stale_frames += 1
            log.warning("dropping a frame with stale epoch %d < %d", frame.epoch, self.epoch)
            return None
        return frame

    async def _await_registered(self, ws: aiohttp.ClientWebSocketResponse) -> tuple[Registered, list[object]]:
        """``REGISTERED`` and every other message that arrived up to it and after it in its frame,
        in order (handled once registered: the master sends its decisions right behind it)."""
        early: list[object] = []
        while True:
            msg = await ws.receive()
            if msg.type != aiohttp.WSMsgType.BINARY:
                if msg.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED, aiohttp.WSMsgType.ERROR):
                    raise aiohttp.ClientError("master closed the connection during registration")
                continue
            frame = self._decode(msg.data)
            if frame is None:
                continue
            bodies = [m.body() for m in frame.messages]
            for i, body in enumerate(bodies):
                if isinstance(body, Registered):
                    if body.epoch < self.epoch:
                        self.stale_frames += 1
                        continue
                    return body, early + bodies[i + 1 :]
                if isinstance(body, Refused):
                    raise ChannelRefused(body.message)
                if body is not None and not isinstance(body, Ping):
                    early.append(body)


def _frames(msgs: list[AgentMessage]) -> list[bytes]:
    """Encode ``msgs`` as frames under the size cap (halving a batch that is too big). A message
    that cannot be encoded (text that is not Unicode, e.g. a path decoded with surrogateescape in
    a message) is that message's error: logged once and dropped, the rest still go out."""
    try:
        data = codec.encode_msgpack(Frame(messages=tuple(msgs)))
    except codec.EncodeError as e:
        if len(msgs) == 1:
            log.error("dropping a %s message that cannot be encoded: %s", msgs[0].type.name, e)
            return []
        data = b""  # split until the culprit is alone
    if data and (len(data) <= MAX_FRAME_BYTES or len(msgs) == 1):
        return [data]
    mid = len(msgs) // 2
    return _frames(msgs[:mid]) + _frames(msgs[mid:])
