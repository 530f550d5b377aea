from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from frameworks.elastic import messages as m
from frameworks.elastic import wire
from frameworks.elastic.core import CoordinatorConfig, CoordinatorCore, CoordinatorError
from frameworks.elastic.optimizer import OptimizerError, ParameterStore


def core(**kw: Any) -> CoordinatorCore:
    return CoordinatorCore(
        CoordinatorConfig(num_shards=2, epochs=1, heartbeat_timeout=3.0, lease_timeout=30.0, **kw)
    )


def test_dead_worker_lease_returns_on_heartbeat_timeout() -> None:
    c = core()
    c.join(m.JoinRequest("a"), 0.0)
    c.join(m.JoinRequest("b"), 0.0)
    la = c.lease(m.WorkerRequest("a"), 0.0)
    assert la.status is m.LeaseStatus.GRANTED and la.shard == 0
    c.heartbeat(m.WorkerRequest("b"), 2.0)
    c.tick(3.5)  # a is silent for 3.5 s > 3 s
    st = c.status(3.5)
    assert [w["worker_id"] for w in st["workers"]] == ["b"] and st["generation"] == 3
    assert st["lease_returns"] == 1 and st["shards"]["todo"] == 2
    assert any("a missed its heartbeats" in e["text"] for e in st["log"])
    assert c.complete(m.LeaseDone("a", la.lease_id or 0), 4.0).accepted is False
    assert c.lease(m.WorkerRequest("a"), 4.0).status is m.LeaseStatus.REJOIN


def test_lease_wait_then_finished() -> None:
    c = core()
    c.join(m.JoinRequest("a"), 0.0)
    l1, l2 = c.lease(m.WorkerRequest("a"), 0.0), c.lease(m.WorkerRequest("a"), 0.0)
    assert c.lease(m.WorkerRequest("a"), 0.0).status is m.LeaseStatus.WAIT
    for le in (l1, l2):
        assert c.complete(m.LeaseDone("a", le.lease_id or 0), 1.0).accepted
    assert c.lease(m.WorkerRequest("a"), 1.0).status is m.LeaseStatus.FINISHED
    assert c.heartbeat(m.WorkerRequest("a"), 1.0).finished


def test_push_applies_momentum_and_tracks_progress() -> None:
    c = core(optimizer="momentum", learning_rate=0.5, momentum=0.5)
    with pytest.raises(CoordinatorError) as e:
        c.push(m.PushRequest("a", m.to_arrays({"w": np.ones(2)})), 0.0)
    assert e.value.status == 409
    p = c.init(m.InitRequest("a", m.to_arrays({"w": np.zeros(2)})), 0.0)
    assert p.version == 1
    c.init(m.InitRequest("b", m.to_arrays({"w": np.full(2, 7.0)})), 0.0)  # first init wins
    r1 = c.push(m.PushRequest("a", m.to_arrays({"w": np.ones(2)}), samples=10, loss=2.0, base_version=1), 1.0)
    r2 = c.push(m.PushRequest("a", m.to_arrays({"w": np.ones(2)}), samples=10, loss=1.0, base_version=1), 2.0)
    assert r2.staleness == 1 and r1.version == 2
    assert r2.parameters is not None
    w = m.from_arrays(r2.parameters.arrays)["w"]
    np.testing.assert_allclose(w, [-0.5 - 0.75, -0.5 - 0.75])  # v1 = 1, v2 = 1.5
    st = c.status(2.0)["progress"]
    assert st["samples_total"] == 20 and st["samples_per_second"] > 0 and st["loss"] == pytest.approx(1.9)
    with pytest.raises(CoordinatorError, match="shape"):
        c.push(m.PushRequest("a", m.to_arrays({"w": np.ones(3)})), 3.0)
    assert c.pull(m.PullRequest("a", have_version=3), 3.0).unchanged


def test_snapshot_restore_round_trip() -> None:
    c = core()
    c.join(m.JoinRequest("a"), 0.0)
    c.init(m.InitRequest("a", m.to_arrays({"w": np.arange(3.0)})), 0.0)
    c.push(m.PushRequest("a", m.to_arrays({"w": np.ones(3)})), 0.0)
    le = c.lease(m.WorkerRequest("a"), 0.0)
    c.complete(m.LeaseDone("a", le.lease_id or 0), 0.0)
    c.report(m.ReportRequest("a", {"test_accuracy": 0.9}), 0.0)
    ck = c.snapshot(5.0)
    r = CoordinatorCore.restore(c.config, ck, 6.0)
    assert r.store.version == c.store.version
    np.testing.assert_array_equal(r.store.params["w"], c.store.params["w"])
    np.testing.assert_array_equal(r.store.velocity["w"], c.store.velocity["w"])
    assert r.shards.counts()["done"] == 1 and r.reports == {"test_accuracy": 0.9}
    a = r.join(m.JoinRequest("a"), 6.0)
    assert a.generation > ck.generation
    with pytest.raises(CoordinatorError, match="shards"):
        CoordinatorCore.restore(CoordinatorConfig(num_shards=5), ck, 6.0)


def test_arrays_validate() -> None:
    a = m.to_array("x", np.ones((2, 2), dtype=np.float32))
    assert m.from_array(a).dtype == np.float32
    with pytest.raises(m.ArrayError, match="bytes"):
        m.from_array(m.Array("x", "float32", (3, 3), a.data))
    with pytest.raises(m.ArrayError, match="not allowed"):
        m.from_array(m.Array("x", "object", (1,), b"\0" * 8))
    with pytest.raises(m.ArrayError, match="duplicate"):
        m.from_arrays((a, a))


