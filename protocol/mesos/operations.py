"""Mesos v1 offer operations (``Offer.Operation``: ``Launch``, ``LaunchGroup``,
``Reserve``, ``Unreserve``, ``Create``, ``Destroy``) and their feedback (``OperationState``,
``OperationStatus``, ``OperationRecord``).
"""

from __future__ import annotations

import enum

import attrs

from protocol.mesos.common import UUID
from protocol.mesos.tasks import ExecutorInfo, TaskGroupInfo, TaskInfo
from protocol.mesos_common import AgentID, FrameworkID, OperationID, Resource, ResourceProviderID

__pure__ = True


# --- offer operations -----------------------------------------------------------------------


class OperationType(enum.Enum):
    UNKNOWN = "UNKNOWN"
    LAUNCH = "LAUNCH"
    LAUNCH_GROUP = "LAUNCH_GROUP"
    RESERVE = "RESERVE"
    UNRESERVE = "UNRESERVE"
    CREATE = "CREATE"
    DESTROY = "DESTROY"
    GROW_VOLUME = "GROW_VOLUME"
    SHRINK_VOLUME = "SHRINK_VOLUME"
    CREATE_DISK = "CREATE_DISK"
    DESTROY_DISK = "DESTROY_DISK"


@attrs.frozen
class Launch:
    task_infos: tuple[TaskInfo, ...] = ()


@attrs.frozen
class LaunchGroup:
    executor: ExecutorInfo
    task_group: TaskGroupInfo


@attrs.frozen
class Reserve:
    resources: tuple[Resource, ...] = ()
    source: tuple[Resource, ...] = ()


@attrs.frozen
class Unreserve:
    resources: tuple[Resource, ...] = ()


@attrs.frozen
class Create:
    volumes: tuple[Resource, ...] = ()


@attrs.frozen
class Destroy:
    volumes: tuple[Resource, ...] = ()


@attrs.frozen
class Operation:
    """``Offer.Operation``: one step of an ACCEPT (GROW/SHRINK_VOLUME, CREATE/DESTROY_DISK are
    named in the type enum but carry no body here; the master refuses them)."""

    type: OperationType | None = None
    id: OperationID | None = None
    launch: Launch | None = None
    launch_group: LaunchGroup | None = None
    reserve: Reserve | None = None
    unreserve: Unreserve | None = None
    create: Create | None = None
    destroy: Destroy | None = None

    @classmethod
    def make_launch(cls, *tasks: TaskInfo) -> Operation:
        return cls(type=OperationType.LAUNCH, launch=Launch(tuple(tasks)))

    @classmethod
    def make_launch_group(cls, executor: ExecutorInfo, *tasks: TaskInfo) -> Operation:
        return cls(
            type=OperationType.LAUNCH_GROUP,
            launch_group=LaunchGroup(executor=executor, task_group=TaskGroupInfo(tuple(tasks))),
        )

    @classmethod
    def make_reserve(cls, *resources: Resource) -> Operation:
        return cls(type=OperationType.RESERVE, reserve=Reserve(resources=tuple(resources)))

    @classmethod
    def make_unreserve(cls, *resources: Resource) -> Operation:
        return cls(type=OperationType.UNRESERVE, unreserve=Unreserve(resources=tuple(resources)))

    @classmethod
    def make_create(cls, *volumes: Resource) -> Operation:
        return cls(type=OperationType.CREATE, create=Create(volumes=tuple(volumes)))

    @classmethod
    def make_destroy(cls, *volumes: Resource) -> Operation:
        return cls(type=OperationType.DESTROY, destroy=Destroy(volumes=tuple(volumes)))


class OperationState(enum.Enum):
    OPERATION_UNSUPPORTED = "OPERATION_UNSUPPORTED"
    OPERATION_PENDING = "OPERATION_PENDING"
    OPERATION_FINISHED = "OPERATION_FINISHED"
    OPERATION_FAILED = "OPERATION_FAILED"
    OPERATION_ERROR = "OPERATION_ERROR"
    OPERATION_DROPPED = "OPERATION_DROPPED"
    OPERATION_UNREACHABLE = "OPERATION_UNREACHABLE"
    OPERATION_GONE_BY_OPERATOR = "OPERATION_GONE_BY_OPERATOR"
    OPERATION_RECOVERING = "OPERATION_RECOVERING"
    OPERATION_UNKNOWN = "OPERATION_UNKNOWN"


@attrs.frozen
class OperationStatus:
    state: OperationState
    operation_id: OperationID | None = None
    message: str | None = None
    converted_resources: tuple[Resource, ...] = ()
    uuid: UUID | None = None
    agent_id: AgentID | None = None
    resource_provider_id: ResourceProviderID | None = None


@attrs.frozen
class OperationRecord:
    """Mesos' ``Operation`` (operator GET_OPERATIONS), renamed: ``Operation`` is ``Offer.Operation``."""

    info: Operation
    latest_status: OperationStatus
    uuid: UUID
    framework_id: FrameworkID | None = None
    agent_id: AgentID | None = None
    statuses: tuple[OperationStatus, ...] = ()
