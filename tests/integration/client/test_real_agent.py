"""The client library against a real in-process master and a real agent process: real task
processes finish, fail and are killed; updates are acknowledged; the offer comes back."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from frameworks.cli.common import ManagedProcess, start_process, stop_process
from frameworks.client.driver import Scheduler, SchedulerDriver
from frameworks.client.placement import Ask, first_fit
from frameworks.client.transport import HttpTransport
from master.service import MasterService
from protocol.backoff import Backoff
from protocol.mesos import CommandInfo, FrameworkInfo, TaskInfo, TaskStatus
from protocol.mesos_common import TaskID
from protocol.resources import Resources
from protocol.task_states import TaskState

from ..cluster import running_master

pytestmark = pytest.mark.slow


@pytest.fixture
async def master(tmp_path: Path) -> AsyncIterator[MasterService]:
    async with running_master(tmp_path / "master") as svc:
        yield svc


@pytest.fixture
def agent(master: MasterService, tmp_path: Path) -> Iterator[ManagedProcess]:
    p = start_process(
        "agent",
        [sys.executable, "-m", "agent.main", "--master", master.url.removeprefix("http://"), "--work-dir",
         str(tmp_path / "agent"), "--resources", "cpus:2;mem:512;disk:100", "--default-grace", "0.5"],
        log_path=tmp_path / "agent.log",
    )
    try:
        yield p
    finally:
        stop_process(p)


class Last(Scheduler):
    def __init__(self) -> None:
        self.final: dict[str, TaskStatus] = {}

    def update(self, driver: SchedulerDriver, status: TaskStatus) -> None:
        if status.state not in (TaskState.TASK_STAGING, TaskState.TASK_STARTING, TaskState.TASK_RUNNING):
            self.final[status.task_id.value] = status


def shell_task(tid: str, cmd: str, res: Resources) -> TaskInfo:
    return TaskInfo(name=tid, task_id=TaskID(tid), resources=res.to_mesos(), command=CommandInfo(shell=True, value=cmd))


async def test_real_processes_finish_fail_and_get_killed(master: MasterService, agent: ManagedProcess) -> None:
    last = Last()
    d = SchedulerDriver(FrameworkInfo(user="u", name="real-agent-it"), HttpTransport(master.url), last,
                        backoff=Backoff(0.01, 0.1))
    async with d:
        await d.wait_subscribed(30)
        await d.wait_for(lambda: len(d.offers) >= 1, 60)
        shape = Resources.of(cpus=0.5, mem=64)
        asks = [("ok", "true"), ("bad", "exit 3"), ("long", "sleep 30")]
        for tid, cmd in asks:
            p = await d.wait_for(lambda: first_fit(list(d.offers), Ask(shape)), 30)
            await d.launch(p.offer_id, [shell_task(tid, cmd, p.resources)])
        await d.wait_for(lambda: {"ok", "bad"} <= set(last.final), 60)
        assert last.final["ok"].state is TaskState.TASK_FINISHED
        assert last.final["bad"].state is TaskState.TASK_FAILED
        await d.wait_for(lambda: "long" in d.tasks and d.tasks["long"].state is TaskState.TASK_RUNNING, 30)
        await d.kill("long")
        await d.wait_for(lambda: "long" in last.final, 30)
        assert last.final["long"].state is TaskState.TASK_KILLED
        assert not d.tasks
        await d.teardown()
