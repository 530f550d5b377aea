"""Capped exponential backoff with jitter (for reconnects and resends)."""

from __future__ import annotations

import random


class Backoff:
    """``next()`` returns the next delay: ``initial * factor**n`` capped at ``maximum``, then
    jittered down by up to ``jitter`` (a fraction), so many clients don't retry in lockstep."""

    def __init__(
        self,
        initial: float = 0.1,
        maximum: float = 10.0,
        factor: float = 2.0,
        jitter: float = 0.5,
        rng: random.Random | None = None,
    ) -> None:
        if initial <= 0 or maximum < initial or factor < 1 or not 0 <= jitter <= 1:
            raise ValueError("backoff needs 0 < initial <= maximum, factor >= 1, 0 <= jitter <= 1")
        self.initial = initial
        self.maximum = maximum
        self.factor = factor
        self.jitter = jitter
        self._rng = rng or random.Random()
        self._attempt = 0

    @property
    def attempt(self) -> int:
        return self._attempt

    def peek(self) -> float:
        """The un-jittered delay the next call would be based on."""
        return min(self.maximum, self.initial * self.factor**self._attempt)

    def next(self) -> float:
        base = self.peek()
        self._attempt += 1
        return base * (1.0 - self.jitter * self._rng.random())

    def reset(self) -> None:
        self._attempt = 0
