"""Abandoned subscriptions: frameworks that subscribe and walk away without ever running a task
keep Mesos' failover_timeout, but at most ``abandoned_frameworks_per_principal`` per principal;
a framework with tasks keeps its whole failover window."""

from __future__ import annotations

from master import registry_ops as ops
from master.events import StreamClosed
from master.records import FrameworkPhase
from master.testing import Harness, closed, framework_info, persisted


def test_only_the_newest_abandoned_subscriptions_per_principal_are_kept() -> None:
    h = Harness(abandoned_frameworks_per_principal=3)
    ids = []
    for i in range(5):
        fid, sid = h.subscribe(framework_info(f"probe{i}", failover_timeout=3600.0))
        ids.append(fid)
        h.now += 1.0
        fx = h.feed(StreamClosed(sid))
        removed = [op.framework_id for op in persisted(fx) if isinstance(op, ops.FrameworkRemoved)]
        assert removed == ([] if i < 3 else [ids[i - 3]])
        assert closed(fx) == []
    assert {f for f, fw in h.state.frameworks.items() if fw.phase is FrameworkPhase.DISCONNECTED} == set(ids[2:])
    # another principal has its own allowance
    fid, sid = h.subscribe(framework_info("other", failover_timeout=3600.0, principal="p2"))
    h.feed(StreamClosed(sid))
    assert h.state.frameworks[fid].phase is FrameworkPhase.DISCONNECTED


def test_a_framework_that_ran_tasks_keeps_its_failover_window() -> None:
    from master.testing import task
    from protocol import mesos

    h = Harness(abandoned_frameworks_per_principal=0)
    h.agent()
    fid, sid = h.subscribe(framework_info("real", failover_timeout=3600.0))
    (offer,) = [o for e in h.allocate() for o in _offers(e)]
    h.call(fid, sid, mesos.Call.make_accept(mesos.FrameworkID(fid), (offer.id,), (mesos.Operation.make_launch(task("t1")),)))
    h.feed(StreamClosed(sid))
    fw = h.state.frameworks[fid]
    assert fw.phase is FrameworkPhase.DISCONNECTED and fw.deadline == h.now + 3600.0


def _offers(e: object) -> list:  # type: ignore[type-arg]
    from master.events import SendEvent

    if isinstance(e, SendEvent) and e.event.offers is not None:
        return list(e.event.offers.offers)
    return []
