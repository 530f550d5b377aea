"""The agent's one effect runner (shell): every effect of the two pure cores (``tasks.py``,
``status_updates.py``) and of the shell's own disk writes goes through this ordered queue.

Consecutive disk effects (checkpoint writes, spawns) are pulled forward and run together as one
batch (``agent/journal.py``), in the checkpoint thread when the batch spawns, creates a file or
fsyncs, inline otherwise; every other effect goes, in queue order, to the one handler registered
for its type (``EffectRunner.on``). Because every disk effect queued before a loop effect is
flushed first, an update is written before it is sent.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import logging
from collections.abc import Callable, Coroutine, Iterable
from typing import Any, Generic, TypeVar

import attrs

from agent import status_updates as su
from agent import tasks as tk
from agent.checkpoint import PidRecord

log = logging.getLogger(__name__)

E = TypeVar("E")
R = TypeVar("R")


# --- the shell's own disk effects ----------------------------------------------------------------


@attrs.frozen
class WritePid:
    framework_id: str
    task_id: str
    record: PidRecord


@attrs.frozen
class WriteKill:
    """Record why a task is being killed and when its SIGKILL is due (before the signal)."""

    framework_id: str
    task_id: str
    reason: str
    deadline: float | None = None


@attrs.frozen
class WriteFramework:
    framework_id: str


@attrs.frozen
class Signal:
    """Signal a task (after its kill record was written)."""

    framework_id: str
    task_id: str
    signal: str


DISK = frozenset({
    WriteFramework, WriteKill, tk.CheckpointTask, tk.SpawnTask, su.CheckpointUpdate, su.CheckpointAck, WritePid,
    tk.DropTask,
})


def needs_thread(effects: Iterable[object]) -> bool:
    """Whether a disk batch has slow work (a spawn, a file creation, an fsync) that must not run
    on the event loop. A batch of plain appends (acks, pid and kill records, non-durable updates)
    costs a few tens of microseconds, less than the hop to the checkpoint thread and back."""
    for e in effects:
        if isinstance(e, su.CheckpointUpdate):
            if e.durable:
                return True
        elif isinstance(e, (tk.SpawnTask, tk.CheckpointTask, WriteFramework)):
            return True
    return False


class EffectRunner(Generic[R]):
    """The ordered work queue. ``disk`` runs a batch of disk effects and returns what it spawned,
    each handed to ``spawned`` back on the event loop."""

    def __init__(
        self,
        disk: Callable[[list[object]], list[R]],
        spawned: Callable[[R], None],
        pool: concurrent.futures.ThreadPoolExecutor,
        spawn: Callable[[Coroutine[Any, Any, Any], str], Any],
        idle: Callable[[], None],
    ) -> None:
        self._disk, self._spawned, self._pool, self._spawn, self._idle = disk, spawned, pool, spawn, idle
        self._handlers: dict[type, Callable[[Any], None]] = {}
        self._work: collections.deque[object] = collections.deque()
        self._running = False
        self._done = asyncio.Event()
        self._done.set()

    def on(self, kind: type[E], handler: Callable[[E], None]) -> None:
        """``handler`` runs every effect of type ``kind`` (one handler per type)."""
        assert kind not in self._handlers and kind not in DISK, kind
        self._handlers[kind] = handler

    def submit(self, effects: list[Any]) -> None:
        if not effects:
            return
        self._work.extend(effects)
        if not self._running:
            self._running = True
            self._done.clear()
            self._spawn(self._run(), "agent-work")

    def next(self, *effects: object) -> None:
        """Run ``effects`` before anything else queued (the disk ones first, as always)."""
        self._work.extendleft(reversed(effects))

    async def drain(self) -> None:
        await self._done.wait()

    async def _run(self) -> None:
        try:
            while self._work:
                if type(self._work[0]) in DISK:
                    # Pull every queued disk effect forward (in order) into one batch: writing
                    # a checkpoint earlier than planned is always safe, and each non-disk
                    # effect still finds everything queued before it on disk.
                    batch: list[object] = []
                    rest: list[object] = []
                    for e in self._work:
                        (batch if type(e) in DISK else rest).append(e)
                    self._work.clear()
                    self._work.extend(rest)
                    if needs_thread(batch):
                        results = await asyncio.get_running_loop().run_in_executor(self._pool, self._disk, batch)
                        for r in results:
                            self._spawned(r)
                    else:
                        # No batch is in the thread now (this loop awaits each one), so the
                        # checkpoint's batch state is ours; appends go to the page cache.
                        self._disk(batch)
                    continue
                eff = self._work.popleft()
                handler = self._handlers.get(type(eff))
                if handler is None:
                    log.warning("unhandled effect %r", eff)
                    continue
                try:
                    handler(eff)
                except Exception:
                    log.exception("effect %r failed", eff)
        finally:
            self._running = False
            self._done.set()
            self._idle()
