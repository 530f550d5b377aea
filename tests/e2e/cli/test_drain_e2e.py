"""Agent drain during a batch job (Mesos automatic node draining), with real processes: a job of sleepers runs,
`agora agent drain` takes their agent out of service with a short grace; the master kills its tasks
(TASK_KILLED, REASON_AGENT_DRAINING), the batch framework re-runs them on the other agent without
counting a failure, the job succeeds and the drained agent shows `drained` (Mesos' DRAINED)."""

from __future__ import annotations

import json
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

from click.testing import CliRunner, Result

from frameworks.cli.common import wait_until
from frameworks.cli.main import cli
from frameworks.cli.up import LocalCluster

COUNT = 4


def http_json(url: str, body: dict[str, Any] | None = None) -> Any:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json", "Accept": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read())


def test_drain_kills_the_agents_tasks_and_the_batch_job_reruns_them_elsewhere(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    env = {"AGORA_MASTER": cluster.master_url, "AGORA_CONFIG": str(tmp_path / "config.toml"), "AGORA_BATCH": ""}

    def agora(*args: str) -> Result:
        return CliRunner().invoke(cli, list(args), env=env, catch_exceptions=False)

    def ok(r: Result) -> str:
        assert r.exit_code == 0, r.output
        return r.output

    def job() -> dict[str, Any]:
        assert cluster.batch_url is not None
        return dict(http_json(f"{cluster.batch_url}/api/v1/jobs/{jid}"))

    # the first attempt of each task leaves a mark and sleeps; a re-run finds the mark and exits 0
    marks = tmp_path / "marks"
    marks.mkdir()
    script = f'if [ -e {marks}/$AGORA_TASK_INDEX ]; then exit 0; fi; touch {marks}/$AGORA_TASK_INDEX; exec sleep 600'
    out = ok(agora("job", "submit", "--cpus", "0.1", "--mem", "16", "--count", str(COUNT), "--retries", "0",
                   "--shell", "--", script))
    jid = int(out.strip())

    def first_attempts_running() -> bool:
        return len(list(marks.iterdir())) == COUNT and all(t["phase"] == "RUNNING" for t in job()["task_list"])

    wait_until(first_attempts_running, 60, "every first attempt running")
    where = Counter(t["history"][0]["agent_id"] for t in job()["task_list"])
    victim = where.most_common(1)[0][0]
    on_victim = {t["index"] for t in job()["task_list"] if t["history"][0]["agent_id"] == victim}
    try:
        state = json.loads(ok(agora("agent", "drain", victim, "--grace", "1", "--reason", "G4", "--json")))
        assert state["state"] in ("draining", "drained") and state["reason"] == "G4"
        # --retries 0: had a drained task counted as a failure, the job would fail
        assert agora("job", "wait", str(jid), "--timeout", "60").exit_code == 0
        detail = job()
        assert detail["state"] == "SUCCEEDED"
        for t in detail["task_list"]:
            assert t["failures"] == 0 and t["phase"] == "SUCCEEDED"
            if t["index"] in on_victim:
                killed, rerun = t["history"]
                assert killed["state"] == "TASK_KILLED" and killed["agent_id"] == victim
                assert rerun["state"] == "TASK_FINISHED" and rerun["agent_id"] != victim
        # the master says why: REASON_AGENT_DRAINING
        tasks = http_json(cluster.master_url + "/api/v1", {"type": "GET_TASKS"})["get_tasks"]
        reasons = {
            t["task_id"]["value"]: t["statuses"][-1].get("reason")
            for t in tasks.get("completed_tasks", []) if t["state"] == "TASK_KILLED"
        }
        assert {f"j{jid}-{i}-0" for i in on_victim} <= {tid for tid, why in reasons.items() if why == "REASON_AGENT_DRAINING"}

        def drained() -> bool:
            listed = {a["id"]: a for a in json.loads(ok(agora("agent", "list", "--json")))}
            return bool(listed[victim]["state"] == "drained")

        wait_until(drained, 30, "the agent drained")  # every killed task's update acknowledged
        agents = http_json(cluster.master_url + "/api/v1", {"type": "GET_AGENTS"})["get_agents"]["agents"]
        (info,) = [a["drain_info"] for a in agents if a["agent_info"]["id"]["value"] == victim]
        assert info == {"state": "DRAINED", "config": {"max_grace_period": {"nanoseconds": 1_000_000_000}, "mark_gone": False}}
    finally:
        back = json.loads(ok(agora("agent", "reactivate", victim, "--json")))
    assert back["state"] == "active"
