"""The pure parts of ``agora task``, ``agora agent`` and ``agora job``: finding a task or agent in
``/state``, sinfo-like agent states, squeue codes, sacct's elapsed and exit code."""

from __future__ import annotations

from typing import Any

import pytest
from click.testing import CliRunner

from frameworks.cli import agent as ag
from frameworks.cli import job as jb
from frameworks.cli import job_api
from frameworks.cli import task as tk
from frameworks.cli.common import CliError, free_port
from frameworks.cli.main import cli


def state() -> dict[str, Any]:
    run = {"id": "t1", "state": "TASK_RUNNING", "slave_id": "m-S0", "framework_id": "f1"}
    old = {"id": "t1", "state": "TASK_FINISHED", "slave_id": "m-S1", "framework_id": "f1"}
    return {
        "slaves": [
            {"id": "m-S0", "hostname": "h0", "port": 5051, "active": True, "phase": "REGISTERED"},
            {"id": "m-S1", "hostname": "h1", "port": 5052, "active": True, "phase": "DRAINING", "drain_reason": "fan",
             "drain_info": {"state": "DRAINED", "config": {"mark_gone": False}}},
            {"id": "m-S10", "hostname": "h2", "port": 5053, "active": False, "deactivated": True, "phase": "UNREACHABLE"},
        ],
        "recovered_slaves": [{"id": "m-S3", "hostname": "h3", "port": 5054}],
        "frameworks": [
            {"id": "f1", "name": "agora-batch", "webui_url": "http://b:1", "tasks": [run], "completed_tasks": [old]},
        ],
        "completed_frameworks": [
            {"id": "f0", "name": "gone", "tasks": [], "completed_tasks": [{"id": "t0", "state": "TASK_KILLED", "slave_id": "m-S1"}]},
        ],
    }


def test_find_task_prefers_the_running_copy_and_knows_completed_frameworks() -> None:
    s = state()
    t1 = tk.find_task(s, "t1")
    assert t1 is not None and t1["state"] == "TASK_RUNNING" and t1["framework_url"] == "http://b:1"
    t0 = tk.find_task(s, "t0")
    assert t0 is not None and t0["framework"] == "gone" and t0["completed"] and t0["framework_id"] == "f0"
    assert tk.find_task(s, "nope") is None
    assert tk.agent_url(s, "m-S1") == "http://h1:5052" and tk.agent_url(s, "m-S9") is None
    assert tk.sandbox_file("f1", "t1", "stderr") == "f1/t1/stderr"
    # a task of a task group: under its executor's sandbox (the agent's layout)
    assert tk.sandbox_file("f1", "t1", "stdout", "pod") == "f1/pod/tasks/t1/stdout"
    assert tk.sandbox_file("f1", "t1", "stdout", "t1") == "f1/t1/stdout"
    assert tk.batch_task("j12-3-1") == (12, 3)
    assert tk.batch_task("web-1") is None and tk.batch_task("jx-1-2") is None


@pytest.mark.parametrize(
    ("agent", "tasks", "want"),
    [
        ({"phase": "REGISTERED", "active": True}, 2, "active"),
        ({"phase": "REGISTERED", "active": False}, 0, "disconnected"),
        ({"phase": "DRAINING", "active": True, "drain_info": {"state": "DRAINING"}}, 1, "draining"),
        ({"phase": "DRAINING", "active": True, "drain_info": {"state": "DRAINED"}}, 0, "drained"),
        ({"phase": "DRAINING", "active": True}, 1, "deactivated"),  # DEACTIVATE_AGENT: no drain_info
        ({"phase": "UNREACHABLE", "drain_info": {"state": "DRAINED", "config": {"mark_gone": True}}}, 0, "gone"),
        ({"phase": "UNREACHABLE", "drain_info": {"state": "DRAINING", "config": {}}}, 0, "unreachable"),
        ({"phase": "UNREACHABLE", "deactivated": True}, 0, "unreachable"),
        ({"phase": "RECOVERED"}, 0, "recovering"),
        ({"deactivated": True}, 0, "deactivated"),
    ],
)
def test_agent_states(agent: dict[str, Any], tasks: int, want: str) -> None:
    assert ag.agent_state(agent, tasks) == want


