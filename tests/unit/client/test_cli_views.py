"""`agora agents|frameworks|tasks|offers`: row builders over a Mesos /state, and the commands
against a tiny HTTP server serving that state."""

from __future__ import annotations

import json
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest
from click.testing import CliRunner

from frameworks.cli import cluster
from frameworks.cli.common import CliError, agent_share, master_url

from ..cli.stub_server import stub_server

STATE: dict[str, Any] = {
    "slaves": [
        {"id": "S1", "hostname": "h1", "port": 5051, "active": True, "attributes": {"rack": "r1"},
         "resources": {"cpus": 4.0, "mem": 4096.0, "gpus": 0.0, "disk": 0.0},
         "used_resources": {"cpus": 1.0, "mem": 128.0}, "offered_resources": {"cpus": 3.0}},
        {"id": "S0", "hostname": "h0", "port": 5052, "active": True, "attributes": {},
         "resources": {"cpus": 2.0, "mem": 1024.0}},
    ],
    "frameworks": [
        {"id": "F1", "name": "batch", "roles": ["*"], "active": True, "connected": True,
         "capabilities": ["REUSABLE_OFFERS"],
         "tasks": [{"id": "t1", "name": "t1", "framework_id": "F1", "slave_id": "S1", "state": "TASK_RUNNING",
                    "resources": {"cpus": 1.0, "mem": 128.0}}],
         "completed_tasks": [{"id": "t0", "name": "t0", "framework_id": "F1", "slave_id": "S1",
                              "state": "TASK_FINISHED", "resources": {"cpus": 1.0}}],
         "offers": [{"id": "O1", "framework_id": "F1", "slave_id": "S1", "resources": {"cpus": 3.0},
                     "offered_time": 990.0}]},
    ],
    "completed_frameworks": [{"id": "F0", "name": "old", "tasks": [], "completed_tasks": []}],
}


def test_rows() -> None:
    agents = cluster.rows_agents(STATE)
    assert [a["id"] for a in agents] == ["S0", "S1"]
    fws = cluster.rows_frameworks(STATE)
    assert [(f["name"], f["completed"], f["tasks"]) for f in fws] == [("batch", False, 1), ("old", True, 0)]
    assert [t["id"] for t in cluster.rows_tasks(STATE)] == ["t1"]
    assert {t["id"] for t in cluster.rows_tasks(STATE, include_completed=True)} == {"t0", "t1"}
    (o,) = cluster.rows_offers(STATE, now=1000.0)
    assert (o["id"], o["holder"], o["hostname"], o["age"]) == ("O1", "batch", "h1", 10.0)
    listing = [{"id": {"value": "O9"}, "framework_id": {"value": "F1"}, "agent_id": {"value": "S0"}, "age": 2.5}]
    (o,) = cluster.rows_offers(STATE, now=0, listing=listing)
    assert (o["id"], o["holder"], o["hostname"], o["age"]) == ("O9", "batch", "h0", 2.5)


@pytest.fixture
def state_server() -> Iterator[str]:
    class H(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path == "/state":
                body = json.dumps(STATE).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            else:
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    with stub_server(H) as addr:
        yield addr


@pytest.mark.parametrize("cmd", ["agents", "frameworks", "tasks", "offers"])
def test_commands_json_and_table(state_server: str, cmd: str) -> None:
    runner = CliRunner()
    res = runner.invoke(getattr(cluster, cmd), ["--master", state_server, "--json"])
    assert res.exit_code == 0, res.output
    rows = json.loads(res.output)
    assert isinstance(rows, list) and rows
    res = runner.invoke(getattr(cluster, cmd), [], env={"AGORA_MASTER": state_server})
    assert res.exit_code == 0, res.output


def test_unreachable_master_is_a_clean_error() -> None:
    from frameworks.cli.common import free_port

    res = CliRunner().invoke(cluster.agents, ["--master", f"127.0.0.1:{free_port()}"])
    assert res.exit_code == 1
    assert "cannot reach" in res.output and "Traceback" not in res.output


def test_master_url_and_share(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AGORA_MASTER", raising=False)
    assert master_url(None) == "http://127.0.0.1:5050"
    assert master_url("h:1") == "http://h:1"
    monkeypatch.setenv("AGORA_MASTER", "x:2")
    assert master_url(None) == "http://x:2"
    with pytest.raises(CliError, match="needs hosts and a path"):  # zk:// is resolved (tests/integration/ha)
        master_url("zk://127.0.0.1:1")
    assert agent_share(2, cpus=4, mem_mb=8192).startswith("cpus:2;mem:4096;disk:")
    assert agent_share(8, cpus=2, mem_mb=1024).startswith("cpus:1;mem:256;")


def test_error_answers_are_the_servers_own_words_not_http() -> None:
    from frameworks.cli.common import answer_error

    assert str(answer_error("GET", "http://b:1/api/v1/jobs/9", 404, '{"error": "no job 9"}')) == "no job 9"
    assert str(answer_error("POST", "http://b:1/api/v1", 400, "Failed to validate master::Call")) == (
        "Failed to validate master::Call"
    )
    assert str(answer_error("GET", "http://b:1/state", 401, "")) == (
        "b:1 requires authentication; give a token with --token or AGORA_TOKEN"
    )
    assert str(answer_error("GET", "http://b:1/state", 403, '{"error": "operator only"}')) == (
        "not allowed by b:1: operator only"
    )
    err = answer_error("GET", "http://b:1/x", 500, "boom")
    assert str(err) == "b:1 answered 500 (internal server error) to GET /x: boom" and err.code == 500


def test_service_errors_carry_the_services_own_text() -> None:
    from frameworks.cli.common import error_text

    assert error_text('GET http://b/api/v1/jobs/9: HTTP 404 {"error": "no job 9"}') == (
        "GET http://b/api/v1/jobs/9: HTTP 404: no job 9"
    )
    assert error_text("GET http://b/x: HTTP 500 {not json") == "GET http://b/x: HTTP 500 {not json"
    assert error_text("cannot reach http://b/x: refused") == "cannot reach http://b/x: refused"
