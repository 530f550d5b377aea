"""The Mesos v1 master operator API: ``OperatorCall`` with its bodies, and
``OperatorResponse`` with its bodies (``GetState``, ``GetAgents``, ``GetFrameworks``, ...).
"""

from __future__ import annotations

import enum

import attrs

from protocol.mesos.common import (
    AgentCapability,
    AgentInfo,
    FrameworkInfo,
    InverseOffer,
    MachineID,
    MasterInfo,
    Offer,
    Unavailability,
)
from protocol.mesos.operations import OperationRecord
from protocol.mesos.tasks import ExecutorInfo, Task, TaskInfo
from protocol.mesos_common import AgentID, DurationInfo, FrameworkID, Resource, Scalar, TimeInfo

__pure__ = True


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
class MaintenanceWindow:
    """``maintenance.Window``: machines and when they may become unavailable."""

    machine_ids: tuple[MachineID, ...] = ()
    unavailability: Unavailability | None = None


@attrs.frozen
class MaintenanceSchedule:
    """``maintenance.Schedule``: a list of windows (a machine in one window at most)."""

    windows: tuple[MaintenanceWindow, ...] = ()


@attrs.frozen
class UpdateMaintenanceSchedule:
    schedule: MaintenanceSchedule


@attrs.frozen
class StartMaintenance:
    machines: tuple[MachineID, ...] = ()


@attrs.frozen
class StopMaintenance:
    machines: tuple[MachineID, ...] = ()


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
    update_maintenance_schedule: UpdateMaintenanceSchedule | None = None
    start_maintenance: StartMaintenance | None = None
    stop_maintenance: StopMaintenance | None = None


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


class InverseOfferStatusValue(enum.Enum):
    UNKNOWN = "UNKNOWN"
    ACCEPT = "ACCEPT"
    DECLINE = "DECLINE"


@attrs.frozen
class InverseOfferStatus:
    """A framework's last answer to the inverse offers of a machine's agent (UNKNOWN: none yet)."""

    status: InverseOfferStatusValue
    framework_id: FrameworkID
    timestamp: TimeInfo


@attrs.frozen
class DrainingMachine:
    id: MachineID
    statuses: tuple[InverseOfferStatus, ...] = ()


@attrs.frozen
class ClusterStatus:
    """``maintenance.ClusterStatus``: the machines in DRAINING and DOWN mode."""

    draining_machines: tuple[DrainingMachine, ...] = ()
    down_machines: tuple[MachineID, ...] = ()


@attrs.frozen
class GetMaintenanceStatus:
    status: ClusterStatus


@attrs.frozen
class GetMaintenanceSchedule:
    schedule: MaintenanceSchedule


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
    get_maintenance_status: GetMaintenanceStatus | None = None
    get_maintenance_schedule: GetMaintenanceSchedule | None = None
