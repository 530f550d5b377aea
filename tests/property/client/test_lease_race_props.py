"""A reusable lease under racing ACCEPTs and regrowths: the framework's cache never lets it send
an ACCEPT the master would have to refuse, and it converges on the master's value.

Model: one lease of integer cpus. The framework ACCEPTs from its cache (calls go to the master in
order); the master applies each ACCEPT (the lease shrinks, it sends the remainder) and, when a
task ends, grows the lease back (it sends the new value); events reach the framework in order but
interleave arbitrarily with the calls."""

from __future__ import annotations

from collections import deque

from hypothesis import given, settings
from hypothesis import strategies as st

from frameworks.client.offers import OfferCache
from protocol.resources import Resources

steps = st.lists(st.tuples(st.sampled_from(["accept", "apply", "end", "deliver"]), st.integers(1, 3)), max_size=60)


@settings(max_examples=150, deadline=None)
@given(st.integers(min_value=1, max_value=6), st.integers(min_value=0, max_value=3), steps)
def test_no_overclaim_across_regrowth_races(start: int, old_tasks: int, seq: list[tuple[str, int]]) -> None:
    lease = start
    running = [1] * old_tasks  # tasks launched earlier from this lease
    calls: deque[int] = deque()
    stream: deque[int] = deque()
    cache = OfferCache(reusable=True, inflight_ttl=1e9)
    cache.put("o", "a", "h", Resources.of(cpus=start), now=0)
    now = 0.0
    for op, n in seq:
        now += 0.001
        if op == "accept":
            free = int(cache.get("o").available.scalar("cpus"))
            if free >= 1:
                d = min(n, free)
                cache.commit([cache.take("o", Resources.of(cpus=d))], now)
                calls.append(d)
        elif op == "apply" and calls:
            d = calls.popleft()
            assert lease >= d, "the framework over-claimed the lease"
            lease -= d
            running.append(d)
            stream.append(lease)
        elif op == "end" and running:
            lease += running.pop(n % len(running))
            stream.append(lease)
        elif op == "deliver" and stream:
            cache.put("o", "a", "h", Resources.of(cpus=stream.popleft()), now=now)
    while calls:
        d = calls.popleft()
        assert lease >= d
        lease -= d
        stream.append(lease)
    while stream:
        now += 0.001
        cache.put("o", "a", "h", Resources.of(cpus=stream.popleft()), now=now)
    assert cache.get("o").available == Resources.of(cpus=lease)
