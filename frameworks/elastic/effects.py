"""What the elastic core asks its shell to do (effects), and what it needs of a held offer
(pure). The shell (``service.py``) executes effects in order; see ``service_core`` for when each
is produced.
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs

from frameworks.kit.effects import DeclareDemand, Decline, Kill, Launch, Persist, Revive
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
class WorkerGone:
    """A worker task ended: the coordinator may return its leases now instead of on timeout.
    ``died``: it failed (crashed, killed by its agent for a limit) - the shards it held count a
    death each and are set aside after repeated deaths; otherwise it just left."""

    job_id: int
    task_id: str
    died: str | None = None


Effect = (
    StartCoordinator
    | StopCoordinator
    | Launch[WorkerLaunch]
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
