"""`agora events`: the line of each event type, and the command reading a canned RecordIO stream
from a tiny HTTP server (what the master's SUBSCRIBE answers)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest
from click.testing import CliRunner

from frameworks.cli.events import event_line, events
from protocol import codec, mesos, recordio
from protocol.resources import Resources
from protocol.task_states import TaskState

from .stub_server import stub_server

RES = Resources.parse("cpus:2;mem:1024").to_mesos()
AGENT = mesos.AgentRecord(
    agent_info=mesos.AgentInfo(hostname="h1", port=5051, resources=RES, id=mesos.AgentID("A1")),
    active=True, version="0.1.0", total_resources=RES,
)
FW = mesos.FrameworkRecord(
    framework_info=mesos.FrameworkInfo(user="u", name="batch", id=mesos.FrameworkID("F1")),
    active=True, connected=True, recovered=False,
)
TASK = mesos.Task(
    name="t1", task_id=mesos.TaskID("t1"), framework_id=mesos.FrameworkID("F1"), agent_id=mesos.AgentID("A1"),
    state=TaskState.TASK_STAGING, resources=Resources.parse("cpus:1;mem:128").to_mesos(),
)
STATUS = mesos.TaskStatus(
    task_id=mesos.TaskID("t1"), state=TaskState.TASK_FAILED, message="exit 3",
    reason=mesos.Reason.REASON_COMMAND_EXECUTOR_FAILED,
)
STATE = mesos.GetState(
    get_agents=mesos.GetAgents(agents=(AGENT,)), get_frameworks=mesos.GetFrameworks(frameworks=(FW,)),
    get_tasks=mesos.GetTasks(tasks=(TASK,)),
)
OE = mesos.OperatorEvent
STREAM = [
    OE.make_subscribed(STATE, 15.0),
    OE.make_heartbeat(),
    OE.make_agent_added(AGENT),
    OE.make_framework_added(FW),
    OE.make_task_added(TASK),
    OE.make_task_updated(mesos.FrameworkID("F1"), STATUS, TaskState.TASK_FAILED),
    OE.make_framework_removed(FW.framework_info),
]


def as_json(ev: mesos.OperatorEvent) -> dict[str, Any]:
    out = json.loads(codec.encode_json(ev))
    assert isinstance(out, dict)
    return out


def test_event_lines() -> None:
    lines = [event_line(as_json(e)) for e in STREAM]
    assert lines == [
        "SUBSCRIBED 1 agents, 1 frameworks, 1 tasks, heartbeat every 15s",
        "HEARTBEAT",
        "AGENT_ADDED agent A1 h1:5051 cpus:2;mem:1024",
        "FRAMEWORK_ADDED framework F1 batch (active)",
        "TASK_ADDED task t1 of framework F1 on agent A1 TASK_STAGING cpus:1;mem:128",
        "TASK_UPDATED task t1 of framework F1 TASK_FAILED (REASON_COMMAND_EXECUTOR_FAILED; exit 3)",
        "FRAMEWORK_REMOVED framework F1 batch",
    ]
    assert event_line(as_json(OE.make_agent_removed(mesos.AgentID("A1")))) == "AGENT_REMOVED agent A1"
    gone = mesos.FrameworkRecord(framework_info=FW.framework_info, active=False, connected=False, recovered=False)
    assert event_line(as_json(OE.make_framework_updated(gone))) == "FRAMEWORK_UPDATED framework F1 batch (disconnected)"
    assert event_line({"type": "SOMETHING_NEW", "something_new": {"x": 1}}) == "SOMETHING_NEW"
    assert event_line({}) == "UNKNOWN"


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"  # the body ends when the connection closes
    status = 200
    calls: list[dict[str, Any]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        _Handler.calls.append({"path": self.path, "ctype": self.headers.get("Content-Type"), "body": json.loads(body)})
        if self.status != 200:
            self.send_response(self.status)
            self.end_headers()
            self.wfile.write(b"Failed to validate master::Call")
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(b"".join(recordio.encode(codec.encode_json(e)) for e in STREAM))

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    _Handler.calls = []
    _Handler.status = 200
    with stub_server(_Handler) as addr:
        yield addr


def test_prints_one_line_per_event_without_heartbeats(server: str) -> None:
    res = CliRunner().invoke(events, ["--master", server, "--count", "4"])
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    assert len(lines) == 4
    assert "SUBSCRIBED 1 agents" in lines[0]
    assert "AGENT_ADDED agent A1 h1:5051" in lines[1]
    assert "FRAMEWORK_ADDED framework F1 batch" in lines[2]
    assert "TASK_ADDED task t1" in lines[3]
    assert _Handler.calls == [{"path": "/api/v1", "ctype": "application/json", "body": {"type": "SUBSCRIBE"}}]


def test_json_lines_with_heartbeats(server: str) -> None:
    res = CliRunner().invoke(events, ["--master", server, "--json", "--heartbeats", "--count", str(len(STREAM))])
    assert res.exit_code == 0, res.output
    got = [json.loads(line) for line in res.output.splitlines()]
    assert got == [as_json(e) for e in STREAM]
    assert [codec.decode_json(mesos.OperatorEvent, json.dumps(g)) for g in got] == STREAM


def test_the_stream_ending_is_an_error(server: str) -> None:
    res = CliRunner().invoke(events, ["--master", server, "--json"])
    assert res.exit_code == 1
    assert len(res.output.splitlines()) == len(STREAM) - 1 + 1  # every event but the heartbeat, then the error
    assert "closed the event stream" in res.output


def test_a_refused_subscribe_is_reported(server: str) -> None:
    _Handler.status = 400
    res = CliRunner().invoke(events, ["--master", server])
    assert res.exit_code == 1
    assert "Error: Failed to validate master::Call" in res.output
