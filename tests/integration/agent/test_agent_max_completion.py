"""TaskInfo.max_completion_time: a command task still running when it passes is killed and ends
TASK_FAILED with REASON_MAX_COMPLETION_TIME_REACHED, as in Mesos; one that ends in time finishes."""

from __future__ import annotations

from typing import Any

from protocol.mesos import CommandInfo, DurationInfo, TaskInfo
from protocol.mesos_common import TaskID
from protocol.resources import Resources
from protocol.task_states import TaskState as S


def task(tid: str, cmd: str, seconds: float) -> TaskInfo:
    return TaskInfo(name=tid, task_id=TaskID(tid), resources=Resources.of(cpus=0.1, mem=32).to_mesos(),
                    command=CommandInfo(value=cmd), max_completion_time=DurationInfo(int(seconds * 1e9)))


async def test_max_completion_time(master: Any, make_agent: Any) -> None:
    await make_agent()
    await master.wait_connected()
    await master.run_many([task("slow", "exec sleep 30", 0.3), task("quick", "true", 30)])
    st = await master.wait_terminal("slow")
    assert st.state is S.TASK_FAILED and st.reason is not None
    assert st.reason.name == "REASON_MAX_COMPLETION_TIME_REACHED"
    assert st.message == "Task exceeded its max_completion_time of 0.3 s"
    assert (await master.wait_terminal("quick")).state is S.TASK_FINISHED
