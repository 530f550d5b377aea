"""Named registry operations: every durable change the master makes is one of these values.

The pure core (``master.state``) emits them inside a ``Persist`` effect; the registry shell
(``master.registry``) applies a batch of them in one SQLite transaction *before* the master acts
on the change ("write first, then act"). Payloads are plain values (strings, floats, bytes) so the
registry does not depend on the message schema; framework infos are stored codec-encoded.
"""

from __future__ import annotations

import attrs

__pure__ = True


@attrs.frozen
class AgentAdmitted:
    """An agent registered (or came back): it is known and reachable."""

    agent_id: str
    hostname: str
    port: int
    resources: str  # Resources as a Mesos resource string
    attributes: str = ""
    registered_at: float = 0.0


@attrs.frozen
class AgentMarkedUnreachable:
    agent_id: str
    at: float


@attrs.frozen
class AgentRemoved:
    agent_id: str


@attrs.frozen
class AgentDrainSet:
    """Maintenance: the agent is out of service (no new offers) or back in service (``draining``
    False). ``kill``: DRAIN_AGENT, its tasks are killed (``max_grace`` seconds at most, None = each
    task's own kill policy) and it is marked gone once drained if ``mark_gone``; without ``kill``
    it is only deactivated (DEACTIVATE_AGENT). ``drained``: draining, and every task on it ended
    with its last update acknowledged (Mesos' DRAINED)."""

    agent_id: str
    draining: bool
    kill: bool = False
    max_grace: float | None = None
    mark_gone: bool = False
    drained: bool = False


@attrs.frozen
class AgentPrincipalBound:
    """The principal that first registered an agent id: only it may register that id again
    (kept when the agent is removed, so a removed id cannot be taken over)."""

    agent_id: str
    principal: str


@attrs.frozen
class FrameworkAdded:
    """A framework subscribed; ``info`` is its msgpack-encoded ``FrameworkInfo``."""

    framework_id: str
    info: bytes
    failover_timeout: float
    registered_at: float = 0.0


@attrs.frozen
class FrameworkDisconnected:
    """The framework's connection went away; it is removed at ``deadline`` unless it returns."""

    framework_id: str
    deadline: float


@attrs.frozen
class FrameworkReconnected:
    framework_id: str


@attrs.frozen
class FrameworkRemoved:
    framework_id: str
    at: float = 0.0


@attrs.frozen
class ReservationsSet:
    """The dynamic reservations on an agent (a Mesos resource string; empty = none)."""

    agent_id: str
    resources: str


@attrs.frozen
class QuotaSet:
    role: str
    guarantee: str
    limit: str | None = None


@attrs.frozen
class QuotaRemoved:
    role: str


@attrs.frozen
class WeightSet:
    role: str
    weight: float


@attrs.frozen
class MaintenanceSet:
    """The maintenance schedule and the machines in DOWN mode (``master.maintenance``
    ``MaintenanceBook.encode``: one JSON text, replaced whole)."""

    state: str


RegistryOp = (
    AgentAdmitted
    | AgentMarkedUnreachable
    | AgentRemoved
    | AgentDrainSet
    | AgentPrincipalBound
    | FrameworkAdded
    | FrameworkDisconnected
    | FrameworkReconnected
    | FrameworkRemoved
    | ReservationsSet
    | QuotaSet
    | QuotaRemoved
    | WeightSet
    | MaintenanceSet
)


# --- what the registry holds (read back at startup) --------------------------------------------


@attrs.frozen
class AgentEntry:
    agent_id: str
    hostname: str
    port: int
    resources: str
    attributes: str = ""
    registered_at: float = 0.0
    unreachable_since: float | None = None
    draining: bool = False
    reservations: str = ""
    drain_kill: bool = False  # DRAIN_AGENT rather than DEACTIVATE_AGENT (see ``AgentDrainSet``)
    drain_max_grace: float | None = None
    drain_mark_gone: bool = False
    drained: bool = False


@attrs.frozen
class FrameworkEntry:
    framework_id: str
    info: bytes
    failover_timeout: float
    registered_at: float = 0.0
    deadline: float | None = None  # set while disconnected


@attrs.frozen
class RegistrySnapshot:
    master_seq: int = 0  # how many times a master started on this registry (the fencing epoch)
    agents: tuple[AgentEntry, ...] = ()
    frameworks: tuple[FrameworkEntry, ...] = ()
    removed_frameworks: frozenset[str] = frozenset()
    quotas: tuple[QuotaSet, ...] = ()
    weights: tuple[WeightSet, ...] = ()
    next_framework_seq: int = 0
    next_agent_seq: int = 0
    agent_principals: tuple[tuple[str, str], ...] = ()  # (agent id, principal) bindings
    maintenance: str = ""  # the last ``MaintenanceSet.state`` ("" = no schedule, nothing DOWN)
