"""The batch service's launch crash window: a launch is written before its ACCEPT leaves, and a
restarted service reconciles its LAUNCHING attempts with the master instead of relaunching them,
so no task id is ever launched twice and no task is lost.

The crash is simulated at the worst point: inside the ACCEPT (the fake driver's ``launch``), a
second store opened on the same file sees what a ``kill -9`` at that instant would leave, and a
new service restored from it stands in for the restarted one."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import attrs
import pytest

from frameworks.batch.core import BatchCore, Launch, TaskPhase
from frameworks.batch.model import JobSpec, JobState
from frameworks.batch.planner import OfferView
from frameworks.batch.service import BatchService
from frameworks.batch.store import JobStore
from frameworks.client.demand import DemandBook
from frameworks.client.driver import KnownTask
from protocol.mesos import TaskInfo
from protocol.resources import Resources
from protocol.task_states import TaskState as S


@attrs.define
class FakeDriver:
    """What ``BatchService._execute`` calls on a ``SchedulerDriver``; ``launch`` records the ids
    and what the store on disk holds for them at that instant."""

    store_path: Path
    connected: bool = True
    tasks: dict[str, KnownTask] = attrs.field(factory=dict)
    demands: DemandBook = attrs.field(factory=DemandBook)
    launched: list[str] = attrs.field(factory=list)
    on_disk: dict[str, TaskPhase] = attrs.field(factory=dict)

    async def launch(self, offer_id: str, infos: list[TaskInfo]) -> None:
        crashed = JobStore(self.store_path)  # what a restart right now would load
        try:
            saved = {a.task_id: t.phase for job in crashed.load() for t in job.tasks for a in t.history}
        finally:
            crashed.close()
        for info in infos:
            tid = info.task_id.value
            self.launched.append(tid)
            self.on_disk[tid] = saved.get(tid, TaskPhase.PENDING)

    async def kill(self, task_id: str, agent_id: str | None) -> None: ...
    async def decline(self, offer_ids: tuple[str, ...], refuse_seconds: float) -> None: ...
    async def suppress(self) -> None: ...
    async def revive(self) -> None: ...
    async def send_demand(self) -> bool:
        return False


def offer(oid: str, cpus: float) -> OfferView:
    return OfferView(oid, f"agent-{oid}", f"host-{oid}", "*", Resources.of(cpus=cpus, mem=1024))


def service(work_dir: Path) -> tuple[BatchService, FakeDriver]:
    svc = BatchService("127.0.0.1:9", work_dir, now=lambda: 0.0)
    fake = FakeDriver(svc.store.path)
    svc.host.driver = cast(Any, fake)
    for job in svc.store.open().load():  # what _start does
        svc.core.restore(job)
    return svc, fake


async def test_a_launch_is_durable_before_its_accept_and_is_reconciled_after_a_crash(tmp_path: Path) -> None:
    svc, first = service(tmp_path)
    try:
        jid, _ = svc.core.submit(JobSpec(name="arr", argv=("true",), cpus=1.0, mem=64.0, count=3), 0.0)
        await svc.store.open().awrite([svc.core.jobs[jid]])
        await svc._execute(svc.core.schedule([offer("o1", cpus=2)], 0.0))
        assert first.launched == ["j1-0-0", "j1-1-0"]
        # write-first: at the ACCEPT the attempts were already LAUNCHING on disk
        assert first.on_disk == {"j1-0-0": TaskPhase.LAUNCHING, "j1-1-0": TaskPhase.LAUNCHING}
    finally:
        svc.store.close()  # the crash: nothing written after the ACCEPT left

    again, second = service(tmp_path)
    try:
        job = again.core.jobs[jid]
        assert [t.phase for t in job.tasks] == [TaskPhase.LAUNCHING, TaskPhase.LAUNCHING, TaskPhase.PENDING]
        # on re-subscription the driver reconciles both attempts explicitly
        again.host.subscribed(cast(Any, second), "fw-1", None)
        assert {t: (k.agent_id, k.state) for t, k in second.tasks.items()} == {
            "j1-0-0": ("agent-o1", S.TASK_STAGING),
            "j1-1-0": ("agent-o1", S.TASK_STAGING),
        }
        # meanwhile they are not launched again; only the task that never left is
        await again._execute(again.core.schedule([offer("o2", cpus=3)], 1.0))
        assert second.launched == ["j1-2-0"]
        # the answers: one ran (adopted), the master never heard of the other (a new attempt id)
        again.host.update(cast(Any, second), _status("j1-0-0", S.TASK_RUNNING))
        again.host.update(cast(Any, second), _status("j1-1-0", S.TASK_UNKNOWN))
        assert job.tasks[0].phase is TaskPhase.RUNNING and job.tasks[1].phase is TaskPhase.PENDING
        assert job.tasks[1].failures == 0  # never ran: no retry spent
        await again._execute(again.core.schedule([offer("o3", cpus=1)], 2.0))
        assert second.launched == ["j1-2-0", "j1-1-1"]
        for tid in ("j1-0-0", "j1-1-1", "j1-2-0"):
            again.host.update(cast(Any, second), _status(tid, S.TASK_FINISHED))
        assert job.state is JobState.SUCCEEDED
        every = first.launched + second.launched
        assert len(every) == len(set(every))  # no task id launched twice
    finally:
        again.store.close()


async def test_a_launch_while_disconnected_goes_back_to_pending(tmp_path: Path) -> None:
    svc, fake = service(tmp_path)
    try:
        fake.connected = False
        jid, _ = svc.core.submit(JobSpec(name="one", argv=("true",), cpus=1.0, mem=64.0), 0.0)
        await svc._execute(svc.core.schedule([offer("o1", cpus=1)], 0.0))
        assert fake.launched == [] and svc.core.jobs[jid].tasks[0].phase is TaskPhase.PENDING
        assert svc.core.active_attempts() == []
    finally:
        svc.store.close()


def _status(task_id: str, state: S) -> Any:
    from protocol.mesos import TaskStatus
    from protocol.mesos_common import AgentID, TaskID

    return TaskStatus(task_id=TaskID(task_id), state=state, agent_id=AgentID("agent-o1"))


@pytest.mark.parametrize("answer", [S.TASK_LOST, S.TASK_GONE, S.TASK_DROPPED, S.TASK_UNKNOWN])
def test_a_launch_the_master_never_ran_is_retried_under_a_new_attempt_id(answer: S) -> None:
    core = BatchCore()
    jid, _ = core.submit(JobSpec(name="one", argv=("true",), cpus=1.0, mem=64.0), 0.0)
    (launch,) = [e for e in core.schedule([offer("o1", cpus=1)], 0.0) if isinstance(e, Launch)]
    assert [t.task_id for t in launch.tasks] == ["j1-0-0"] and core.active_attempts() == [("j1-0-0", "agent-o1")]
    core.on_update("j1-0-0", answer, 1.0)  # the explicit reconciliation's answer
    task = core.jobs[jid].tasks[0]
    assert task.phase is TaskPhase.PENDING and task.failures == 0 and core.active_attempts() == []
    again = [t.task_id for e in core.schedule([offer("o2", cpus=1)], 2.0) if isinstance(e, Launch) for t in e.tasks]
    assert again == ["j1-0-1"]  # a new id: the old one is never launched twice


@pytest.mark.parametrize("answer", [S.TASK_RUNNING, S.TASK_FINISHED])
def test_a_launch_the_master_knows_is_adopted(answer: S) -> None:
    core = BatchCore()
    jid, _ = core.submit(JobSpec(name="one", argv=("true",), cpus=1.0, mem=64.0), 0.0)
    core.schedule([offer("o1", cpus=1)], 0.0)
    core.on_update("j1-0-0", answer, 1.0)
    task = core.jobs[jid].tasks[0]
    assert task.attempt == 0 and task.phase is (TaskPhase.RUNNING if answer is S.TASK_RUNNING else TaskPhase.SUCCEEDED)
