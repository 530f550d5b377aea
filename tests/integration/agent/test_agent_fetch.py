"""A real agent in-process with CommandInfo.uris: the files are in the sandbox before the task
runs, TASK_STARTING then TASK_RUNNING say what was fetched, a failed fetch is TASK_FAILED, a
kill during a fetch ends it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from protocol.mesos import URI, CommandInfo, TaskInfo
from protocol.mesos_common import TaskID
from protocol.resources import Resources
from protocol.task_states import TaskState as S

from .fileserver import FileServer, tgz

pytestmark = pytest.mark.slow


@pytest.fixture
async def server() -> AsyncIterator[FileServer]:
    s = await FileServer().start()
    yield s
    await s.stop()


def task(tid: str, cmd: str, *uris: URI) -> TaskInfo:
    return TaskInfo(name=tid, task_id=TaskID(tid), resources=Resources.of(cpus=0.1, mem=32).to_mesos(),
                    command=CommandInfo(value=cmd, uris=uris))


async def test_task_runs_with_its_fetched_files(master: Any, make_agent: Any, server: FileServer) -> None:
    server.files["app.tgz"] = tgz({"app/main.sh": (b"echo from-archive $(cat app/conf)\n", 0o755), "app/conf": (b"v1", 0o644)})
    server.files["tool"] = b"#!/bin/sh\necho tool-ok\n"
    agent = await make_agent()
    await master.wait_connected()
    await master.run_many([task("t", "./app/main.sh && ./tool", URI(server.url("/f/app.tgz"), cache=True),
                                URI(server.url("/f/tool"), executable=True))])
    st = await master.wait_terminal("t")
    assert st.state is S.TASK_FINISHED, st
    assert master.states("t") == [S.TASK_STARTING, S.TASK_RUNNING, S.TASK_FINISHED]
    starting, running = master.statuses("t")[0], next(s for s in master.statuses("t") if s.state is S.TASK_RUNNING)
    assert starting.message == "Fetching 2 URIs into the sandbox"
    assert running.message is not None and running.message.startswith("pid ") and "(fetched 2 URIs: " in running.message
    out = agent.checkpoint.sandbox("fw1", "t") / "stdout"
    assert out.read_text() == "from-archive v1\ntool-ok\n"
    assert "Fetching URI" in (agent.checkpoint.sandbox("fw1", "t") / "stderr").read_text()
    # the same archive again: from the agent's cache, no second download
    await master.run_many([task("t2", "./app/main.sh", URI(server.url("/f/app.tgz"), cache=True))])
    assert (await master.wait_terminal("t2")).state is S.TASK_FINISHED
    assert server.hits["app.tgz"] == 1
    running2 = next(s for s in master.statuses("t2") if s.state is S.TASK_RUNNING)
    assert "1 from the cache" in (running2.message or "")


async def test_failed_fetch_and_invalid_uri(master: Any, make_agent: Any, server: FileServer) -> None:
    await make_agent()
    await master.wait_connected()
    await master.run_many([
        task("missing", "true", URI(server.url("/f/nope.tgz"))),
        task("hdfs", "true", URI("hdfs://namenode/x.tgz")),
    ])
    st = await master.wait_terminal("missing")
    assert st.state is S.TASK_FAILED and st.reason is not None and st.reason.name == "REASON_CONTAINER_LAUNCH_FAILED"
    assert st.message == (f"Failed to fetch all URIs for container 'missing': Failed to fetch '{server.url('/f/nope.tgz')}': "
                          "Error downloading resource, received HTTP return code 404")
    assert master.states("missing") == [S.TASK_STARTING, S.TASK_FAILED]  # never ran
    st = await master.wait_terminal("hdfs")
    assert st.state is S.TASK_ERROR and "scheme 'hdfs' is not supported" in (st.message or "")


async def test_kill_during_fetch(master: Any, make_agent: Any, server: FileServer) -> None:
    agent = await make_agent(fetcher_stall_timeout=30.0)
    await master.wait_connected()
    await master.run_many([task("slow", "true", URI(server.url("/stall")))])
    await master.wait_state("slow", S.TASK_STARTING)
    await master.wait_for(lambda: agent.fetcher.fetching("t/fw1/slow"))
    await master.kill("slow")
    st = await master.wait_terminal("slow", within=10)
    assert st.state is S.TASK_KILLED and st.reason is not None and st.reason.name == "REASON_TASK_KILLED_DURING_LAUNCH"
    assert master.states("slow") == [S.TASK_STARTING, S.TASK_KILLED]
