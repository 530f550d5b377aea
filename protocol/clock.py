"""An injectable clock: the system one for services, a fake one that tests drive.

Cores never read time; shells ask a ``Clock`` and pass ``now`` in. ``FakeClock.sleep`` lets an
async shell under test wait for virtual time that the test advances explicitly.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from typing import Protocol


class Clock(Protocol):
    def now(self) -> float:
        """Seconds since the epoch (wall clock, used for deadlines and timestamps)."""
        ...

    async def sleep(self, seconds: float) -> None: ...


class SystemClock:
    def now(self) -> float:
        return time.time()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))


class FakeClock:
    """Virtual time. ``advance`` wakes every sleeper whose deadline has passed, in order."""

    def __init__(self, start: float = 1_000_000.0) -> None:
        self._now = start
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._seq = itertools.count()
        self._sleeper_added: asyncio.Event | None = None

    def now(self) -> float:
        return self._now

    def set(self, t: float) -> None:
        if t < self._now:
            raise ValueError("FakeClock cannot go backwards")
        self._now = t
        self._wake()

    def advance(self, dt: float) -> None:
        if dt < 0:
            raise ValueError("FakeClock cannot go backwards")
        self.set(self._now + dt)

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self._now + seconds, next(self._seq), fut))
        if self._sleeper_added is not None:
            self._sleeper_added.set()
        await fut

    async def wait_for_sleepers(self, count: int, within: float = 10.0) -> None:
        """Wait (in real time, bounded) until ``count`` tasks are asleep on this clock, so a test
        can advance time knowing the code under test has reached its timer."""

        async def _wait() -> None:
            while self.sleepers < count:
                self._sleeper_added = asyncio.Event()
                await self._sleeper_added.wait()

        await asyncio.wait_for(_wait(), within)

    @property
    def sleepers(self) -> int:
        return sum(1 for _, _, f in self._sleepers if not f.done())

    def next_deadline(self) -> float | None:
        pending = [d for d, _, f in self._sleepers if not f.done()]
        return min(pending) if pending else None

    def _wake(self) -> None:
        while self._sleepers and self._sleepers[0][0] <= self._now:
            _, _, fut = heapq.heappop(self._sleepers)
            if not fut.done():
                fut.set_result(None)