def test_optimizer_rejects_bad_config_and_non_finite() -> None:
    with pytest.raises(OptimizerError):
        ParameterStore("adam")
    s = ParameterStore("sgd", 1.0)
    s.initialize({"w": np.zeros(1)})
    with pytest.raises(OptimizerError, match="non-finite"):
        s.apply({"w": np.array([np.nan])})
    s.apply({"w": np.array([2.0])})
    assert s.params["w"][0] == -2.0 and s.version == 2


def test_a_push_for_a_lease_taken_back_is_not_applied() -> None:
    """Async parameter server: a's lease expired and the shard went to b; a's late gradients for
    it are refused, so the shard's gradient is applied once (by b)."""
    c = core(optimizer="sgd", learning_rate=1.0)
    c.join(m.JoinRequest("a"), 0.0)
    c.join(m.JoinRequest("b"), 0.0)
    c.init(m.InitRequest("a", m.to_arrays({"w": np.zeros(2)})), 0.0)
    la = c.lease(m.WorkerRequest("a"), 0.0)
    ok = c.push(m.PushRequest("a", m.to_arrays({"w": np.ones(2)}), lease_id=la.lease_id), 1.0)
    assert ok.applied and ok.version == 2
    c.heartbeat(m.WorkerRequest("b"), 29.0)
    c.shards.expire(30.0)  # a's lease ran out (a stays a member: only the lease is gone)
    lb = c.lease(m.WorkerRequest("b"), 31.0)
    assert lb.shard == la.shard
    late = c.push(m.PushRequest("a", m.to_arrays({"w": np.ones(2)}), lease_id=la.lease_id), 32.0)
    assert not late.applied and late.version == 2 and "no longer held" in late.detail
    assert late.parameters is not None  # fresh parameters back all the same
    c.push(m.PushRequest("b", m.to_arrays({"w": np.ones(2)}), lease_id=lb.lease_id), 33.0)
    np.testing.assert_allclose(c.store.params["w"], [-2.0, -2.0])  # a's first push + b's, not a's late one
    st = c.status(33.0)
    assert st["stale_pushes"] == 1 and st["progress"]["pushes"] == 2
    # a push outside any shard (no lease named) is applied as before
    assert c.push(m.PushRequest("a", m.to_arrays({"w": np.zeros(2)})), 34.0).applied


def test_a_worker_that_died_counts_against_the_shards_it_held() -> None:
    c = core(max_failures=2)
    for w in ("a", "b"):
        c.join(m.JoinRequest(w), 0.0)
        le = c.lease(m.WorkerRequest(w), 0.0)
        assert le.shard == 0
        c.worker_died(w, "killed by its agent for exceeding its memory limit", 1.0)
    st = c.status(1.0)
    assert st["shards"]["set_aside"] == 1 and st["world_size"] == 0
    (detail,) = st["shards"]["set_aside_detail"]
    assert detail["shard"] == 0 and "2 workers died holding it" in detail["reason"]
    assert any(e["kind"] == "set_aside" and "memory limit" in e["text"] for e in st["log"])
    ck = c.snapshot(2.0)
    assert wire.decode(m.Checkpoint, wire.encode(ck)).shards.set_aside == ck.shards.set_aside


def test_heartbeat_timeouts_do_not_count_as_deaths_of_the_shard() -> None:
    """Workers that merely went silent (descheduled) give their leases back without setting the
    shard aside, however often it happens; a worker that comes back rejoins and the shard is done."""
    c = core(max_failures=2)
    t = 0.0
    for w in ("a", "b", "c"):
        c.join(m.JoinRequest(w), t)
        assert c.lease(m.WorkerRequest(w), t).shard == 0
        t += 4.0
        c.tick(t)  # silent for 4 s > 3 s: out, shard 0 back to to-do
    st = c.status(t)
    assert st["shards"]["set_aside"] == 0 and st["shards"]["todo"] == 2 and st["world_size"] == 0
    assert c.heartbeat(m.WorkerRequest("a"), t).known is False  # a was only descheduled: it rejoins
    c.join(m.JoinRequest("a"), t)
    le = c.lease(m.WorkerRequest("a"), t)
    assert le.shard == 0 and c.complete(m.LeaseDone("a", le.lease_id or 0), t).accepted
    c.worker_died("b", "exit -9", t)  # a later death report: shard 0 was completed since
    assert c.status(t)["shards"]["set_aside"] == 0


def test_a_silent_worker_whose_death_is_reported_later_counts_against_its_shard() -> None:
    """The service's terminal update for a worker that first timed out still counts a death
    against the shard it held then: two such deaths set it aside."""
    c = core(max_failures=2)
    t = 0.0
    for w in ("a", "b"):
        c.join(m.JoinRequest(w), t)
        assert c.lease(m.WorkerRequest(w), t).shard == 0
        t += 4.0
        c.tick(t)  # heartbeat timeout: no death counted yet
        assert c.status(t)["shards"]["set_aside"] == 0
        c.worker_died(w, "exit -11", t)  # its agent says the process died
    st = c.status(t)
    assert st["shards"]["set_aside"] == 1
    (detail,) = st["shards"]["set_aside_detail"]
    assert detail["shard"] == 0 and "2 workers died holding it" in detail["reason"]
