"""The service lifecycle every Agora process uses: start, stop, async context manager, and one
owned set of background tasks (nothing fire-and-forget).

A subclass implements ``_start`` (bind, connect, ``spawn`` its loops) and ``_stop`` (close what
it opened). ``stop`` is idempotent, cancels every spawned task and waits for them; a spawned task
that dies with an exception is logged and makes ``failed`` hold that exception, so a supervisor
(or a test) can notice instead of the error vanishing.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any, Self

log = logging.getLogger(__name__)


class Service:
    name: str = "service"

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[Any]] = set()
        self._started = False
        self._stopping = False
        self._stopped = asyncio.Event()
        self.failed: BaseException | None = None

    # --- lifecycle ---------------------------------------------------------------------------

    async def start(self) -> None:
        if self._started:
            return
        self._started = True
        try:
            await self._start()
        except BaseException:
            await self.stop()
            raise

    async def stop(self) -> None:
        if self._stopping:
            await self._stopped.wait()
            return
        self._stopping = True
        try:
            tasks = list(self._tasks)
            for t in tasks:
                t.cancel()
            if tasks:
                await asyncio.gather(*tasks, return_exceptions=True)
            await self._stop()
        finally:
            self._stopped.set()

    async def wait_stopped(self) -> None:
        await self._stopped.wait()

    @property
    def running(self) -> bool:
        return self._started and not self._stopping

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # --- tasks -------------------------------------------------------------------------------

    def spawn(self, coro: Coroutine[Any, Any, Any], name: str | None = None) -> asyncio.Task[Any]:
        """Run ``coro`` as a task owned by this service (cancelled and awaited by ``stop``)."""
        if self._stopping:
            coro.close()
            raise RuntimeError(f"{self.name} is stopping; cannot spawn {name or coro!r}")
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)
        return task

    def _task_done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None:
            self.failed = self.failed or exc
            log.error("%s: task %s failed", self.name, task.get_name(), exc_info=exc)

    # --- hooks -------------------------------------------------------------------------------

    async def _start(self) -> None:  # pragma: no cover - trivial default
        pass

    async def _stop(self) -> None:  # pragma: no cover - trivial default
        pass
