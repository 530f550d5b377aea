"""Mutable state records of the allocator (agents, frameworks, tasks, offers, demands).

Plain slotted classes owned by the ``Ledger``; nothing outside the allocator package sees them
(queries return frozen snapshots). Revocable quantities are kept flattened (plain scalars) and
tagged revocable only when shown in an offer.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping

from master.allocator.constraints import RoleConstraints
from protocol.resources import Resources
from protocol.transitions import Lifecycle

__pure__ = True

EMPTY = Resources()
REUSABLE_OFFERS = "REUSABLE_OFFERS"
REVOCABLE_RESOURCES = "REVOCABLE_RESOURCES"
GPU_RESOURCES = "GPU_RESOURCES"


class AgentState:
    __slots__ = (
        "active",
        "agent_id",
        "allocated",
        "attributes",
        "free",
        "free_scalars",
        "has_gpus",
        "has_reserved",
        "hostname",
        "lent",
        "offers",
        "quota_held",
        "rev_allocated",
        "rev_offered",
        "seq",
        "tasks",
        "total",
        "total_scalars",
        "usage_slack",
    )

    def __init__(self, agent_id: str, hostname: str, total: Resources, attributes: dict[str, str | float], seq: int):
        self.agent_id = agent_id
        self.hostname = hostname
        self.attributes = attributes
        self.seq = seq
        self.active = True
        self.total = total
        self.total_scalars = total.non_revocable().scalars()
        self.has_reserved = bool(total.reserved())
        # Mesos: an agent with GPUs is offered only to GPU_RESOURCES frameworks
        self.has_gpus = self.total_scalars.get("gpus", 0.0) > 0
        # regular ledger: allocated + offered (sum of its offers) + free == total;
        # allocated includes lent
        self.allocated = EMPTY
        self.free = total.non_revocable()
        # (resources, their scalars): a cache valid while ``free is free_scalars[0]``
        self.free_scalars: tuple[Resources, dict[str, float]] | None = None
        # revocable ledger (flat scalars): rev_offered + rev_allocated <= usage_slack + flat(lent)
        self.usage_slack = EMPTY
        self.lent = EMPTY
        self.rev_offered = EMPTY
        self.rev_allocated = EMPTY
        self.quota_held = EMPTY
        self.offers: dict[str, None] = {}
        self.tasks: dict[tuple[str, str], None] = {}

    def set_total(self, total: Resources) -> None:
        self.total = total
        self.total_scalars = total.non_revocable().scalars()
        self.has_reserved = bool(total.reserved())
        self.has_gpus = self.total_scalars.get("gpus", 0.0) > 0


class DemandState:
    __slots__ = (
        "count",
        "framework_id",
        "gang_id",
        "gang_min",
        "in_offers",
        "launched",
        "ports",
        "priority",
        "revocable_ok",
        "role",
        "seq",
        "shape",
        "shape_scalars",
    )

    def __init__(
        self,
        seq: int,
        framework_id: str,
        role: str,
        shape: Resources,
        count: int,
        gang_id: str | None,
        gang_min: int | None,
        revocable_ok: bool,
        priority: int,
        ports: int = 0,
    ) -> None:
        self.seq = seq
        self.framework_id = framework_id
        self.role = role
        self.shape = shape
        self.shape_scalars = shape.scalars()
        self.count = count
        self.gang_id = gang_id
        self.gang_min = gang_min
        self.revocable_ok = revocable_ok
        self.priority = priority
        self.ports = ports  # ports of the agent's ranges per unit, besides the shape
        self.launched = 0
        self.in_offers = 0

    def unmet(self) -> int:
        return max(0, self.count - self.in_offers)

    def gang_needed(self) -> int:
        """Units that must be placed together now (0 when not a gang or already started)."""
        if self.gang_id is None or self.gang_min is None:
            return 0
        return max(0, self.gang_min - self.launched - self.in_offers)


class FrameworkState:
    __slots__ = (
        "active",
        "capabilities",
        "constraints",
        "demands",
        "excluded",
        "framework_id",
        "gpu_ok",
        "min_allocatable",
        "offer_roles",
        "offers",
        "reusable",
        "revocable_ok",
        "roles",
        "seq",
        "suppressed",
        "tasks",
        "uses_demand",
    )

    def __init__(
        self, framework_id: str, roles: tuple[str, ...], capabilities: frozenset[str], active: bool, seq: int
    ) -> None:
        self.framework_id = framework_id
        self.roles = roles  # every role it has state in (sorter membership)
        self.offer_roles = roles  # the roles it is subscribed with (offers go only to these)
        self.capabilities = capabilities
        self.reusable = False
        self.revocable_ok = False
        self.gpu_ok = False
        self.set_capabilities(capabilities)
        self.active = active
        self.seq = seq
        self.suppressed: set[str] = set()
        self.offers: dict[str, None] = {}
        self.tasks: dict[str, None] = {}
        self.demands: list[DemandState] = []
        self.uses_demand = False
        # offer constraints by role (``constraints.py``), and per constrained role the agents
        # they exclude (kept current as agents and constraints change; empty: no constraints)
        self.constraints: dict[str, RoleConstraints] = {}
        self.excluded: dict[str, set[str]] = {}
        # offer filters by role: its own minimum allocatable alternatives (Mesos' offer_filters)
        self.min_allocatable: dict[str, tuple[Mapping[str, float], ...]] = {}

    def set_capabilities(self, capabilities: frozenset[str]) -> None:
        self.capabilities = capabilities
        self.reusable = REUSABLE_OFFERS in capabilities
        self.revocable_ok = REVOCABLE_RESOURCES in capabilities
        # may be offered resources of agents with GPUs (Mesos' GPU_RESOURCES)
        self.gpu_ok = GPU_RESOURCES in capabilities


class TaskAlloc:
    __slots__ = ("agent_id", "framework_id", "offer_id", "priority", "regular", "revocable", "revoking", "role", "task_id")

    def __init__(
        self,
        framework_id: str,
        task_id: str,
        agent_id: str,
        role: str,
        regular: Resources,
        revocable: Resources,
        offer_id: str | None,
        priority: int,
    ) -> None:
        self.framework_id = framework_id
        self.task_id = task_id
        self.agent_id = agent_id
        self.role = role
        self.regular = regular
        self.revocable = revocable
        self.offer_id = offer_id
        self.priority = priority
        self.revoking = False


class OfferPhase(enum.Enum):
    """An offer's lifecycle (``OFFER``): outstanding in the book until it ends one of four ways."""

    OUTSTANDING = "OUTSTANDING"  # held by its framework (a lease grows and shrinks, staying here)
    ACCEPTED = "ACCEPTED"  # used by an ACCEPT (or a lease merged into another, or used up)
    DECLINED = "DECLINED"  # DECLINE
    REJECTED = "REJECTED"  # returned because the ACCEPT that named it was refused
    RESCINDED = "RESCINDED"  # taken back by the master: agent or framework gone, timeout, starvation, GPU


