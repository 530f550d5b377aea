"""What `agora task`, `agora agent` and `agora job show` print, against canned master, agent and
batch-service answers (tests/unit/cli/stub_server.py): a task id two frameworks use is refused
with both candidates named until --framework picks one; revocable use is shown apart from the
regular use it would otherwise inflate; `job show` lists every attempt of every task."""

from __future__ import annotations

import json
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from frameworks.cli.main import cli
from protocol import codec, mesos
from protocol.resources import Resources

from .stub_server import stub_server


class _Stub(BaseHTTPRequestHandler):
    """The master (``/state``, ``POST /api/v1`` GET_AGENTS), the agent (``/files/read``) and the
    batch service (``/api/v1/jobs/1``) on one address; ``addr`` is filled in once it is known."""

    protocol_version = "HTTP/1.0"
    addr = ""
    reads: list[str] = []
    twin = False  # a second, completed framework named "alpha" that used hello-1 too

    def log_message(self, *args: Any) -> None:
        pass

    def _answer(self, body: bytes) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        if self.path.startswith("/state"):
            self._answer(json.dumps(state(_Stub.addr, _Stub.twin)).encode())
        elif self.path.startswith("/files/read"):
            _Stub.reads.append(self.path)
            framework = "fa" if "path=fa%2F" in self.path else "fb"
            data = f"from {framework}\n" if "offset=0&" in self.path else ""  # the file ends there
            self._answer(json.dumps({"data": data, "offset": 0 if data else 8}).encode())
        elif self.path.startswith("/api/v1/jobs/1"):
            self._answer(json.dumps(job_detail()).encode())
        else:
            self.send_error(404)

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        used = Resources.parse("cpus:1;mem:64") + Resources.parse("cpus:2;mem:32").as_revocable()
        resp = mesos.OperatorResponse(
            type=mesos.OperatorResponseType.GET_AGENTS,
            get_agents=mesos.GetAgents(
                agents=(
                    mesos.AgentRecord(
                        agent_info=mesos.AgentInfo(hostname="127.0.0.1", id=mesos.AgentID("m-S0")),
                        active=True, version="0.1.0", allocated_resources=used.to_mesos(),
                    ),
                )
            ),
        )
        self._answer(codec.encode(resp, codec.JSON))


def state(addr: str, twin: bool = False) -> dict[str, Any]:
    host, port = addr.split(":")
    task = {"id": "hello-1", "state": "TASK_RUNNING", "slave_id": "m-S0"}
    completed = [{"id": "fa0", "name": "alpha", "tasks": [],
                  "completed_tasks": [{**task, "framework_id": "fa0", "state": "TASK_KILLED"}]}]
    return {
        "completed_frameworks": completed if twin else [],
        "slaves": [
            {"id": "m-S0", "hostname": host, "port": int(port), "active": True, "phase": "REGISTERED",
             "resources": {"cpus": 2.0, "mem": 1024.0}, "used_resources": {"cpus": 3.0, "mem": 96.0},
             "revocable_resources": {"cpus": 2.0}},
        ],
        "frameworks": [
            {"id": "fa", "name": "alpha", "tasks": [{**task, "framework_id": "fa"}], "completed_tasks": []},
            {"id": "fb", "name": "beta", "tasks": [{**task, "framework_id": "fb", "state": "TASK_FINISHED",
                                                     "usage": {"cpu_seconds": 1.5, "mem_rss_bytes": 0,
                                                               "mem_peak_bytes": 3 * 1024 * 1024}}],
             "completed_tasks": []},
        ],
    }


def attempt(n: int, state: str | None, code: int | None, message: str) -> dict[str, Any]:
    return {"attempt": n, "task_id": f"j1-0-{n}", "agent_id": "m-S0", "hostname": "h0", "started_at": 1.0 + n,
            "ended_at": 2.0 + n if code is not None else None, "state": state, "exit_code": code, "message": message}


def job_detail() -> dict[str, Any]:
    return {
        "id": 1, "name": "flaky", "state": "RUNNING", "queue": "*", "priority": 0, "reason": None,
        "task_list": [
            {"index": 0, "phase": "RUNNING", "attempt": 2, "failures": 2, "history": [
                attempt(0, "TASK_FAILED", 3, "first try"), attempt(1, "TASK_FAILED", 4, "second try"),
                attempt(2, None, None, "")]},  # under way: no state recorded yet
            {"index": 1, "phase": "PENDING", "attempt": 0, "failures": 0, "history": []},
        ],
    }


@pytest.fixture
def agora(tmp_path: Path) -> Iterator[Any]:
    _Stub.reads = []
    _Stub.twin = False
    with stub_server(_Stub) as addr:
        _Stub.addr = addr
        env = {"AGORA_MASTER": addr, "AGORA_CONFIG": str(tmp_path / "config.toml"), "AGORA_BATCH": f"http://{addr}"}

        def run(*args: str) -> Result:
            return CliRunner().invoke(cli, list(args), env=env, catch_exceptions=False)

        yield run


