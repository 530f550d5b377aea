"""Membership invariants under any sequence of joins, leaves, heartbeats and expiries: ranks are
0..n-1 in join order, the generation grows by exactly one per change, and a member silent for
longer than the timeout never survives an expiry."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from frameworks.elastic.membership import Membership

OPS = st.lists(
    st.tuples(
        st.sampled_from(["join", "leave", "beat", "expire", "move"]), st.integers(0, 4), st.integers(0, 3)
    ),
    max_size=60,
)


@settings(max_examples=100, deadline=None)
@given(ops=OPS)
def test_membership_invariants(ops: list[tuple[str, int, int]]) -> None:
    mb = Membership(heartbeat_timeout=2.0)
    now = 0.0
    last_seen: dict[str, float] = {}
    order: list[str] = []
    for op, w, dt in ops:
        now += dt
        wid = f"w{w}"
        before = mb.generation.number
        change = None
        if op == "join":
            _, change = mb.join(wid, "addr", now)
            if wid not in order:
                order.append(wid)
            last_seen[wid] = now
        elif op == "move" and mb.is_member(wid):
            _, change = mb.join(wid, f"addr-{now}", now)
            last_seen[wid] = now
        elif op == "leave":
            change = mb.leave(wid, now)
            if wid in order:
                order.remove(wid)
        elif op == "beat" and mb.is_member(wid):
            mb.heartbeat(wid, now)
            last_seen[wid] = now
        elif op == "expire":
            change = mb.expire(now)
            for x in list(order):
                if now - last_seen[x] > 2.0:
                    order.remove(x)
        after = mb.generation.number
        assert after == before + (1 if change is not None else 0)
        assert [p.worker_id for p in mb.generation.peers] == order
        assert [p.rank for p in mb.generation.peers] == list(range(len(order)))
        for x in order:
            a = mb.assignment(x)
            assert a.generation == after and a.world_size == len(order)