OFFER = Lifecycle("offer", {
    OfferPhase.OUTSTANDING: frozenset({OfferPhase.ACCEPTED, OfferPhase.DECLINED, OfferPhase.REJECTED, OfferPhase.RESCINDED}),
    OfferPhase.ACCEPTED: frozenset(),
    OfferPhase.DECLINED: frozenset(),
    OfferPhase.REJECTED: frozenset(),
    OfferPhase.RESCINDED: frozenset(),
})


class OfferState:
    __slots__ = (
        "agent_id",
        "created",
        "demand_units",
        "framework_id",
        "idle_since",
        "offer_id",
        "phase",
        "regular",
        "reusable",
        "revocable",
        "role",
        "scalars",
        "tasks",
    )

    def __init__(
        self,
        offer_id: str,
        framework_id: str,
        role: str,
        agent_id: str,
        created: float,
        reusable: bool,
        regular: Resources = EMPTY,
        scalars: dict[str, float] | None = None,
    ) -> None:
        self.offer_id = offer_id
        self.framework_id = framework_id
        self.role = role
        self.agent_id = agent_id
        self.created = created
        self.idle_since: float | None = created
        self.reusable = reusable
        self.regular = regular
        self.scalars = scalars  # of ``regular``, when known
        self.revocable = EMPTY
        # created only when used (most offers are classic and never hold tasks or demand units)
        self.tasks: set[str] | None = set() if reusable else None
        self.demand_units: dict[int, int] | None = None
        self.phase = OfferPhase.OUTSTANDING  # moved only by ``Ledger.offer_drop`` (``OFFER``)

    def is_empty(self) -> bool:
        return not self.regular and not self.revocable
