"""Token buckets: per-principal call rate limits and the agent-removal rate limit.

What a scheduler call costs (``call_cost``): one token, except Agora's ``ACKNOWLEDGE_MANY``,
which costs one token plus one per ``ACKS_PER_TOKEN`` entries beyond the first (a call of 1-100
acknowledgements costs 1, of 101-200 costs 2, ...). The call is one HTTP request, and an
acknowledgement inside it costs the master a small fraction of a request, but a framework must
not get an unbounded number of forwarded acknowledgements per token.
"""

from __future__ import annotations

import attrs

from protocol.mesos import Call, CallType

__pure__ = True

ACKS_PER_TOKEN = 100


def call_cost(call: Call) -> float:
    """Tokens a scheduler call takes from its principal's bucket."""
    if call.type is CallType.ACKNOWLEDGE_MANY and call.acknowledge_many is not None:
        return 1.0 + (len(call.acknowledge_many.acknowledgements) - 1) // ACKS_PER_TOKEN
    return 1.0


@attrs.define
class TokenBucket:
    rate: float  # tokens per second
    capacity: float
    tokens: float = -1.0
    updated: float | None = None

    def __attrs_post_init__(self) -> None:
        if self.tokens < 0:
            self.tokens = self.capacity

    def _refill(self, now: float) -> None:
        if self.updated is not None and now > self.updated:
            self.tokens = min(self.capacity, self.tokens + (now - self.updated) * self.rate)
        if self.updated is None or now > self.updated:
            self.updated = now

    def take(self, now: float, n: float = 1.0) -> bool:
        self._refill(now)
        if self.tokens >= n:
            self.tokens -= n
            return True
        return False

    def available_at(self, n: float = 1.0) -> float:
        """When ``n`` tokens will be there, judged from the last update (no clock needed)."""
        if self.updated is None or self.tokens >= n:
            return float("-inf")
        return self.updated + (n - self.tokens) / self.rate

    def next_available(self, now: float, n: float = 1.0) -> float:
        """When ``n`` tokens will be available (``now`` if already)."""
        self._refill(now)
        if self.tokens >= n:
            return now
        return now + (n - self.tokens) / self.rate


@attrs.define
class RateLimiter:
    """One bucket per key (a principal); buckets idle long enough to be full are dropped."""

    rate: float
    capacity: float
    buckets: dict[str, TokenBucket] = attrs.field(factory=dict)

    def allow(self, key: str, now: float, cost: float = 1.0) -> bool:
        b = self.buckets.get(key)
        if b is None:
            if len(self.buckets) > 10_000:
                self._prune(now)
            b = self.buckets[key] = TokenBucket(self.rate, self.capacity)
        return b.take(now, cost)

    def _prune(self, now: float) -> None:
        full = [k for k, b in self.buckets.items() if b.next_available(now, b.capacity) <= now]
        for k in full:
            del self.buckets[k]
