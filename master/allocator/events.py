"""Input events of the allocator: facts the master reports, in the past tense.

Ids are plain strings here (the ``value`` of the Mesos id messages); the master converts at its
edge. Resources are ``protocol.resources.Resources``. Every event is a frozen attrs class; the
allocator's ``handle(event, now)`` dispatches on the class.
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs

from master.allocator.constraints import RoleConstraints
from protocol.resources import Resources

__pure__ = True


# --- agents ---------------------------------------------------------------------------------


@attrs.frozen
class AgentAdded:
    """An agent registered (or re-registered) with this total. Its tasks, if any, follow as
    ``AllocationRecovered`` events."""

    agent_id: str
    hostname: str
    total: Resources
    attributes: dict[str, str | float] = attrs.field(factory=dict)


@attrs.frozen
class AgentRemoved:
    """The agent is gone for good: its offers are rescinded and its allocations forgotten."""

    agent_id: str
    reason: str = "agent removed"


@attrs.frozen
class AgentUpdated:
    """The agent's total changed (operator override, resource provider, re-registration)."""

    agent_id: str
    total: Resources


@attrs.frozen
class AgentSlackEstimated:
    """The agent's resource estimator reports usage slack (allocated but unused), as plain
    scalar quantities; they are offered tagged revocable."""

    agent_id: str
    slack: Resources


@attrs.frozen
class AgentDeactivated:
    """The agent is unreachable: offers on it are rescinded, nothing new is offered; its
    allocations are kept until it is removed or comes back."""

    agent_id: str
    reason: str = "agent unreachable"


@attrs.frozen
class AgentReactivated:
    agent_id: str


# --- frameworks -----------------------------------------------------------------------------


@attrs.frozen
class FrameworkAdded:
    """A framework subscribed (or re-subscribed: then roles/capabilities are updated).

    ``capabilities`` holds Mesos capability names, e.g. ``"REVOCABLE_RESOURCES"`` and Agora's
    ``"REUSABLE_OFFERS"``. ``suppressed_roles`` comes from SUBSCRIBE.
    """

    framework_id: str
    roles: tuple[str, ...]
    capabilities: frozenset[str] = frozenset()
    active: bool = True
    suppressed_roles: frozenset[str] = frozenset()
    # offer constraints by role (``constraints.py``): agents that satisfy none of a role's groups
    # are not offered to the framework in that role; replaced by each FrameworkAdded
    offer_constraints: Mapping[str, RoleConstraints] = attrs.field(factory=dict)
    # Mesos' ``FrameworkInfo.offer_filters``: by role, the minimum allocatable alternatives that
    # replace the allocator's ``min_allocatable`` for this framework (an empty tuple: none)
    min_allocatable: Mapping[str, tuple[Mapping[str, float], ...]] = attrs.field(factory=dict)


@attrs.frozen
class FrameworkRemoved:
    """Teardown or failover timeout: offers rescinded, allocations released."""

    framework_id: str


@attrs.frozen
class FrameworkActivated:
    framework_id: str


@attrs.frozen
class FrameworkDeactivated:
    """Disconnected: offers are rescinded, nothing new is offered, allocations are kept."""

    framework_id: str


# --- offers ---------------------------------------------------------------------------------


@attrs.frozen
class Launch:
    """LAUNCH / LAUNCH_GROUP of one task using ``resources`` (may include revocable ones).

    ``priority`` orders revocation (lowest evicted first)."""

    task_id: str
    resources: Resources
    priority: int = 0


@attrs.frozen
class Reserve:
    """RESERVE: ``resources`` are the reserved form (e.g. ``cpus(ml):2``); the same quantity of
    unreserved offered resources becomes reserved and stays in the offer."""

    resources: Resources


@attrs.frozen
class Unreserve:
    """UNRESERVE: offered reserved ``resources`` become unreserved and stay in the offer."""

    resources: Resources


Operation = Launch | Reserve | Unreserve


@attrs.frozen
class OffersAccepted:
    """ACCEPT. ``refuse_seconds`` is the filter installed on a classic offer's remainder
    (``None`` = the configured default, 5 s)."""

    framework_id: str
    offer_ids: tuple[str, ...]
    operations: tuple[Operation, ...]
    refuse_seconds: float | None = None


@attrs.frozen
class OffersDeclined:
    """DECLINE: the offers end (a reusable lease too) and a filter is installed."""

    framework_id: str
    offer_ids: tuple[str, ...]
    refuse_seconds: float | None = None


@attrs.frozen
class ResourcesRecovered:
    """A task ended (any terminal state) or was dropped: its resources come back.

    ``resources`` is used only when the allocator does not know the task (then it is a no-op
    unless ``agent_id`` and resources identify an untracked allocation)."""

    framework_id: str
    agent_id: str
    task_id: str
    resources: Resources | None = None


@attrs.frozen
class AllocationRecovered:
    """An allocation that exists on an agent (re-registration after a master restart)."""

    framework_id: str
    agent_id: str
    task_id: str
    resources: Resources
    role: str = "*"
    priority: int = 0


@attrs.frozen
class Suppressed:
    """SUPPRESS: no offers for these roles (empty = all the framework's roles)."""

    framework_id: str
    roles: tuple[str, ...] = ()


@attrs.frozen
class Revived:
    """REVIVE: clear filters and unsuppress these roles (empty = all)."""

    framework_id: str
    roles: tuple[str, ...] = ()


# --- demand ---------------------------------------------------------------------------------


@attrs.frozen
class Demand:
    """One standing demand: ``count`` units of ``shape``.

    ``gang_id``/``gang_min``: at least ``gang_min`` units must be offered at once (whole or
    nothing). ``revocable_ok``: revocable resources may serve it. Higher ``priority`` first.
    ``role`` defaults to the framework's first role. ``ports``: ports of the agent's port ranges
    each unit needs besides ``shape`` (the allocator picks them).
    """

    shape: Resources
    count: int = 1
    gang_id: str | None = None
    gang_min: int | None = None
    revocable_ok: bool = False
    priority: int = 0
    role: str | None = None
    ports: int = 0


@attrs.frozen
class DemandDeclared:
    """REQUEST: replaces the framework's standing demand (an empty tuple clears it). A framework
    that declared demand is served by offers shaped to it, not by plain DRF offers."""

    framework_id: str
    demands: tuple[Demand, ...]


# --- policy ---------------------------------------------------------------------------------


@attrs.frozen
class QuotaSet:
    """Quota of a role: ``guarantee`` is satisfied first; ``limit`` (None = none) is never
    exceeded by allocated + offered (non-revocable). Scalar quantities only."""

    role: str
    guarantee: Resources
    limit: Resources | None = None


@attrs.frozen
class WeightSet:
    role: str
    weight: float


Event = (
    AgentAdded
    | AgentRemoved
    | AgentUpdated
    | AgentSlackEstimated
    | AgentDeactivated
    | AgentReactivated
    | FrameworkAdded
    | FrameworkRemoved
    | FrameworkActivated
    | FrameworkDeactivated
    | OffersAccepted
    | OffersDeclined
    | ResourcesRecovered
    | AllocationRecovered
    | Suppressed
    | Revived
    | DemandDeclared
    | QuotaSet
    | WeightSet
)
