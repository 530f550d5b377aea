"""Agents whose pings fall due close together are pinged by one housekeeping pass (one scan of
all agents), not one pass each; no agent is pinged later than its ping interval."""

from __future__ import annotations

from master.events import SendToAgent, Tick
from master.state import PING_BATCH
from master.testing import Harness, to_agent
from protocol import agent_channel as ac


def test_pings_due_close_together_share_a_pass() -> None:
    h = Harness(ping_interval=5.0, ping_timeout=15.0)
    conns = []
    for i in range(5):
        _, conn = h.agent("cpus:1;mem:128", hostname=f"h{i}")
        conns.append(conn)
        h.advance(0.05)  # registrations spread over 0.25 s (< PING_BATCH * 5 s)
    start = h.now
    passes = 0
    pinged: dict[int, float] = {}
    end = start + 5.0
    while True:
        d = h.state.next_deadline()
        if d is None or d > end:
            break
        h.now = max(h.now, d)
        due = h.state.housekeeping_due(h.now)
        fx = h.feed(Tick())
        pings = [e for e in fx if isinstance(e, SendToAgent) and isinstance(e.body, ac.Ping)]
        if due and pings:
            passes += 1
            for e in pings:
                pinged.setdefault(e.conn_id, h.now)
    assert set(pinged) == set(conns)
    assert passes == 1
    # pinged early by at most PING_BATCH of an interval, never late
    assert all(start - 0.25 + 5.0 - PING_BATCH * 5.0 - 1e-9 <= t <= start + 5.0 for t in pinged.values())
    assert to_agent(h.effects, ac.Ping)
