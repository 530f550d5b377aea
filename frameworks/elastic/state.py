"""The elastic job lifecycle as one table of legal transitions with an explicit terminal set.

PENDING   waiting until ``min_workers`` can be placed (gang of the minimum)
STARTING  the minimum gang is being launched
RUNNING   at least the minimum is running; training progresses
SCALING   a grow or shrink is in flight (a new membership generation is forming)
SUCCEEDED / FAILED / CANCELLED   terminal
A job that loses workers below its minimum goes back to PENDING instead of failing.
"""

from __future__ import annotations

import enum

import attrs

__pure__ = True


class JobState(enum.Enum):
    PENDING = "PENDING"
    STARTING = "STARTING"
    RUNNING = "RUNNING"
    SCALING = "SCALING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"


TERMINAL_STATES: frozenset[JobState] = frozenset({JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED})

_END = frozenset({JobState.FAILED, JobState.CANCELLED})

TRANSITIONS: dict[JobState, frozenset[JobState]] = {
    JobState.PENDING: frozenset({JobState.STARTING}) | _END,
    JobState.STARTING: frozenset({JobState.RUNNING, JobState.PENDING}) | _END,
    JobState.RUNNING: frozenset({JobState.SCALING, JobState.PENDING, JobState.SUCCEEDED}) | _END,
    JobState.SCALING: frozenset({JobState.RUNNING, JobState.PENDING, JobState.SUCCEEDED}) | _END,
    JobState.SUCCEEDED: frozenset(),
    JobState.FAILED: frozenset(),
    JobState.CANCELLED: frozenset(),
}


class IllegalTransition(ValueError):
    """A job state change that the table does not allow."""

    def __init__(self, old: JobState, new: JobState) -> None:
        super().__init__(f"illegal elastic job transition {old.name} -> {new.name}")
        self.old = old
        self.new = new


def is_terminal(state: JobState) -> bool:
    return state in TERMINAL_STATES


def check_transition(old: JobState, new: JobState) -> None:
    """Raise ``IllegalTransition`` unless ``old -> new`` is in the table."""
    if new not in TRANSITIONS[old]:
        raise IllegalTransition(old, new)


@attrs.frozen
class Transition:
    """One step of a job's story: why it moved and when."""

    old: JobState
    new: JobState
    reason: str
    at: float


@attrs.define
class JobLifecycle:
    """A job's current state plus the story of how it got there."""

    state: JobState = JobState.PENDING
    story: list[Transition] = attrs.field(factory=list)

    def move(self, new: JobState, reason: str, now: float) -> Transition:
        check_transition(self.state, new)
        step = Transition(self.state, new, reason, now)
        self.state = new
        self.story.append(step)
        return step

    @property
    def terminal(self) -> bool:
        return is_terminal(self.state)
