"""The books' timers through their own API: ``FrameworkBook.tick`` / ``next_deadline`` (failover
deadlines) and ``AgentBook.tick`` / ``next_deadline`` / ``window_deadline`` (pings, ping
timeouts under the removal rate limit, the re-registration window, unreachable agents removed
for good), with exact effects and deadlines. The cluster around them is built through
``MasterState.handle`` (``Harness``); ``MasterState`` only calls the ticks, frameworks first."""

from __future__ import annotations

from master import registry_ops as ops
from master.events import CloseAgent, Effect, Persist, SendToAgent, StreamClosed
from master.lifecycles import AgentPhase, FrameworkPhase
from master.testing import Harness, framework_info
from protocol import agent_channel as ac
from protocol import codec


def test_a_disconnected_framework_is_removed_at_its_failover_deadline_not_before() -> None:
    h = Harness(ping_interval=1e9, ping_timeout=1e9)
    book, st = h.state.framework_book, h.state
    assert book.next_deadline() is None
    fid, sid = h.subscribe(framework_info("fw", failover_timeout=30.0))
    keep, _ = h.subscribe(framework_info("other", failover_timeout=10.0))  # connected: no deadline
    assert book.next_deadline() is None
    h.feed(StreamClosed(sid))
    assert book.next_deadline() == h.now + 30.0
    fx: list[Effect] = []
    book.tick(h.now + 29.999, fx)
    assert fx == [] and st.frameworks[fid].phase is FrameworkPhase.DISCONNECTED
    book.tick(h.now + 30.0, fx)
    assert fx == [Persist((ops.FrameworkRemoved(fid, h.now + 30.0),))]
    assert fid not in st.frameworks and fid in st.removed_framework_ids and list(st.frameworks) == [keep]
    assert book.next_deadline() is None


def test_recovered_frameworks_count_their_deadline_and_the_earliest_wins() -> None:
    h = Harness()
    book, st = h.state.framework_book, h.state
    info = framework_info("fw")
    book.recover((
        ops.FrameworkEntry("f1", codec.encode_msgpack(info), 100.0, 0.0, deadline=h.now + 50.0),
        ops.FrameworkEntry("f2", codec.encode_msgpack(info), 100.0, 0.0, deadline=h.now + 20.0),
    ), (), h.now)
    assert book.next_deadline() == h.now + 20.0
    fx: list[Effect] = []
    book.tick(h.now + 20.0, fx)
    assert fx == [Persist((ops.FrameworkRemoved("f2", h.now + 20.0),))] and list(st.frameworks) == ["f1"]
    assert book.next_deadline() == h.now + 50.0


def test_agents_due_within_a_tenth_of_an_interval_are_pinged_together() -> None:
    h = Harness(ping_interval=5.0, ping_timeout=15.0)
    book, st = h.state.agent_book, h.state
    assert book.next_deadline() is None
    a1, c1 = h.agent()
    start = h.now
    h.now += 0.4
    a2, c2 = h.agent(hostname="h2")
    assert book.next_deadline() == start + 5.0
    fx: list[Effect] = []
    book.tick(start + 4.4, fx)  # 4.4 + 0.5 < 5.0: nobody yet
    assert fx == []
    book.tick(start + 4.9, fx)  # a1 due at 5.0, a2 at 5.4: both within 0.5
    assert fx == [SendToAgent(c1, ac.Ping(seq=1)), SendToAgent(c2, ac.Ping(seq=1))]
    assert (st.agents[a1].next_ping, st.agents[a2].next_ping) == (start + 9.9, start + 9.9)
    assert book.next_deadline() == start + 9.9


def test_silent_agents_are_marked_unreachable_longest_silent_first_as_the_rate_allows() -> None:
    h = Harness(ping_interval=1e9, ping_timeout=15.0, agent_removal_burst=1, agent_removal_rate=0.5)
    book, st = h.state.agent_book, h.state
    a1, c1 = h.agent()
    h.now += 1.0
    a2, c2 = h.agent(hostname="h2")
    assert book.next_deadline() == h.now - 1.0 + 15.0  # a1's timeout (the next pings are far)
    fx: list[Effect] = []
    at = h.now + 15.0
    book.tick(at, fx)
    assert fx == [
        Persist((ops.AgentMarkedUnreachable(a1, at),)),
        CloseAgent(c1, "agent missed its pings"),
    ]
    assert st.agents[a1].phase is AgentPhase.UNREACHABLE and st.agents[a2].phase is AgentPhase.REGISTERED
    assert st.counters["slave_unreachable_scheduled"] == 1
    # a2 waits for the bucket (0.5 per second: 2 s)
    assert book.next_deadline() == at + 2.0
    fx = []
    book.tick(at + 2.0, fx)
    assert fx == [Persist((ops.AgentMarkedUnreachable(a2, at + 2.0),)), CloseAgent(c2, "agent missed its pings")]


def test_the_re_registration_window_marks_the_agents_that_did_not_come_back_then_closes() -> None:
    h = Harness(agent_reregister_timeout=60.0)
    book, st = h.state.agent_book, h.state
    assert book.window_deadline() is None
    book.recover((
        ops.AgentEntry("a1", "h1", 5051, "cpus:2;mem:512"),
        ops.AgentEntry("a2", "h2", 5051, "cpus:1;mem:256"),
    ), (), h.now)
    assert book.window_deadline() == h.now + 60.0
    assert book.next_deadline() is None  # (RECOVERED agents have no ping: only the window)
    fx: list[Effect] = []
    book.tick(h.now + 59.0, fx)
    assert fx == [] and st.recovery_deadline == h.now + 60.0
    end = h.now + 60.0
    book.tick(end, fx)
    assert fx == [Persist((ops.AgentMarkedUnreachable("a1", end),)), Persist((ops.AgentMarkedUnreachable("a2", end),))]
    assert st.recovery_deadline is None and book.window_deadline() is None
    assert book.next_deadline() == end + st.cfg.unreachable_gc


def test_an_agent_unreachable_for_unreachable_gc_is_removed_for_good() -> None:
    h = Harness(unreachable_gc=100.0)
    book, st = h.state.agent_book, h.state
    book.recover((ops.AgentEntry("a1", "h1", 5051, "cpus:2;mem:512", unreachable_since=h.now - 40.0),), (), h.now)
    assert book.next_deadline() == h.now + 60.0 and book.window_deadline() is None
    fx: list[Effect] = []
    book.tick(h.now + 59.9, fx)
    assert fx == [] and st.agents["a1"].phase is AgentPhase.UNREACHABLE
    book.tick(h.now + 60.0, fx)
    assert fx == [Persist((ops.AgentRemoved("a1"),))]
    assert "a1" not in st.agents and "a1" in st.removed_agent_ids and book.next_deadline() is None


def test_the_core_runs_failover_deadlines_before_the_agents_timers_in_one_tick() -> None:
    h = Harness(ping_interval=1e9, ping_timeout=15.0)
    fid, sid = h.subscribe(framework_info("fw", failover_timeout=15.0))
    aid, _ = h.agent()
    h.feed(StreamClosed(sid))
    h.allocate()
    fx = h.advance(15.0 - 0.01)
    assert [e for e in fx if isinstance(e, Persist)] == [
        Persist((ops.FrameworkRemoved(fid, h.now),)),
        Persist((ops.AgentMarkedUnreachable(aid, h.now),)),
    ]
