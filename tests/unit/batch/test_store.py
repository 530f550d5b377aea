"""The job store keeps every job and task record across a reopen."""

from __future__ import annotations

from pathlib import Path

from frameworks.batch.core import BatchCore
from frameworks.batch.model import JobSpec
from frameworks.batch.planner import OfferView
from frameworks.batch.store import JobStore, job_from_dict, job_to_dict
from protocol.resources import Resources
from protocol.task_states import TaskState


def _core_with_history() -> BatchCore:
    core = BatchCore()
    core.submit(JobSpec(name="a", argv=("false",), count=2, max_retries=1, env=(("X", "1"),)), now=0)
    core.schedule([OfferView("o", "a1", "h1", "*", Resources.of(cpus=4, mem=1024))], now=0)
    core.on_update("j1-0-0", TaskState.TASK_RUNNING, 1, agent_id="a1")
    core.on_update("j1-0-0", TaskState.TASK_FAILED, 2, exit_code=1, message="exit 1")
    return core


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
    assert [job_to_dict(j) for j in jobs] == [job_to_dict(core.job(1))]
    assert store2.get_meta("framework_id") == "f-1"
    restored = BatchCore()
    for j in jobs:
        restored.restore(j)
    jid, _ = restored.submit(JobSpec(name="b", argv=("true",)), now=5)
    assert jid == 2
    store2.close()
