"""The operator event stream: ``SUBSCRIBE`` on ``POST /api/v1`` (Mesos' v1 operator API).

The answer is ``200`` with a chunked RecordIO stream of ``master.Event``s
(``mesos.OperatorEvent``) in the call's media type (JSON or msgpack, from ``Accept`` as the
other operator calls), one record per HTTP chunk as Mesos writes it: first ``SUBSCRIBED`` with the whole ``GET_STATE`` and
``heartbeat_interval_seconds``, then the changes the core publishes (``PublishOperatorEvent``:
TASK_ADDED, TASK_UPDATED, AGENT_ADDED, AGENT_REMOVED, FRAMEWORK_ADDED/UPDATED/REMOVED) and a
HEARTBEAT every ``heartbeat_interval``.

Consistency: the ``SUBSCRIBED`` snapshot is built at the core's ``operator_seq`` N (no await
between the two); the stream then gets exactly the events numbered above N, so an event whose
change is already in the snapshot is never repeated and none made after it is missed.

A slow reader never slows the master: ``publish`` only appends to each stream's queue (each event
encoded once per media type); a stream more than ``max_queue`` records behind is closed and its
connection aborted (like a scheduler stream past ``max_framework_queue``), counted in
``dropped``.

Read ACLs (``view_frameworks``, ``view_tasks``; ``protocol/acls.py``), as Mesos filters its
subscribers: the snapshot is the GET_STATE the subscriber's principal may see, and a
``TASK_*`` / ``FRAMEWORK_*`` event reaches a stream only if its principal may view that task's
or framework's user (decided with the ACLs in force when the event is published).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from aiohttp import web

from master.auth import principal_of, task_owner, visible_response
from master.events import OperatorStreamClosed, OperatorStreamOpened, PublishOperatorEvent
from protocol import codec, httputil, mesos, recordio
from protocol.acls import Action, may_read
from protocol.ids import new_stream_id

if TYPE_CHECKING:
    from master.ports import OperatorPort

log = logging.getLogger(__name__)


class RecordSink(Protocol):
    """Where a stream's records go (``protocol.httputil.RecordChunks``: one HTTP chunk each)."""

    async def write(self, records: Sequence[bytes]) -> None: ...


class OperatorSubscriber:
    """One open operator stream: a bounded queue of encoded records and its writer."""

    def __init__(
        self, stream_id: str, media: str, after_seq: int, max_queue: int, principal: str | None = None
    ) -> None:
        self.stream_id = stream_id
        self.principal = principal  # whose read ACLs decide what the stream shows
        self.media = media
        self.after_seq = after_seq  # the snapshot's seq: events up to it are in the snapshot
        self.max_queue = max_queue
        self.queue: deque[bytes] = deque()
        self.wake = asyncio.Event()
        self.closed = False
        self.close_reason = ""
        self.transport: asyncio.Transport | None = None
        self.sent = 0

    def push(self, record: bytes) -> bool:
        """Queue one record; False (and the stream closed, its connection aborted) if the reader
        is ``max_queue`` records behind."""
        if self.closed:
            return False
        if len(self.queue) >= self.max_queue:
            self.close("event queue overflow (operator not reading its stream)")
            if self.transport is not None:
                self.transport.abort()
            return False
        self.queue.append(record)
        self.wake.set()
        return True

    def close(self, reason: str = "") -> None:
        if not self.closed:
            self.closed = True
            self.close_reason = reason
            self.wake.set()

    async def run(self, out: RecordSink, heartbeat: float, heartbeat_record: bytes) -> None:
        """Write the queue out (one record per HTTP chunk, a burst in one write) and a HEARTBEAT
        when nothing else went for ``heartbeat`` seconds, until closed or the connection goes."""
        loop = asyncio.get_running_loop()
        next_hb = loop.time() + heartbeat
        while True:
            if self.queue:
                batch = list(self.queue)
                self.sent += len(batch)
                self.queue.clear()
                await out.write(batch)
                next_hb = loop.time() + heartbeat
                continue
            if self.closed or self.transport is None or self.transport.is_closing():
                return
            self.wake.clear()
            with contextlib.suppress(TimeoutError):
                # (at most 1 s: a reader that went away is noticed by ``is_closing`` above)
                async with asyncio.timeout(min(max(0.0, next_hb - loop.time()), 1.0)):
                    await self.wake.wait()
            if loop.time() >= next_hb and not self.closed:
                await out.write((heartbeat_record,))
                self.sent += 1
                next_hb = loop.time() + heartbeat


