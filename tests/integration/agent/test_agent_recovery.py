"""Recovery decisions with an in-process agent: R5 (changed resources) and R6 (reboot, pid reuse)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import psutil
import pytest

from agent.checkpoint import AgentMeta, Checkpoint, PidRecord, TaskRecordFile
from agent.launcher import boot_id
from agent.service import StartupError
from protocol.mesos import CommandInfo, TaskInfo
from protocol.mesos_common import TaskID
from protocol.task_states import TaskState as S

pytestmark = pytest.mark.slow

RES = "cpus:4;mem:4096;disk:1000;ports:[31000-32000]"


def fake_checkpoint(work: Path, master: Any, boot: str, pid: PidRecord) -> None:
    """What an agent that ran task ``t`` as ``pid`` would have left behind."""
    cp = Checkpoint(work)
    cp.init()
    cp.write_agent(AgentMeta("agent-1", boot, str(_canonical(RES)), "", "host"))
    cp.write_framework("fw1", master.framework)
    cp.write_task(
        TaskRecordFile("fw1", TaskInfo(name="t", task_id=TaskID("t"), command=CommandInfo(value="sleep 60")))
    )
    cp.commit()
    cp.write_pid("fw1", "t", pid)
    cp.commit()


def _canonical(text: str) -> str:
    from protocol.resources import Resources

    return str(Resources.parse(text))


async def test_r6_reboot_and_pid_reuse_are_neither_adopted_nor_killed(
    master: Any, make_agent: Any, tmp_path: Path
) -> None:
    me = psutil.Process(os.getpid())  # a live process standing in for "someone who got the old pid"
    # a reboot: the boot id differs, so the pid record means nothing
    fake_checkpoint(tmp_path / "a", master, "old-boot", PidRecord(me.pid, me.create_time(), "old-boot"))
    agent = await make_agent(tmp_path / "a")
    st = await master.wait_terminal("t")
    assert st.state is S.TASK_LOST and st.reason is not None and st.reason.name == "REASON_AGENT_RESTARTED"
    assert me.is_running() and not agent.launcher.pids()


async def test_r6_same_boot_pid_reused_by_another_process(
    master: Any, make_agent: Any, tmp_path: Path
) -> None:
    me = psutil.Process(os.getpid())
    fake_checkpoint(tmp_path / "b", master, boot_id(), PidRecord(me.pid, me.create_time() - 100.0, boot_id()))
    agent = await make_agent(tmp_path / "b")
    st = await master.wait_terminal("t")
    assert st.state is S.TASK_LOST
    assert me.is_running() and not agent.launcher.pids()


async def test_r5_changed_resources(master: Any, make_agent: Any, tmp_path: Path) -> None:
    work = tmp_path / "c"
    first = await make_agent(work)
    await master.wait_connected()
    await master.run("old", "sleep 60")
    st = await master.wait_state("old", S.TASK_RUNNING)
    wrapper = psutil.Process(int((st.message or "pid 0").split()[1]))
    await first.stop()  # the agent goes away; its task keeps running
    assert wrapper.is_running()
    with pytest.raises(StartupError, match="resources changed"):
        await make_agent(work, resources="cpus:2;mem:1024;disk:1000", strict=True)
    assert wrapper.is_running()  # strict refusal touches nothing
    await make_agent(work, resources="cpus:2;mem:1024;disk:1000")
    reg = await master.wait_connected(2)
    assert reg.agent_id is None and reg.tasks == ()  # a new agent; nothing merged
    await asyncio.to_thread(wrapper.wait, 10)  # the old task was killed


async def test_finished_log_left_behind_is_removed_silently(master: Any, make_agent: Any, tmp_path: Path) -> None:
    from protocol.mesos import TaskStatus
    from protocol.mesos_common import AgentID

    work = tmp_path / "d"
    fake_checkpoint(work, master, boot_id(), PidRecord(1, 0.0, boot_id()))
    cp = Checkpoint(work)
    st = TaskStatus(task_id=TaskID("t"), state=S.TASK_FINISHED, uuid=b"u" * 16, agent_id=AgentID("agent-1"))
    cp.append_update("fw1", "t", st)
    cp.append_ack("fw1", "t", b"u" * 16)
    cp.commit()
    agent = await make_agent(work)
    reg = await master.wait_connected()
    assert reg.tasks == () and not agent.tracker.tasks
    assert not cp.task_log("fw1", "t").exists()
    assert master.statuses("t") == []
