"""A batch service restarted in the middle of a preemption (real master, agent and batch service
processes, the CLI): the victim's kill was sent, its task ignores SIGTERM for its grace period,
and the service stops and starts again meanwhile. Nothing is lost and nothing is doubled: the
victim ends once, is requeued without a failure and finishes later; no second victim is chosen;
the preemptor runs once."""

from __future__ import annotations

import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from frameworks.cli.common import start_process, stop_process, wait_until
from frameworks.cli.up import LocalCluster, start_cluster

from .test_batch_e2e import cli, show, submit, succeeds

pytestmark = pytest.mark.slow


@pytest.fixture
def one_agent(tmp_path: Path) -> Iterator[LocalCluster]:
    c = start_cluster(
        1, tmp_path / "cluster", port=0, resources="cpus:2;mem:1024;disk:256;ports:[31000-31010]",
        ready_timeout=60, with_elastic=False,
    )
    try:
        yield c
    finally:
        c.stop(grace=5)


def healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=2) as r:
            return bool(r.status == 200)
    except OSError:
        return False


def test_a_restart_in_the_middle_of_a_preemption_loses_nothing_and_doubles_nothing(
    one_agent: LocalCluster, tmp_path: Path
) -> None:
    cluster = one_agent
    assert cluster.batch_url is not None
    flag = tmp_path / "go"
    # two one-cpu tasks fill the agent; each ignores SIGTERM, so a kill takes its 3 s grace
    low = submit(
        cluster, "--count", "2", "--cpus", "1", "--mem", "16", "--preemptible", "--grace", "3", "--shell", "--",
        f"trap '' TERM; while [ ! -e {flag} ]; do sleep 0.05; done",
    )
    try:
        wait_until(lambda: show(cluster, low)["tasks"].get("RUNNING") == 2, 60, "the low job filling the agent")
        high = submit(cluster, "--cpus", "1", "--mem", "16", "--priority", "10", "--preempt", "--", "true")
        wait_until(lambda: bool(show(cluster, low)["changes"]), 30, "a victim chosen")
        assert show(cluster, high)["tasks"] == {"PENDING": 1}  # the victim is still within its grace
        # the service stops and starts again while the kill is under way
        (batch,) = [p for p in cluster.processes if p.name == "batch"]
        stop_process(batch, grace=5)
        cluster.processes.remove(batch)
        again = start_process("batch", batch.argv, log_path=batch.log_path)
        cluster.processes.append(again)
        wait_until(lambda: healthy(str(cluster.batch_url)), 30, "the batch service back")
        succeeds(cluster, high, timeout=60)
        d = show(cluster, low)
        victims = [t for t in d["task_list"] if len(t["history"]) > 1]
        assert len(victims) == 1, d  # one cpu was needed: one victim, not a second after the restart
        assert victims[0]["history"][0]["state"] == "TASK_KILLED" and victims[0]["failures"] == 0
        assert [c["what"] for c in d["changes"]] == [f"task(s) {victims[0]['index']} preempted by job {high}"]
        assert [len(t["history"]) for t in show(cluster, high)["task_list"]] == [1]  # the preemptor ran once
        flag.touch()
        succeeds(cluster, low, timeout=60)
    finally:  # never leave tasks waiting for the flag behind
        flag.touch()
        cli(cluster, "cancel", str(low))
    assert show(cluster, low)["tasks"] == {"SUCCEEDED": 2}
