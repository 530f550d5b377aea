"""Mesos v1 task and executor messages: ``CommandInfo``, ``ExecutorInfo``, containers
(``ContainerInfo``, ``DockerInfo``, ``Image``, ``NetworkInfo``), health and general checks,
``DiscoveryInfo``, ``TaskInfo``, ``TaskGroupInfo``, ``TaskStatus`` (with ``Source`` and ``Reason``)
and ``Task``.
"""

from __future__ import annotations

import enum

import attrs

from protocol.mesos.common import Parameter
from protocol.mesos_common import (
    AgentID,
    ContainerID,
    DurationInfo,
    ExecutorID,
    FrameworkID,
    Labels,
    Resource,
    Scalar,
    TaskID,
    TimeInfo,
    Volume,
)
from protocol.task_states import TaskState

__pure__ = True


# --- tasks and executors --------------------------------------------------------------------


class VariableType(enum.Enum):
    UNKNOWN = "UNKNOWN"
    VALUE = "VALUE"
    SECRET = "SECRET"


@attrs.frozen
class Variable:
    name: str
    value: str | None = None
    type: VariableType | None = None


@attrs.frozen
class Environment:
    variables: tuple[Variable, ...] = ()

    @classmethod
    def of(cls, mapping: dict[str, str]) -> Environment:
        return cls(tuple(Variable(name=k, value=v, type=VariableType.VALUE) for k, v in mapping.items()))

    def as_dict(self) -> dict[str, str]:
        return {v.name: v.value for v in self.variables if v.value is not None}


@attrs.frozen
class URI:
    """A file the fetcher puts into the sandbox (``extract`` defaults to true in Mesos)."""

    value: str
    executable: bool | None = None
    extract: bool | None = None
    cache: bool | None = None
    output_file: str | None = None


@attrs.frozen
class CommandInfo:
    """With ``shell`` true (the default when ``None``) ``value`` runs via ``/bin/sh -c``;
    otherwise ``value`` is the program and ``arguments`` its argv."""

    uris: tuple[URI, ...] = ()
    environment: Environment | None = None
    shell: bool | None = None
    value: str | None = None
    arguments: tuple[str, ...] = ()
    user: str | None = None


class ExecutorType(enum.Enum):
    UNKNOWN = "UNKNOWN"
    DEFAULT = "DEFAULT"
    CUSTOM = "CUSTOM"


class ContainerType(enum.Enum):
    DOCKER = "DOCKER"
    MESOS = "MESOS"


class DockerNetwork(enum.Enum):
    HOST = "HOST"
    BRIDGE = "BRIDGE"
    NONE = "NONE"
    USER = "USER"


@attrs.frozen
class PortMapping:
    host_port: int
    container_port: int
    protocol: str | None = None


@attrs.frozen
class DockerInfo:
    image: str
    network: DockerNetwork | None = None
    port_mappings: tuple[PortMapping, ...] = ()
    privileged: bool | None = None
    parameters: tuple[Parameter, ...] = ()
    force_pull_image: bool | None = None


class ImageType(enum.Enum):
    APPC = "APPC"
    DOCKER = "DOCKER"


@attrs.frozen
class DockerImage:
    name: str


@attrs.frozen
class Image:
    type: ImageType
    docker: DockerImage | None = None
    cached: bool | None = None


@attrs.frozen
class MesosInfo:
    image: Image | None = None


class IPProtocol(enum.Enum):
    IPv4 = "IPv4"
    IPv6 = "IPv6"


@attrs.frozen
class IPAddress:
    protocol: IPProtocol | None = None
    ip_address: str | None = None


@attrs.frozen
class NetworkInfo:
    ip_addresses: tuple[IPAddress, ...] = ()
    name: str | None = None
    groups: tuple[str, ...] = ()
    labels: Labels | None = None
    port_mappings: tuple[PortMapping, ...] = ()


@attrs.frozen
class ContainerInfo:
    """Minimal ``ContainerInfo``: the type, volumes, hostname, docker or mesos image, networks."""

    type: ContainerType
    volumes: tuple[Volume, ...] = ()
    hostname: str | None = None
    docker: DockerInfo | None = None
    mesos: MesosInfo | None = None
    network_infos: tuple[NetworkInfo, ...] = ()


@attrs.frozen
class ContainerStatus:
    container_id: ContainerID | None = None
    network_infos: tuple[NetworkInfo, ...] = ()
    executor_pid: int | None = None


@attrs.frozen
class KillPolicy:
    grace_period: DurationInfo | None = None


class HealthCheckType(enum.Enum):
    UNKNOWN = "UNKNOWN"
    COMMAND = "COMMAND"
    HTTP = "HTTP"
    TCP = "TCP"


@attrs.frozen
class HTTPCheckInfo:
    port: int
    scheme: str | None = None
    path: str | None = None
    statuses: tuple[int, ...] = ()


@attrs.frozen
class TCPCheckInfo:
    port: int


