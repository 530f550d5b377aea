"""Periodic jobs: cron parsing (a seconds field for short intervals), the run decision
(concurrency forbid/allow/replace, missed runs folded into one), and a restart of the service
around a run (real SQLite store): no run lost, none doubled."""

from __future__ import annotations

from pathlib import Path

import pytest

from frameworks.batch.core import BatchCore
from frameworks.batch.model import Concurrency, JobSpec, JobState, SpecError, spec_from_dict
from frameworks.batch.periodic import decide, next_after, schedule_error
from frameworks.batch.store import JobStore

EVERY_2S = "*/2 * * * * *"


def test_schedules_five_and_six_fields_and_clear_errors() -> None:
    assert schedule_error("*/5 * * * *") is None and schedule_error("@hourly") is None
    assert next_after("*/5 * * * *", 0.0) == 300.0
    assert next_after(EVERY_2S, 1001.0) == 1002.0
    assert schedule_error("* * *") == "'* * *' has 3 fields; a cron expression has 5 (minute hour day month weekday) or 6 (second first)"
    assert (schedule_error("61 * * * *") or "").startswith("'61 * * * *' is not a valid cron expression")
    with pytest.raises(SpecError, match="schedule: "):
        spec_from_dict({"argv": ["true"], "schedule": "nope"})
    with pytest.raises(SpecError, match="concurrency: expected 'allow', 'forbid' or 'replace'"):
        spec_from_dict({"argv": ["true"], "schedule": "* * * * *", "concurrency": "sometimes"})


def test_decide_concurrency_and_missed_runs() -> None:
    assert decide(EVERY_2S, "allow", 10.0, 9.9, []) is None
    d = decide(EVERY_2S, "allow", 10.0, 10.5, [7])
    assert d is not None and (d.due_at, d.start, d.missed, d.replace, d.next_run) == (10.0, True, 0, (), 12.0)
    d = decide(EVERY_2S, "forbid", 10.0, 10.5, [7])
    assert d is not None and not d.start and d.skipped and "run job 7 still live" in d.skipped
    d = decide(EVERY_2S, "replace", 10.0, 10.5, [7, 8])
    assert d is not None and d.start and d.replace == (7, 8)
    d = decide(EVERY_2S, "allow", 10.0, 21.0, [])  # 10, 12, ... 20 were due: one run for 20
    assert d is not None and (d.due_at, d.missed, d.next_run) == (20.0, 5, 22.0)


def periodic(concurrency: Concurrency = Concurrency.ALLOW) -> JobSpec:
    return JobSpec("tick", ("true",), schedule=EVERY_2S, concurrency=concurrency)


def test_runs_start_when_due_and_forbid_skips_while_one_is_live() -> None:
    core = BatchCore()
    pid, _ = core.submit(periodic(Concurrency.FORBID), 1001.0, user="alice")
    assert core.job(pid).next_run == 1002.0 and core.job(pid).tasks == []
    assert core.next_wakeup(1001.0) == 1002.0
    core.tick(1002.1)
    (run,) = core.job(pid).runs
    r = core.job(run)
    assert (r.parent_id, r.due_at, r.user, r.spec.schedule, r.state) == (pid, 1002.0, "alice", None, JobState.PENDING)
    core.tick(1004.0)  # the first run has not ended: forbid skips this one
    assert core.job(pid).runs == [run] and core.job(pid).next_run == 1006.0
    assert "skipped" in core.job(pid).changes[-1]["what"]
    core.hold(pid, 1004.5, "op")
    core.tick(1006.0)
    assert core.job(pid).runs == [run]  # held: no run
    core.cancel(run, 1007.0)
    core.release(pid, 1007.0, "op")
    assert core.job(pid).next_run == 1008.0  # runs due while held are not made up
    core.tick(1008.0)
    assert len(core.job(pid).runs) == 2


def test_replace_cancels_the_live_run() -> None:
    core = BatchCore()
    pid, _ = core.submit(periodic(Concurrency.REPLACE), 1001.0)
    core.tick(1002.0)
    core.tick(1004.0)
    first, second = core.job(pid).runs
    assert core.job(first).state is JobState.CANCELLED
    assert core.job(first).reason == "replaced by the run due 1970-01-01T00:16:44Z (concurrency replace)"
    assert core.job(second).state is JobState.PENDING


def reload(path: Path) -> BatchCore:
    store = JobStore(path)
    try:
        core = BatchCore()
        for job in store.load():
            core.restore(job)
        return core
    finally:
        store.close()


def test_a_restart_around_a_run_neither_loses_nor_doubles_it(tmp_path: Path) -> None:
    path = tmp_path / "jobs.db"
    core = BatchCore()
    pid, _ = core.submit(periodic(), 1001.0)
    core.tick(1002.0)  # run 2 for 1002 and the template's next_run, written together
    store = JobStore(path)
    store.write([core.jobs[i] for i in sorted(core.jobs)])
    store.close()
    again = reload(path)
    assert again.job(pid).runs == [2] and again.job(pid).next_run == 1004.0
    again.tick(1002.5)  # the same moment again after the restart: no second run for 1002
    assert again.job(pid).runs == [2] and sorted(again.jobs) == [1, 2]
    # down from 1003 to 1011: the runs due at 1004..1010 fold into one, for 1010
    again.tick(1011.0)
    assert again.job(pid).runs == [2, 3] and again.job(3).due_at == 1010.0
    assert again.job(pid).changes[-2]["what"] == "3 run(s) missed before 1970-01-01T00:16:50Z; one run stands for them"


def test_a_new_schedule_counts_from_the_update() -> None:
    core = BatchCore()
    pid, _ = core.submit(periodic(), 1001.0)
    core.update(pid, {"schedule": "*/5 * * * *"}, 1003.0, "op")
    assert core.job(pid).next_run == 1200.0
    with pytest.raises(SpecError, match="schedule: a job cannot become periodic"):
        core.update(pid, {"schedule": None}, 1004.0, "op")


def test_an_update_of_a_template_applies_to_its_later_runs() -> None:
    core = BatchCore()
    pid, _ = core.submit(periodic(), 1001.0)
    core.update(pid, {"count": 3, "cpus": 2}, 1001.5, "op")
    assert core.job(pid).tasks == [] and core.job(pid).state is JobState.PENDING
    core.tick(1002.0)
    (run,) = core.job(pid).runs
    assert len(core.job(run).tasks) == 3 and core.job(run).spec.cpus == 2


def test_a_template_is_not_ranked_nor_counted_in_fair_share_its_runs_are() -> None:
    core = BatchCore()
    pid, _ = core.submit(periodic(), 1001.0, user="carol")
    assert core.priorities(1001.0) == {} and core.shares(1001.0) == {}
    core.tick(1002.0)
    (run,) = core.job(pid).runs
    assert list(core.priorities(1002.0)) == [run]
    assert list(core.shares(1002.0)) == [("*", "carol")]
    with pytest.raises(SpecError, match="concurrency: only a periodic job"):
        spec_from_dict({"argv": ["true"], "concurrency": "forbid"})
