from __future__ import annotations

import pytest

from frameworks.elastic.shards import Outcome, ShardError, ShardQueue, ShardState


def q(n: int = 3, epochs: int = 1, **kw: object) -> ShardQueue:
    return ShardQueue(num_shards=n, epochs=epochs, lease_timeout=10.0, **kw)  # type: ignore[arg-type]


def test_lease_complete_all_then_finished() -> None:
    s = q()
    leases = [s.lease("w", 0.0) for _ in range(3)]
    assert [le.shard for le in leases if le] == [0, 1, 2]
    assert s.lease("w", 0.0) is None and not s.finished
    assert s.state_of(1) is ShardState.LEASED
    for le in leases:
        assert le is not None and s.complete(le.lease_id, "w") is Outcome.ACCEPTED
    assert s.finished and s.progress() == 1.0


def test_epochs_advance_when_every_shard_is_done() -> None:
    s = q(n=2, epochs=2)
    for expected_epoch in (0, 0, 1, 1):
        le = s.lease("w", 0.0)
        assert le is not None and le.epoch == expected_epoch
        s.complete(le.lease_id, "w")
    assert s.finished and s.completed_total == 4


def test_expired_lease_returns_to_todo_and_late_completion_is_stale() -> None:
    s = q(n=1)
    le = s.lease("dead", 0.0)
    assert le is not None
    assert s.expire(9.9) == ()
    returned = s.expire(10.0)
    assert [r.lease.shard for r in returned] == [0] and "dead" in returned[0].reason
    assert s.state_of(0) is ShardState.TODO
    le2 = s.lease("alive", 11.0)
    assert le2 is not None and le2.lease_id != le.lease_id
    assert s.complete(le.lease_id, "dead") is Outcome.STALE
    assert s.complete(le2.lease_id, "alive") is Outcome.ACCEPTED
    assert s.finished


def test_renew_extends_leases() -> None:
    s = q(n=1)
    le = s.lease("w", 0.0)
    assert le is not None
    s.renew("w", 8.0)
    assert s.expire(15.0) == ()
    assert len(s.expire(18.0)) == 1


def test_release_worker_returns_all_its_leases() -> None:
    s = q(n=3)
    s.lease("a", 0.0)
    s.lease("b", 0.0)
    s.lease("a", 0.0)
    back = s.release_worker("a", "left")
    assert sorted(r.lease.shard for r in back) == [0, 2]
    assert s.counts() == {"todo": 2, "leased": 1, "done": 0, "set_aside": 0}


def test_repeated_failure_sets_shard_aside_with_reason_and_epoch_moves_on() -> None:
    s = q(n=2, epochs=2, max_failures=2)
    le = s.lease("w", 0.0)
    assert le is not None and le.shard == 0
    assert s.fail(le.lease_id, "w", "bad record").set_aside is None
    le = s.lease("w", 0.0)
    assert le is not None and le.shard == 0  # failed shard is retried first
    res = s.fail(le.lease_id, "w", "bad record again")
    assert res.set_aside is not None and res.set_aside.reason == "bad record again"
    assert s.state_of(0) is ShardState.SET_ASIDE
    le = s.lease("w", 0.0)
    assert le is not None and le.shard == 1
    s.complete(le.lease_id, "w")
    le = s.lease("w", 0.0)  # epoch 1 skips the set-aside shard
    assert le is not None and (le.epoch, le.shard) == (1, 1)
    s.complete(le.lease_id, "w")
    assert s.finished


def test_release_does_not_count_a_failure() -> None:
    s = q(n=1, max_failures=1)
    le = s.lease("w", 0.0)
    assert le is not None
    assert s.release(le.lease_id, "w") is not None
    assert s.set_aside() == () and s.state_of(0) is ShardState.TODO


