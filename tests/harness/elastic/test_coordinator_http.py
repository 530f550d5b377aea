"""The coordinator shell on loopback with the real worker library (run in threads: it is
synchronous), a fake clock for heartbeat expiry, and checkpoint restore across restarts."""

from __future__ import annotations

import asyncio
import json
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from frameworks.elastic import checkpoint, wire
from frameworks.elastic import messages as m
from frameworks.elastic.coordinator import Coordinator
from frameworks.elastic.core import CoordinatorConfig
from frameworks.elastic.worker import CoordinatorRejected, ElasticJob
from protocol.clock import FakeClock

CFG = CoordinatorConfig(job="t", num_shards=4, epochs=2, heartbeat_timeout=3.0, lease_timeout=60.0)


def status(url: str) -> dict[str, Any]:
    with urllib.request.urlopen(url + "/v1/status", timeout=5) as r:
        out: dict[str, Any] = json.loads(r.read())
        return out


def job(url: str, wid: str, **kw: Any) -> ElasticJob:
    return ElasticJob(url, wid, heartbeat=False, handle_sigterm=False, retry_deadline=10.0, **kw)


async def test_workers_train_all_shards_and_see_generations() -> None:
    async with Coordinator(CFG) as coord:
        a, b = job(coord.url, "a"), job(coord.url, "b")
        seen: list[int] = []
        a.on_generation_change = lambda asg: seen.append(asg.generation)

        def train(j: ElasticJob) -> list[tuple[int, int]]:
            j.init_parameters({"w": np.zeros(3)})
            done = []
            for shard in j.shards():
                j.push({"w": np.ones(3)}, samples=5, loss=1.0)
                done.append((shard.epoch, shard.index))
            return done

        await asyncio.to_thread(a.join)
        await asyncio.to_thread(b.join)
        await asyncio.to_thread(a.heartbeat)
        assert (a.rank, a.world_size, b.rank, a.generation) == (0, 2, 1, 2)
        assert seen == [2]
        da, db = await asyncio.gather(asyncio.to_thread(train, a), asyncio.to_thread(train, b))
        assert sorted(da + db) == [(e, s) for e in range(2) for s in range(4)]
        st = await asyncio.to_thread(status, coord.url)
        assert st["finished"] and st["progress"]["samples_total"] == 40 and st["progress"]["pushes"] == 8
        await asyncio.to_thread(a.close)
        await asyncio.to_thread(b.close)
        st = await asyncio.to_thread(status, coord.url)
        assert st["world_size"] == 0


async def test_silent_worker_expires_and_its_lease_returns() -> None:
    clock = FakeClock()
    async with Coordinator(CFG, clock=clock, tick_interval=1.0) as coord:
        dead, alive = job(coord.url, "dead"), job(coord.url, "alive")
        await asyncio.to_thread(dead.join)
        await asyncio.to_thread(alive.join)
        it = dead.shards()
        shard = await asyncio.to_thread(next, it)
        assert coord.core.status(clock.now())["leases"][0]["worker_id"] == "dead"
        for _ in range(4):  # 4 ticks of 1 s; "alive" heartbeats, "dead" stays silent
            await clock.wait_for_sleepers(1)
            await asyncio.to_thread(alive.heartbeat)
            clock.advance(1.0)
            await asyncio.sleep(0)  # let the tick run (not a wait for time: the clock is fake)
        st = await asyncio.to_thread(status, coord.url)
        assert [w["worker_id"] for w in st["workers"]] == ["alive"]
        assert st["lease_returns"] == 1 and st["shards"]["leased"] == 0
        # a heartbeat timeout is not a death (the worker may only have been descheduled)
        assert any(
            f"shard {shard.index}" in e["text"] and "dead missed its heartbeats" in e["text"] for e in st["log"]
        ), st["log"]
        await asyncio.to_thread(
            it.close
        )  # the dead worker's late release is refused as stale; nothing breaks
        got = await asyncio.to_thread(lambda: next(alive.shards()))
        assert got.index == shard.index
        await asyncio.to_thread(dead.close)
        await asyncio.to_thread(alive.close)


async def test_bad_requests_get_typed_errors() -> None:
    async with Coordinator(CFG) as coord:
        j = job(coord.url, "w")
        with pytest.raises(CoordinatorRejected) as e:
            await asyncio.to_thread(j.push, {"w": np.ones(2)})
        assert e.value.status == 409

        def raw(path: str, body: bytes) -> tuple[int, m.ErrorReply]:
            req = urllib.request.Request(coord.url + path, data=body, method="POST")
            try:
                urllib.request.urlopen(req, timeout=5)
            except urllib.error.HTTPError as err:
                with err:  # its socket, closed now rather than by a later test's garbage collection
                    return err.code, wire.decode(m.ErrorReply, err.read())
            raise AssertionError("expected an error")

        code, err = await asyncio.to_thread(raw, "/v1/join", b"\xc1garbage")
        assert code == 400 and err.code == "bad_request"
        code, err = await asyncio.to_thread(raw, "/v1/join", wire.encode(m.JoinRequest("")))
        assert code == 400 and "bad worker id" in err.reason
        assert coord.running  # still serving


