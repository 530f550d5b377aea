"""What the agent's checkpoint holds, as values (pure): the records ``agent/checkpoint.py`` writes
and reads back, and what recovery reads (``Recovery``), which the recovery planner
(``agent/recovery_plan.py``) decides on."""

from __future__ import annotations

from pathlib import Path

import attrs

from protocol.mesos import ExecutorInfo, FrameworkInfo, TaskInfo, TaskStatus

__pure__ = True


class CheckpointError(Exception):
    """A checkpoint problem, naming the file."""

    def __init__(self, path: Path | str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = str(path)
        self.reason = reason


class CorruptCheckpoint(CheckpointError):
    pass


@attrs.frozen
class AgentMeta:
    agent_id: str | None
    boot_id: str
    resources: str
    attributes: str = ""
    hostname: str = ""


@attrs.frozen
class PidRecord:
    pid: int
    create_time: float
    boot_id: str


@attrs.frozen
class TaskRecordFile:
    """The task record (the first record of a task log)."""

    framework_id: str
    task: TaskInfo
    executor: ExecutorInfo | None = None  # the group's executor for LAUNCH_GROUP tasks
    killing_state: bool = False
    gpus: tuple[int, ...] = ()  # NVML indices of the GPU devices assigned to the task
    group: tuple[str, ...] = ()  # the task ids of its task group (LAUNCH_GROUP), itself included


@attrs.frozen
class UpdateLog:
    updates: tuple[TaskStatus, ...]
    acked: frozenset[bytes]
    truncated: bool = False


@attrs.frozen
class RecoveredTaskFiles:
    framework_id: str
    task_id: str
    record: TaskRecordFile | None
    log: UpdateLog | None
    pid: PidRecord | None
    exit_code: int | None
    kill_reason: str | None
    kill_deadline: float | None = None
    broken: CorruptCheckpoint | None = None


@attrs.frozen
class Recovery:
    agent: AgentMeta | None
    frameworks: dict[str, FrameworkInfo]
    tasks: tuple[RecoveredTaskFiles, ...]
    broken: tuple[CorruptCheckpoint, ...]