def test_a_task_id_two_frameworks_use_is_ambiguous_until_framework_picks_one(agora: Any) -> None:
    for cmd in (("task", "logs", "hello-1"), ("task", "show", "hello-1"), ("task", "attach", "hello-1"),
                ("task", "kill", "hello-1"), ("task", "download", "hello-1")):
        r = agora(*cmd)
        assert r.exit_code == 1, (cmd, r.output)
        assert r.output == (
            "Error: task id 'hello-1' is used by 2 frameworks: alpha (id fa, TASK_RUNNING), "
            "beta (id fb, TASK_FINISHED); choose one with --framework ID|NAME\n"
        ), cmd
    assert _Stub.reads == []  # nothing was read from either sandbox
    r = agora("task", "logs", "hello-1", "--framework", "beta")
    assert r.exit_code == 0 and r.output == "from fb\n"
    assert _Stub.reads and all("path=fb%2Fhello-1%2Fstdout" in p for p in _Stub.reads)
    r = agora("task", "show", "hello-1", "--framework", "fa", "--json")
    assert r.exit_code == 0 and json.loads(r.output)["framework"] == "alpha"
    r = agora("task", "show", "hello-1", "--framework", "beta")
    assert r.exit_code == 0 and "  usage         cpu 1.50 s, peak mem 3.0 MB\n" in r.output
    r = agora("task", "show", "hello-1", "--framework", "gamma")
    assert r.exit_code == 1 and "no task 'hello-1' in framework 'gamma'" in r.output


def test_two_frameworks_of_one_name_are_told_apart_by_id(agora: Any) -> None:
    _Stub.twin = True  # "alpha" now names the running fa and the completed fa0
    r = agora("task", "show", "hello-1", "--framework", "alpha")
    assert r.exit_code == 1
    assert r.output == (
        "Error: task id 'hello-1' is used by 2 frameworks: alpha (id fa, TASK_RUNNING), "
        "alpha (id fa0, TASK_KILLED); choose one with --framework ID\n"
    )
    r = agora("task", "show", "hello-1", "--framework", "fa0", "--json")
    assert r.exit_code == 0 and json.loads(r.output)["framework_id"] == "fa0"
    r = agora("tasks", "--all", "--framework", "alpha")
    assert r.exit_code == 1
    assert r.output == (
        "Error: 2 frameworks are named 'alpha': fa (inactive), fa0 (completed); give one's id with --framework ID\n"
    )
    r = agora("tasks", "--all", "--json", "--framework", "fa0")
    assert r.exit_code == 0 and [t["framework_id"] for t in json.loads(r.output)] == ["fa0"]
    r = agora("tasks", "--json", "--framework", "beta")  # a name no other framework has
    assert r.exit_code == 0 and [t["framework_id"] for t in json.loads(r.output)] == ["fb"]
    r = agora("tasks", "--framework", "gamma")
    assert r.exit_code == 1 and "no framework 'gamma' (an id or a name) known to the master" in r.output


def test_agent_usage_shows_revocable_use_apart_from_regular(agora: Any) -> None:
    shown = agora("agent", "show", "S0")
    assert shown.exit_code == 0, shown.output
    assert "cpus 1/2 (+2 revocable), mem 64/1024 (+32 revocable) (used/total)" in shown.output
    listed = agora("agent", "list")
    assert listed.exit_code == 0 and "cpus 1/2 (+2 revocable)" in listed.output
    assert "cpus 1/2 (+2 revocable)" in agora("agents").output
    row = json.loads(agora("agent", "show", "S0", "--json").output)
    assert row["used_resources"]["cpus"] == 3.0 and row["revocable_used_resources"] == {"cpus": 2.0, "mem": 32.0}


def test_agent_master_option_takes_zk_like_every_command() -> None:
    for sub in ("list", "show", "drain", "reactivate"):
        helptext = CliRunner().invoke(cli, ["agent", sub, "--help"]).output
        assert "zk://" in helptext, sub


def test_job_show_lists_every_attempt_of_every_task(agora: Any) -> None:
    r = agora("job", "show", "1")
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    assert lines[0].startswith("job 1 flaky  state=RUNNING") and lines[1].split()[:3] == ["TASK", "PHASE", "ATTEMPT"]
    rows = [line.split() for line in lines[2:]]
    # task 0: its three attempts, oldest first, index and phase on the first row only
    # the agent as `agora agent show` takes it (S0), not the hostname every local agent shares
    assert rows[0][:5] == ["0", "RUNNING", "0", "j1-0-0", "S0"] and rows[0][-3:] == ["3", "first", "try"]
    assert rows[1][:3] == ["1", "j1-0-1", "S0"] and rows[1][-3:] == ["4", "second", "try"]
    assert rows[2][:3] == ["2", "j1-0-2", "S0"] and rows[2][-2:] == ["TASK_RUNNING", "-"]  # live, not "-"
    assert rows[3][:4] == ["1", "PENDING", "-", "-"]  # never launched: one row of dashes
    assert len(rows) == 4