async def test_checkpoint_restore_and_worker_rides_through_a_restart(tmp_path: Path) -> None:
    coord = Coordinator(CFG, checkpoint_dir=tmp_path, checkpoint_interval=3600)
    await coord.start()
    port = coord.port
    w = ElasticJob(coord.url, "w", heartbeat=False, handle_sigterm=False, retry_deadline=20.0)
    try:
        await asyncio.to_thread(w.init_parameters, {"w": np.zeros(2)})
        await asyncio.to_thread(w.push, {"w": np.ones(2)}, samples=3)
        it = w.shards()
        first = await asyncio.to_thread(next, it)
        await asyncio.to_thread(next, it)  # completes the first shard, leases the second
        path = await coord.checkpoint_now()
        assert path is not None and path.exists()
        gen_before = coord.core.membership.generation_number
        saved = coord.core.store.params["w"].copy()
        await coord.stop()

        # the worker's next call fails until the coordinator is back on the same port
        restarted = Coordinator(CFG, port=port, checkpoint_dir=tmp_path, checkpoint_interval=3600)
        pending = asyncio.create_task(asyncio.to_thread(w.pull))
        await restarted.start()
        try:
            params = await asyncio.wait_for(pending, 30)
            np.testing.assert_array_equal(params["w"], saved)
            st = await asyncio.to_thread(status, restarted.url)
            assert st["restored_from"] is not None and st["shards"]["done"] == 1
            assert st["progress"]["samples_total"] == 3
            # the old lease is stale after the restart; the worker rejoins and carries on
            rest = await asyncio.to_thread(lambda: [(s.epoch, s.index) for s in it])
            assert first.index not in [i for e, i in rest if e == 0]
            assert len(rest) == 4 + 3  # epoch 0: the 3 not yet done (incl. the lost lease), epoch 1: 4
            assert w.generation > gen_before
        finally:
            await asyncio.to_thread(w.close)
            await restarted.stop()
        assert checkpoint.load(tmp_path) is not None
    finally:
        await coord.stop()


async def test_corrupt_checkpoint_is_refused_with_the_file_name(tmp_path: Path) -> None:
    (tmp_path / checkpoint.CHECKPOINT_NAME).write_bytes(b"\x93not a checkpoint")
    with pytest.raises(checkpoint.CheckpointError, match=checkpoint.CHECKPOINT_NAME):
        await Coordinator(CFG, checkpoint_dir=tmp_path).start()


async def test_a_worker_whose_lease_was_taken_back_stops_pushing_for_that_shard() -> None:
    """Asynchronous parameter server: the slow worker's lease expires and its shard goes to
    another worker; the slow worker's next push for it is refused (not applied), the shard is
    marked lost, later pushes for it are not even sent, and it is never completed by the slow one."""
    clock = FakeClock()
    cfg = CoordinatorConfig(
        job="t",
        num_shards=2,
        epochs=1,
        heartbeat_timeout=100.0,
        lease_timeout=5.0,
        optimizer="sgd",
        learning_rate=1.0,
    )
    async with Coordinator(cfg, clock=clock, tick_interval=1.0) as coord:
        slow, fast = job(coord.url, "slow"), job(coord.url, "fast")
        await asyncio.to_thread(slow.join)
        await asyncio.to_thread(fast.join)
        await asyncio.to_thread(slow.init_parameters, {"w": np.zeros(2)})
        it = slow.shards()
        shard = await asyncio.to_thread(next, it)
        await asyncio.to_thread(slow.push, {"w": np.ones(2)})
        assert coord.core.store.version == 2
        clock.advance(6.0)
        coord.core.tick(clock.now())  # the lease expired (no heartbeats renewed it)
        fast_it = fast.shards()
        taken = await asyncio.to_thread(next, fast_it)
        assert taken.index == shard.index
        params = await asyncio.to_thread(slow.push, {"w": np.ones(2)})
        assert shard.lost and coord.core.store.version == 2 and coord.core.stale_pushes == 1
        np.testing.assert_allclose(params["w"], [-1.0, -1.0])  # fresh parameters all the same
        await asyncio.to_thread(slow.push, {"w": np.ones(2)})  # skipped: not sent at all
        assert coord.core.stale_pushes == 1 and coord.core.pushes == 1
        await asyncio.to_thread(fast.push, {"w": np.ones(2)})
        other = await asyncio.to_thread(next, it)  # the lost shard is not completed by "slow"
        assert other.index != shard.index and not other.lost
        st = await asyncio.to_thread(status, coord.url)
        assert st["shards"]["done"] == 0 and st["stale_pushes"] == 1 and st["progress"]["pushes"] == 2
        await asyncio.to_thread(fast_it.close)
        await asyncio.to_thread(it.close)
        await asyncio.to_thread(slow.close)
        await asyncio.to_thread(fast.close)
