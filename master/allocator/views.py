"""Read-only views the master serves (/state, metrics, the offers page)."""

from __future__ import annotations

import attrs

from protocol.resources import Resources

__pure__ = True


@attrs.frozen
class AgentView:
    agent_id: str
    hostname: str
    active: bool
    total: Resources
    allocated: Resources
    offered: Resources
    free: Resources
    usage_slack: Resources
    lent: Resources
    revocable_offered: Resources
    revocable_allocated: Resources


@attrs.frozen
class FrameworkView:
    framework_id: str
    roles: tuple[str, ...]
    active: bool
    suppressed: frozenset[str]
    uses_demand: bool
    allocated: Resources
    offered: Resources
    offer_ids: tuple[str, ...]
    task_ids: tuple[str, ...]


@attrs.frozen
class PassStats:
    """What the last ``allocate`` did (for metrics and tests of incrementality)."""

    number: int
    full_sweep: bool
    agents_visited: int
    decisions: int


@attrs.frozen
class TaskView:
    framework_id: str
    task_id: str
    agent_id: str
    role: str
    resources: Resources
    offer_id: str | None
    revoking: bool
