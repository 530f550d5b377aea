"""The batch service's job events: a stream for ``GET /api/v1/events`` and webhook notifications.

``EventBus`` numbers every ``JobEvent`` (submitted, started, finished, preempted, requeued, held,
released, updated), keeps the latest ``keep`` of them and hands each to the live subscribers; a
subscriber that asks from a number it still holds gets what it missed first, then the live ones.
A subscriber too slow to take ``queue_size`` events is dropped (its stream ends) rather than
making the service hold events without bound.

``deliver`` POSTs a job's final state to its ``notify`` URL (JSON), retrying a failed attempt
(no answer, or a status other than 2xx) with exponential backoff; the service marks the job
notified once an attempt succeeds, and a restart sends the notifications not yet delivered.
"""

from __future__ import annotations

import asyncio
import collections
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp

from frameworks.batch.effects import JobEvent

log = logging.getLogger(__name__)


def event_dict(seq: int, e: JobEvent, name: str) -> dict[str, Any]:
    return {"seq": seq, "kind": e.kind, "job_id": e.job_id, "name": name, "at": e.at, "state": e.state,
            "detail": e.detail}  # fmt: skip


class EventBus:
    def __init__(self, keep: int = 1000, queue_size: int = 10_000) -> None:
        self.seq = 0
        self.recent: collections.deque[dict[str, Any]] = collections.deque(maxlen=keep)
        self.queue_size = queue_size
        self._subscribers: set[asyncio.Queue[dict[str, Any] | None]] = set()

    def publish(self, e: JobEvent, name: str) -> dict[str, Any]:
        self.seq += 1
        d = event_dict(self.seq, e, name)
        self.recent.append(d)
        for q in list(self._subscribers):
            if q.qsize() >= self.queue_size - 1:
                self._subscribers.discard(q)
                q.put_nowait(None)  # too slow: end its stream
            else:
                q.put_nowait(d)
        return d

    async def follow(self, since: int | None, heartbeat: float = 15.0) -> AsyncIterator[dict[str, Any]]:
        """The events after number ``since`` still held (none when ``since`` is None), then every
        new one as it comes, until the subscriber is dropped; ``{"kind": "heartbeat"}`` after
        ``heartbeat`` seconds without one (so a follower can tell a quiet stream from a dead one)."""
        q: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        self._subscribers.add(q)
        try:
            if since is not None:
                for d in list(self.recent):
                    if d["seq"] > since:
                        yield d
                last = self.seq
            else:
                last = self.seq
            while True:
                try:
                    item = await asyncio.wait_for(q.get(), heartbeat)
                except TimeoutError:
                    yield {"kind": "heartbeat", "seq": self.seq}
                    continue
                if item is None:
                    return
                if item["seq"] > last:
                    yield item
        finally:
            self._subscribers.discard(q)

    def close(self) -> None:
        for q in list(self._subscribers):
            q.put_nowait(None)
        self._subscribers.clear()


async def deliver(
    http: aiohttp.ClientSession,
    url: str,
    body: dict[str, Any],
    *,
    attempts: int = 8,
    base_delay: float = 1.0,
    max_delay: float = 60.0,
    sleep: Callable[[float], Any] = asyncio.sleep,
) -> bool:
    """POST ``body`` to ``url`` until it is answered 2xx: up to ``attempts`` tries, waiting
    ``base_delay`` * 2^k (at most ``max_delay``) between them. True once delivered."""
    for k in range(attempts):
        try:
            async with http.post(url, json=body, timeout=aiohttp.ClientTimeout(total=10)) as resp:
                if 200 <= resp.status < 300:
                    return True
                log.info("batch: notification to %s answered HTTP %d (try %d of %d)", url, resp.status, k + 1, attempts)
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            log.info("batch: notification to %s failed: %s (try %d of %d)", url, exc, k + 1, attempts)
        if k + 1 < attempts:
            await sleep(min(max_delay, base_delay * 2**k))
    log.warning("batch: notification to %s given up after %d tries", url, attempts)
    return False
