"""The scheduler HTTP edge: ``POST /api/v1/scheduler`` exactly as Mesos v1 serves it, plus
``/version``, ``/health`` and ``/redirect``.

Transport-level faults get Mesos' status codes (400/403/405/406/413/415/429); a well-formed call
from the subscribed framework always gets ``202`` and its semantic problems surface as events.
SUBSCRIBE answers ``200`` with a chunked RecordIO stream (``Mesos-Stream-Id``), SUBSCRIBED then
HEARTBEAT at once and every ``heartbeat_interval``, and one extra HEARTBEAT after each burst of
events (mesoshttp only delivers an event when the next record's length line arrives); every
record is its own HTTP chunk, as Mesos writes it.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from typing import TYPE_CHECKING

from aiohttp import web

from master.auth import principal_of
from master.events import CallReceived, StreamClosed, SubscribeReceived
from master.ratelimit import call_cost
from master.unsupported import unsupported
from protocol import codec, httputil, mesos, recordio
from protocol.ids import new_stream_id

if TYPE_CHECKING:
    from master.ports import SchedulerEdgePort

log = logging.getLogger(__name__)

VERSION = "1.11.0"
PROTOBUF = "application/x-protobuf"
STREAM_HEADER = "Mesos-Stream-Id"


class BodyTooLarge(Exception):
    pass


def text(status: int, message: str, **headers: str) -> web.Response:
    return web.Response(status=status, text=message, content_type="text/plain", headers=headers or None)


async def read_body(request: web.Request, limit: int, read_timeout: float) -> bytes:
    """The body via ``protocol.httputil.read_body`` (refused from Content-Length or while
    streaming, never buffered whole), within ``read_timeout``."""
    content = request.content
    if content.is_eof():
        # the whole body already arrived with the head (a typical call): take it from the
        # buffer, no timer and no chunk iteration (a timer per call was ~8 us)
        declared = request.content_length
        if declared is not None and declared > limit:
            raise BodyTooLarge(f"Request body exceeds the limit of {limit} bytes")
        body = content.read_nowait(-1)
        if len(body) > limit:
            raise BodyTooLarge(f"Request body exceeds the limit of {limit} bytes")
        return body
    try:
        async with asyncio.timeout(read_timeout):
            return await httputil.read_body(request, limit)
    except web.HTTPRequestEntityTooLarge as e:
        raise BodyTooLarge(f"Request body exceeds the limit of {limit} bytes") from e


def media_type(header: str | None) -> str | None:
    return httputil.media_type(header)


def pick_response_type(accept: str | None, content_type: str) -> str | None:
    """The event stream's media type from ``Accept`` (None = nothing acceptable -> 406)."""
    if accept is None or not accept.strip():
        return content_type
    return httputil.negotiate(accept)


class EventStream:
    """One framework's open SUBSCRIBE response: a queue of events written as RecordIO chunks."""

    def __init__(self, stream_id: str, media: str, heartbeat: float, extra_heartbeat: bool, max_queue: int) -> None:
        self.stream_id = stream_id
        self.media = media
        self.heartbeat = heartbeat
        self.extra_heartbeat = extra_heartbeat
        self.max_queue = max_queue
        self.queue: deque[mesos.Event] = deque()
        self.wake = asyncio.Event()
        self.closed = False
        self.transport: asyncio.Transport | None = None
        self.close_reason = ""
        self.sent = 0
        self.encode_errors = 0

    def push(self, event: mesos.Event) -> None:
        if self.closed:
            return
        if len(self.queue) >= self.max_queue:
            # the framework does not read its stream: drop it (a blocked write is aborted too)
            self.close("event queue overflow (framework not reading its stream)")
            if self.transport is not None:
                self.transport.abort()
            return
        if not self.queue:  # (a queue with events in it has woken the writer already)
            self.wake.set()
        self.queue.append(event)

    def close(self, reason: str = "") -> None:
        if not self.closed:
            self.closed = True
            self.close_reason = reason
            self.wake.set()

    def _record(self, event: mesos.Event) -> bytes:
        """The event's RecordIO record; empty for an event that cannot be encoded (that event's
        error, logged once: the stream and the events behind it go on)."""
        try:
            return recordio.encode(codec.encode(event, self.media))
        except codec.EncodeError as e:
            self.encode_errors += 1
            log.error("stream %s: dropping a %s event that cannot be encoded: %s", self.stream_id, event.type, e)
            return b""

    async def run(self, out: httputil.RecordChunks, request: web.Request) -> None:
        self.transport = request.transport
        hb = self._record(mesos.Event.make_heartbeat())
        loop = asyncio.get_running_loop()
        next_hb = loop.time() + self.heartbeat
        while True:
            while self.queue:
                batch: list[bytes] = []
                burst = False
                while self.queue:
                    ev = self.queue.popleft()
                    burst = burst or ev.type is not mesos.EventType.HEARTBEAT
                    record = self._record(ev)
                    if record:
                        batch.append(record)
                if burst and self.extra_heartbeat:
                    batch.append(hb)
                    next_hb = loop.time() + self.heartbeat
                # one record per HTTP chunk, as Mesos writes (a client reading one record per
                # chunk keeps up); the burst's chunks leave in one write
                if batch:
                    self.sent += len(batch)
                    await out.write(batch)
            if self.closed:
                return
            transport = request.transport
            if transport is None or transport.is_closing():
                return
            self.wake.clear()
            delay = max(0.0, next_hb - loop.time())
            try:
                async with asyncio.timeout(min(delay, 1.0)):
                    await self.wake.wait()
            except TimeoutError:
                pass
            if loop.time() >= next_hb and not self.closed:
                await out.write((hb,))
                next_hb = loop.time() + self.heartbeat


