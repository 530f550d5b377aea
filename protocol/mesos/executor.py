"""The Mesos v1 executor API: ``ExecutorCall`` and ``ExecutorEvent`` with their bodies.
"""

from __future__ import annotations

import enum

import attrs

from protocol.mesos.common import AgentInfo, FrameworkInfo
from protocol.mesos.tasks import ExecutorInfo, KillPolicy, TaskGroupInfo, TaskInfo, TaskStatus
from protocol.mesos_common import ContainerID, ExecutorID, FrameworkID, TaskID

__pure__ = True


# --- executor API ---------------------------------------------------------------------------


class ExecutorCallType(enum.Enum):
    UNKNOWN = "UNKNOWN"
    SUBSCRIBE = "SUBSCRIBE"
    UPDATE = "UPDATE"
    MESSAGE = "MESSAGE"
    HEARTBEAT = "HEARTBEAT"


@attrs.frozen
class ExecutorUpdate:
    """Executor ``Call.Update`` (also the items of ``unacknowledged_updates``)."""

    status: TaskStatus


@attrs.frozen
class ExecutorSubscribe:
    unacknowledged_tasks: tuple[TaskInfo, ...] = ()
    unacknowledged_updates: tuple[ExecutorUpdate, ...] = ()


@attrs.frozen
class ExecutorMessage:
    """``{"data": b64}``: executor ``Call.Message`` and ``Event.Message`` alike."""

    data: bytes


@attrs.frozen
class ExecutorCall:
    """A call from an executor to its agent (``POST /api/v1/executor``)."""

    executor_id: ExecutorID
    framework_id: FrameworkID
    type: ExecutorCallType | None = None
    subscribe: ExecutorSubscribe | None = None
    update: ExecutorUpdate | None = None
    message: ExecutorMessage | None = None

    @classmethod
    def make_subscribe(
        cls,
        framework_id: FrameworkID,
        executor_id: ExecutorID,
        unacknowledged_tasks: tuple[TaskInfo, ...] = (),
        unacknowledged_updates: tuple[ExecutorUpdate, ...] = (),
    ) -> ExecutorCall:
        return cls(
            executor_id=executor_id,
            framework_id=framework_id,
            type=ExecutorCallType.SUBSCRIBE,
            subscribe=ExecutorSubscribe(unacknowledged_tasks, unacknowledged_updates),
        )

    @classmethod
    def make_update(cls, framework_id: FrameworkID, executor_id: ExecutorID, status: TaskStatus) -> ExecutorCall:
        return cls(executor_id, framework_id, ExecutorCallType.UPDATE, update=ExecutorUpdate(status))

    @classmethod
    def make_message(cls, framework_id: FrameworkID, executor_id: ExecutorID, data: bytes) -> ExecutorCall:
        return cls(executor_id, framework_id, ExecutorCallType.MESSAGE, message=ExecutorMessage(data))

    @classmethod
    def make_heartbeat(cls, framework_id: FrameworkID, executor_id: ExecutorID) -> ExecutorCall:
        return cls(executor_id, framework_id, ExecutorCallType.HEARTBEAT)


class ExecutorEventType(enum.Enum):
    UNKNOWN = "UNKNOWN"
    SUBSCRIBED = "SUBSCRIBED"
    LAUNCH = "LAUNCH"
    LAUNCH_GROUP = "LAUNCH_GROUP"
    KILL = "KILL"
    ACKNOWLEDGED = "ACKNOWLEDGED"
    MESSAGE = "MESSAGE"
    SHUTDOWN = "SHUTDOWN"
    ERROR = "ERROR"
    HEARTBEAT = "HEARTBEAT"


@attrs.frozen
class ExecutorSubscribed:
    executor_info: ExecutorInfo
    framework_info: FrameworkInfo
    agent_info: AgentInfo
    container_id: ContainerID | None = None


@attrs.frozen
class ExecutorLaunch:
    task: TaskInfo


@attrs.frozen
class ExecutorLaunchGroup:
    task_group: TaskGroupInfo


@attrs.frozen
class ExecutorKill:
    task_id: TaskID
    kill_policy: KillPolicy | None = None


@attrs.frozen
class ExecutorAcknowledged:
    task_id: TaskID
    uuid: bytes


@attrs.frozen
class ExecutorError:
    message: str


@attrs.frozen
class ExecutorEvent:
    """An event from the agent to an executor; SHUTDOWN and HEARTBEAT have no body."""

    type: ExecutorEventType | None = None
    subscribed: ExecutorSubscribed | None = None
    launch: ExecutorLaunch | None = None
    launch_group: ExecutorLaunchGroup | None = None
    kill: ExecutorKill | None = None
    acknowledged: ExecutorAcknowledged | None = None
    message: ExecutorMessage | None = None
    error: ExecutorError | None = None

    @classmethod
    def make_subscribed(
        cls,
        executor_info: ExecutorInfo,
        framework_info: FrameworkInfo,
        agent_info: AgentInfo,
        container_id: ContainerID | None = None,
    ) -> ExecutorEvent:
        return cls(
            type=ExecutorEventType.SUBSCRIBED,
            subscribed=ExecutorSubscribed(executor_info, framework_info, agent_info, container_id),
        )

    @classmethod
    def make_launch(cls, task: TaskInfo) -> ExecutorEvent:
        return cls(type=ExecutorEventType.LAUNCH, launch=ExecutorLaunch(task))

    @classmethod
    def make_launch_group(cls, tasks: tuple[TaskInfo, ...]) -> ExecutorEvent:
        return cls(type=ExecutorEventType.LAUNCH_GROUP, launch_group=ExecutorLaunchGroup(TaskGroupInfo(tasks)))

    @classmethod
    def make_kill(cls, task_id: TaskID, kill_policy: KillPolicy | None = None) -> ExecutorEvent:
        return cls(type=ExecutorEventType.KILL, kill=ExecutorKill(task_id, kill_policy))

    @classmethod
    def make_acknowledged(cls, task_id: TaskID, uuid: bytes) -> ExecutorEvent:
        return cls(type=ExecutorEventType.ACKNOWLEDGED, acknowledged=ExecutorAcknowledged(task_id, uuid))

    @classmethod
    def make_message(cls, data: bytes) -> ExecutorEvent:
        return cls(type=ExecutorEventType.MESSAGE, message=ExecutorMessage(data))

    @classmethod
    def make_shutdown(cls) -> ExecutorEvent:
        return cls(type=ExecutorEventType.SHUTDOWN)

    @classmethod
    def make_error(cls, message: str) -> ExecutorEvent:
        return cls(type=ExecutorEventType.ERROR, error=ExecutorError(message))

    @classmethod
    def make_heartbeat(cls) -> ExecutorEvent:
        return cls(type=ExecutorEventType.HEARTBEAT)
