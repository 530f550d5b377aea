"""What the elastic core asks its shell to do (effects), and what it needs of a held offer
(pure). The shell (``service.py``) executes effects in order; see ``service_core`` for when each
is produced.
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs

from frameworks.client.demand import Demand
from protocol.resources import Resources

__pure__ = True


@attrs.frozen
class WorkerLaunch:
    job_id: int
    task_id: str
    index: int
    resources: Resources
    revocable: bool


@attrs.frozen
class StartCoordinator:
    job_id: int


@attrs.frozen
class StopCoordinator:
    job_id: int


@attrs.frozen
class Launch:
    offer_id: str
    agent_id: str
    workers: tuple[WorkerLaunch, ...]


@attrs.frozen
class Kill:
    task_id: str
    agent_id: str | None
    reason: str


@attrs.frozen
class WorkerGone:
    """A worker task ended: the coordinator may return its leases now instead of on timeout.
    ``died``: it failed (crashed, killed by its agent for a limit) - the shards it held count a
    death each and are set aside after repeated deaths; otherwise it just left."""

    job_id: int
    task_id: str
    died: str | None = None


@attrs.frozen
class DeclareDemand:
    demands: tuple[tuple[str, Demand], ...]


@attrs.frozen
class Decline:
    offer_ids: tuple[str, ...]
    refuse_seconds: float


@attrs.frozen
class Revive:
    """Clear the refusal filters of earlier declines: something is wanted again."""


@attrs.frozen
class Persist:
    job_ids: tuple[int, ...]


Effect = (
    StartCoordinator
    | StopCoordinator
    | Launch
    | Kill
    | WorkerGone
    | DeclareDemand
    | Decline
    | Revive
    | Persist
)


@attrs.frozen
class Returning:
    """The slot of a worker that ended on a live agent: its resources are on their way back to us
    (the master recovers them and offers them again) but no offer shows them yet."""

    task_id: str
    agent_id: str
    revocable: bool
    since: float
    need: Mapping[str, float]  # its scalars (flattened)


@attrs.frozen
class OfferSlot:
    """What the core needs of one held offer."""

    offer_id: str
    agent_id: str
    hostname: str
    available: Resources
    role: str = "*"
