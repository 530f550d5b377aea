"""The agent's /state and v1 operator API (/api/v1) in Mesos 1.11's shapes (written down here from
Mesos' src/slave/http.cpp writers and the agent v1 proto, in our words), built from one read model;
a tool finds a task's sandbox from its executor's ``directory`` and reads it."""

from __future__ import annotations

import base64
import json
from typing import Any

import aiohttp

from protocol.agent_channel import RunTasks
from protocol.mesos import CommandInfo, ExecutorInfo, ExecutorType, TaskInfo
from protocol.mesos_common import ExecutorID, FrameworkID, TaskID
from protocol.resources import Resources
from protocol.task_states import TaskState as S

from ..master.mesos_shapes import check, shape

# the agent's /state (git_*, domain, master_hostname, log_dir, external_log_file only when set)
AGENT_STATE = shape(
    "version build_date build_time build_user start_time id pid hostname capabilities resources attributes "
    "flags frameworks completed_frameworks reserved_resources reserved_resources_full unreserved_resources "
    "unreserved_resources_full reserved_resources_allocated unreserved_resources_allocated",
    "git_sha git_branch git_tag domain master_hostname log_dir external_log_file",
    "master registered boot_id isolation isolator gpus tasks recovery stale_frames",
)
AGENT_FRAMEWORK = shape(
    "id name user failover_timeout checkpoint hostname capabilities executors completed_executors",
    "role roles principal",
)
AGENT_EXECUTOR = shape(
    "id name framework_id source container directory resources role type tasks queued_tasks completed_tasks",
    "labels",
)
AGENT_TASK = shape(
    "id name framework_id executor_id slave_id state resources role statuses",
    "labels discovery container health_check user",
    "sandbox",
)
V1_TASK = shape("name task_id framework_id agent_id state resources statuses",
                "executor_id labels discovery container health_check user status_update_state status_update_uuid limits kill_policy check")
V1_FILE = shape("path nlink size mtime mode uid gid")
V1_CONTAINER = shape("framework_id executor_id executor_name container_id", "container_status resource_statistics")


def task(tid: str, cmd: str) -> TaskInfo:
    return TaskInfo(name=tid, task_id=TaskID(tid), resources=Resources.of(cpus=0.1, mem=32).to_mesos(),
                    command=CommandInfo(value=cmd))


async def v1(s: aiohttp.ClientSession, url: str, body: dict[str, Any]) -> tuple[int, Any]:
    async with s.post(url + "/api/v1", data=json.dumps(body), headers={"Content-Type": "application/json"}) as r:
        text = await r.text()
        return r.status, (json.loads(text) if r.status == 200 else text)


async def test_state_and_v1_calls_in_mesos_shapes(master: Any, make_agent: Any) -> None:
    agent = await make_agent()
    await master.wait_connected()
    await master.run_many([task("cmd", "echo hello-sandbox; exec sleep 30")])
    pod = ExecutorInfo(executor_id=ExecutorID("pod"), type=ExecutorType.DEFAULT,
                       resources=Resources.of(cpus=0.1, mem=32).to_mesos())
    await master.send(RunTasks(FrameworkID("fw1"), master.framework, (task("p1", "exec sleep 30"),), executor=pod, group=True))
    await master.wait_state("cmd", S.TASK_RUNNING)
    await master.wait_state("p1", S.TASK_RUNNING)
    url = f"http://127.0.0.1:{agent.port}"
    async with aiohttp.ClientSession() as s:
        for path in ("/state", "/slave(1)/state"):
            async with s.get(url + path) as r:
                state = await r.json()
            check(state, AGENT_STATE, path)
        (fw,) = state["frameworks"]
        check(fw, AGENT_FRAMEWORK, "framework")
        execs = {e["id"]: e for e in fw["executors"]}
        assert set(execs) == {"cmd", "pod"}
        for e in execs.values():
            check(e, AGENT_EXECUTOR, f"executor {e['id']}")
            for t in e["tasks"]:
                check(t, AGENT_TASK, f"task {t['id']}")
        assert execs["pod"]["type"] == "DEFAULT" and [t["id"] for t in execs["pod"]["tasks"]] == ["p1"]
        # a tool's way to a task's output: the executor's directory, then /files/read
        # (the log writer, a process of its own, creates the file: it may not be there yet)
        stdout = agent.checkpoint.sandbox("fw1", "cmd") / "stdout"
        await master.wait_for(lambda: stdout.exists() and stdout.stat().st_size > 0)
        async with s.get(url + "/files/read", params={"path": execs["cmd"]["directory"] + "/stdout", "offset": "0"}) as r:
            assert (await r.json())["data"] == "hello-sandbox\n"

        status, health = await v1(s, url, {"type": "GET_HEALTH"})
        assert (status, health) == (200, {"type": "GET_HEALTH", "get_health": {"healthy": True}})
        _, version = await v1(s, url, {"type": "GET_VERSION"})
        assert version["get_version"]["version_info"]["version"] == agent.version
        _, flags = await v1(s, url, {"type": "GET_FLAGS"})
        names = {f["name"] for f in flags["get_flags"]["flags"]}
        assert {"work_dir", "port"} <= names and "token" not in names
        _, metrics = await v1(s, url, {"type": "GET_METRICS", "get_metrics": {}})
        assert all(set(m) == {"name", "value"} for m in metrics["get_metrics"]["metrics"]) and metrics["get_metrics"]["metrics"]
        _, tasks = await v1(s, url, {"type": "GET_TASKS"})
        got = tasks["get_tasks"]
        assert set(got) == {"pending_tasks", "queued_tasks", "launched_tasks", "terminated_tasks", "completed_tasks"}
        assert sorted(t["task_id"]["value"] for t in got["launched_tasks"]) == ["cmd", "p1"]
        for t in got["launched_tasks"]:
            check(t, V1_TASK, "v1 task")
        _, fws = await v1(s, url, {"type": "GET_FRAMEWORKS"})
        assert [f["framework_info"]["id"]["value"] for f in fws["get_frameworks"]["frameworks"]] == ["fw1"]
        _, exs = await v1(s, url, {"type": "GET_EXECUTORS"})
        assert sorted(e["executor_info"]["executor_id"]["value"] for e in exs["get_executors"]["executors"]) == ["cmd", "pod"]
        _, whole = await v1(s, url, {"type": "GET_STATE"})
        assert set(whole["get_state"]) == {"get_tasks", "get_executors", "get_frameworks"}
        _, cont = await v1(s, url, {"type": "GET_CONTAINERS"})
        for c in cont["get_containers"]["containers"]:
            check(c, V1_CONTAINER, "container")
        ids = {c["container_id"]["value"] for c in cont["get_containers"]["containers"]}
        # the container ids are those the task statuses carry
        assert {st.container_status.container_id.value for st in master.statuses("cmd")} <= ids

        directory = execs["cmd"]["directory"]
        _, listing = await v1(s, url, {"type": "LIST_FILES", "list_files": {"path": directory}})
        infos = listing["list_files"]["file_infos"]
        for fi in infos:
            check(fi, V1_FILE, "file info")
        assert f"{directory}/stdout" in {fi["path"] for fi in infos}
        _, read = await v1(s, url, {"type": "READ_FILE", "read_file": {"path": directory + "/stdout", "offset": 6}})
        assert read["read_file"]["size"] == 14 and base64.b64decode(read["read_file"]["data"]) == b"sandbox\n"
        # confinement as /files/*, and explicit answers for what is not served
        status, text = await v1(s, url, {"type": "READ_FILE", "read_file": {"path": "/etc/passwd", "offset": 0}})
        assert status == 403
        status, text = await v1(s, url, {"type": "LAUNCH_NESTED_CONTAINER"})
        assert (status, text) == (400, "Agent call LAUNCH_NESTED_CONTAINER is not supported by this agent")
        async with s.post(url + "/api/v1", data=b"\x08\x01", headers={"Content-Type": "application/x-protobuf"}) as r:
            assert r.status == 415