class OperatorStreams:
    """The master's open operator streams: the ``SUBSCRIBE`` handler and the fan-out of the
    core's ``PublishOperatorEvent`` effects."""

    def __init__(self, service: OperatorPort) -> None:
        self.svc = service
        self.subscribers: dict[str, OperatorSubscriber] = {}
        self.max_queue = service.config.max_framework_queue
        self.dropped = 0  # streams closed because their reader fell behind
        self.published = 0

    def publish(self, effect: PublishOperatorEvent) -> None:
        """Hand one event to every stream whose snapshot predates it (never blocks)."""
        if not self.subscribers:
            return
        self.published += 1
        encoded: dict[str, bytes] = {}
        viewer = self._viewer(effect.event)
        for sub in list(self.subscribers.values()):
            if effect.seq <= sub.after_seq:
                continue
            if viewer is not None and not may_read(self.svc.auth.acls, viewer[0], sub.principal, viewer[1]):
                continue
            record = encoded.get(sub.media)
            if record is None:
                try:
                    record = encoded[sub.media] = recordio.encode(codec.encode(effect.event, sub.media))
                except codec.EncodeError as e:  # that event's error, logged once; the streams go on
                    log.error("operator streams (%s): dropping a %s event that cannot be encoded: %s",
                              sub.media, effect.event.type, e)
                    record = encoded[sub.media] = b""
            if not record:
                continue
            if not sub.push(record) and self.subscribers.pop(sub.stream_id, None) is not None:
                self.dropped += 1
                log.warning("operator stream %s dropped: %s", sub.stream_id, sub.close_reason)

    def _viewer(self, ev: mesos.OperatorEvent) -> tuple[Action, str | None] | None:
        """The read ACL an event is under and its object (the task's or framework's user), or
        None when every stream gets it (agents, heartbeats; no view rules in the ACLs)."""
        acls = self.svc.auth.acls
        if not (acls.enforces(Action.VIEW_FRAMEWORKS) or acls.enforces(Action.VIEW_TASKS)):
            return None
        if ev.task_added is not None:
            t = ev.task_added.task
            return Action.VIEW_TASKS, t.user or task_owner(self.svc, t.framework_id.value, t.task_id.value)
        if ev.task_updated is not None:
            u = ev.task_updated
            return Action.VIEW_TASKS, task_owner(self.svc, u.framework_id.value, u.status.task_id.value)
        for added in (ev.framework_added, ev.framework_updated):
            if added is not None:
                return Action.VIEW_FRAMEWORKS, added.framework.framework_info.user or None
        if ev.framework_removed is not None:
            return Action.VIEW_FRAMEWORKS, ev.framework_removed.framework_info.user or None
        return None

    def close_all(self) -> None:
        for sub in list(self.subscribers.values()):
            sub.close("master stopping")

    def snapshot(self) -> mesos.GetState:
        api = self.svc.operator_api
        return mesos.GetState(
            get_tasks=api._get_tasks(),
            get_executors=api._get_executors(),
            get_frameworks=api._get_frameworks(),
            get_agents=api._get_agents(),
        )

    async def subscribe(self, request: web.Request, media: str) -> web.StreamResponse:
        svc = self.svc
        stream_id = new_stream_id()
        resp = web.StreamResponse(status=200, headers={"Content-Type": media})
        out = await httputil.RecordChunks.open(resp, request)
        heartbeat = svc.config.heartbeat_interval
        opened = False
        try:
            await svc.dispatch(OperatorStreamOpened(stream_id))  # the core publishes from now on
            opened = True
            # the snapshot and its seq together, no await between them; as the principal may see it
            state = self.snapshot()
            shown = visible_response(svc, request, mesos.OperatorResponse(type=mesos.OperatorResponseType.GET_STATE, get_state=state))
            state = shown.get_state or state
            sub = OperatorSubscriber(stream_id, media, svc.state.operator_seq, self.max_queue, principal_of(request))
            sub.transport = request.transport
            sub.queue.append(recordio.encode(codec.encode(mesos.OperatorEvent.make_subscribed(state, heartbeat), media)))
            self.subscribers[stream_id] = sub
            log.info("operator SUBSCRIBE (stream %s, %s)", stream_id, media)
            hb = recordio.encode(codec.encode(mesos.OperatorEvent.make_heartbeat(), media))
            await sub.run(out, heartbeat, hb)
        except (ConnectionError, asyncio.CancelledError) as e:
            if isinstance(e, asyncio.CancelledError) and not svc.running:
                raise
        finally:
            self.subscribers.pop(stream_id, None)
            if opened and svc.running:
                await svc.dispatch(OperatorStreamClosed(stream_id))
        await out.close()
        return resp
