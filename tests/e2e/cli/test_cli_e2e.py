"""`agora task|agent|job logs|job history` against a real master, agents and batch framework
for the users of a shared cluster: task logs from the agent's sandbox (tail, follow to the end, attach), kill,
sinfo-like agent states with the drain reason, a job's logs from all its tasks, sacct history."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from frameworks.cli.common import wait_until
from frameworks.cli.main import cli
from frameworks.cli.up import LocalCluster

SMALL = ("--cpus", "0.1", "--mem", "16")


@pytest.fixture
def agora(cluster: LocalCluster, tmp_path: Path) -> Any:
    """``agora ARGS`` in-process; the master comes from the environment, the config file is empty."""
    env = {"AGORA_MASTER": cluster.master_url, "AGORA_CONFIG": str(tmp_path / "config.toml"), "AGORA_BATCH": ""}

    def run(*args: str) -> Result:
        return CliRunner().invoke(cli, list(args), env=env, catch_exceptions=False)

    return run


def ok(r: Result) -> str:
    assert r.exit_code == 0, r.output
    return r.output


def submit(agora: Any, *args: str) -> int:
    return int(ok(agora("job", "submit", *SMALL, *args)).strip())


def task_state(agora: Any, task_id: str) -> str:
    r = agora("task", "show", task_id, "--json")
    return str(json.loads(r.output)["state"]) if r.exit_code == 0 else "UNKNOWN"


def running(agora: Any, task_id: str) -> None:
    wait_until(lambda: task_state(agora, task_id) == "TASK_RUNNING", 60, f"{task_id} running")


def test_task_list_show_logs_tail_and_download(agora: Any, tmp_path: Path) -> None:
    jid = submit(agora, "--shell", "--", "for i in 1 2 3 4 5; do echo line $i; done; echo oops >&2")
    assert agora("job", "wait", str(jid)).exit_code == 0
    tid = f"j{jid}-0-0"
    listed = json.loads(ok(agora("task", "list", "--all", "--json")))
    assert tid in {t["id"] for t in listed}
    assert tid in {t["id"] for t in json.loads(ok(agora("tasks", "--all", "--json")))}  # the old name
    shown = json.loads(ok(agora("task", "show", tid, "--json")))
    assert shown["state"] == "TASK_FINISHED" and shown["framework"] == "agora-batch"
    assert shown["agent_url"].startswith("http://127.0.0.1:")
    assert ok(agora("task", "logs", tid)) == "".join(f"line {i}\n" for i in range(1, 6))
    assert ok(agora("task", "logs", tid, "--stderr")) == "oops\n"
    assert ok(agora("task", "logs", tid, "--tail", "2")) == "line 4\nline 5\n"
    as_json = [json.loads(x) for x in ok(agora("task", "logs", tid, "--tail", "1", "--stderr", "--json")).splitlines()]
    assert as_json == [{"task": tid, "stream": "stderr", "line": "oops"}]
    assert ok(agora("task", "download", tid)) == "".join(f"line {i}\n" for i in range(1, 6))
    ok(agora("task", "download", tid, "--stderr", "-o", str(tmp_path / "err.txt")))
    assert (tmp_path / "err.txt").read_text() == "oops\n"
    r = agora("task", "logs", "no-such-task")
    assert r.exit_code == 1 and r.output.startswith("Error: no task 'no-such-task' known to the master")


def test_logs_follow_and_attach_read_to_the_end(agora: Any) -> None:
    jid = submit(
        agora, "--count", "2", "--shell", "--",
        "for i in 1 2 3 4; do echo out $i; echo err $i >&2; sleep 0.15; done",
    )
    t0, t1 = f"j{jid}-0-0", f"j{jid}-1-0"
    running(agora, t0)
    assert ok(agora("task", "logs", t0, "-f")) == "".join(f"out {i}\n" for i in range(1, 5))
    assert task_state(agora, t0) == "TASK_FINISHED"  # -f returned because the task ended
    attached = ok(agora("task", "attach", t1)).splitlines()
    assert [x for x in attached if x.startswith("[stdout]")] == [f"[stdout] out {i}" for i in range(1, 5)]
    assert [x for x in attached if x.startswith("[stderr]")] == [f"[stderr] err {i}" for i in range(1, 5)]


def test_task_kill_ends_a_running_batch_task(agora: Any) -> None:
    jid = submit(agora, "--", "sleep", "607")
    tid = f"j{jid}-0-0"
    running(agora, tid)
    assert f"killing task {tid}" in ok(agora("task", "kill", tid))
    assert agora("job", "wait", str(jid)).exit_code == 1
    assert task_state(agora, tid) == "TASK_KILLED"
    r = agora("task", "kill", tid)
    assert r.exit_code == 1 and "already ended (TASK_KILLED)" in r.output


def test_agent_drain_shows_state_and_reason_then_reactivate(agora: Any) -> None:
    agents = json.loads(ok(agora("agent", "list", "--json")))
    assert [a["state"] for a in agents] == ["active", "active"]
    aid = agents[1]["id"]
    try:
        drained = json.loads(ok(agora("agent", "drain", aid, "--grace", "5", "--reason", "fan broken", "--json")))
        assert drained["state"] == "drained" and drained["reason"] == "fan broken"
        listed = {a["id"]: a for a in json.loads(ok(agora("agent", "list", "--json")))}
        assert listed[aid]["state"] == "drained" and listed[aid]["reason"] == "fan broken"
        assert "fan broken" in ok(agora("agent", "show", aid.rsplit("-", 1)[1]))  # by its S<n> suffix
        assert "drained" in ok(agora("agent", "list", "--state", "drained"))
        assert len(json.loads(ok(agora("agents", "--json")))) == 2  # the old name
    finally:
        back = json.loads(ok(agora("agent", "reactivate", aid, "--json")))
    assert back["state"] == "active" and back["reason"] is None
    r = agora("agent", "drain", "S99")
    assert r.exit_code == 1 and r.output == "Error: no agent 'S99' known to the master\n"


def test_job_logs_follow_every_task_prefixed_and_history(agora: Any) -> None:
    jid = submit(agora, "--name", "hi", "--count", "3", "--shell", "--", "echo hello $AGORA_TASK_INDEX; sleep 0.3; echo bye")
    out = ok(agora("job", "logs", str(jid), "-f")).splitlines()
    for i in range(3):
        assert [x for x in out if x.startswith(f"[{i}] ")] == [f"[{i}] hello {i}", f"[{i}] bye"]
    lines = [json.loads(x) for x in ok(agora("job", "logs", str(jid), "--json")).splitlines()]
    assert {(x["task"], x["line"]) for x in lines} == {(i, f"hello {i}") for i in range(3)} | {(i, "bye") for i in range(3)}
    bad = submit(agora, "--name", "bad", "--shell", "--", "exit 3")
    assert agora("job", "wait", str(bad)).exit_code == 1
    history = {j["id"]: j for j in json.loads(ok(agora("job", "history", "--json")))}
    assert history[jid]["state"] == "SUCCEEDED" and history[jid]["exit_code"] == 0
    assert history[jid]["elapsed"] >= 0.3
    assert history[bad]["state"] == "FAILED" and history[bad]["exit_code"] == 3
    text = ok(agora("job", "history"))
    assert "ELAPSED" in text and "EXIT" in text
    codes = {line.split()[0]: line.split()[3] for line in ok(agora("job", "list")).splitlines()[1:]}  # ID NAME USER ST
    assert codes[str(jid)] == "CD" and codes[str(bad)] == "F"
    r = agora("job", "logs", "999")
    assert r.exit_code == 1 and "no job 999" in r.output


def test_a_queue_the_batch_framework_serves_runs_and_another_is_refused(agora: Any, cluster: LocalCluster) -> None:
    assert cluster.batch_roles == ("*", "ml")  # start_cluster(batch_roles=...) = agora up --queues '*,ml'
    jid = submit(agora, "--queue", "ml", "--", "true")
    assert ok(agora("job", "wait", str(jid), "--timeout", "60")).startswith(f"job {jid} succeeded")
    r = agora("job", "submit", *SMALL, "--queue", "gpu", "--", "true")
    assert r.exit_code == 1 and "queue 'gpu' is not served by agora-batch: it subscribes with roles '*', 'ml'" in r.output