async def test_finished_work_stays_as_completed_executors_and_frameworks(master: Any, make_agent: Any) -> None:
    """A task the agent forgot (terminal and acknowledged) stays in ``/state`` as Mesos' agent
    keeps it: its executor under the framework's ``completed_executors`` while the framework runs
    something else, the framework under ``completed_frameworks`` once nothing of it is left; the
    v1 calls say the same."""
    agent = await make_agent()
    await master.wait_connected()
    await master.run_many([task("done", "echo done"), task("live", "exec sleep 30")])
    assert (await master.wait_terminal("done")).state is S.TASK_FINISHED
    await master.wait_state("live", S.TASK_RUNNING)
    await master.wait_for(lambda: agent.tracker.get("fw1", "done") is None)
    url = f"http://127.0.0.1:{agent.port}"
    async with aiohttp.ClientSession() as s:
        async with s.get(url + "/state") as r:
            state = await r.json()
        assert state["completed_frameworks"] == []
        (fw,) = state["frameworks"]
        assert [e["id"] for e in fw["executors"]] == ["live"]
        (ex,) = fw["completed_executors"]
        check(ex, AGENT_EXECUTOR, "completed executor")
        assert (ex["id"], ex["tasks"], ex["directory"]) == ("done", [], str(agent.checkpoint.sandbox("fw1", "done")))
        (t,) = ex["completed_tasks"]
        check(t, AGENT_TASK, "completed task")
        assert (t["id"], t["state"]) == ("done", "TASK_FINISHED")
        _, exs = await v1(s, url, {"type": "GET_EXECUTORS"})
        assert [e["executor_info"]["executor_id"]["value"] for e in exs["get_executors"]["completed_executors"]] == ["done"]
        _, tasks = await v1(s, url, {"type": "GET_TASKS"})
        assert [t["task_id"]["value"] for t in tasks["get_tasks"]["completed_tasks"]] == ["done"]

        await master.kill("live")
        assert (await master.wait_terminal("live")).state is S.TASK_KILLED
        await master.wait_for(lambda: not agent.tracker.tasks)
        async with s.get(url + "/state") as r:
            state = await r.json()
        assert state["frameworks"] == []
        (fw,) = state["completed_frameworks"]
        check(fw, AGENT_FRAMEWORK, "completed framework")
        assert fw["executors"] == [] and [e["id"] for e in fw["completed_executors"]] == ["done", "live"]
        _, fws = await v1(s, url, {"type": "GET_FRAMEWORKS"})
        got = fws["get_frameworks"]
        assert got["frameworks"] == [] and [f["framework_info"]["id"]["value"] for f in got["completed_frameworks"]] == ["fw1"]
