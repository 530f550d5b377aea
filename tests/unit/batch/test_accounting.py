"""Accounting: every attempt that ran is a row (user, queue, agent, start, end, exit code, the CPU
seconds and peak memory its agent measured), queried by user, queue, state and time window;
retention forgets old finished jobs (not one a live job depends on) and their rows; the users'
decayed usage survives a reopen of the store."""

from __future__ import annotations

from pathlib import Path

import pytest

from frameworks.batch.core import BatchCore
from frameworks.batch.fairshare import Usage
from frameworks.batch.model import spec_from_dict
from frameworks.batch.planner import OfferView
from frameworks.batch.store import AccountingQuery, JobStore
from frameworks.batch.views import history_row, job_summary
from protocol.resources import Resources
from protocol.task_states import TaskState

S = TaskState
OFFER = [OfferView("o", "a1", "h1", "*", Resources.of(cpus=8, mem=4096))]


def cluster_day() -> BatchCore:
    """alice's job ran at 10..20 (1.5 CPU seconds, 2 MiB peak); bob's failed once at 30..35 and
    succeeded on its retry at 40..50; carol's queue-ml job is still running since 60."""
    core = BatchCore()
    alice = core.submit(spec_from_dict({"argv": ["true"], "cpus": 1}), 0.0, user="alice")[0]
    bob = core.submit(spec_from_dict({"argv": ["false"], "max_retries": 1}), 25.0, user="bob")[0]
    core.schedule(OFFER, 5.0)
    core.on_update(f"j{alice}-0-0", S.TASK_RUNNING, 10.0, agent_id="a1")
    core.on_update(f"j{alice}-0-0", S.TASK_FINISHED, 20.0, exit_code=0, cpu_seconds=1.5, mem_peak_bytes=2 << 20)
    core.on_update(f"j{bob}-0-0", S.TASK_RUNNING, 30.0)
    core.on_update(f"j{bob}-0-0", S.TASK_FAILED, 35.0, exit_code=3, cpu_seconds=0.25, mem_peak_bytes=1 << 20)
    core.schedule(OFFER, 40.0)
    core.on_update(f"j{bob}-0-1", S.TASK_RUNNING, 40.0)
    core.on_update(f"j{bob}-0-1", S.TASK_FINISHED, 50.0, exit_code=0, cpu_seconds=0.5, mem_peak_bytes=3 << 20)
    carol = core.submit(spec_from_dict({"argv": ["sleep", "1"], "queue": "ml"}), 55.0, user="carol")[0]
    core.schedule([OfferView("m", "a1", "h1", "ml", Resources.of(cpus=1, mem=256))], 58.0)
    core.on_update(f"j{carol}-0-0", S.TASK_RUNNING, 60.0)
    return core


async def test_every_attempt_that_ran_is_a_row_and_the_filters_select_them(tmp_path: Path) -> None:
    core = cluster_day()
    store = JobStore(tmp_path / "jobs.db")
    await store.awrite(list(core.jobs.values()))

    def ids(**q: object) -> list[str]:
        return [r["task_id"] for r in store.accounting(AccountingQuery(**q))]  # type: ignore[arg-type]

    assert ids() == ["j3-0-0", "j2-0-1", "j2-0-0", "j1-0-0"]  # newest first (a running one by its start)
    (row,) = store.accounting(AccountingQuery(user="alice"))
    assert {k: row[k] for k in ("job_id", "idx", "attempt", "user", "queue", "agent_id", "hostname", "started_at",
                                "ended_at", "state", "exit_code", "cpu_seconds", "mem_peak_bytes", "cpus")} == {
        "job_id": 1, "idx": 0, "attempt": 0, "user": "alice", "queue": "*", "agent_id": "a1", "hostname": "h1",
        "started_at": 10.0, "ended_at": 20.0, "state": "TASK_FINISHED", "exit_code": 0, "cpu_seconds": 1.5,
        "mem_peak_bytes": 2 << 20, "cpus": 1.0}
    assert ids(user="bob") == ["j2-0-1", "j2-0-0"]
    assert ids(queue="ml") == ["j3-0-0"]
    assert ids(states=("TASK_FAILED",)) == ["j2-0-0"]
    assert ids(since=36.0) == ["j3-0-0", "j2-0-1"]  # ended at or after 36, or still running
    assert ids(since=15.0, until=32.0) == ["j2-0-0", "j1-0-0"]  # overlapping [15, 32)
    assert ids(limit=1) == ["j3-0-0"]
    # a later write of the same attempt replaces its row (the running one ends)
    core.on_update("j3-0-0", S.TASK_KILLED, 70.0, cpu_seconds=0.1, mem_peak_bytes=1)
    await store.awrite([core.job(3)])
    assert [(r["state"], r["ended_at"]) for r in store.accounting(AccountingQuery(queue="ml"))] == [
        ("TASK_KILLED", 70.0)]
    store.close()


def test_history_rows_sum_what_the_attempts_used() -> None:
    core = cluster_day()
    bob = history_row(core.job(2))
    assert (bob["user"], bob["state"], bob["exit_code"], bob["attempts"]) == ("bob", "SUCCEEDED", 0, 2)
    assert bob["cpu_seconds"] == 0.75 and bob["mem_peak_bytes"] == 3 << 20
    assert bob["elapsed"] == 20.0  # first RUNNING at 30, ended at 50
    carol = history_row(core.job(3))
    assert (carol["state"], carol["exit_code"], carol["cpu_seconds"], carol["elapsed"]) == ("RUNNING", None, None, None)


def test_the_summary_a_webhook_gets_carries_the_exit_code_of_a_plain_job() -> None:
    core = cluster_day()
    assert job_summary(core.job(1))["exit_code"] == 0  # succeeded, not a gang
    assert job_summary(core.job(2))["exit_code"] == 0  # its last attempt's, not the failed first one's
    assert job_summary(core.job(3))["exit_code"] is None  # still running


async def test_retention_forgets_old_finished_jobs_but_not_a_live_jobs_dependency(tmp_path: Path) -> None:
    core = cluster_day()
    dependent = core.submit(spec_from_dict({"argv": ["true"], "after": [1]}), 60.0, user="alice")[0]
    store = JobStore(tmp_path / "jobs.db")
    await store.awrite(list(core.jobs.values()))
    gone = core.purge(before=55.0)
    assert gone == [2]  # alice's job 1 ended before too, but job 4 depends on it; 3 is live
    assert sorted(core.jobs) == [1, 3, dependent]
    assert store.purge(gone, 55.0) == 3  # the accounting rows of jobs 1 and 2 that ended before 55
    assert [r["task_id"] for r in store.accounting(AccountingQuery())] == ["j3-0-0"]
    assert sorted(j.job_id for j in store.load()) == [1, 3, dependent]
    store.close()


def test_usage_survives_a_reopen_and_decays_on_from_its_time(tmp_path: Path) -> None:
    store = JobStore(tmp_path / "jobs.db")
    store.save_usage({("*", "alice"): Usage(cpu=100.0, mem=0.0, gpu=2.0, billing=104.0, at=1000.0)})
    store.close()
    store = JobStore(tmp_path / "jobs.db")
    core = BatchCore()
    for key, usage in store.load_usage().items():
        core.usage.restore(key, usage)
    store.close()
    core.submit(spec_from_dict({"argv": ["true"]}), 1000.0, user="alice")
    half_life = core.config.fairshare.half_life
    later = core.shares(1000.0 + half_life)[("*", "alice")]
    assert later.usage.cpu == pytest.approx(50.0) and later.usage.billing == pytest.approx(52.0)
