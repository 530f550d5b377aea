"""The Mesos v1 message catalogue: scheduler, executor and operator API, as frozen attrs classes.

Field names are exactly the proto field names; the JSON and msgpack forms come from
``protocol.codec``. Conventions (as in ``protocol.mesos_common``, whose value
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
rules of a call (the semantic ones belong to the master).

The catalogue is a package split by API; import from ``protocol.mesos`` (this module re-exports
every name), not from its submodules: ``common`` (addresses, framework/master/agent info, offers,
``Request``), ``tasks`` (``TaskInfo``, ``ExecutorInfo``, containers, checks, ``TaskStatus``,
``Task``), ``operations`` (offer operations and their status), ``scheduler`` (``Call``, ``Event``),
``executor`` (``ExecutorCall``, ``ExecutorEvent``), ``operator`` (``OperatorCall``,
``OperatorResponse``), ``operator_events`` (the SUBSCRIBE stream's ``OperatorEvent``) and
``validation``. The shared value types (ids, values, ``Resource``) stay in
``protocol.mesos_common``, which imports nothing of this package.
"""

from __future__ import annotations

from protocol.mesos.common import (
    URL,
    UUID,
    Address,
    AgentCapability,
    AgentCapabilityType,
    AgentInfo,
    Capability,
    CapabilityType,
    Credential,
    DomainInfo,
    FaultDomain,
    FaultDomainName,
    Filters,
    FrameworkInfo,
    InverseOffer,
    MasterCapability,
    MasterCapabilityType,
    MasterInfo,
    MinAllocatableResources,
    Offer,
    OfferFilters,
    Parameter,
    Parameters,
    Request,
    ResourceQuantities,
    Unavailability,
)
from protocol.mesos.executor import (
    ExecutorAcknowledged,
    ExecutorCall,
    ExecutorCallType,
    ExecutorError,
    ExecutorEvent,
    ExecutorEventType,
    ExecutorKill,
    ExecutorLaunch,
    ExecutorLaunchGroup,
    ExecutorMessage,
    ExecutorSubscribe,
    ExecutorSubscribed,
    ExecutorUpdate,
)
from protocol.mesos.operations import (
    Create,
    Destroy,
    Launch,
    LaunchGroup,
    Operation,
    OperationRecord,
    OperationState,
    OperationStatus,
    OperationType,
    Reserve,
    Unreserve,
)
from protocol.mesos.operator import (
    AgentRecord,
    CreateVolumes,
    DeactivateAgent,
    DestroyVolumes,
    DrainAgent,
    DrainConfig,
    DrainInfo,
    DrainState,
    ExecutorRecord,
    FileInfo,
    Flag,
    FrameworkRecord,
    GetAgents,
    GetExecutors,
    GetFlags,
    GetFrameworks,
    GetHealth,
    GetLoggingLevel,
    GetMaster,
    GetMetrics,
    GetMetricsCall,
    GetOperations,
    GetQuota,
    GetRoles,
    GetState,
    GetTasks,
    GetVersion,
    GetWeights,
    ListFiles,
    ListFilesCall,
    MarkAgentGone,
    Metric,
    OperatorCall,
    OperatorCallType,
    OperatorResponse,
    OperatorResponseType,
    QuotaConfig,
    QuotaInfo,
    QuotaStatus,
    ReactivateAgent,
    ReadFile,
    ReadFileCall,
    RemoveQuota,
    ReserveResources,
    Role,
    RoleQuota,
    SetLoggingLevel,
    Teardown,
    UnreserveResources,
    UpdateQuota,
    UpdateWeights,
    VersionInfo,
    WeightInfo,
)
from protocol.mesos.operator_events import (
    AgentAdded,
    AgentRemoved,
    FrameworkAdded,
    FrameworkRemoved,
    FrameworkUpdated,
    OperatorEvent,
    OperatorEventType,
    OperatorSubscribed,
    TaskAdded,
    TaskUpdated,
)
from protocol.mesos.scheduler import (
    MAX_ACKNOWLEDGEMENTS,
    Accept,
    AcceptInverseOffers,
    Acknowledge,
    AcknowledgeMany,
    AcknowledgeOperationStatus,
    Call,
    CallType,
    Decline,
    DeclineInverseOffers,
    Error,
    Event,
    EventType,
    Failure,
    InverseOffers,
    Kill,
    Message,
    MessageEvent,
    Offers,
    Reconcile,
    ReconcileOperation,
    ReconcileOperations,
    ReconcileTask,
    RequestCall,
    Rescind,
    RescindInverseOffer,
    Revive,
    Shutdown,
    Subscribe,
    Subscribed,
    Suppress,
    Update,
    UpdateFramework,
    UpdateOperationStatus,
)
from protocol.mesos.tasks import (
    URI,
    CheckInfo,
    CheckStatusCommand,
    CheckStatusHttp,
    CheckStatusInfo,
    CheckStatusTcp,
    CheckType,
    CommandCheck,
    CommandInfo,
    ContainerInfo,
    ContainerStatus,
    ContainerType,
    DiscoveryInfo,
    DiscoveryVisibility,
    DockerImage,
    DockerInfo,
    DockerNetwork,
    Environment,
    ExecutorInfo,
    ExecutorType,
    HealthCheck,
    HealthCheckType,
    HttpCheck,
    HTTPCheckInfo,
    Image,
    ImageType,
    IPAddress,
    IPProtocol,
    KillPolicy,
    MesosInfo,
    NetworkInfo,
    Port,
    PortMapping,
    Ports,
    Reason,
    Source,
    Task,
    TaskGroupInfo,
    TaskInfo,
    TaskResourceLimitation,
    TaskStatus,
    TcpCheck,
    TCPCheckInfo,
    Variable,
    VariableType,
)
from protocol.mesos.validation import (
    UUID_BYTES,
    validate_call,
    validate_executor_call,
    validate_operator_call,
)
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
    "AcknowledgeMany", "MAX_ACKNOWLEDGEMENTS",
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

