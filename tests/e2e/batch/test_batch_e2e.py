"""The batch framework end to end: real master, agents and batch service processes, driven
through the `agora job` CLI: arrays, gangs with reasons, dependencies, retries,
cancel, `wait` exit codes, two big gangs without deadlock, and reusable-offer throughput."""

from __future__ import annotations

import json
import time
import urllib.request
from typing import Any

import psutil
import pytest
from click.testing import CliRunner

from frameworks.cli.common import wait_until
from frameworks.cli.job import job
from frameworks.cli.up import LocalCluster


def cli(cluster: LocalCluster, *args: str) -> tuple[int, str]:
    assert cluster.batch_url
    r = CliRunner().invoke(job, ["--batch", cluster.batch_url, *args], catch_exceptions=False)
    return r.exit_code, r.output


def submit(cluster: LocalCluster, *args: str) -> int:
    code, out = cli(cluster, "submit", *args)
    assert code == 0, out
    return int(out.strip())


def show(cluster: LocalCluster, job_id: int) -> dict[str, Any]:
    code, out = cli(cluster, "show", str(job_id), "--json")
    assert code == 0, out
    return dict(json.loads(out))


def wait(cluster: LocalCluster, job_id: int, timeout: float = 120) -> int:
    return cli(cluster, "wait", str(job_id), "--timeout", str(timeout))[0]


def succeeds(cluster: LocalCluster, job_id: int, timeout: float = 120) -> None:
    """Wait for the job; on anything but success fail with its whole story (tasks, reasons) and
    what the master offers and holds at that moment."""
    if wait(cluster, job_id, timeout) != 0:
        story = show(cluster, job_id)
        try:
            with urllib.request.urlopen(f"{cluster.master_url}/api/v1/offers", timeout=10) as r:
                story["master_offers"] = json.loads(r.read())
            with urllib.request.urlopen(f"{cluster.master_url}/state-summary", timeout=10) as r:
                story["master_state_summary"] = json.loads(r.read())
        except (OSError, ValueError) as exc:
            story["master"] = f"unreadable: {exc}"
        pytest.fail(json.dumps(story, indent=1))


def test_array_job_of_50_tasks(cluster: LocalCluster) -> None:
    jid = submit(cluster, "--count", "50", "--cpus", "0.1", "--mem", "16", "--", "true")
    succeeds(cluster, jid)
    d = show(cluster, jid)
    assert d["tasks"] == {"SUCCEEDED": 50}
    assert {t["history"][-1]["exit_code"] for t in d["task_list"]} == {0}


def test_logs_follow_prints_a_tasks_output_until_it_ends(cluster: LocalCluster) -> None:
    jid = submit(
        cluster, "--count", "2", "--cpus", "0.1", "--mem", "16", "--shell", "--",
        "echo start $AGORA_TASK_INDEX; sleep 0.5; echo end $AGORA_TASK_INDEX",
    )
    wait_until(lambda: show(cluster, jid)["task_list"][1]["phase"] != "PENDING", 60, "task 1 launched")
    wait_until(
        lambda: show(cluster, jid)["task_list"][1]["phase"] in ("RUNNING", "SUCCEEDED"), 60, "task 1 running"
    )
    code, out = cli(cluster, "logs", str(jid), "--task", "1", "-f")
    assert code == 0 and out.splitlines() == ["start 1", "end 1"]
    succeeds(cluster, jid)


def test_dependent_job_runs_after_its_parent(cluster: LocalCluster) -> None:
    parent = submit(cluster, "--cpus", "0.1", "--mem", "16", "--", "sleep", "0.5")
    child = submit(cluster, "--cpus", "0.1", "--mem", "16", "--after", str(parent), "--", "true")
    succeeds(cluster, child)
    p, c = show(cluster, parent), show(cluster, child)
    assert c["started_at"] >= p["ended_at"]


def test_failing_task_is_retried_then_the_job_fails(cluster: LocalCluster) -> None:
    jid = submit(cluster, "--cpus", "0.1", "--mem", "16", "--retries", "2", "--shell", "--", "exit 3")
    assert wait(cluster, jid) == 1
    d = show(cluster, jid)
    assert d["state"] == "FAILED"
    history = d["task_list"][0]["history"]
    assert len(history) == 3
    assert [h["state"] for h in history] == ["TASK_FAILED"] * 3


def _sleepers(seconds: str, cluster: LocalCluster) -> list[psutil.Process]:
    """The task processes themselves (``sleep N``), not the agent's wrapper around them, of this
    cluster (their sandbox is under its work dir; the same tests may run elsewhere on the machine)."""
    out = []
    for p in psutil.process_iter(["name", "cmdline"]):
        if p.info.get("name") == "sleep" and (p.info.get("cmdline") or [])[1:] == [seconds]:
            try:
                if str(cluster.work_dir) in p.environ().get("MESOS_SANDBOX", ""):
                    out.append(p)
            except (psutil.Error, OSError):
                continue
    return out


def test_cancel_kills_running_tasks(cluster: LocalCluster) -> None:
    jid = submit(cluster, "--count", "2", "--cpus", "0.1", "--mem", "16", "--", "sleep", "613")
    wait_until(lambda: show(cluster, jid)["tasks"].get("RUNNING") == 2, 60, "both tasks running")
    wait_until(lambda: len(_sleepers("613", cluster)) == 2, 30, "both task processes started")
    code, out = cli(cluster, "cancel", str(jid))
    assert code == 0, out
    assert wait(cluster, jid) == 1
    wait_until(lambda: show(cluster, jid)["tasks"] == {"CANCELLED": 2}, 30, "tasks cancelled")
    wait_until(lambda: not _sleepers("613", cluster), 30, "the task processes to be gone")