def test_snapshot_restore_keeps_progress_and_turns_leases_into_todo() -> None:
    s = q(n=4, epochs=2, max_failures=1)
    a = s.lease("w", 0.0)
    b = s.lease("w", 0.0)
    c = s.lease("w", 0.0)
    assert a and b and c
    s.complete(a.lease_id, "w")
    s.fail(b.lease_id, "w", "corrupt")
    r = ShardQueue.restore(s.snapshot(), lease_timeout=5.0, max_failures=1)
    assert r.counts() == {"todo": 2, "leased": 0, "done": 1, "set_aside": 1}
    nxt = r.lease("x", 0.0)
    assert nxt is not None and nxt.lease_id > c.lease_id
    with pytest.raises(ShardError):
        ShardQueue.restore({"epoch": 1}, lease_timeout=5.0, max_failures=1)


def test_bad_construction() -> None:
    with pytest.raises(ShardError):
        ShardQueue(num_shards=0, epochs=1, lease_timeout=1.0)
    with pytest.raises(ShardError):
        ShardQueue(num_shards=1, epochs=1, lease_timeout=0.0)


def test_a_shard_whose_holders_keep_dying_is_set_aside() -> None:
    """A shard that crashes its workers outright: each death returns it, the third sets it aside
    (with the reason), and the epoch moves on without it."""
    s = q(n=2, max_failures=3)
    for i in range(3):
        le = s.lease(f"w{i}", 0.0)
        assert le is not None and le.shard == 0  # the returned shard comes first again
        back, aside = s.worker_died(f"w{i}", f"w{i} died: exit -11")
        if i < 2:
            assert [r.lease.shard for r in back] == [0] and aside == ()
    assert [(a.shard, a.failures) for a in aside] == [(0, 3)] and "died holding it" in aside[0].reason
    assert "exit -11" in aside[0].reason and s.state_of(0) is ShardState.SET_ASIDE
    le = s.lease("w", 0.0)
    assert le is not None and le.shard == 1
    s.complete(le.lease_id, "w")
    assert s.finished


def test_a_completed_shard_forgets_its_holders_deaths() -> None:
    s = q(n=1, epochs=3, max_failures=2)
    for _ in range(2):  # one death per epoch, each followed by a completion: never set aside
        le = s.lease("a", 0.0)
        assert le is not None
        s.worker_died("a", "crash")
        le = s.lease("b", 0.0)
        assert le is not None and s.complete(le.lease_id, "b") is Outcome.ACCEPTED
    le = s.lease("a", 0.0)
    assert le is not None
    s.worker_died("a", "crash")
    snap = s.snapshot()
    assert snap["deaths"] == {"0": 1}
    r = ShardQueue.restore(snap, 10.0, 2)
    le = r.lease("a", 0.0)
    assert le is not None
    _, aside = r.worker_died("a", "crash")
    assert [a.shard for a in aside] == [0] and r.finished  # deaths survived the checkpoint


def test_timed_out_holders_return_the_shard_without_a_death() -> None:
    s = q(n=1, max_failures=1)
    le = s.lease("a", 0.0)
    assert le is not None
    (back,) = s.worker_timed_out("a", "a missed its heartbeats")
    assert back.lease == le and s.state_of(0) is ShardState.TODO and s.set_aside() == ()
    s.worker_back("a")  # it rejoined: a later death report no longer counts the old shard
    assert s.worker_died("a", "crash") == ((), ())
    assert s.state_of(0) is ShardState.TODO


def test_a_death_reported_after_a_timeout_sets_aside_even_a_re_leased_shard() -> None:
    s = q(n=2, max_failures=1)
    le = s.lease("a", 0.0)
    assert le is not None and le.shard == 0
    s.worker_timed_out("a", "silent")
    other = s.lease("b", 0.0)
    assert other is not None and other.shard == 0
    back, aside = s.worker_died("a", "exit -11")
    assert back == () and [x.shard for x in aside] == [0]
    assert s.state_of(0) is ShardState.SET_ASIDE and s.complete(other.lease_id, "b") is Outcome.STALE
