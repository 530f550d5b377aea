"""Mesos v1 messages shared by every API: addresses, URLs, parameters, fault domains,
``UUID``, ``Credential``; ``FrameworkInfo``, ``MasterInfo``, ``AgentInfo`` and their capabilities;
offers (``Offer``, ``InverseOffer``, ``Filters``) and ``Request`` with Agora's demand fields.
"""

from __future__ import annotations

import enum

import attrs

from protocol.mesos_common import (
    AgentID,
    AllocationInfo,
    Attribute,
    DurationInfo,
    ExecutorID,
    FrameworkID,
    Labels,
    OfferID,
    Resource,
    Scalar,
    TimeInfo,
)

__pure__ = True


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
class MachineID:
    """A machine of the cluster (maintenance): its hostname and/or IP address."""

    hostname: str | None = None
    ip: str | None = None


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
    first; ``role`` (default the framework's first role) names the role the demand is for;
    ``ports``: how many ports of the agent's port ranges each unit needs besides the shape (which
    ports is the master's choice, so a framework need not name ranges it has not been offered).
    """

    agent_id: AgentID | None = None
    resources: tuple[Resource, ...] = ()
    count: int | None = None
    gang_id: str | None = None
    gang_min: int | None = None
    revocable_ok: bool | None = None
    priority: int | None = None
    role: str | None = None
    ports: int | None = None
