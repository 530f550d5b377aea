"""The job store keeps every job and task record across a reopen, writes only what changed, and
opens a store written in the first (one blob per job) layout."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import msgpack
import pytest

from frameworks.batch.core import BatchCore, JobRecord
from frameworks.batch.model import JobSpec
from frameworks.batch.planner import OfferView
from frameworks.batch.store import JobStore, job_from_dict, job_to_dict, snapshot
from protocol.resources import Resources
from protocol.task_states import TaskState

from .walk import CoreWalk

S = TaskState


def _core_with_history() -> BatchCore:
    core = BatchCore()
    core.submit(JobSpec(name="a", argv=("false",), count=2, max_retries=1, env=(("X", "1"),)), now=0)
    core.schedule([OfferView("o", "a1", "h1", "*", Resources.of(cpus=4, mem=1024))], now=0)
    core.on_update("j1-0-0", TaskState.TASK_RUNNING, 1, agent_id="a1")
    core.on_update("j1-0-0", TaskState.TASK_FAILED, 2, exit_code=1, message="exit 1")
    return core


def _dicts(jobs: list[JobRecord]) -> list[dict[str, Any]]:
    return [job_to_dict(j) for j in jobs]


def test_dict_round_trip() -> None:
    job = _core_with_history().job(1)
    back = job_from_dict(job_to_dict(job))
    assert job_to_dict(back) == job_to_dict(job)
    assert back.tasks[0].history[0].exit_code == 1


async def test_store_survives_reopen(tmp_path: Path) -> None:
    core = _core_with_history()
    store = JobStore(tmp_path / "jobs.db")
    await store.awrite(list(core.jobs.values()))
    store.set_meta("framework_id", "f-1")
    store.close()
    store2 = JobStore(tmp_path / "jobs.db")
    jobs = store2.load()
    assert _dicts(jobs) == [job_to_dict(core.job(1))]
    assert store2.get_meta("framework_id") == "f-1"
    restored = BatchCore()
    for j in jobs:
        restored.restore(j)
    jid, _ = restored.submit(JobSpec(name="b", argv=("true",)), now=5)
    assert jid == 2
    store2.close()


def test_a_flush_writes_the_header_and_only_the_changed_tasks() -> None:
    core = BatchCore()
    core.submit(JobSpec(name="a", argv=("true",), count=50, cpus=1), now=0)
    job = core.job(1)
    assert len(snapshot([job]).tasks) == 50  # a new job: every task
    assert snapshot([job]).tasks == []  # nothing changed since
    core.schedule([OfferView("o", "a1", "h1", "*", Resources.of(cpus=2, mem=1024))], now=0)
    core.on_update("j1-1-0", S.TASK_RUNNING, 1, agent_id="a1")
    batch = snapshot([job])
    assert [(row[0], row[1]) for row in batch.tasks] == [(1, 0), (1, 1)]
    assert [row[0] for row in batch.jobs] == [1]


@pytest.mark.parametrize("seed", [1, 2])
async def test_many_small_flushes_reopen_to_the_same_state_as_a_full_write(tmp_path: Path, seed: int) -> None:
    walk = CoreWalk(seed)
    store = JobStore(tmp_path / "jobs.db")
    expected: dict[int, dict[str, Any]] = {}  # what a whole-job write at the same moments holds
    for _ in range(250):
        walk.step()
        ids = sorted(walk.dirty)
        walk.dirty.clear()
        jobs = [walk.core.jobs[i] for i in ids]
        await store.awrite(jobs)
        expected.update((j.job_id, job_to_dict(j)) for j in jobs)
    store.close()
    assert len(expected) >= 5 and any(len(d["tasks"]) > 1 for d in expected.values())
    assert any(len(t["history"]) > 1 for d in expected.values() for t in d["tasks"])

    store = JobStore(tmp_path / "jobs.db")
    loaded = store.load()
    assert _dicts(loaded) == [expected[i] for i in sorted(expected)]
    # A final flush of everything makes the file equal to the core exactly; a restored core
    # carries on from there and its later flushes stay incremental and exact.
    await store.awrite(list(walk.core.jobs.values()))
    store.close()
    store = JobStore(tmp_path / "jobs.db")
    restored = BatchCore()
    for job in store.load():
        restored.restore(job)
    assert _dicts(list(restored.jobs.values())) == _dicts(list(walk.core.jobs.values()))
    walk.core = restored
    for _ in range(100):
        walk.step()
    await store.awrite(list(walk.core.jobs.values()))
    store.close()
    store = JobStore(tmp_path / "jobs.db")
    assert _dicts(store.load()) == _dicts(list(walk.core.jobs.values()))
    store.close()


async def test_a_failed_write_leaves_its_tasks_to_the_next_flush(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    core = BatchCore()
    core.submit(JobSpec(name="a", argv=("true",), count=3, cpus=1), now=0)
    store = JobStore(tmp_path / "jobs.db")
    await store.awrite([core.job(1)])
    core.schedule([OfferView("o", "a1", "h1", "*", Resources.of(cpus=3, mem=1024))], now=0)

    def disk_full(batch: object) -> None:
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(store, "write_batch", disk_full)
    with pytest.raises(sqlite3.OperationalError):
        await store.awrite([core.job(1)])
    monkeypatch.undo()
    await store.awrite([core.job(1)])
    store.close()
    store = JobStore(tmp_path / "jobs.db")
    assert _dicts(store.load()) == [job_to_dict(core.job(1))]
    store.close()


# The first on-disk layout, as the store wrote it before task rows existed.
SCHEMA_1 = """
CREATE TABLE IF NOT EXISTS jobs (
    id INTEGER PRIMARY KEY,
    state TEXT NOT NULL,
    submitted_at REAL NOT NULL,
    data BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""


async def test_a_store_in_the_first_layout_opens_and_is_converted(tmp_path: Path) -> None:
    walk = CoreWalk(7)
    for _ in range(150):
        walk.step()
    path = tmp_path / "jobs.db"
    db = sqlite3.connect(str(path), isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.executescript(SCHEMA_1)
    db.executemany(
        "INSERT INTO jobs (id, state, submitted_at, data) VALUES (?, ?, ?, ?)",
        [
            (j.job_id, j.state.value, j.submitted_at, msgpack.packb(job_to_dict(j), use_bin_type=True))
            for j in walk.core.jobs.values()
        ],
    )
    db.execute("INSERT INTO meta (key, value) VALUES ('framework_id', 'f-7')")
    db.close()
    want = _dicts(list(walk.core.jobs.values()))
    assert len(want) >= 3

    store = JobStore(path)
    assert store.get_meta("framework_id") == "f-7"
    assert store.get_meta("schema") == "2"
    restored = BatchCore()
    for job in store.load():
        restored.restore(job)
    assert _dicts(list(restored.jobs.values())) == want
    # Later flushes only carry the changed tasks; the converted rows hold the rest.
    walk.core = restored
    for _ in range(100):
        walk.step()
        ids = sorted(walk.dirty)
        walk.dirty.clear()
        await store.awrite([walk.core.jobs[i] for i in ids])
    await store.awrite(list(walk.core.jobs.values()))
    store.close()
    store = JobStore(path)
    assert _dicts(store.load()) == _dicts(list(walk.core.jobs.values()))
    store.close()


def test_a_gangs_state_and_each_attempts_address_and_ports_round_trip() -> None:
    core = BatchCore()
    core.submit(JobSpec(name="g", argv=("train",), count=2, gang=2, ports=1, max_retries=1), now=0)
    offer = OfferView("o", "a1", "h1", "*", Resources.of(cpus=4, mem=1024, ports=((31000, 31009),)), {}, "10.0.0.1")
    core.schedule([offer], now=0)
    core.on_update("j1-0-0", TaskState.TASK_RUNNING, 1)
    core.on_update("j1-1-0", TaskState.TASK_FAILED, 2, exit_code=1)  # a restart: regrouping, one spent
    job = core.job(1)
    back = job_from_dict(job_to_dict(job))
    assert job_to_dict(back) == job_to_dict(job)
    assert back.gang_restarts == 1 and back.regrouping == job.regrouping and back.regrouping is not None
    assert back.gang_not_before == 3.0
    assert back.tasks[0].history[0].ports == (31000, 31001) and back.tasks[0].history[0].address == "10.0.0.1"


def test_kept_output_is_stored_per_attempt_and_stream_and_purged_with_its_job(tmp_path: Path) -> None:
    from frameworks.batch.logtail import KeptTail

    store = JobStore(tmp_path / "jobs.db")
    try:
        store.save_tails(1, "batch-1-0-0", {"stdout": KeptTail(100, b"last words\n"), "stderr": KeptTail(0, b"oops\n")})
        store.save_tails(2, "batch-2-0-0", {"stdout": KeptTail(0, b"kept\n")})
        store.save_tails(1, "batch-1-0-0", {"stdout": KeptTail(200, b"later words\n")})  # the same attempt again
        assert store.tail("batch-1-0-0", "stdout") == KeptTail(200, b"later words\n")
        assert store.tail("batch-1-0-0", "stderr") == KeptTail(0, b"oops\n")
        assert store.tail("batch-1-0-1", "stdout") is None
        store.purge([1], before=0.0)
        assert store.tail("batch-1-0-0", "stdout") is None and store.tail("batch-1-0-0", "stderr") is None
        assert store.tail("batch-2-0-0", "stdout") == KeptTail(0, b"kept\n")
    finally:
        store.close()
    reopened = JobStore(tmp_path / "jobs.db")  # written through: there after a restart
    try:
        assert reopened.tail("batch-2-0-0", "stdout") == KeptTail(0, b"kept\n")
    finally:
        reopened.close()
