"""The agent's disk on real files: a task past its ``disk`` is killed (REASON_CONTAINER_LIMITATION_DISK,
usage and limit in the message) and its sandbox's size shows in ``/state``; finished sandboxes are
kept for ``--gc-delay`` but removed at once when the disk is fuller than ``1 - --gc-disk-headroom``;
a full work dir (a small real file system) leaves checkpoints and status updates working through
the reserve, says so in the log, and takes the reserve back once there is room."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from agent.service import AgentService
from protocol.task_states import TaskState

from ...cgroup_env import small_filesystem

pytestmark = pytest.mark.slow

MB = 1024 * 1024


async def test_a_task_past_its_disk_is_killed(master: Any, make_agent: Any) -> None:
    agent: AgentService = await make_agent(disk_watch_interval=0.1)
    await master.wait_connected()
    await master.run("small", "head -c 3000000 /dev/urandom > blob; sleep 300", disk=8)  # within
    await master.run("big", "head -c 6000000 /dev/urandom > blob; sleep 300", disk=4)  # past
    st = await master.wait_terminal("big")
    assert st.state is TaskState.TASK_FAILED
    assert st.reason is not None and st.reason.value == "REASON_CONTAINER_LIMITATION_DISK"
    assert st.message is not None and st.message.startswith("Disk limit exceeded: the sandbox uses ")
    assert st.message.endswith("of the task's 4.0 MB disk")
    # "big" may pass its disk before "small" has written all of its blob: wait for the watcher to see it
    await master.wait_for(lambda: (u := agent.usage.get(("fw1", "small"))) is not None
                          and (u.disk_used_bytes or 0) >= 3_000_000)
    async with aiohttp.ClientSession() as s, s.get(f"{agent.url}/state") as r:
        tasks = {t["id"]: t for t in (await r.json())["tasks"]}
    assert tasks["small"]["state"] == "TASK_RUNNING"
    assert 3_000_000 <= tasks["small"]["usage"]["disk_used_bytes"] < 8 * MB
    await master.kill("small")
    assert (await master.wait_terminal("small")).state is TaskState.TASK_KILLED


async def test_no_enforcement_only_measures(master: Any, make_agent: Any) -> None:
    agent: AgentService = await make_agent(disk_watch_interval=0.1, enforce_disk_limit=False)
    await master.wait_connected()
    await master.run("big", "head -c 3000000 /dev/urandom > blob; sleep 300", disk=1)
    await master.wait_state("big", TaskState.TASK_RUNNING)
    await master.wait_for(lambda: (u := agent.usage.get(("fw1", "big"))) is not None
                          and (u.disk_used_bytes or 0) >= 3_000_000)
    assert master.terminal("big") is None
    await master.kill("big")
    await master.wait_terminal("big")


async def test_finished_sandboxes_go_at_once_when_the_disk_is_past_the_headroom(master: Any, make_agent: Any,
                                                                                 tmp_path: Path) -> None:
    # this machine's disk is less than 100% full: a headroom of 1.0 puts any disk past it, 0.0 none
    full = await make_agent(tmp_path / "full", gc_delay=3600, gc_disk_headroom=1.0, disk_watch_interval=0.1)
    await master.wait_connected()
    await master.run("a", "echo a")
    await master.wait_terminal("a")
    sandbox = full.checkpoint.sandbox("fw1", "a")
    await master.wait_for(lambda: not sandbox.exists())
    await full.stop()
    roomy = await make_agent(tmp_path / "roomy", gc_delay=3600, gc_disk_headroom=0.0, disk_watch_interval=0.1)
    await master.wait_connected(2)
    await master.run("b", "echo b")
    await master.wait_terminal("b")
    kept = roomy.checkpoint.sandbox("fw1", "b")
    await master.wait_for(lambda: roomy.sandbox_gc and len(roomy.sandbox_gc) == 1)  # scheduled after the ack
    assert kept.exists() and roomy.monitor.gc_max_age() > 0


async def test_a_full_work_dir_keeps_checkpoints_and_updates_going(master: Any, make_agent: Any, tmp_path: Path,
                                                                   caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    with small_filesystem(tmp_path / "small", "40m") as work:
        agent: AgentService = await make_agent(work, work_dir_reserve="8MB", disk_watch_interval=0.1,
                                               log_max_size="1MB", log_max_files=2)
        assert (work / "meta" / "reserve").stat().st_blocks * 512 >= 8 * MB
        await master.wait_connected()
        # fills the file system: its writes fail, it ends, and that end is checkpointed and reported
        # (on tmpfs the file is memory too: the task may hold all of it)
        await master.run("fill", "dd if=/dev/zero of=fill bs=1M", mem=128)
        st = await master.wait_terminal("fill")
        assert st.state is TaskState.TASK_FAILED
        # the next task's checkpoint (a new file) finds no room: the reserve makes it; it runs and reports
        await master.run("next", "echo next")
        assert (await master.wait_terminal("next")).state is TaskState.TASK_FINISHED
        assert master.states("next") == [TaskState.TASK_RUNNING, TaskState.TASK_FINISHED]
        assert "is full: released its 8 MB reserve so that checkpoints and status updates go on" in caplog.text
        assert "checkpoint write failed" not in caplog.text and "checkpoint commit failed" not in caplog.text
        # room again: the reserve is taken back at the next disk check
        (agent.checkpoint.sandbox("fw1", "fill") / "fill").unlink()
        await master.wait_for(lambda: (work / "meta" / "reserve").exists())
        assert "has room again: took back its 8 MB reserve" in caplog.text
        await agent.stop()
