"""What the batch core asks its shell to do (pure): the kit's vocabulary
(``frameworks.kit.effects``: ``Launch``, ``Kill``, ``Decline``, ``Persist``, ``Suppress``,
``Revive``, ``DeclareDemand``), launched as ``TaskLaunch`` each, and the batch framework's own
``JobEvent``. The shell (``service.py``) executes them in order."""

from __future__ import annotations

import attrs

from frameworks.batch.model import JobSpec
from frameworks.kit.effects import DeclareDemand, Decline, Kill, Launch, Persist, Revive, Suppress
from protocol.resources import Resources

__pure__ = True

__all__ = [
    "DeclareDemand", "Decline", "Effect", "JobEvent", "Kill", "Launch", "Persist", "Revive", "Suppress", "TaskLaunch",
]  # fmt: skip


@attrs.frozen
class TaskLaunch:
    task_id: str
    job_id: int
    index: int
    name: str
    spec: JobSpec
    resources: Resources
    env: tuple[tuple[str, str], ...] = ()  # this task's own variables: ports, its gang's rendezvous
    run_as: str | None = None  # the OS account (CommandInfo.user; None: the framework's user)


@attrs.frozen
class JobEvent:
    """Something that happened to a job, for the event stream and notifications: ``kind`` is
    submitted, started, finished, preempted, requeued, held, released or updated."""

    kind: str
    job_id: int
    at: float
    state: str
    detail: str | None = None


Effect = Launch[TaskLaunch] | Kill | Decline | Persist | Suppress | Revive | DeclareDemand | JobEvent
