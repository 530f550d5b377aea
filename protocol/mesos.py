"""The Mesos v1 message catalogue: scheduler, executor and operator API, as frozen attrs classes.

Field names are exactly the proto field names; the JSON and msgpack forms come from
``protocol.codec`` (see MESOS_COMPAT.md). Conventions (as in ``protocol.mesos_common``, whose value
types are re-exported here): an optional field defaults to ``None`` and is omitted on the wire; a
repeated field is a tuple defaulting to ``()``; enums are ``enum.Enum`` whose member names and
values are the wire names. Proto2 ``required`` fields have no default, with deliberate exceptions
for what real clients send (all noted on the class):

* ``TaskInfo.agent_id`` is optional: mesoshttp omits it and sends ``slave_id`` instead (ignored);
  the master treats a missing ``agent_id`` as the offer's agent.
* ``Call.type``/``Event.type`` are optional as in Mesos' own proto, so an unknown type name is
  dropped while decoding and reported by :func:`validate_call` ("Expecting 'type' ...").
* ``Call.requests``: mesoshttp sends REQUEST with the list at top level and no ``request``
  object; we accept both shapes.
* Agora's REQUEST extension: :class:`Request` carries optional demand fields (``count``,
  ``gang_id``, ``gang_min``, ``revocable_ok``, ``priority``, ``role``) next to Mesos'
  ``agent_id``/``resources`` (the per-unit shape). Mesos clients never send them.

Builders are ``make_*`` classmethods (a proto field already owns the plain name, e.g.
``Call.subscribe``): ``Call.make_subscribe(info)``, ``Event.make_update(status)``, ...
``validate_call``/``validate_executor_call``/``validate_operator_call`` implement the structural
rules of MESOS_COMPAT.md §1.5 (the semantic ones belong to the master).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable

import attrs

from protocol.mesos_common import (
    AgentID,
    AllocationInfo,
    Attribute,
    ContainerID,
    DiskInfo,
    DurationInfo,
    ExecutorID,
    FrameworkID,
    Label,
    Labels,
    OfferID,
    OperationID,
    Persistence,
    Range,
    Ranges,
    ReservationInfo,
    ReservationType,
    Resource,
    ResourceProviderID,
    RevocableInfo,
    Scalar,
    SharedInfo,
    TaskID,
    Text,
    TimeInfo,
    ValueSet,
    ValueType,
    Volume,
    VolumeMode,
)
from protocol.task_states import TaskState

__pure__ = True

__all__ = [  # noqa: RUF022 - grouped by topic, not sorted
    # re-exported value types
    "AgentID", "AllocationInfo", "Attribute", "ContainerID", "DiskInfo", "DurationInfo", "ExecutorID",
    "FrameworkID", "Label", "Labels", "OfferID", "OperationID", "Persistence", "Range", "Ranges",
    "ReservationInfo", "ReservationType", "Resource", "ResourceProviderID", "RevocableInfo", "Scalar",
    "SharedInfo", "TaskID", "Text", "TimeInfo", "ValueSet", "ValueType", "Volume", "VolumeMode",
    "TaskState",
    # common
    "Address", "URL", "Parameter", "Parameters", "DomainInfo", "FaultDomain", "FaultDomainName",
    "UUID", "Credential",
    # framework / master / agent
    "CapabilityType", "Capability", "OfferFilters", "ResourceQuantities", "MinAllocatableResources",
    "FrameworkInfo", "MasterCapabilityType", "MasterCapability", "MasterInfo", "AgentCapabilityType",
    "AgentCapability", "AgentInfo",
    # offers
    "Unavailability", "Offer", "InverseOffer", "Filters", "Request",
    # tasks
    "VariableType", "Variable", "Environment", "URI", "CommandInfo", "ExecutorType", "ExecutorInfo",
    "ContainerType", "DockerNetwork", "PortMapping", "DockerInfo", "ImageType", "DockerImage", "Image",
    "MesosInfo", "IPProtocol", "IPAddress", "NetworkInfo", "ContainerInfo", "ContainerStatus",
    "KillPolicy", "HealthCheckType", "HTTPCheckInfo", "TCPCheckInfo", "HealthCheck", "CheckType",
    "CommandCheck", "HttpCheck", "TcpCheck", "CheckInfo", "CheckStatusCommand", "CheckStatusHttp",
    "CheckStatusTcp", "CheckStatusInfo", "DiscoveryVisibility", "Port", "Ports", "DiscoveryInfo",
    "TaskInfo", "TaskGroupInfo", "Source", "Reason", "TaskResourceLimitation", "TaskStatus", "Task",
    # operations
    "OperationType", "Launch", "LaunchGroup", "Reserve", "Unreserve", "Create", "Destroy", "Operation",
    "OperationState", "OperationStatus", "OperationRecord",
    # scheduler calls
    "CallType", "Subscribe", "Accept", "Decline", "AcceptInverseOffers", "DeclineInverseOffers",
    "Revive", "Suppress", "Kill", "Shutdown", "Acknowledge", "AcknowledgeOperationStatus",
    "ReconcileTask", "Reconcile", "ReconcileOperation", "ReconcileOperations", "Message",
    "RequestCall", "UpdateFramework", "Call",
    # scheduler events
    "EventType", "Subscribed", "Offers", "InverseOffers", "Rescind", "RescindInverseOffer", "Update",
    "UpdateOperationStatus", "MessageEvent", "Failure", "Error", "Event",
    # executor API
    "ExecutorCallType", "ExecutorSubscribe", "ExecutorUpdate", "ExecutorMessage", "ExecutorCall",
    "ExecutorEventType", "ExecutorSubscribed", "ExecutorLaunch", "ExecutorLaunchGroup", "ExecutorKill",
    "ExecutorAcknowledged", "ExecutorError", "ExecutorEvent",
    # operator API
    "OperatorCallType", "GetMetricsCall", "SetLoggingLevel", "ListFilesCall", "ReadFileCall",
    "WeightInfo", "UpdateWeights", "ReserveResources", "UnreserveResources", "CreateVolumes",
    "DestroyVolumes", "QuotaConfig", "UpdateQuota", "RemoveQuota", "Teardown", "DrainConfig",
    "DrainAgent", "DeactivateAgent", "ReactivateAgent", "MarkAgentGone", "OperatorCall",
    "OperatorResponseType", "GetHealth", "Flag", "GetFlags", "VersionInfo", "GetVersion", "Metric",
    "GetMetrics", "GetLoggingLevel", "FileInfo", "ListFiles", "ReadFile", "DrainState", "DrainInfo",
    "AgentRecord", "GetAgents", "FrameworkRecord", "GetFrameworks", "ExecutorRecord", "GetExecutors",
    "GetOperations", "GetTasks", "RoleQuota", "Role", "GetRoles", "GetWeights", "GetMaster",
    "QuotaInfo", "QuotaStatus", "GetQuota", "GetState", "OperatorResponse",
    # operator API: event stream (SUBSCRIBE)
    "OperatorEventType", "OperatorSubscribed", "TaskAdded", "TaskUpdated", "AgentAdded",
    "AgentRemoved", "FrameworkAdded", "FrameworkUpdated", "FrameworkRemoved", "OperatorEvent",
    # validation
    "UUID_BYTES", "validate_call", "validate_executor_call", "validate_operator_call",
]  # fmt: skip


def _lower(t: enum.Enum) -> str:
    return t.name.lower()


# --- common ---------------------------------------------------------------------------------


@attrs.frozen
class Address:
    """A network address: ``ip`` is the dotted string here (unlike ``MasterInfo.ip``).
    ``port`` is required (keyword-only so the fields keep Mesos' order)."""

    hostname: str | None = None
    ip: str | None = None
    port: int = attrs.field(kw_only=True)


@attrs.frozen
class Parameter:
    key: str
    value: str


@attrs.frozen
class Parameters:
    parameter: tuple[Parameter, ...] = ()


@attrs.frozen
class URL:
    scheme: str
    address: Address
    path: str | None = None
    query: tuple[Parameter, ...] = ()
    fragment: str | None = None


@attrs.frozen
class FaultDomainName:
    name: str


@attrs.frozen
class FaultDomain:
    region: FaultDomainName
    zone: FaultDomainName


@attrs.frozen
class DomainInfo:
    fault_domain: FaultDomain | None = None


@attrs.frozen
class UUID:
    """Mesos ``UUID`` message: 16 raw bytes."""

    value: bytes


@attrs.frozen
class Credential:
    principal: str
    secret: str | None = None


# --- framework, master, agent ---------------------------------------------------------------


class CapabilityType(enum.Enum):
    """``FrameworkInfo.Capability.Type``, plus Agora's ``REUSABLE_OFFERS`` (lease-model offers)."""

    UNKNOWN = "UNKNOWN"
    REVOCABLE_RESOURCES = "REVOCABLE_RESOURCES"
    TASK_KILLING_STATE = "TASK_KILLING_STATE"
    GPU_RESOURCES = "GPU_RESOURCES"
    SHARED_RESOURCES = "SHARED_RESOURCES"
    PARTITION_AWARE = "PARTITION_AWARE"
    MULTI_ROLE = "MULTI_ROLE"
    RESERVATION_REFINEMENT = "RESERVATION_REFINEMENT"
    REGION_AWARE = "REGION_AWARE"
    REUSABLE_OFFERS = "REUSABLE_OFFERS"


@attrs.frozen
class Capability:
    """A framework capability; an unknown type name decodes to ``type=None``."""

    type: CapabilityType | None = None


@attrs.frozen
class ResourceQuantities:
    quantities: dict[str, Scalar] = attrs.field(factory=dict)


@attrs.frozen
class MinAllocatableResources:
    quantities: tuple[ResourceQuantities, ...] = ()


@attrs.frozen
class OfferFilters:
    min_allocatable_resources: MinAllocatableResources | None = None


@attrs.frozen
class FrameworkInfo:
    """``failover_timeout`` in seconds (Mesos default 0); ``role`` is the pre-MULTI_ROLE field."""

    user: str
    name: str
    id: FrameworkID | None = None
    failover_timeout: float | None = None
    checkpoint: bool | None = None
    role: str | None = None
    roles: tuple[str, ...] = ()
    hostname: str | None = None
    principal: str | None = None
    webui_url: str | None = None
    capabilities: tuple[Capability, ...] = ()
    labels: Labels | None = None
    offer_filters: dict[str, OfferFilters] = attrs.field(factory=dict)

    def has_capability(self, t: CapabilityType) -> bool:
        return any(c.type is t for c in self.capabilities)

    def effective_roles(self) -> tuple[str, ...]:
        """``roles`` with MULTI_ROLE, else ``(role or "*",)``."""
        if self.has_capability(CapabilityType.MULTI_ROLE):
            return self.roles
        return (self.role if self.role is not None else "*",)


class MasterCapabilityType(enum.Enum):
    UNKNOWN = "UNKNOWN"
    AGENT_UPDATE = "AGENT_UPDATE"
    AGENT_DRAINING = "AGENT_DRAINING"
    QUOTA_V2 = "QUOTA_V2"
    # Agora: the master takes ACKNOWLEDGE_MANY calls (many acknowledgements in one call)
    ACKNOWLEDGE_MANY = "ACKNOWLEDGE_MANY"


@attrs.frozen
class MasterCapability:
    type: MasterCapabilityType | None = None


@attrs.frozen
class MasterInfo:
    """``ip`` is the IPv4 address as a network-order uint32 (127.0.0.1 → 16777343)."""

    id: str
    ip: int
    port: int
    pid: str | None = None
    hostname: str | None = None
    version: str | None = None
    address: Address | None = None
    domain: DomainInfo | None = None
    capabilities: tuple[MasterCapability, ...] = ()


class AgentCapabilityType(enum.Enum):
    UNKNOWN = "UNKNOWN"
    MULTI_ROLE = "MULTI_ROLE"
    HIERARCHICAL_ROLE = "HIERARCHICAL_ROLE"
    RESERVATION_REFINEMENT = "RESERVATION_REFINEMENT"
    RESOURCE_PROVIDER = "RESOURCE_PROVIDER"
    RESIZE_VOLUME = "RESIZE_VOLUME"
    AGENT_OPERATION_FEEDBACK = "AGENT_OPERATION_FEEDBACK"
    AGENT_DRAINING = "AGENT_DRAINING"
    TASK_RESOURCE_LIMITS = "TASK_RESOURCE_LIMITS"


@attrs.frozen
class AgentCapability:
    type: AgentCapabilityType | None = None


@attrs.frozen
class AgentInfo:
    hostname: str
    port: int | None = None
    resources: tuple[Resource, ...] = ()
    attributes: tuple[Attribute, ...] = ()
    id: AgentID | None = None
    domain: DomainInfo | None = None
    capabilities: tuple[AgentCapability, ...] = ()


# --- offers ---------------------------------------------------------------------------------


@attrs.frozen
class Unavailability:
    start: TimeInfo
    duration: DurationInfo | None = None


@attrs.frozen
class Offer:
    id: OfferID
    framework_id: FrameworkID
    agent_id: AgentID
    hostname: str
    url: URL | None = None
    domain: DomainInfo | None = None
    resources: tuple[Resource, ...] = ()
    attributes: tuple[Attribute, ...] = ()
    executor_ids: tuple[ExecutorID, ...] = ()
    unavailability: Unavailability | None = None
    allocation_info: AllocationInfo | None = None


@attrs.frozen
class InverseOffer:
    id: OfferID
    framework_id: FrameworkID
    unavailability: Unavailability
    url: URL | None = None
    agent_id: AgentID | None = None
    resources: tuple[Resource, ...] = ()


@attrs.frozen
class Filters:
    """``refuse_seconds`` defaults to 5.0 when absent (Mesos proto default)."""

    refuse_seconds: float | None = None

    DEFAULT_REFUSE_SECONDS = 5.0

    def effective_refuse_seconds(self) -> float:
        r = self.refuse_seconds
        if r is None or r < 0 or r != r:
            return self.DEFAULT_REFUSE_SECONDS
        return min(r, 365 * 86400.0)


@attrs.frozen
class Request:
    """Mesos ``Request`` (``agent_id``, ``resources``) plus Agora's demand extension.

    Agora reads a request as a standing demand: ``count`` units (default 1) of the shape
    ``resources``; ``gang_id``/``gang_min``: at least ``gang_min`` units must be offered together
    (whole or nothing); ``revocable_ok``: revocable resources may serve it; higher ``priority``
    first; ``role`` (default the framework's first role) names the role the demand is for.
    """

    agent_id: AgentID | None = None
    resources: tuple[Resource, ...] = ()
    count: int | None = None
    gang_id: str | None = None
    gang_min: int | None = None
    revocable_ok: bool | None = None
    priority: int | None = None
    role: str | None = None


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


# --- scheduler calls ------------------------------------------------------------------------


class CallType(enum.Enum):
    UNKNOWN = "UNKNOWN"
    SUBSCRIBE = "SUBSCRIBE"
    TEARDOWN = "TEARDOWN"
    ACCEPT = "ACCEPT"
    DECLINE = "DECLINE"
    ACCEPT_INVERSE_OFFERS = "ACCEPT_INVERSE_OFFERS"
    DECLINE_INVERSE_OFFERS = "DECLINE_INVERSE_OFFERS"
    REVIVE = "REVIVE"
    KILL = "KILL"
    SHUTDOWN = "SHUTDOWN"
    ACKNOWLEDGE = "ACKNOWLEDGE"
    ACKNOWLEDGE_OPERATION_STATUS = "ACKNOWLEDGE_OPERATION_STATUS"
    RECONCILE = "RECONCILE"
    RECONCILE_OPERATIONS = "RECONCILE_OPERATIONS"
    MESSAGE = "MESSAGE"
    REQUEST = "REQUEST"
    SUPPRESS = "SUPPRESS"
    UPDATE_FRAMEWORK = "UPDATE_FRAMEWORK"
    # Agora extension: many ACKNOWLEDGEs in one call (advertised by the master in
    # ``MasterInfo.capabilities`` as ``ACKNOWLEDGE_MANY``; a Mesos master answers 400)
    ACKNOWLEDGE_MANY = "ACKNOWLEDGE_MANY"


@attrs.frozen
class Subscribe:
    """SUBSCRIBE body (``offer_constraints`` and mesoshttp's ``credentials`` are ignored)."""

    framework_info: FrameworkInfo
    suppressed_roles: tuple[str, ...] = ()
    force: bool | None = None


@attrs.frozen
class Accept:
    offer_ids: tuple[OfferID, ...] = ()
    operations: tuple[Operation, ...] = ()
    filters: Filters | None = None


@attrs.frozen
class Decline:
    offer_ids: tuple[OfferID, ...] = ()
    filters: Filters | None = None


@attrs.frozen
class AcceptInverseOffers:
    inverse_offer_ids: tuple[OfferID, ...] = ()
    filters: Filters | None = None


@attrs.frozen
class DeclineInverseOffers:
    inverse_offer_ids: tuple[OfferID, ...] = ()
    filters: Filters | None = None


@attrs.frozen
class Revive:
    """Empty ``roles`` = all the framework's roles."""

    roles: tuple[str, ...] = ()


@attrs.frozen
class Suppress:
    """Empty ``roles`` = all the framework's roles."""

    roles: tuple[str, ...] = ()


@attrs.frozen
class Kill:
    task_id: TaskID
    agent_id: AgentID | None = None
    kill_policy: KillPolicy | None = None


@attrs.frozen
class Shutdown:
    executor_id: ExecutorID
    agent_id: AgentID


@attrs.frozen
class Acknowledge:
    """``uuid`` must be the 16 bytes of the acknowledged update."""

    agent_id: AgentID
    task_id: TaskID
    uuid: bytes


# the most acknowledgements one ACKNOWLEDGE_MANY call may carry
MAX_ACKNOWLEDGEMENTS = 10_000


@attrs.frozen
class AcknowledgeMany:
    """Agora: the body of ``ACKNOWLEDGE_MANY``, each entry exactly a Mesos ``Acknowledge``."""

    acknowledgements: tuple[Acknowledge, ...] = ()


@attrs.frozen
class AcknowledgeOperationStatus:
    uuid: bytes
    operation_id: OperationID
    agent_id: AgentID | None = None
    resource_provider_id: ResourceProviderID | None = None


@attrs.frozen
class ReconcileTask:
    task_id: TaskID
    agent_id: AgentID | None = None


@attrs.frozen
class Reconcile:
    """Empty ``tasks`` = implicit reconciliation (all the framework's tasks)."""

    tasks: tuple[ReconcileTask, ...] = ()


@attrs.frozen
class ReconcileOperation:
    operation_id: OperationID
    agent_id: AgentID | None = None
    resource_provider_id: ResourceProviderID | None = None


@attrs.frozen
class ReconcileOperations:
    operations: tuple[ReconcileOperation, ...] = ()


@attrs.frozen
class Message:
    """Framework → executor message (``data`` base64 in JSON)."""

    agent_id: AgentID
    executor_id: ExecutorID
    data: bytes


@attrs.frozen
class RequestCall:
    """REQUEST body (Mesos ``Call.Request``)."""

    requests: tuple[Request, ...] = ()


@attrs.frozen
class UpdateFramework:
    framework_info: FrameworkInfo
    suppressed_roles: tuple[str, ...] = ()


@attrs.frozen
class Call:
    """A scheduler call: ``{"type": T, "framework_id": ..., "<t lower>": {...}}``.

    ``requests`` is the top-level list mesoshttp sends with REQUEST instead of a ``request``
    object; use :meth:`all_requests` to read either shape.
    """

    type: CallType | None = None
    framework_id: FrameworkID | None = None
    subscribe: Subscribe | None = None
    accept: Accept | None = None
    decline: Decline | None = None
    accept_inverse_offers: AcceptInverseOffers | None = None
    decline_inverse_offers: DeclineInverseOffers | None = None
    revive: Revive | None = None
    suppress: Suppress | None = None
    kill: Kill | None = None
    shutdown: Shutdown | None = None
    acknowledge: Acknowledge | None = None
    acknowledge_operation_status: AcknowledgeOperationStatus | None = None
    reconcile: Reconcile | None = None
    reconcile_operations: ReconcileOperations | None = None
    message: Message | None = None
    request: RequestCall | None = None
    update_framework: UpdateFramework | None = None
    requests: tuple[Request, ...] = ()
    acknowledge_many: AcknowledgeMany | None = None  # Agora extension

    def all_requests(self) -> tuple[Request, ...]:
        """The REQUEST list, from ``request.requests`` or mesoshttp's top-level ``requests``."""
        if self.request is not None and self.request.requests:
            return self.request.requests
        return self.requests

    # builders

    @classmethod
    def make_subscribe(cls, framework_info: FrameworkInfo, suppressed_roles: tuple[str, ...] = ()) -> Call:
        """SUBSCRIBE; carries ``framework_id`` iff ``framework_info.id`` is set (re-subscribe)."""
        return cls(
            type=CallType.SUBSCRIBE,
            framework_id=framework_info.id,
            subscribe=Subscribe(framework_info=framework_info, suppressed_roles=suppressed_roles),
        )

    @classmethod
    def make_teardown(cls, framework_id: FrameworkID) -> Call:
        return cls(type=CallType.TEARDOWN, framework_id=framework_id)

    @classmethod
    def make_accept(
        cls,
        framework_id: FrameworkID,
        offer_ids: tuple[OfferID, ...],
        operations: tuple[Operation, ...],
        filters: Filters | None = None,
    ) -> Call:
        return cls(
            type=CallType.ACCEPT,
            framework_id=framework_id,
            accept=Accept(offer_ids=offer_ids, operations=operations, filters=filters),
        )

    @classmethod
    def make_decline(
        cls, framework_id: FrameworkID, offer_ids: tuple[OfferID, ...], filters: Filters | None = None
    ) -> Call:
        return cls(type=CallType.DECLINE, framework_id=framework_id, decline=Decline(offer_ids, filters))

    @classmethod
    def make_revive(cls, framework_id: FrameworkID, roles: tuple[str, ...] = ()) -> Call:
        return cls(type=CallType.REVIVE, framework_id=framework_id, revive=Revive(roles) if roles else None)

    @classmethod
    def make_suppress(cls, framework_id: FrameworkID, roles: tuple[str, ...] = ()) -> Call:
        return cls(type=CallType.SUPPRESS, framework_id=framework_id, suppress=Suppress(roles) if roles else None)

    @classmethod
    def make_kill(cls, framework_id: FrameworkID, task_id: TaskID, agent_id: AgentID | None = None) -> Call:
        return cls(type=CallType.KILL, framework_id=framework_id, kill=Kill(task_id=task_id, agent_id=agent_id))

    @classmethod
    def make_shutdown(cls, framework_id: FrameworkID, executor_id: ExecutorID, agent_id: AgentID) -> Call:
        return cls(type=CallType.SHUTDOWN, framework_id=framework_id, shutdown=Shutdown(executor_id, agent_id))

    @classmethod
    def make_acknowledge(cls, framework_id: FrameworkID, status: TaskStatus) -> Call:
        """ACKNOWLEDGE for a reliable update (needs ``status.uuid`` and ``status.agent_id``)."""
        if status.uuid is None or status.agent_id is None:
            raise ValueError("only an update with uuid and agent_id can be acknowledged")
        return cls(
            type=CallType.ACKNOWLEDGE,
            framework_id=framework_id,
            acknowledge=Acknowledge(agent_id=status.agent_id, task_id=status.task_id, uuid=status.uuid),
        )

    @classmethod
    def make_acknowledge_many(cls, framework_id: FrameworkID, statuses: Iterable[TaskStatus]) -> Call:
        """ACKNOWLEDGE_MANY (Agora) for reliable updates (each needs ``uuid`` and ``agent_id``)."""
        acks: list[Acknowledge] = []
        for status in statuses:
            if status.uuid is None or status.agent_id is None:
                raise ValueError("only an update with uuid and agent_id can be acknowledged")
            acks.append(Acknowledge(agent_id=status.agent_id, task_id=status.task_id, uuid=status.uuid))
        return cls(
            type=CallType.ACKNOWLEDGE_MANY,
            framework_id=framework_id,
            acknowledge_many=AcknowledgeMany(acknowledgements=tuple(acks)),
        )

    @classmethod
    def make_reconcile(cls, framework_id: FrameworkID, tasks: tuple[ReconcileTask, ...] = ()) -> Call:
        return cls(type=CallType.RECONCILE, framework_id=framework_id, reconcile=Reconcile(tasks))

    @classmethod
    def make_message(cls, framework_id: FrameworkID, agent_id: AgentID, executor_id: ExecutorID, data: bytes) -> Call:
        return cls(type=CallType.MESSAGE, framework_id=framework_id, message=Message(agent_id, executor_id, data))

    @classmethod
    def make_request(cls, framework_id: FrameworkID, requests: tuple[Request, ...]) -> Call:
        return cls(type=CallType.REQUEST, framework_id=framework_id, request=RequestCall(requests))


# --- scheduler events -----------------------------------------------------------------------


class EventType(enum.Enum):
    UNKNOWN = "UNKNOWN"
    SUBSCRIBED = "SUBSCRIBED"
    OFFERS = "OFFERS"
    INVERSE_OFFERS = "INVERSE_OFFERS"
    RESCIND = "RESCIND"
    RESCIND_INVERSE_OFFER = "RESCIND_INVERSE_OFFER"
    UPDATE = "UPDATE"
    UPDATE_OPERATION_STATUS = "UPDATE_OPERATION_STATUS"
    MESSAGE = "MESSAGE"
    FAILURE = "FAILURE"
    ERROR = "ERROR"
    HEARTBEAT = "HEARTBEAT"


@attrs.frozen
class Subscribed:
    framework_id: FrameworkID
    heartbeat_interval_seconds: float | None = None
    master_info: MasterInfo | None = None


@attrs.frozen
class Offers:
    offers: tuple[Offer, ...] = ()


@attrs.frozen
class InverseOffers:
    inverse_offers: tuple[InverseOffer, ...] = ()


@attrs.frozen
class Rescind:
    offer_id: OfferID


@attrs.frozen
class RescindInverseOffer:
    inverse_offer_id: OfferID


@attrs.frozen
class Update:
    status: TaskStatus


@attrs.frozen
class UpdateOperationStatus:
    status: OperationStatus


@attrs.frozen
class MessageEvent:
    """Executor → framework message (``Event.Message``)."""

    agent_id: AgentID
    executor_id: ExecutorID
    data: bytes


@attrs.frozen
class Failure:
    """Agent lost (no ``executor_id``) or executor exited (``executor_id`` and ``status``)."""

    agent_id: AgentID | None = None
    executor_id: ExecutorID | None = None
    status: int | None = None


@attrs.frozen
class Error:
    message: str


@attrs.frozen
class Event:
    """A scheduler event: ``{"type": T, "<t lower>": {...}}``; HEARTBEAT has no body."""

    type: EventType | None = None
    subscribed: Subscribed | None = None
    offers: Offers | None = None
    inverse_offers: InverseOffers | None = None
    rescind: Rescind | None = None
    rescind_inverse_offer: RescindInverseOffer | None = None
    update: Update | None = None
    update_operation_status: UpdateOperationStatus | None = None
    message: MessageEvent | None = None
    failure: Failure | None = None
    error: Error | None = None

    HEARTBEAT_INTERVAL_SECONDS = 15.0

    @classmethod
    def make_subscribed(
        cls,
        framework_id: FrameworkID,
        master_info: MasterInfo | None = None,
        heartbeat_interval_seconds: float = HEARTBEAT_INTERVAL_SECONDS,
    ) -> Event:
        return cls(
            type=EventType.SUBSCRIBED,
            subscribed=Subscribed(framework_id, heartbeat_interval_seconds, master_info),
        )

    @classmethod
    def make_offers(cls, offers: tuple[Offer, ...]) -> Event:
        return cls(type=EventType.OFFERS, offers=Offers(offers))

    @classmethod
    def make_inverse_offers(cls, inverse_offers: tuple[InverseOffer, ...]) -> Event:
        return cls(type=EventType.INVERSE_OFFERS, inverse_offers=InverseOffers(inverse_offers))

    @classmethod
    def make_rescind(cls, offer_id: OfferID) -> Event:
        return cls(type=EventType.RESCIND, rescind=Rescind(offer_id))

    @classmethod
    def make_rescind_inverse_offer(cls, inverse_offer_id: OfferID) -> Event:
        return cls(type=EventType.RESCIND_INVERSE_OFFER, rescind_inverse_offer=RescindInverseOffer(inverse_offer_id))

    @classmethod
    def make_update(cls, status: TaskStatus) -> Event:
        return cls(type=EventType.UPDATE, update=Update(status))

    @classmethod
    def make_update_operation_status(cls, status: OperationStatus) -> Event:
        return cls(type=EventType.UPDATE_OPERATION_STATUS, update_operation_status=UpdateOperationStatus(status))

    @classmethod
    def make_message(cls, agent_id: AgentID, executor_id: ExecutorID, data: bytes) -> Event:
        return cls(type=EventType.MESSAGE, message=MessageEvent(agent_id, executor_id, data))

    @classmethod
    def make_failure(cls, agent_id: AgentID, executor_id: ExecutorID | None = None, status: int | None = None) -> Event:
        return cls(type=EventType.FAILURE, failure=Failure(agent_id, executor_id, status))

    @classmethod
    def make_error(cls, message: str) -> Event:
        return cls(type=EventType.ERROR, error=Error(message))

    @classmethod
    def make_heartbeat(cls) -> Event:
        return cls(type=EventType.HEARTBEAT)


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


# --- operator API: calls --------------------------------------------------------------------


class OperatorCallType(enum.Enum):
    UNKNOWN = "UNKNOWN"
    GET_HEALTH = "GET_HEALTH"
    GET_FLAGS = "GET_FLAGS"
    GET_VERSION = "GET_VERSION"
    GET_METRICS = "GET_METRICS"
    GET_LOGGING_LEVEL = "GET_LOGGING_LEVEL"
    SET_LOGGING_LEVEL = "SET_LOGGING_LEVEL"
    LIST_FILES = "LIST_FILES"
    READ_FILE = "READ_FILE"
    GET_STATE = "GET_STATE"
    GET_AGENTS = "GET_AGENTS"
    GET_FRAMEWORKS = "GET_FRAMEWORKS"
    GET_EXECUTORS = "GET_EXECUTORS"
    GET_OPERATIONS = "GET_OPERATIONS"
    GET_TASKS = "GET_TASKS"
    GET_ROLES = "GET_ROLES"
    GET_WEIGHTS = "GET_WEIGHTS"
    UPDATE_WEIGHTS = "UPDATE_WEIGHTS"
    GET_MASTER = "GET_MASTER"
    SUBSCRIBE = "SUBSCRIBE"
    RESERVE_RESOURCES = "RESERVE_RESOURCES"
    UNRESERVE_RESOURCES = "UNRESERVE_RESOURCES"
    CREATE_VOLUMES = "CREATE_VOLUMES"
    DESTROY_VOLUMES = "DESTROY_VOLUMES"
    GROW_VOLUME = "GROW_VOLUME"
    SHRINK_VOLUME = "SHRINK_VOLUME"
    GET_MAINTENANCE_STATUS = "GET_MAINTENANCE_STATUS"
    GET_MAINTENANCE_SCHEDULE = "GET_MAINTENANCE_SCHEDULE"
    UPDATE_MAINTENANCE_SCHEDULE = "UPDATE_MAINTENANCE_SCHEDULE"
    START_MAINTENANCE = "START_MAINTENANCE"
    STOP_MAINTENANCE = "STOP_MAINTENANCE"
    DRAIN_AGENT = "DRAIN_AGENT"
    DEACTIVATE_AGENT = "DEACTIVATE_AGENT"
    REACTIVATE_AGENT = "REACTIVATE_AGENT"
    GET_QUOTA = "GET_QUOTA"
    UPDATE_QUOTA = "UPDATE_QUOTA"
    SET_QUOTA = "SET_QUOTA"
    REMOVE_QUOTA = "REMOVE_QUOTA"
    TEARDOWN = "TEARDOWN"
    MARK_AGENT_GONE = "MARK_AGENT_GONE"


@attrs.frozen
class GetMetricsCall:
    timeout: DurationInfo | None = None


@attrs.frozen
class SetLoggingLevel:
    level: int
    duration: DurationInfo


@attrs.frozen
class ListFilesCall:
    path: str


@attrs.frozen
class ReadFileCall:
    path: str
    offset: int
    length: int | None = None


@attrs.frozen
class WeightInfo:
    weight: float
    role: str | None = None


@attrs.frozen
class UpdateWeights:
    weight_infos: tuple[WeightInfo, ...] = ()


@attrs.frozen
class ReserveResources:
    agent_id: AgentID
    resources: tuple[Resource, ...] = ()
    source: tuple[Resource, ...] = ()


@attrs.frozen
class UnreserveResources:
    agent_id: AgentID
    resources: tuple[Resource, ...] = ()


@attrs.frozen
class CreateVolumes:
    agent_id: AgentID
    volumes: tuple[Resource, ...] = ()


@attrs.frozen
class DestroyVolumes:
    agent_id: AgentID
    volumes: tuple[Resource, ...] = ()


@attrs.frozen
class QuotaConfig:
    """Quota of a role: resource name → guaranteed / limit quantity."""

    role: str
    guarantees: dict[str, Scalar] = attrs.field(factory=dict)
    limits: dict[str, Scalar] = attrs.field(factory=dict)


@attrs.frozen
class UpdateQuota:
    force: bool | None = None
    quota_configs: tuple[QuotaConfig, ...] = ()


@attrs.frozen
class RemoveQuota:
    role: str


@attrs.frozen
class Teardown:
    framework_id: FrameworkID


@attrs.frozen
class DrainConfig:
    max_grace_period: DurationInfo | None = None
    mark_gone: bool | None = None


@attrs.frozen
class DrainAgent:
    agent_id: AgentID
    max_grace_period: DurationInfo | None = None
    mark_gone: bool | None = None
    reason: str | None = None  # Agora extension: why (``agora agent list`` shows it)


@attrs.frozen
class DeactivateAgent:
    agent_id: AgentID


@attrs.frozen
class ReactivateAgent:
    agent_id: AgentID


@attrs.frozen
class MarkAgentGone:
    agent_id: AgentID


@attrs.frozen
class OperatorCall:
    """An operator call (``POST /api/v1``): ``{"type": T, "<t lower>": {...}}``."""

    type: OperatorCallType | None = None
    get_metrics: GetMetricsCall | None = None
    set_logging_level: SetLoggingLevel | None = None
    list_files: ListFilesCall | None = None
    read_file: ReadFileCall | None = None
    update_weights: UpdateWeights | None = None
    reserve_resources: ReserveResources | None = None
    unreserve_resources: UnreserveResources | None = None
    create_volumes: CreateVolumes | None = None
    destroy_volumes: DestroyVolumes | None = None
    update_quota: UpdateQuota | None = None
    remove_quota: RemoveQuota | None = None
    teardown: Teardown | None = None
    drain_agent: DrainAgent | None = None
    deactivate_agent: DeactivateAgent | None = None
    reactivate_agent: ReactivateAgent | None = None
    mark_agent_gone: MarkAgentGone | None = None


# --- operator API: responses ----------------------------------------------------------------


class OperatorResponseType(enum.Enum):
    UNKNOWN = "UNKNOWN"
    GET_HEALTH = "GET_HEALTH"
    GET_FLAGS = "GET_FLAGS"
    GET_VERSION = "GET_VERSION"
    GET_METRICS = "GET_METRICS"
    GET_LOGGING_LEVEL = "GET_LOGGING_LEVEL"
    LIST_FILES = "LIST_FILES"
    READ_FILE = "READ_FILE"
    GET_STATE = "GET_STATE"
    GET_AGENTS = "GET_AGENTS"
    GET_FRAMEWORKS = "GET_FRAMEWORKS"
    GET_EXECUTORS = "GET_EXECUTORS"
    GET_OPERATIONS = "GET_OPERATIONS"
    GET_TASKS = "GET_TASKS"
    GET_ROLES = "GET_ROLES"
    GET_WEIGHTS = "GET_WEIGHTS"
    GET_MASTER = "GET_MASTER"
    GET_MAINTENANCE_STATUS = "GET_MAINTENANCE_STATUS"
    GET_MAINTENANCE_SCHEDULE = "GET_MAINTENANCE_SCHEDULE"
    GET_QUOTA = "GET_QUOTA"


@attrs.frozen
class GetHealth:
    healthy: bool


@attrs.frozen
class Flag:
    name: str
    value: str | None = None


@attrs.frozen
class GetFlags:
    flags: tuple[Flag, ...] = ()


@attrs.frozen
class VersionInfo:
    """``version`` must be numeric dotted (pymesos parses it)."""

    version: str
    build_date: str | None = None
    build_time: float | None = None
    build_user: str | None = None
    git_sha: str | None = None
    git_branch: str | None = None
    git_tag: str | None = None


@attrs.frozen
class GetVersion:
    version_info: VersionInfo


@attrs.frozen
class Metric:
    name: str
    value: float | None = None


@attrs.frozen
class GetMetrics:
    metrics: tuple[Metric, ...] = ()


@attrs.frozen
class GetLoggingLevel:
    level: int


@attrs.frozen
class FileInfo:
    path: str
    nlink: int | None = None
    size: int | None = None
    mtime: TimeInfo | None = None
    mode: int | None = None
    uid: str | None = None
    gid: str | None = None


@attrs.frozen
class ListFiles:
    file_infos: tuple[FileInfo, ...] = ()


@attrs.frozen
class ReadFile:
    size: int
    data: bytes


class DrainState(enum.Enum):
    UNKNOWN = "UNKNOWN"
    DRAINING = "DRAINING"
    DRAINED = "DRAINED"


@attrs.frozen
class DrainInfo:
    state: DrainState
    config: DrainConfig


@attrs.frozen
class AgentRecord:
    """``GetAgents.Agent``."""

    agent_info: AgentInfo
    active: bool
    version: str
    deactivated: bool | None = None
    pid: str | None = None
    registered_time: TimeInfo | None = None
    reregistered_time: TimeInfo | None = None
    total_resources: tuple[Resource, ...] = ()
    allocated_resources: tuple[Resource, ...] = ()
    offered_resources: tuple[Resource, ...] = ()
    capabilities: tuple[AgentCapability, ...] = ()
    drain_info: DrainInfo | None = None
    estimated_drain_start_time: TimeInfo | None = None


@attrs.frozen
class GetAgents:
    agents: tuple[AgentRecord, ...] = ()
    recovered_agents: tuple[AgentInfo, ...] = ()


@attrs.frozen
class FrameworkRecord:
    """``GetFrameworks.Framework``."""

    framework_info: FrameworkInfo
    active: bool
    connected: bool
    recovered: bool
    registered_time: TimeInfo | None = None
    reregistered_time: TimeInfo | None = None
    unregistered_time: TimeInfo | None = None
    offers: tuple[Offer, ...] = ()
    inverse_offers: tuple[InverseOffer, ...] = ()
    allocated_resources: tuple[Resource, ...] = ()
    offered_resources: tuple[Resource, ...] = ()


@attrs.frozen
class GetFrameworks:
    frameworks: tuple[FrameworkRecord, ...] = ()
    completed_frameworks: tuple[FrameworkRecord, ...] = ()
    recovered_frameworks: tuple[FrameworkInfo, ...] = ()


@attrs.frozen
class ExecutorRecord:
    """``GetExecutors.Executor``."""

    executor_info: ExecutorInfo
    agent_id: AgentID


@attrs.frozen
class GetExecutors:
    executors: tuple[ExecutorRecord, ...] = ()
    orphan_executors: tuple[ExecutorRecord, ...] = ()


@attrs.frozen
class GetOperations:
    operations: tuple[OperationRecord, ...] = ()


@attrs.frozen
class GetTasks:
    pending_tasks: tuple[TaskInfo, ...] = ()
    tasks: tuple[Task, ...] = ()
    unreachable_tasks: tuple[Task, ...] = ()
    completed_tasks: tuple[Task, ...] = ()
    orphan_tasks: tuple[Task, ...] = ()


@attrs.frozen
class RoleQuota:
    """``Role.Quota``: resource name → quantity maps."""

    role: str | None = None
    guarantee: dict[str, Scalar] = attrs.field(factory=dict)
    limit: dict[str, Scalar] = attrs.field(factory=dict)
    consumed: dict[str, Scalar] = attrs.field(factory=dict)


@attrs.frozen
class Role:
    name: str
    weight: float
    frameworks: tuple[FrameworkID, ...] = ()
    resources: tuple[Resource, ...] = ()
    allocated: tuple[Resource, ...] = ()
    offered: tuple[Resource, ...] = ()
    reserved: tuple[Resource, ...] = ()
    quota: RoleQuota | None = None


@attrs.frozen
class GetRoles:
    roles: tuple[Role, ...] = ()


@attrs.frozen
class GetWeights:
    weight_infos: tuple[WeightInfo, ...] = ()


@attrs.frozen
class GetMaster:
    """``start_time``/``elected_time`` in seconds since the epoch."""

    master_info: MasterInfo | None = None
    start_time: float | None = None
    elected_time: float | None = None


@attrs.frozen
class QuotaInfo:
    role: str | None = None
    principal: str | None = None
    guarantee: tuple[Resource, ...] = ()


@attrs.frozen
class QuotaStatus:
    infos: tuple[QuotaInfo, ...] = ()
    configs: tuple[QuotaConfig, ...] = ()


@attrs.frozen
class GetQuota:
    status: QuotaStatus


@attrs.frozen
class GetState:
    get_tasks: GetTasks | None = None
    get_executors: GetExecutors | None = None
    get_frameworks: GetFrameworks | None = None
    get_agents: GetAgents | None = None


@attrs.frozen
class OperatorResponse:
    """An operator response: ``{"type": T, "<t lower>": {...}}``."""

    type: OperatorResponseType | None = None
    get_health: GetHealth | None = None
    get_flags: GetFlags | None = None
    get_version: GetVersion | None = None
    get_metrics: GetMetrics | None = None
    get_logging_level: GetLoggingLevel | None = None
    list_files: ListFiles | None = None
    read_file: ReadFile | None = None
    get_state: GetState | None = None
    get_agents: GetAgents | None = None
    get_frameworks: GetFrameworks | None = None
    get_executors: GetExecutors | None = None
    get_operations: GetOperations | None = None
    get_tasks: GetTasks | None = None
    get_roles: GetRoles | None = None
    get_weights: GetWeights | None = None
    get_master: GetMaster | None = None
    get_quota: GetQuota | None = None


# --- operator API: event stream (SUBSCRIBE) -------------------------------------------------


class OperatorEventType(enum.Enum):
    UNKNOWN = "UNKNOWN"
    SUBSCRIBED = "SUBSCRIBED"
    TASK_ADDED = "TASK_ADDED"
    TASK_UPDATED = "TASK_UPDATED"
    AGENT_ADDED = "AGENT_ADDED"
    AGENT_REMOVED = "AGENT_REMOVED"
    FRAMEWORK_ADDED = "FRAMEWORK_ADDED"
    FRAMEWORK_UPDATED = "FRAMEWORK_UPDATED"
    FRAMEWORK_REMOVED = "FRAMEWORK_REMOVED"
    HEARTBEAT = "HEARTBEAT"


@attrs.frozen
class OperatorSubscribed:
    """``master.Event.Subscribed``: the whole state, then changes as events."""

    get_state: GetState | None = None
    heartbeat_interval_seconds: float | None = None


@attrs.frozen
class TaskAdded:
    task: Task


@attrs.frozen
class TaskUpdated:
    """``status``: the task's latest status; ``state``: its latest state (as the master holds it)."""

    framework_id: FrameworkID
    status: TaskStatus
    state: TaskState


@attrs.frozen
class AgentAdded:
    agent: AgentRecord


@attrs.frozen
class AgentRemoved:
    agent_id: AgentID


@attrs.frozen
class FrameworkAdded:
    framework: FrameworkRecord


@attrs.frozen
class FrameworkUpdated:
    framework: FrameworkRecord


@attrs.frozen
class FrameworkRemoved:
    framework_info: FrameworkInfo


@attrs.frozen
class OperatorEvent:
    """An event of the operator stream (``master.Event``): ``{"type": T, "<t lower>": {...}}``;
    HEARTBEAT has no body."""

    type: OperatorEventType | None = None
    subscribed: OperatorSubscribed | None = None
    task_added: TaskAdded | None = None
    task_updated: TaskUpdated | None = None
    agent_added: AgentAdded | None = None
    agent_removed: AgentRemoved | None = None
    framework_added: FrameworkAdded | None = None
    framework_updated: FrameworkUpdated | None = None
    framework_removed: FrameworkRemoved | None = None

    @classmethod
    def make_subscribed(cls, get_state: GetState, heartbeat_interval_seconds: float) -> OperatorEvent:
        return cls(type=OperatorEventType.SUBSCRIBED, subscribed=OperatorSubscribed(get_state, heartbeat_interval_seconds))

    @classmethod
    def make_task_added(cls, task: Task) -> OperatorEvent:
        return cls(type=OperatorEventType.TASK_ADDED, task_added=TaskAdded(task))

    @classmethod
    def make_task_updated(cls, framework_id: FrameworkID, status: TaskStatus, state: TaskState) -> OperatorEvent:
        return cls(type=OperatorEventType.TASK_UPDATED, task_updated=TaskUpdated(framework_id, status, state))

    @classmethod
    def make_agent_added(cls, agent: AgentRecord) -> OperatorEvent:
        return cls(type=OperatorEventType.AGENT_ADDED, agent_added=AgentAdded(agent))

    @classmethod
    def make_agent_removed(cls, agent_id: AgentID) -> OperatorEvent:
        return cls(type=OperatorEventType.AGENT_REMOVED, agent_removed=AgentRemoved(agent_id))

    @classmethod
    def make_framework_added(cls, framework: FrameworkRecord) -> OperatorEvent:
        return cls(type=OperatorEventType.FRAMEWORK_ADDED, framework_added=FrameworkAdded(framework))

    @classmethod
    def make_framework_updated(cls, framework: FrameworkRecord) -> OperatorEvent:
        return cls(type=OperatorEventType.FRAMEWORK_UPDATED, framework_updated=FrameworkUpdated(framework))

    @classmethod
    def make_framework_removed(cls, framework_info: FrameworkInfo) -> OperatorEvent:
        return cls(type=OperatorEventType.FRAMEWORK_REMOVED, framework_removed=FrameworkRemoved(framework_info))

    @classmethod
    def make_heartbeat(cls) -> OperatorEvent:
        return cls(type=OperatorEventType.HEARTBEAT)


# --- structural validation ------------------------------------------------------------------

UUID_BYTES = 16

# Call types whose body object may be absent (MESOS_COMPAT.md §1.5).
_NO_BODY_NEEDED = frozenset({CallType.TEARDOWN, CallType.REVIVE, CallType.SUPPRESS})


def validate_call(call: Call) -> str | None:
    """The structural rules of a scheduler Call (§1.5); ``None`` if valid, else Mesos' message.

    REQUEST also accepts mesoshttp's top-level ``requests`` instead of a ``request`` object.
    """
    t = call.type
    if t is None:
        return "Expecting 'type' to be present"
    if t is CallType.UNKNOWN:
        return "Unknown call type"
    if t is CallType.SUBSCRIBE:
        if call.subscribe is None:
            return "Expecting 'subscribe' to be present"
        if call.framework_id != call.subscribe.framework_info.id:
            return "'framework_id' differs from 'subscribe.framework_info.id'"
        return None
    if call.framework_id is None:
        return "Expecting 'framework_id' to be present"
    if t in _NO_BODY_NEEDED:
        return None
    key = _lower(t)
    body = getattr(call, key)
    if body is None:
        if t is CallType.REQUEST and call.requests:
            return None
        return f"Expecting '{key}' to be present"
    if isinstance(body, Acknowledge) and len(body.uuid) != UUID_BYTES:
        return "Invalid UUID in 'acknowledge.uuid': expected 16 bytes"
    if isinstance(body, AcknowledgeMany):
        acks = body.acknowledgements
        if not acks:
            return "Expecting 'acknowledge_many.acknowledgements' to be non-empty"
        if len(acks) > MAX_ACKNOWLEDGEMENTS:
            return f"Too many entries in 'acknowledge_many.acknowledgements': {len(acks)} > {MAX_ACKNOWLEDGEMENTS}"
        for i, a in enumerate(acks):
            if len(a.uuid) != UUID_BYTES:
                return f"Invalid UUID in 'acknowledge_many.acknowledgements[{i}].uuid': expected 16 bytes"
    if (
        t is CallType.ACKNOWLEDGE_OPERATION_STATUS
        and len(call.acknowledge_operation_status.uuid) != UUID_BYTES  # type: ignore[union-attr]
    ):
        return "Invalid UUID in 'acknowledge_operation_status.uuid': expected 16 bytes"
    if t is CallType.UPDATE_FRAMEWORK and call.update_framework.framework_info.id != call.framework_id:  # type: ignore[union-attr]
        return "'framework_id' differs from 'update_framework.framework_info.id'"
    return None


_EXECUTOR_BODIES = {
    ExecutorCallType.SUBSCRIBE: "subscribe",
    ExecutorCallType.UPDATE: "update",
    ExecutorCallType.MESSAGE: "message",
}


def validate_executor_call(call: ExecutorCall) -> str | None:
    """Structural rules of an executor Call; ``None`` if valid."""
    t = call.type
    if t is None:
        return "Expecting 'type' to be present"
    if t is ExecutorCallType.UNKNOWN:
        return "Unknown call type"
    key = _EXECUTOR_BODIES.get(t)
    if key is not None and getattr(call, key) is None:
        return f"Expecting '{key}' to be present"
    if t is ExecutorCallType.UPDATE:
        status = call.update.status  # type: ignore[union-attr]
        if status.uuid is not None and len(status.uuid) != UUID_BYTES:
            return "Invalid UUID in 'update.status.uuid': expected 16 bytes"
        if status.executor_id is not None and status.executor_id != call.executor_id:
            return "'update.status.executor_id' differs from 'executor_id'"
    return None


def validate_operator_call(call: OperatorCall) -> str | None:
    """Structural rules of an operator Call: type present, its body present when it has one."""
    t = call.type
    if t is None:
        return "Expecting 'type' to be present"
    if t is OperatorCallType.UNKNOWN:
        return "Unknown call type"
    key = _lower(t)
    if key in _OPERATOR_BODIES and getattr(call, key) is None and t is not OperatorCallType.GET_METRICS:
        return f"Expecting '{key}' to be present"
    return None


_OPERATOR_BODIES = frozenset(a.name for a in attrs.fields(OperatorCall) if a.name != "type")
