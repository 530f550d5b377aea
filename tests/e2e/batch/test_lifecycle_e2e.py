"""The job lifecycle end to end, through the `agora job` CLI against real master, agent and batch
service processes: job files (several jobs, dependencies by name, errors with line and field,
`show --toml` resubmitted), hold/release/update/requeue recorded with who did it,
--after-notok, preemption of a running job, `job list --start`, and updates refused while a gang
runs."""

from __future__ import annotations

import getpass
import json
import time
from pathlib import Path
from typing import Any

from frameworks.cli.common import wait_until
from frameworks.cli.up import LocalCluster

from .test_batch_e2e import cli, show, submit, succeeds, wait

QUICK = ("--cpus", "0.1", "--mem", "16")


def test_a_job_file_submits_its_jobs_in_dependency_order(cluster: LocalCluster, tmp_path: Path) -> None:
    f = tmp_path / "pipeline.toml"
    out = tmp_path / "model.txt"
    f.write_text(
        f"""
[[job]]
name = "report"
shell = "test -s $OUT && echo done"
after = ["train"]
cpus = 0.1
mem = 16
env = {{ OUT = "{out}" }}

[[job]]
name = "train"
command = ["sh", "-c", "echo model > {out}"]
cpus = 0.1
mem = 16
count = 2
"""
    )
    code, out = cli(cluster, "submit", str(f))
    assert code == 0, out
    rows = [line.split() for line in out.splitlines()]
    assert [name for _, name in rows] == ["train", "report"]  # dependency first
    train, report = (int(i) for i, _ in rows)
    succeeds(cluster, report)
    assert show(cluster, report)["spec"]["after"] == [{"job_id": train, "kind": "success"}]
    assert show(cluster, report)["started_at"] >= show(cluster, train)["ended_at"]


def test_a_bad_job_file_names_line_and_field_and_submits_nothing(cluster: LocalCluster, tmp_path: Path) -> None:
    before = cli(cluster, "list", "--json")[1]
    f = tmp_path / "bad.toml"
    f.write_text('[[job]]\nname = "a"\nshell = "true"\n\n[[job]]\nname = "b"\nshell = "true"\ncpus = "two"\n')
    code, out = cli(cluster, "submit", str(f))
    assert code == 1
    assert f"{f}:8: cpus: expected a number, got 'two'" in out
    f.write_text('name = "a"\nshell = "true"\nafter = ["nope"]\n')
    code, out = cli(cluster, "submit", str(f))
    assert code == 1 and f"{f}:3: after: no job named 'nope' in the file" in out
    code, out = cli(cluster, "submit", "--after", "987654", "--", "true")
    assert code == 1 and "no job 987654" in out
    assert cli(cluster, "list", "--json")[1] == before


def test_show_toml_prints_a_file_that_submits_the_same_job(cluster: LocalCluster, tmp_path: Path) -> None:
    jid = submit(cluster, *QUICK, "--count", "2", "--priority", "3", "--env", "A=1", "--shell", "--", "test $A = 1")
    code, text = cli(cluster, "show", str(jid), "--toml")
    assert code == 0, text
    f = tmp_path / "again.toml"
    f.write_text(text)
    again = submit(cluster, str(f))
    assert show(cluster, again)["spec"] == show(cluster, jid)["spec"]
    succeeds(cluster, again)


def test_hold_update_release_and_requeue_through_the_cli(cluster: LocalCluster) -> None:
    # a job is held before it can start: its parent runs first
    parent = submit(cluster, *QUICK, "--", "sleep", "0.3")
    child = submit(cluster, *QUICK, "--after", str(parent), "--", "true")
    code, out = cli(cluster, "hold", str(child))
    assert code == 0 and out.strip() == f"job {child} held"
    code, out = cli(cluster, "update", str(child), "--priority", "7", "--count", "2")
    assert code == 0, out
    succeeds(cluster, parent)
    wait_until(lambda: show(cluster, child).get("reason") == f"held by {getpass.getuser()}", 30, "held reason")
    assert show(cluster, child)["state"] == "PENDING"
    code, out = cli(cluster, "release", str(child))
    assert code == 0, out
    succeeds(cluster, child)
    d = show(cluster, child)
    assert d["priority"] == 7 and d["tasks"] == {"SUCCEEDED": 2}
    code, out = cli(cluster, "requeue", str(child))
    assert code == 0, out
    succeeds(cluster, child)
    d = show(cluster, child)
    assert [len(t["history"]) for t in d["task_list"]] == [2, 2]
    me = getpass.getuser()
    assert [(c["who"], c["what"]) for c in d["changes"]] == [
        (me, "hold"),
        (me, "update count 1 -> 2, priority 0 -> 7"),
        (me, "release"),
        (me, "requeue"),
    ]
    code, out = cli(cluster, "show", str(child))
    assert f"{me}: update count 1 -> 2, priority 0 -> 7" in out
    # a finished job cannot be updated; nothing changes
    code, out = cli(cluster, "update", str(child), "--priority", "1")
    assert code == 1 and "already succeeded" in out


def test_a_running_job_is_requeued_and_runs_again(cluster: LocalCluster) -> None:
    jid = submit(cluster, *QUICK, "--shell", "--", "sleep 611 || true")
    wait_until(lambda: show(cluster, jid)["tasks"].get("RUNNING") == 1, 60, "running")
    code, out = cli(cluster, "requeue", str(jid))
    assert code == 0, out
    wait_until(lambda: len(show(cluster, jid)["task_list"][0]["history"]) == 2, 60, "a second attempt")
    d = show(cluster, jid)
    assert d["task_list"][0]["failures"] == 0
    assert d["task_list"][0]["history"][0]["state"] == "TASK_KILLED"
    cli(cluster, "cancel", str(jid))
    assert wait(cluster, jid) == 1


