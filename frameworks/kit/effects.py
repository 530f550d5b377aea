"""The effects a framework's pure core asks its shell to carry out at the master, one vocabulary
for every Agora framework service (pure).

A core returns a list of effects from each fact it is fed (an offer, a status update, a request,
time); the shell executes them in order. A framework adds its own effects next to these
(the batch framework's ``JobEvent``, the elastic framework's coordinator effects) and defines its
``Effect`` union from both. What a ``Launch`` carries per task is the framework's own type
(``Launch[TaskLaunch]`` in batch, ``Launch[WorkerLaunch]`` in elastic): the shell turns each into
a ``TaskInfo``.
"""

from __future__ import annotations

from typing import Generic, TypeVar

import attrs

from frameworks.client.demand import Demand

__pure__ = True

T = TypeVar("T")


@attrs.frozen
class Launch(Generic[T]):
    """Launch ``tasks`` on one held offer (one ACCEPT of that offer)."""

    offer_id: str
    agent_id: str
    tasks: tuple[T, ...]


@attrs.frozen
class Kill:
    """Kill one task (``agent_id``: where it runs, when known); ``reason`` is for the log."""

    task_id: str
    agent_id: str | None
    reason: str


@attrs.frozen
class Decline:
    """Decline held offers, refusing their resources for ``refuse_seconds``."""

    offer_ids: tuple[str, ...]
    refuse_seconds: float


@attrs.frozen
class Persist:
    """Write these jobs' records to the store (before the next effect that depends on them)."""

    job_ids: tuple[int, ...]


@attrs.frozen
class Suppress:
    """Stop receiving offers: nothing is waiting."""


@attrs.frozen
class Revive:
    """Clear the refusal filters of earlier declines and receive offers again: something is
    wanted again."""


@attrs.frozen
class DeclareDemand:
    """The whole standing demand, keyed by job (``frameworks.client.demand.DemandBook.replace``)."""

    demands: tuple[tuple[str, Demand], ...]
