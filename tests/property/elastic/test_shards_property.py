"""Whatever workers do (complete, fail, die, release, go silent), every shard of every epoch ends
done exactly once or set aside, and the queue always finishes."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from frameworks.elastic.shards import Outcome, ShardQueue

ACTIONS = st.lists(
    st.tuples(
        st.sampled_from(["lease", "complete", "fail", "release", "die", "tick", "stale"]),
        st.integers(0, 3),  # worker
        st.integers(0, 5),  # which lease / how far to tick
    ),
    max_size=120,
)


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(1, 6),
    epochs=st.integers(1, 3),
    max_failures=st.integers(1, 3),
    actions=ACTIONS,
)
def test_every_shard_done_exactly_once_or_set_aside(
    n: int, epochs: int, max_failures: int, actions: list[tuple[str, int, int]]
) -> None:
    q = ShardQueue(num_shards=n, epochs=epochs, lease_timeout=3.0, max_failures=max_failures)
    now = 0.0
    done: dict[tuple[int, int], int] = {}
    old_leases: list[tuple[int, str]] = []

    def complete(lease_id: int, worker: str, epoch: int, shard: int) -> None:
        if q.complete(lease_id, worker) is Outcome.ACCEPTED:
            done[(epoch, shard)] = done.get((epoch, shard), 0) + 1

    for op, w, k in actions:
        worker = f"w{w}"
        mine = q.leases_of(worker)
        if op == "lease":
            le = q.lease(worker, now)
            if le is not None:
                old_leases.append((le.lease_id, worker))
        elif op == "complete" and mine:
            le = mine[k % len(mine)]
            complete(le.lease_id, worker, le.epoch, le.shard)
        elif op == "fail" and mine:
            q.fail(mine[k % len(mine)].lease_id, worker, "boom")
        elif op == "release" and mine:
            q.release(mine[k % len(mine)].lease_id, worker)
        elif op == "die":
            q.release_worker(worker, "died")
        elif op == "tick":
            now += k
            q.expire(now)
        elif op == "stale" and old_leases:
            lid, holder = old_leases[k % len(old_leases)]
            live = {le.lease_id: le for le in q.leases()}
            if lid not in live:
                assert q.complete(lid, holder) is Outcome.STALE
        counts = q.counts()
        assert sum(counts.values()) <= n
        assert len({le.shard for le in q.leases()}) == len(q.leases())  # a shard has at most one lease

    # drain with one honest worker
    for _ in range(n * epochs * (max_failures + 2) + 10):
        q.expire(now + 1000.0)
        le = q.lease("finisher", now)
        if le is None:
            break
        complete(le.lease_id, "finisher", le.epoch, le.shard)
    assert q.finished
    aside = {a.shard for a in q.set_aside()}
    assert all(c == 1 for c in done.values())
    for e in range(epochs):
        for s in range(n):
            assert (e, s) in done or s in aside