def test_gang_waits_with_reason_then_starts(cluster: LocalCluster) -> None:
    # 8 cpus in the cluster: a 3+3 cpu blocker leaves 2 free, the 4x1-cpu gang cannot start.
    blocker = submit(cluster, "--count", "2", "--cpus", "3", "--mem", "16", "--", "sleep", "617")
    wait_until(lambda: show(cluster, blocker)["tasks"].get("RUNNING") == 2, 60, "blocker running")
    gang = submit(cluster, "--count", "4", "--gang", "4", "--cpus", "1", "--mem", "16", "--", "true")
    wait_until(lambda: (show(cluster, gang).get("reason") or "").startswith("gang "), 30, "a gang reason")
    d = show(cluster, gang)
    assert d["state"] == "PENDING"
    # Either the master offers nothing (it co-allocates a gang whole, REQUEST with gang_min), or the
    # framework still holds part of what the gang needs: both are named.
    assert d["reason"] in (
        "gang 0/4 placed; waiting for 4 x cpus:1;mem:16 to be offered together",
        "gang 2/4 placed; waiting for 1 cpus; largest free offer has 0",
    ), d["reason"]
    cli(cluster, "cancel", str(blocker))
    succeeds(cluster, gang)


@pytest.mark.timeout(400)
def test_two_gangs_each_over_half_the_cluster_both_finish(cluster: LocalCluster) -> None:
    a = submit(cluster, "--count", "5", "--gang", "5", "--cpus", "1", "--mem", "16", "--", "sleep", "1")
    b = submit(cluster, "--count", "5", "--gang", "5", "--cpus", "1", "--mem", "16", "--", "sleep", "1")
    succeeds(cluster, a, timeout=180)
    succeeds(cluster, b, timeout=180)
    runs = {jid: _attempt_spans(cluster, jid) for jid in (a, b)}
    # Each gang ran whole: all five of its tasks were running at one moment.
    for jid, spans in runs.items():
        last = [task_spans[-1] for task_spans in spans]
        assert max(s for s, _ in last) < min(e for _, e in last), (jid, last)
    # The cluster never ran more than its 8 one-cpu tasks: b starts once enough of a has ended
    # (it may overlap a's last tasks; that is room, not a deadlock or an overcommit).
    # At equal times an end counts before a start (key False < True).
    edges = sorted(
        (t, is_start)
        for spans in runs.values()
        for task_spans in spans
        for start, end in task_spans
        for t, is_start in ((start, True), (end, False))
    )
    running = peak = 0
    for _, is_start in edges:
        running += 1 if is_start else -1
        peak = max(peak, running)
    assert peak <= 8, runs


def _attempt_spans(cluster: LocalCluster, job_id: int) -> list[list[tuple[float, float]]]:
    """Per task, the (started, ended) times of its attempts that ran, as the service saw them."""
    out = []
    for task in show(cluster, job_id)["task_list"]:
        spans = [
            (h["started_at"], h["ended_at"])
            for h in task["history"]
            if h.get("started_at") is not None and h.get("ended_at") is not None
        ]
        assert spans, task
        out.append(spans)
    return out


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_500_true_tasks_on_one_agent_reuse_the_offer(cluster: LocalCluster) -> None:
    start = time.monotonic()
    jid = submit(
        cluster,
        "--count",
        "500",
        "--cpus",
        "0.5",
        "--mem",
        "16",
        "--constraint",
        "host_index=0",
        "--",
        "true",
    )
    succeeds(cluster, jid, timeout=300)
    elapsed = time.monotonic() - start
    d = show(cluster, jid)
    assert d["tasks"] == {"SUCCEEDED": 500}
    print(f"\n500 true tasks on one agent: {elapsed:.1f}s, {500 / elapsed:.0f} tasks/s")


def test_a_gang_the_cluster_cannot_hold_holds_nothing_and_a_small_job_runs_at_once(cluster: LocalCluster) -> None:
    # 8 cpus in the cluster: a 9 x 1-cpu gang can never start. It used to hold what it could
    # place for its whole hold (30 s at a time) while smaller jobs waited "largest free offer has 0".
    gang = submit(cluster, "--count", "9", "--gang", "9", "--cpus", "1", "--mem", "16", "--priority", "50",
                  "--", "true")
    want = "gang 0/9 placed; cannot fit in the cluster: 9 x cpus:1;mem:16 at once, its agents have room for 8"
    wait_until(lambda: show(cluster, gang).get("reason") == want, 30, "the gang's cannot-fit reason")
    start = time.monotonic()
    small = submit(cluster, "--count", "8", "--cpus", "1", "--mem", "16", "--", "true")
    succeeds(cluster, small, timeout=20)  # all 8 cpus at once: nothing is held for the gang
    elapsed = time.monotonic() - start
    assert elapsed < 15, elapsed
    d = show(cluster, gang)
    assert d["state"] == "PENDING" and d["reason"] == want
    assert cli(cluster, "cancel", str(gang))[0] == 0