@attrs.frozen
class HealthCheck:
    """Minimal ``HealthCheck`` (durations in seconds as in Mesos)."""

    delay_seconds: float | None = None
    interval_seconds: float | None = None
    timeout_seconds: float | None = None
    consecutive_failures: int | None = None
    grace_period_seconds: float | None = None
    type: HealthCheckType | None = None
    command: CommandInfo | None = None
    http: HTTPCheckInfo | None = None
    tcp: TCPCheckInfo | None = None


class CheckType(enum.Enum):
    UNKNOWN = "UNKNOWN"
    COMMAND = "COMMAND"
    HTTP = "HTTP"
    TCP = "TCP"


@attrs.frozen
class CommandCheck:
    command: CommandInfo


@attrs.frozen
class HttpCheck:
    port: int
    path: str | None = None


@attrs.frozen
class TcpCheck:
    port: int


@attrs.frozen
class CheckInfo:
    """Minimal general ``CheckInfo`` (results are reported, never acted upon)."""

    type: CheckType | None = None
    command: CommandCheck | None = None
    http: HttpCheck | None = None
    tcp: TcpCheck | None = None
    delay_seconds: float | None = None
    interval_seconds: float | None = None
    timeout_seconds: float | None = None


@attrs.frozen
class CheckStatusCommand:
    exit_code: int | None = None


@attrs.frozen
class CheckStatusHttp:
    status_code: int | None = None


@attrs.frozen
class CheckStatusTcp:
    succeeded: bool | None = None


@attrs.frozen
class CheckStatusInfo:
    type: CheckType | None = None
    command: CheckStatusCommand | None = None
    http: CheckStatusHttp | None = None
    tcp: CheckStatusTcp | None = None


class DiscoveryVisibility(enum.Enum):
    FRAMEWORK = "FRAMEWORK"
    CLUSTER = "CLUSTER"
    EXTERNAL = "EXTERNAL"


@attrs.frozen
class Port:
    number: int
    name: str | None = None
    protocol: str | None = None
    visibility: DiscoveryVisibility | None = None
    labels: Labels | None = None


@attrs.frozen
class Ports:
    ports: tuple[Port, ...] = ()


@attrs.frozen
class DiscoveryInfo:
    visibility: DiscoveryVisibility
    name: str | None = None
    environment: str | None = None
    location: str | None = None
    version: str | None = None
    ports: Ports | None = None
    labels: Labels | None = None


@attrs.frozen
class ExecutorInfo:
    executor_id: ExecutorID
    type: ExecutorType | None = None
    framework_id: FrameworkID | None = None
    command: CommandInfo | None = None
    container: ContainerInfo | None = None
    resources: tuple[Resource, ...] = ()
    name: str | None = None
    source: str | None = None
    data: bytes | None = None
    discovery: DiscoveryInfo | None = None
    shutdown_grace_period: DurationInfo | None = None
    labels: Labels | None = None


@attrs.frozen
class TaskInfo:
    """A task to launch: exactly one of ``executor``/``command`` for LAUNCH.

    ``agent_id`` is required by Mesos but optional here: mesoshttp sends ``slave_id`` (ignored)
    instead, and the master then uses the offer's agent.
    """

    name: str
    task_id: TaskID
    agent_id: AgentID | None = None
    resources: tuple[Resource, ...] = ()
    executor: ExecutorInfo | None = None
    command: CommandInfo | None = None
    container: ContainerInfo | None = None
    health_check: HealthCheck | None = None
    check: CheckInfo | None = None
    kill_policy: KillPolicy | None = None
    data: bytes | None = None
    labels: Labels | None = None
    discovery: DiscoveryInfo | None = None
    max_completion_time: DurationInfo | None = None
    limits: dict[str, Scalar] = attrs.field(factory=dict)


@attrs.frozen
class TaskGroupInfo:
    tasks: tuple[TaskInfo, ...] = ()


class Source(enum.Enum):
    """``TaskStatus.Source``."""

    SOURCE_MASTER = "SOURCE_MASTER"
    SOURCE_AGENT = "SOURCE_AGENT"
    SOURCE_EXECUTOR = "SOURCE_EXECUTOR"