def test_after_notok_runs_the_cleanup_only_after_a_failure(cluster: LocalCluster) -> None:
    bad = submit(cluster, *QUICK, "--shell", "--", "exit 4")
    good = submit(cluster, *QUICK, "--", "true")
    cleanup = submit(cluster, *QUICK, "--after-notok", str(bad), "--", "true")
    never = submit(cluster, *QUICK, "--after-notok", str(good), "--", "true")
    succeeds(cluster, cleanup)
    assert wait(cluster, never) == 1
    d = show(cluster, never)
    assert d["state"] == "CANCELLED" and d["reason"] == f"dependency job {good} succeeded (after-notok)"


def test_a_high_priority_job_preempts_a_running_low_priority_one_which_is_requeued_and_finishes(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    flag = tmp_path / "go"
    # 8 one-cpu tasks fill both agents (4 cpus each) until the flag appears
    low = submit(
        cluster, "--count", "8", "--cpus", "1", "--mem", "16", "--priority", "1", "--preemptible", "--grace", "1",
        "--shell", "--", f"while [ ! -e {flag} ]; do sleep 0.05; done",
    )
    try:
        wait_until(lambda: show(cluster, low)["tasks"].get("RUNNING") == 8, 60, "the low job filling the cluster")
        high = submit(cluster, "--cpus", "2", "--mem", "16", "--priority", "10", "--preempt", "--", "true")
        succeeds(cluster, high, timeout=30)

        def requeued() -> list[dict[str, Any]]:  # killed once, then launched again
            return [t for t in show(cluster, low)["task_list"] if len(t["history"]) > 1]

        wait_until(lambda: len(requeued()) >= 2, 30, "the preempted tasks launched again")
        preempted = requeued()
        d = show(cluster, low)
        assert len(preempted) == 2, d  # the fewest: two one-cpu tasks make room for two cpus
        for t in preempted:
            assert t["history"][0]["state"] == "TASK_KILLED" and t["failures"] == 0
        assert [c["what"] for c in d["changes"]] == [
            f"task(s) {', '.join(str(t['index']) for t in preempted)} preempted by job {high}"
        ]
        flag.touch()
        succeeds(cluster, low)
    finally:  # never leave the cluster the package shares full of waiting tasks
        flag.touch()
        cli(cluster, "cancel", str(low))
    assert show(cluster, low)["tasks"] == {"SUCCEEDED": 8}


def test_job_list_start_shows_when_pending_jobs_start_from_the_running_time_limits(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    flag = tmp_path / "done"
    # 8 one-cpu tasks with a 60 s time limit fill both agents until the flag appears
    fill = submit(
        cluster, "--count", "8", "--cpus", "1", "--mem", "16", "--time-limit", "60", "--shell", "--",
        f"while [ ! -e {flag} ]; do sleep 0.05; done",
    )
    try:
        wait_until(lambda: show(cluster, fill)["tasks"].get("RUNNING") == 8, 60, "the cluster filled")
        nxt = submit(cluster, "--cpus", "2", "--mem", "16", "--time-limit", "10", "--", "true")
        after = submit(cluster, *QUICK, "--after", str(nxt), "--", "true")
        code, out = cli(cluster, "list", "--start", "--json")
        assert code == 0, out
        jobs = {j["id"]: j for j in json.loads(out)["jobs"]}
        started = [t["history"][-1]["started_at"] for t in show(cluster, fill)["task_list"]]
        # two of the running tasks on one agent end at the latest 60 s after they started
        assert min(started) + 60 <= jobs[nxt]["expected_start"] <= max(started) + 60
        assert jobs[after]["expected_start"] is None  # it waits on a dependency
        ids = [j["id"] for j in json.loads(out)["jobs"]]
        assert ids.index(nxt) < ids.index(after)  # the known starts first
        code, out = cli(cluster, "list", "--start")
        assert code == 0, out
        rows = {line.split()[0]: line for line in out.splitlines()[1:] if line.strip()}
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(jobs[nxt]["expected_start"]))
        assert stamp in rows[str(nxt)]
        assert " N/A " in rows[str(after)]
    finally:
        flag.touch()
    succeeds(cluster, fill)
    succeeds(cluster, after)


def test_updates_that_would_break_a_running_gang_are_refused_and_change_nothing(cluster: LocalCluster) -> None:
    jid = submit(cluster, "--count", "2", "--gang", "2", *QUICK, "--", "sleep", "612")
    try:
        wait_until(lambda: show(cluster, jid)["tasks"].get("RUNNING") == 2, 60, "the gang running")
        code, out = cli(cluster, "update", str(jid), "--count", "3")
        assert (code, out) == (1, f"Error: count: job {jid}'s gang has started; changing its count would break it\n")
        code, out = cli(cluster, "update", str(jid), "--cpus", "0.2", "--priority", "-1")
        assert code == 1 and out.startswith(f"Error: cpus: job {jid} has tasks launching or running"), out
        d = show(cluster, jid)
        assert (d["count"], d["priority"], d["tasks"], d["changes"]) == (2, 0, {"RUNNING": 2}, [])
        assert [len(t["history"]) for t in d["task_list"]] == [1, 1]  # nothing restarted
    finally:
        cli(cluster, "cancel", str(jid))
    assert wait(cluster, jid) == 1