class SchedulerApi:
    def __init__(self, service: SchedulerEdgePort) -> None:
        self.svc = service
        self.streams: dict[str, EventStream] = {}

    def routes(self) -> list[web.RouteDef]:
        return [
            web.route("*", "/api/v1/scheduler", self.scheduler),
            web.get("/version", self.version),
            web.get("/health", self.health),
            web.get("/master/health", self.health),
            web.get("/redirect", self.redirect),
            web.get("/master/redirect", self.redirect),
        ]

    # --- simple endpoints -------------------------------------------------------------------------

    async def version(self, request: web.Request) -> web.Response:
        return web.json_response(
            {
                "version": VERSION,
                "agora_version": "0.1.0",
                "build_date": "",
                "build_time": 0.0,
                "build_user": "",
                "git_sha": "",
                "git_branch": "",
                "git_tag": "",
            }
        )

    async def health(self, request: web.Request) -> web.Response:
        return web.Response(status=200)

    async def redirect(self, request: web.Request) -> web.Response:
        return web.Response(status=307, headers={"Location": f"//{self.svc.advertised_host}:{self.svc.port}"})

    # --- the scheduler endpoint -------------------------------------------------------------------

    async def scheduler(self, request: web.Request) -> web.StreamResponse:
        svc = self.svc
        if not svc.ready:
            return text(503, "Master is recovering")
        if request.method != "POST":
            return text(405, f"Expecting 'POST', received '{request.method}'", Allow="POST")
        ctype = media_type(request.headers.get("Content-Type"))
        if ctype is None:
            return text(400, "Expecting 'Content-Type' to be present")
        if ctype == PROTOBUF:
            return text(415, "Unsupported media type 'application/x-protobuf' (use application/json or application/x-msgpack)")
        if ctype not in (codec.JSON, codec.MSGPACK):
            return text(415, f"Unsupported media type '{ctype}'")
        try:
            body = await read_body(request, svc.config.max_body_bytes, svc.config.read_timeout)
        except BodyTooLarge as e:
            svc.metrics_inc("invalid_messages_total")
            return text(413, str(e), Connection="close")
        except TimeoutError:
            return text(408, "Timed out reading the request body", Connection="close")
        call, err = self._decode_call(body, ctype)
        if call is None:
            svc.metrics_inc("invalid_messages_total")
            return text(400, err)
        problem = mesos.validate_call(call)
        if problem is not None:
            svc.metrics_inc("invalid_messages_total")
            return text(400, f"Failed to validate scheduler::Call: {problem}")
        refused = unsupported(call)  # said, never accepted and ignored (master/unsupported.py)
        if refused is not None:
            svc.metrics_inc("invalid_messages_total")
            return text(400, refused)
        if call.type is mesos.CallType.SUBSCRIBE:
            return await self._subscribe(request, call, ctype)
        return await self._other(request, call)

    @staticmethod
    def _decode_call(body: bytes, ctype: str) -> tuple[mesos.Call | None, str]:
        return httputil.decode_body(mesos.Call, body, ctype, "Call")

    async def _subscribe(self, request: web.Request, call: mesos.Call, ctype: str) -> web.StreamResponse:
        svc = self.svc
        out_type = pick_response_type(request.headers.get("Accept"), ctype)
        if out_type is None:
            return text(406, "Expecting 'Accept' to allow 'application/json' or 'application/x-msgpack'")
        if STREAM_HEADER in request.headers:
            return text(400, "Subscribe calls should not include the 'Mesos-Stream-Id' header")
        assert call.subscribe is not None
        principal = call.subscribe.framework_info.principal or "anonymous"
        if not svc.rate_ok(principal):
            return text(429, "Too many requests for principal; slow down")
        cfg = svc.config
        stream_id = new_stream_id()
        stream = EventStream(stream_id, out_type, cfg.heartbeat_interval, cfg.extra_heartbeat_after_burst, cfg.max_framework_queue)
        self.streams[stream_id] = stream
        info = call.subscribe.framework_info
        log.info("SUBSCRIBE from %r (framework id %s, stream %s)", info.name, info.id.value if info.id else None, stream_id)
        resp = web.StreamResponse(status=200, headers={STREAM_HEADER: stream_id, "Content-Type": out_type})
        out: httputil.RecordChunks | None = None
        try:
            out = await httputil.RecordChunks.open(resp, request)
            await svc.dispatch(
                SubscribeReceived(
                    stream_id=stream_id, subscribe=call.subscribe, principal=principal, authenticated=principal_of(request)
                )
            )
            await stream.run(out, request)
        except (ConnectionError, asyncio.CancelledError) as e:
            if isinstance(e, asyncio.CancelledError) and not svc.running:
                raise
        finally:
            self.streams.pop(stream_id, None)
            if svc.running:
                await svc.dispatch(StreamClosed(stream_id=stream_id))
        if out is not None:
            await out.close()
        return resp

    async def _other(self, request: web.Request, call: mesos.Call) -> web.StreamResponse:
        svc = self.svc
        assert call.framework_id is not None
        fid = call.framework_id.value
        fw = svc.state.frameworks.get(fid)
        if fw is None:
            return text(400, "Framework cannot be found")
        if svc.auth.frameworks and principal_of(request) != fw.principal:
            # S17: only the framework's own principal may call for it
            return text(403, f"Authenticated principal '{principal_of(request)}' is not the framework's principal")
        sid = request.headers.get(STREAM_HEADER)
        if sid is not None and sid == fw.last_stream_id:
            # a call from the stream that just ended (closed by the master, or replaced by a
            # re-subscription): clients like pymesos die on any non-2xx, so accept it; the core
            # ignores it (an ACKNOWLEDGE is still forwarded while no new stream exists)
            await svc.dispatch(CallReceived(framework_id=fid, stream_id=sid, call=call))
            return web.Response(status=202)
        if not fw.connected:
            return text(403, "Framework is not subscribed")
        if sid is None:
            return text(400, f"All non-subscribe calls should include the '{STREAM_HEADER}' header")
        if sid != fw.stream_id:
            return text(
                400,
                f"The stream ID '{sid}' included in this request didn't match the stream ID currently associated"
                f" with framework ID {fid}",
            )
        if not svc.rate_ok(fw.principal or fid, call_cost(call)):
            return text(429, "Too many requests for principal; slow down")
        assert call.type is not None
        if call.type is mesos.CallType.UPDATE_FRAMEWORK:
            assert call.update_framework is not None
            bad = svc.state.update_framework_problem(
                fw, call.update_framework.framework_info, call.update_framework.offer_constraints)
            if bad is not None:
                return text(400, f"Failed to validate scheduler::Call: {bad}")
        log.log(logging.INFO if call.type is mesos.CallType.TEARDOWN else logging.DEBUG,
                "scheduler call %s from framework %s", call.type.value, fid)
        await svc.dispatch(CallReceived(framework_id=fid, stream_id=sid, call=call))
        return web.Response(status=202)

    # --- effects from the core --------------------------------------------------------------------

    def send(self, stream_id: str, event: mesos.Event) -> None:
        s = self.streams.get(stream_id)
        if s is not None:
            s.push(event)

    def close(self, stream_id: str, reason: str) -> None:
        s = self.streams.get(stream_id)
        if s is not None:
            s.close(reason)

    def close_all(self) -> None:
        for s in list(self.streams.values()):
            s.close("master stopping")