def test_agent_rows_and_lookup() -> None:
    rows = ag.rows_agents(state())
    by_id = {r["id"]: r for r in rows}
    assert by_id["m-S0"]["state"] == "active" and by_id["m-S0"]["tasks"] == ["t1"]
    assert by_id["m-S1"]["state"] == "drained" and by_id["m-S1"]["reason"] == "fan"
    assert by_id["m-S10"]["state"] == "unreachable" and by_id["m-S3"]["state"] == "recovering"
    assert ag.find_agent(rows, "S1")["id"] == "m-S1"  # suffix, not a prefix of S10
    assert ag.find_agent(rows, "h2:5053")["id"] == "m-S10"
    with pytest.raises(CliError, match="no agent 'S9'"):
        ag.find_agent(rows, "S9")
    with pytest.raises(CliError, match="ambiguous"):
        ag.find_agent([*rows, {**rows[0], "id": "x-S0"}], "S0")
    call = ag.drain_call("m-S1", 2.5, "disk")
    assert call == {
        "type": "DRAIN_AGENT",
        "drain_agent": {"agent_id": {"value": "m-S1"}, "max_grace_period": {"nanoseconds": 2_500_000_000}, "reason": "disk"},
    }
    assert ag.drain_call("m-S1", None, None, mark_gone=True)["drain_agent"]["mark_gone"] is True
    assert ag.reactivate_call("a")["reactivate_agent"] == {"agent_id": {"value": "a"}}


@pytest.mark.parametrize(
    ("state_", "tasks", "code"),
    [
        ("PENDING", {"PENDING": 2}, "PD"),
        ("RUNNING", {"RUNNING": 1, "PENDING": 1}, "R"),
        ("CANCELLED", {"RUNNING": 1, "CANCELLED": 1}, "CG"),  # ended, a task is still being killed
        ("FAILED", {"LAUNCHING": 1}, "CG"),
        ("CANCELLED", {"CANCELLED": 2}, "CA"),
        ("SUCCEEDED", {"SUCCEEDED": 2}, "CD"),
        ("FAILED", {"FAILED": 1}, "F"),
    ],
)
def test_squeue_codes(state_: str, tasks: dict[str, int], code: str) -> None:
    assert job_api.short_state({"state": state_, "tasks": tasks}) == code


def test_sacct_elapsed_and_exit_code() -> None:
    assert job_api.elapsed_text(100.0, 161.4) == "00:01:01"
    assert job_api.elapsed_text(0.0, 2 * 86400 + 3723) == "2-01:02:03"
    assert job_api.elapsed_text(None, 5.0) == "-"
    detail = {
        "task_list": [
            {"history": [{"exit_code": 3}, {"exit_code": 0}]},  # retried, then succeeded
            {"history": [{"exit_code": 1}]},
            {"history": []},
        ]
    }
    assert job_api.exit_code(detail) == 1
    assert job_api.exit_code({"task_list": [{"history": [{"exit_code": None}]}]}) is None


@pytest.mark.parametrize(
    "argv",
    [
        ["task", "list"],
        ["task", "show", "t1"],
        ["task", "logs", "t1"],
        ["agent", "list", "--json"],
        ["agent", "drain", "S0"],
        ["tasks"],
        ["agents"],
        ["frameworks"],
        ["offers"],
        ["events"],
        ["job", "list"],
        ["job", "submit", "--", "true"],
        ["elastic", "list"],
    ],
)
def test_an_unreachable_master_is_one_line_saying_what_to_do(
    argv: list[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    monkeypatch.setenv("AGORA_CONFIG", str(tmp_path / "none.toml"))
    for var in ("AGORA_BATCH", "AGORA_ELASTIC"):
        monkeypatch.delenv(var, raising=False)
    port = free_port()
    monkeypatch.setenv("AGORA_MASTER", f"127.0.0.1:{port}")
    r = CliRunner().invoke(cli, argv)
    assert r.exit_code == 1, r.output
    assert r.output == (
        f"Error: cannot reach the master at http://127.0.0.1:{port}: connection refused (nothing listens there); "
        "start a local cluster with `agora up`, or point the CLI at your master with --master HOST:PORT "
        "or AGORA_MASTER (or `agora config set master HOST:PORT`)\n"
    )


def test_job_log_follower_reads_only_tasks_that_ran_and_stops_reading_finished_ones() -> None:
    job: dict[int, dict[str, Any]] = {
        0: {"phase": "RUNNING", "history": [{}]},
        1: {"phase": "PENDING", "history": []},
        2: {"phase": "SUCCEEDED", "history": [{}]},
    }
    tl = jb.TaskLogs(lambda: {i: dict(t) for i, t in job.items()})
    assert not any(tl.skip(i) for i in range(3))  # before the first refresh: read everything
    tl.refresh()
    assert [tl.skip(i) for i in range(3)] == [False, True, False]
    tl.read_empty(0)  # running: more may come
    tl.read_empty(2)  # ended and read to its end
    assert [tl.skip(i) for i in range(3)] == [False, True, True]
    assert not tl.job_over()
    job[0]["phase"], job[1]["phase"], job[1]["history"] = "SUCCEEDED", "RUNNING", [{}]
    tl.refresh()
    assert [tl.skip(i) for i in range(3)] == [False, False, True]
    job[1]["phase"] = "FAILED"
    tl.refresh()
    assert tl.job_over()


def test_ctrl_c_while_following_exits_130_without_a_traceback() -> None:
    def interrupted() -> None:
        raise KeyboardInterrupt

    with pytest.raises(SystemExit) as exc:
        tk._run(interrupted)
    assert exc.value.code == 130
