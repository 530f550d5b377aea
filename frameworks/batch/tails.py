"""Keeping the ends of finished attempts' output, batched per agent (shell).

An attempt that ran and ended leaves the last ``log_tail`` bytes of its ``stdout`` and
``stderr`` in the batch service's store (``agora job logs`` reads them once the agent has removed
the sandbox). Asking each agent once per attempt (a listing, then reads) made that the batch
service's largest cost at hundreds of tasks a second, and the agents' too; here the ends of one
tick are gathered per agent and fetched with one ``GET /files/tails`` (``agent/files.py``) for up
to ``MAX_TAILS`` attempts. An agent that does not serve it (an older agent: 404; ACLs that allow
only per-sandbox reads: 403) is asked per attempt as before (``fetch_tails``: a listing, then
reads, called by ``BatchService._copy_tail``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from typing import Any

import aiohttp
import attrs

from frameworks.batch.logtail import KeptTail, kept, window_start

log = logging.getLogger(__name__)

MAX_TAILS = 256  # attempts per request (the agent's limit, ``agent.files.MAX_TAILS``)


@attrs.frozen
class TailPorts:
    """What the keeper needs of the batch service."""

    log_tail: Callable[[], int]  # bytes kept of each stream
    agent_url: Callable[[str], str | None]
    framework: Callable[[], str | None]  # the framework id, once registered
    http: Callable[[], tuple[aiohttp.ClientSession, Mapping[str, str]] | None]  # session, headers
    save: Callable[[int, str, Mapping[str, KeptTail]], Awaitable[None]]  # into the store
    spawn: Callable[[Coroutine[Any, Any, None], str], object]
    one_by_one: Callable[[int, str, str], Coroutine[Any, Any, None]]  # the per-attempt copy


class TailKeeper:
    def __init__(self, ports: TailPorts, slots: asyncio.Semaphore, delay: float = 0.02) -> None:
        self.ports = ports
        self.slots = slots  # copies at a time, shared with the per-attempt path
        self.delay = delay  # how long the first end waits for the others of its tick
        self._pending: dict[str, dict[str, int]] = {}  # agent id -> {task id: job id}
        self._flushing: set[str] = set()
        self._unbatched: set[str] = set()  # agents that answered 404/403: asked per attempt
        self.requests = 0  # /files/tails requests made

    def add(self, job_id: int, task_id: str, agent_id: str) -> None:
        """An attempt on ``agent_id`` ended (``RuntimeError`` while the service stops)."""
        if agent_id in self._unbatched:
            self.ports.spawn(self.ports.one_by_one(job_id, task_id, agent_id), f"batch-tail-{task_id}")
            return
        if agent_id not in self._flushing:
            self.ports.spawn(self._flush(agent_id), f"batch-tails-{agent_id}")
            self._flushing.add(agent_id)
        self._pending.setdefault(agent_id, {})[task_id] = job_id

    async def _flush(self, agent_id: str) -> None:
        try:
            await asyncio.sleep(self.delay)
            while pending := self._pending.pop(agent_id, None):
                items = list(pending.items())
                for i in range(0, len(items), MAX_TAILS):
                    await self._copy(agent_id, dict(items[i:i + MAX_TAILS]))
        finally:
            self._flushing.discard(agent_id)

    async def _copy(self, agent_id: str, attempts: dict[str, int]) -> None:
        ports = self.ports
        keep = ports.log_tail()
        agent, fid, http = ports.agent_url(agent_id), ports.framework(), ports.http()
        if agent is None or fid is None or http is None:
            log.warning("batch: cannot keep the output of %d attempts: their agent %s is not known here",
                        len(attempts), agent_id)
            return
        session, headers = http
        params = [("path", fid), *(("task", t) for t in attempts), ("length", str(keep))]
        async with self.slots:
            try:
                self.requests += 1
                async with session.get(f"{agent}/files/tails", params=params, headers=headers) as resp:
                    if resp.status in (403, 404):
                        body = None
                    elif resp.status != 200:
                        raise ValueError(f"HTTP {resp.status}: {(await resp.text())[:200]}")
                    else:
                        body = await resp.json()
                if body is not None:
                    for task_id, streams in body.items():
                        job_id = attempts.get(task_id)
                        if job_id is None:
                            continue
                        tails = {s: _tail(v, keep) for s, v in streams.items() if s in ("stdout", "stderr")}
                        tails = {s: t for s, t in tails.items() if t.data}
                        if tails:
                            await ports.save(job_id, task_id, tails)
                    return
            except (aiohttp.ClientError, TimeoutError, ValueError, KeyError, TypeError, AttributeError) as exc:
                log.warning("batch: cannot keep the output of %d attempts from agent %s: %s", len(attempts), agent_id, exc)
                return
        self._unbatched.add(agent_id)  # this agent reads sandboxes one at a time only
        for task_id, job_id in attempts.items():
            await ports.one_by_one(job_id, task_id, agent_id)


def _tail(v: Mapping[str, Any], keep: int) -> KeptTail:
    start, data = int(v["offset"]), str(v["data"]).encode("utf-8")
    if len(data) > keep:
        start, data = start + len(data) - keep, data[-keep:]
    return kept(start, data)


async def fetch_tails(http: aiohttp.ClientSession, headers: dict[str, str], agent: str, box: str,
                      keep: int) -> dict[str, KeptTail] | None:
    """The last ``keep`` bytes of each non-empty stream (stdout, stderr) of the sandbox ``box``
    on ``agent`` (None: no such sandbox). Raises ``aiohttp.ClientError``, ``TimeoutError``,
    ``ValueError`` (an agent's error answer), ``KeyError``/``TypeError`` (a malformed one)."""
    # one listing tells which streams hold anything (a task that printed nothing costs one
    # request); a rotated stream has stdout.1 ... beside stdout
    async with http.get(f"{agent}/files/browse", params={"path": box}, headers=headers) as resp:
        if resp.status == 404:
            return None  # no sandbox: nothing to keep
        if resp.status != 200:
            raise ValueError(f"HTTP {resp.status}: {(await resp.text())[:200]}")
        listing = await resp.json()
    names = {str(e["path"]).rsplit("/", 1)[-1] for e in listing if int(e.get("size", 0)) > 0}
    tails: dict[str, KeptTail] = {}
    for stream in ("stdout", "stderr"):
        if any(n == stream or n.startswith(stream + ".") for n in names):
            tail = await read_tail(http, headers, agent, f"{box}/{stream}", keep)
            if tail is not None and tail.data:
                tails[stream] = tail
    return tails


async def read_tail(http: aiohttp.ClientSession, headers: dict[str, str], agent: str, path: str,
                    keep: int) -> KeptTail | None:
    """The last ``keep`` bytes of ``path`` in the agent's sandboxes (None: no such file)."""

    async def read(offset: int, length: int) -> tuple[int, bytes] | None:
        params = {"path": path, "offset": str(offset), "length": str(length)}
        async with http.get(f"{agent}/files/read", params=params, headers=headers) as resp:
            if resp.status == 404:
                return None
            if resp.status != 200:
                raise ValueError(f"HTTP {resp.status}: {(await resp.text())[:200]}")
            d = await resp.json()
        return int(d["offset"]), str(d["data"]).encode("utf-8")

    end = await read(-1, 0)
    if end is None:
        return None
    size = end[0]
    start = at = window_start(size, keep)
    data = b""
    while at < size:
        got = await read(at, size - at)
        if got is None or not got[1]:
            break
        if got[0] > at and not data:  # rotated past the window's start: the tail starts later
            start = got[0]
        data += got[1]
        at = got[0] + len(got[1])
    return kept(start, data[-keep:] if len(data) > keep else data)
