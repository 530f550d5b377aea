"""Gangs on a real cluster (master, 2 agents with 4 cpus each, the batch service, real processes):
ranks that find each other through MASTER_ADDR:MASTER_PORT and allreduce, and gangs that fail
together (--gang-policy abort and restart, a rank killed with SIGKILL)."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import psutil

from frameworks.batch.examples import allreduce
from frameworks.cli.common import wait_until
from frameworks.cli.up import LocalCluster

from .test_batch_e2e import cli, show, submit, succeeds, wait

ALLREDUCE = str(Path(allreduce.__file__).resolve())
KILL_GRACE = 3.0  # the agents' default grace between SIGTERM and SIGKILL


def _ours(p: psutil.Process, cluster: LocalCluster) -> bool:
    """A task process of this cluster (its sandbox is under the cluster's work dir), not one of
    another cluster running the same tests on this machine."""
    try:
        return str(cluster.work_dir) in p.environ().get("MESOS_SANDBOX", "")
    except (psutil.Error, OSError):
        return False


def _ranks(cluster: LocalCluster, tag: str) -> list[psutil.Process]:
    """The allreduce processes of one test (``tag`` is an argument only its job passes)."""
    out = []
    for p in psutil.process_iter(["cmdline"]):
        cmd = p.info.get("cmdline") or []
        if ALLREDUCE in cmd and tag in cmd and _ours(p, cluster):
            out.append(p)
    return out


def _sleepers(cluster: LocalCluster, seconds: str) -> list[psutil.Process]:
    return [
        p for p in psutil.process_iter(["name", "cmdline"])
        if p.info.get("name") == "sleep" and (p.info.get("cmdline") or [])[1:] == [seconds] and _ours(p, cluster)
    ]


def _logs(cluster: LocalCluster, job_id: int, index: int) -> str:
    code, out = cli(cluster, "logs", str(job_id), "--task", str(index))
    assert code == 0, out
    return out


def test_a_3_rank_gang_across_two_agents_rendezvouses_and_allreduces(cluster: LocalCluster) -> None:
    # 2 cpus a rank: two ranks fill one 4-cpu agent, the third runs on the other.
    jid = submit(cluster, "--count", "3", "--gang", "3", "--cpus", "2", "--mem", "16", "--ports", "1",
                 "--", sys.executable, ALLREDUCE)
    succeeds(cluster, jid, timeout=60)
    d = show(cluster, jid)
    assert d["gang_policy"] == "abort" and d["tasks"] == {"SUCCEEDED": 3}
    agents = [t["history"][-1]["agent_id"] for t in d["task_list"]]
    assert len(set(agents)) == 2, agents
    lines = [_logs(cluster, jid, i).strip() for i in range(3)]
    for i, line in enumerate(lines):
        assert line.startswith(f"rank {i}/3: allreduce ok sum=[6, 14, 3] node "), lines
    master = {line.rsplit(" via ", 1)[1] for line in lines}
    assert len(master) == 1, lines  # every rank met rank 0 at the same MASTER_ADDR:MASTER_PORT


def test_abort_one_rank_exiting_1_fails_the_job_and_leaves_no_rank_running(cluster: LocalCluster) -> None:
    tag = "--fail-rank"
    jid = submit(cluster, "--count", "3", "--gang", "3", "--cpus", "1", "--mem", "16", "--gang-policy", "abort",
                 "--", sys.executable, ALLREDUCE, tag, "1")
    assert wait(cluster, jid, 60) == 1
    d = show(cluster, jid)
    assert d["state"] == "FAILED" and d["exit_code"] == 1, d
    assert d["reason"].startswith("gang aborted: task 1 failed with exit code 1"), d["reason"]
    assert [t["phase"] for t in d["task_list"]] == ["CANCELLED", "FAILED", "CANCELLED"]
    # The job fails once its last rank is gone: nothing is left running when `wait` returns.
    assert _ranks(cluster, tag) == []
    code, out = cli(cluster, "show", str(jid))
    assert code == 0 and out.count("reason: gang aborted: task 1 failed with exit code 1") == 1, out
    assert "gang: 3 at once, policy abort, restarts 0, exit code 1" in out, out
    code, out = cli(cluster, "history")
    assert code == 0 and any(line.split()[0] == str(jid) and " 1 " in line for line in out.splitlines()), out


def test_restart_runs_the_whole_gang_again_and_it_succeeds(cluster: LocalCluster, tmp_path: Path) -> None:
    marker = tmp_path / "failed-once"
    jid = submit(cluster, "--count", "3", "--gang", "3", "--cpus", "1", "--mem", "16", "--gang-policy", "restart",
                 "--retries", "1", "--", sys.executable, ALLREDUCE, "--fail-rank", "2", "--fail-once", str(marker))
    succeeds(cluster, jid, timeout=60)
    assert marker.exists()
    d = show(cluster, jid)
    assert d["gang_restarts"] == 1 and d["tasks"] == {"SUCCEEDED": 3}
    histories = [t["history"] for t in d["task_list"]]
    assert [len(h) for h in histories] == [2, 2, 2]  # every rank ran twice: the gang, not one rank
    assert histories[2][0]["exit_code"] == 1
    first_ended = max(h[0]["ended_at"] for h in histories)
    assert min(h[1]["started_at"] for h in histories) >= first_ended  # placed again only once all had ended
    assert all(h[1]["state"] == "TASK_FINISHED" for h in histories)


def test_kill_9_of_one_rank_aborts_and_no_rank_outlives_the_kill_grace(cluster: LocalCluster) -> None:
    jid = submit(cluster, "--count", "3", "--gang", "3", "--cpus", "1", "--mem", "16", "--shell", "--", "sleep 619")
    wait_until(lambda: len(_sleepers(cluster, "619")) == 3, 60, "three ranks running")
    victim = _sleepers(cluster, "619")[0]
    killed_at = time.monotonic()
    os.kill(victim.pid, signal.SIGKILL)
    wait_until(lambda: not _sleepers(cluster, "619"), KILL_GRACE + 5, "every rank gone")
    gone_after = time.monotonic() - killed_at
    assert wait(cluster, jid, 30) == 1
    d = show(cluster, jid)
    assert d["state"] == "FAILED" and d["reason"].startswith("gang aborted: task "), d
    assert sorted(t["phase"] for t in d["task_list"]) == ["CANCELLED", "CANCELLED", "FAILED"]
    print(f"\nkill -9 of one rank: every rank gone {gone_after:.2f}s later (kill grace {KILL_GRACE:g}s)")


def test_kill_9_of_one_rank_with_restart_runs_every_rank_again(cluster: LocalCluster) -> None:
    jid = submit(cluster, "--count", "3", "--gang", "3", "--cpus", "1", "--mem", "16", "--gang-policy", "restart",
                 "--retries", "1", "--shell", "--", "sleep 623")
    wait_until(lambda: len(_sleepers(cluster, "623")) == 3, 60, "three ranks running")
    first = {p.pid for p in _sleepers(cluster, "623")}
    os.kill(next(iter(first)), signal.SIGKILL)

    def running_again() -> bool:
        d = show(cluster, jid)
        return d["gang_restarts"] == 1 and [(len(t["history"]), t["phase"]) for t in d["task_list"]] == [
            (2, "RUNNING")
        ] * 3

    wait_until(running_again, 60, "every rank running again, under a second attempt")
    wait_until(lambda: len(_sleepers(cluster, "623")) == 3, 30, "three new rank processes")
    assert not first & {p.pid for p in _sleepers(cluster, "623")}
    assert cli(cluster, "cancel", str(jid))[0] == 0
    wait_until(lambda: not _sleepers(cluster, "623"), KILL_GRACE + 5, "every rank gone after cancel")
