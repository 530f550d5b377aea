"""Service jobs end to end: real master, agents and batch service; warm instances (the service
executor under the agent's executor API) fed service tasks through `agora job submit --service`:
per-task results, a failing task retried, an instance that crashes mid-task (its task re-run,
nothing lost or done twice), the shell form, and cancellation."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import psutil
import pytest

from frameworks.cli.common import wait_until
from frameworks.cli.up import LocalCluster
from frameworks.service.client import ServiceClient, ServiceError, ServiceJobFailed

from .test_batch_e2e import cli, show, submit, wait

WORKER = '''
import os, sys
from frameworks.service import agora_service

marks = os.environ["MARKS"]

def first_time(what):
    path = os.path.join(marks, what)
    try:
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        return True
    except FileExistsError:
        return False

for task in agora_service():
    with open(os.path.join(marks, "done.log"), "a") as log:
        log.write(task.input + "\\n")
    if task.input == "flaky" and first_time("flaky"):
        task.fail("flaky the first time")
    elif task.input == "crash" and first_time("crash"):
        print("crashing on purpose")  # goes to stderr: results are not corrupted
        os._exit(3)
    elif task.input == "bad":
        task.fail("bad input")
    elif task.input.startswith("sleep"):
        import time; time.sleep(float(task.input.split()[1])); task.done("slept")
    else:
        task.done(str(int(task.input) ** 2) if task.input.isdigit() else task.input.upper())
'''


def results(cluster: LocalCluster, job_id: int) -> list[dict[str, Any]]:
    code, out = cli(cluster, "results", str(job_id), "--json")
    assert code == 0, out
    return [json.loads(line) for line in out.splitlines()]


def service_job(cluster: LocalCluster, tmp_path: Path, inputs: list[str], *args: str) -> int:
    (tmp_path / "worker.py").write_text(WORKER)
    marks = tmp_path / "marks"
    marks.mkdir()
    (tmp_path / "inputs").write_text("".join(f"{x}\n" for x in inputs))
    return submit(
        cluster, "--cpus", "0.1", "--mem", "64", "--env", f"MARKS={marks}", *args,
        "--service", f"{sys.executable} {tmp_path / 'worker.py'}", "--inputs", str(tmp_path / "inputs"),
    )


def test_results_a_retried_failure_and_a_crashed_instance(cluster: LocalCluster, tmp_path: Path) -> None:
    inputs = [str(i) for i in range(40)]
    inputs[5], inputs[17], inputs[30] = "flaky", "crash", "bad"
    jid = service_job(cluster, tmp_path, inputs, "--count", "2", "--retries", "1", "--window", "4")
    assert wait(cluster, jid) == 1  # "bad" fails twice: the job fails, every other task is done
    d = show(cluster, jid)
    assert d["state"] == "FAILED" and d["reason"] == "1 of 40 service tasks failed"
    assert d["service"] == {"pending": 0, "sent": 0, "done": 39, "failed": 1, "cancelled": 0, "total": 40}
    rows = results(cluster, jid)
    assert [r["index"] for r in rows] == list(range(40))
    for r in rows:
        x = r["input"]
        if x == "bad":
            assert (r["state"], r["result"], r["failures"]) == ("FAILED", "bad input", 2)
        elif x == "flaky":
            assert (r["state"], r["result"], r["failures"], r["sends"]) == ("DONE", "FLAKY", 1, 2)
        elif x == "crash":
            assert (r["state"], r["result"], r["failures"], r["sends"]) == ("DONE", "CRASH", 1, 2)
        else:
            assert (r["state"], r["result"], r["failures"]) == ("DONE", str(int(x) ** 2), 0)
    # Nothing done twice: each input was worked on once, but the two that failed the first time.
    log = (tmp_path / "marks" / "done.log").read_text().splitlines()
    assert sorted(log) == sorted([*inputs, "flaky", "crash", "bad"])
    # The crashed instance's task ended failed; it is run again only if work is still left by
    # the time its retry is due (else it is not needed: CANCELLED without running).
    states = [h["state"] for t in d["task_list"] for h in t["history"]]
    assert states.count("TASK_FAILED") == 1 and states.count("TASK_FINISHED") >= 1
    failed = next(h for t in d["task_list"] for h in t["history"] if h["state"] == "TASK_FAILED")
    assert failed["message"] == "the service command exited with code 3"


def test_shell_form_one_line_in_one_line_out(cluster: LocalCluster, tmp_path: Path) -> None:
    (tmp_path / "inputs").write_text("a\nb c\n\n::error:: not this one\n")
    jid = submit(
        cluster, "--cpus", "0.1", "--mem", "16", "--service",
        'while read -r x; do case "$x" in ::error::*) echo "::error:: refused";; *) echo "<$x>";; esac; done',
        "--inputs", str(tmp_path / "inputs"),
    )
    assert wait(cluster, jid) == 1
    code, out = cli(cluster, "results", str(jid))
    assert code == 0, out
    assert out.splitlines() == ["0\tDONE\t<a>", "1\tDONE\t<b c>", "2\tDONE\t<>", "3\tFAILED\trefused"]
    code, out = cli(cluster, "results", str(jid), "--state", "failed")
    assert out.splitlines() == ["3\tFAILED\trefused"]
    code, out = cli(cluster, "show", str(jid))
    assert "service tasks: 3 done, 1 failed, 0 cancelled, 0 running, 0 pending, of 4" in out


def _workers(tmp_path: Path) -> list[psutil.Process]:
    out = []
    for p in psutil.process_iter(["cmdline"]):
        if str(tmp_path / "worker.py") in (p.info.get("cmdline") or []):
            out.append(p)
    return out


def test_cancel_ends_the_instances_and_their_tasks(cluster: LocalCluster, tmp_path: Path) -> None:
    jid = service_job(cluster, tmp_path, ["1", "sleep 600", "sleep 600", "4"], "--count", "2", "--window", "1")
    running = {"pending": 1, "sent": 2, "done": 1, "failed": 0, "cancelled": 0, "total": 4}
    try:
        wait_until(lambda: show(cluster, jid).get("service") == running, 60, "both sleeps running")
        assert len(_workers(tmp_path)) == 2
    finally:  # the cancel is what the test is about, and it never leaves two sleeps behind
        code, out = cli(cluster, "cancel", str(jid))
    assert code == 0, out
    assert wait(cluster, jid) == 1
    wait_until(lambda: not _workers(tmp_path), 30, "the instances' commands to be gone")
    assert [r["state"] for r in results(cluster, jid)] == ["DONE", "CANCELLED", "CANCELLED", "CANCELLED"]
    # the instances' tasks end as their kills are reported (the processes may go first)
    wait_until(lambda: show(cluster, jid)["tasks"] == {"CANCELLED": 2}, 30, "both instance tasks cancelled")
    code, out = cli(cluster, "submit", "--service", "cat")
    assert code != 0 and "--service needs --inputs FILE" in out


def test_the_python_client_maps_and_names_failures(cluster: LocalCluster) -> None:
    assert cluster.batch_url
    client = ServiceClient(cluster.batch_url)
    doubled = 'while read -r x; do case "$x" in *[!0-9]*) echo "::error:: not a number: $x";; *) echo $((x * 2));; esac; done'
    assert client.map(doubled, ["1", "2", "21"], cpus=0.1, mem=16, timeout=60) == ["2", "4", "42"]
    with pytest.raises(ServiceJobFailed, match=r"failed: 1 of 3 service tasks failed: #1 'x': failed: not a number: x") as err:
        client.map(doubled, ["1", "x", "3"], cpus=0.1, mem=16, timeout=60)
    assert [(r.state, r.result) for r in err.value.results] == [("DONE", "2"), ("FAILED", "not a number: x"), ("DONE", "6")]
    with pytest.raises(ServiceError, match="inputs: a service job needs a non-empty list"):
        client.submit("cat", [])