class Reason(enum.Enum):
    """``TaskStatus.Reason`` (every name in Mesos' v1 proto)."""

    REASON_COMMAND_EXECUTOR_FAILED = "REASON_COMMAND_EXECUTOR_FAILED"
    REASON_CONTAINER_LAUNCH_FAILED = "REASON_CONTAINER_LAUNCH_FAILED"
    REASON_CONTAINER_LIMITATION = "REASON_CONTAINER_LIMITATION"
    REASON_CONTAINER_LIMITATION_DISK = "REASON_CONTAINER_LIMITATION_DISK"
    REASON_CONTAINER_LIMITATION_MEMORY = "REASON_CONTAINER_LIMITATION_MEMORY"
    REASON_CONTAINER_PREEMPTED = "REASON_CONTAINER_PREEMPTED"
    REASON_CONTAINER_UPDATE_FAILED = "REASON_CONTAINER_UPDATE_FAILED"
    REASON_MAX_COMPLETION_TIME_REACHED = "REASON_MAX_COMPLETION_TIME_REACHED"
    REASON_EXECUTOR_REGISTRATION_TIMEOUT = "REASON_EXECUTOR_REGISTRATION_TIMEOUT"
    REASON_EXECUTOR_REREGISTRATION_TIMEOUT = "REASON_EXECUTOR_REREGISTRATION_TIMEOUT"
    REASON_EXECUTOR_TERMINATED = "REASON_EXECUTOR_TERMINATED"
    REASON_EXECUTOR_UNREGISTERED = "REASON_EXECUTOR_UNREGISTERED"
    REASON_FRAMEWORK_REMOVED = "REASON_FRAMEWORK_REMOVED"
    REASON_GC_ERROR = "REASON_GC_ERROR"
    REASON_INVALID_FRAMEWORKID = "REASON_INVALID_FRAMEWORKID"
    REASON_INVALID_OFFERS = "REASON_INVALID_OFFERS"
    REASON_IO_SWITCHBOARD_EXITED = "REASON_IO_SWITCHBOARD_EXITED"
    REASON_MASTER_DISCONNECTED = "REASON_MASTER_DISCONNECTED"
    REASON_RECONCILIATION = "REASON_RECONCILIATION"
    REASON_RESOURCES_UNKNOWN = "REASON_RESOURCES_UNKNOWN"
    REASON_AGENT_DISCONNECTED = "REASON_AGENT_DISCONNECTED"
    REASON_AGENT_DRAINING = "REASON_AGENT_DRAINING"  # killed because the operator drains its agent
    REASON_AGENT_REMOVED = "REASON_AGENT_REMOVED"
    REASON_AGENT_REMOVED_BY_OPERATOR = "REASON_AGENT_REMOVED_BY_OPERATOR"
    REASON_AGENT_REREGISTERED = "REASON_AGENT_REREGISTERED"
    REASON_AGENT_RESTARTED = "REASON_AGENT_RESTARTED"
    REASON_AGENT_UNKNOWN = "REASON_AGENT_UNKNOWN"
    REASON_TASK_KILLED_DURING_LAUNCH = "REASON_TASK_KILLED_DURING_LAUNCH"
    REASON_TASK_CHECK_STATUS_UPDATED = "REASON_TASK_CHECK_STATUS_UPDATED"
    REASON_TASK_HEALTH_CHECK_STATUS_UPDATED = "REASON_TASK_HEALTH_CHECK_STATUS_UPDATED"
    REASON_TASK_GROUP_INVALID = "REASON_TASK_GROUP_INVALID"
    REASON_TASK_GROUP_UNAUTHORIZED = "REASON_TASK_GROUP_UNAUTHORIZED"
    REASON_TASK_INVALID = "REASON_TASK_INVALID"
    REASON_TASK_UNAUTHORIZED = "REASON_TASK_UNAUTHORIZED"
    REASON_TASK_UNKNOWN = "REASON_TASK_UNKNOWN"


@attrs.frozen
class TaskResourceLimitation:
    resources: tuple[Resource, ...] = ()


@attrs.frozen
class TaskStatus:
    """A task status update. ``uuid`` (16 bytes) present ⇔ reliable, must be acknowledged; any
    update with a ``uuid`` must carry ``agent_id`` (clients dereference it). ``timestamp`` is
    seconds since the epoch."""

    task_id: TaskID
    state: TaskState
    message: str | None = None
    source: Source | None = None
    reason: Reason | None = None
    data: bytes | None = None
    agent_id: AgentID | None = None
    executor_id: ExecutorID | None = None
    timestamp: float | None = None
    uuid: bytes | None = None
    healthy: bool | None = None
    check_status: CheckStatusInfo | None = None
    labels: Labels | None = None
    container_status: ContainerStatus | None = None
    unreachable_time: TimeInfo | None = None
    limitation: TaskResourceLimitation | None = None


@attrs.frozen
class Task:
    """The v1 ``Task`` (operator API): a launched task as the master knows it."""

    name: str
    task_id: TaskID
    framework_id: FrameworkID
    agent_id: AgentID
    state: TaskState
    executor_id: ExecutorID | None = None
    resources: tuple[Resource, ...] = ()
    statuses: tuple[TaskStatus, ...] = ()
    status_update_state: TaskState | None = None
    status_update_uuid: bytes | None = None
    labels: Labels | None = None
    discovery: DiscoveryInfo | None = None
    container: ContainerInfo | None = None
    health_check: HealthCheck | None = None
    kill_policy: KillPolicy | None = None
    check: CheckInfo | None = None
    limits: dict[str, Scalar] = attrs.field(factory=dict)
    user: str | None = None
