"""Task states (Mesos v1 names) and their one transition table.

A task's life is a path through ``TRANSITIONS`` that ends in exactly one terminal state. The
master, the agent and the frameworks all check updates against this table; an illegal pair raises
``IllegalTransition`` (a bug or a lying peer, never silently accepted).
"""

from __future__ import annotations

import enum

__pure__ = True


class TaskState(enum.Enum):
    TASK_STAGING = "TASK_STAGING"
    TASK_STARTING = "TASK_STARTING"
    TASK_RUNNING = "TASK_RUNNING"
    TASK_KILLING = "TASK_KILLING"
    TASK_FINISHED = "TASK_FINISHED"
    TASK_FAILED = "TASK_FAILED"
    TASK_KILLED = "TASK_KILLED"
    TASK_ERROR = "TASK_ERROR"
    TASK_LOST = "TASK_LOST"
    TASK_DROPPED = "TASK_DROPPED"
    TASK_UNREACHABLE = "TASK_UNREACHABLE"
    TASK_GONE = "TASK_GONE"
    TASK_GONE_BY_OPERATOR = "TASK_GONE_BY_OPERATOR"
    TASK_UNKNOWN = "TASK_UNKNOWN"

    # Members are singletons compared by identity, so the identity hash is a valid hash; the
    # master looks states up in sets and dicts several times per status update, and Enum's own
    # ``__hash__`` is a Python function (``hash(self._name_)``), ~8x slower.
    __hash__ = object.__hash__


S = TaskState

TERMINAL_STATES: frozenset[TaskState] = frozenset(
    {
        S.TASK_FINISHED,
        S.TASK_FAILED,
        S.TASK_KILLED,
        S.TASK_ERROR,
        S.TASK_LOST,
        S.TASK_DROPPED,
        S.TASK_GONE,
        S.TASK_GONE_BY_OPERATOR,
    }
)

# States only partition-aware frameworks see; others get TASK_LOST instead (Mesos rule).
PARTITION_AWARE_ONLY: frozenset[TaskState] = frozenset(
    {S.TASK_DROPPED, S.TASK_UNREACHABLE, S.TASK_GONE, S.TASK_GONE_BY_OPERATOR, S.TASK_UNKNOWN}
)

_ENDINGS = TERMINAL_STATES | {S.TASK_UNREACHABLE}

TRANSITIONS: dict[TaskState, frozenset[TaskState]] = {
    S.TASK_STAGING: frozenset({S.TASK_STARTING, S.TASK_RUNNING, S.TASK_KILLING} | _ENDINGS),
    S.TASK_STARTING: frozenset({S.TASK_RUNNING, S.TASK_KILLING} | _ENDINGS),
    S.TASK_RUNNING: frozenset({S.TASK_KILLING} | _ENDINGS),
    S.TASK_KILLING: frozenset(_ENDINGS),
    # An unreachable task may come back (partition healed) or be declared gone/lost.
    S.TASK_UNREACHABLE: frozenset({S.TASK_RUNNING, S.TASK_KILLING, S.TASK_STARTING} | TERMINAL_STATES),
    # Reconciliation answer only; never a stored state with successors.
    S.TASK_UNKNOWN: frozenset(),
    **{t: frozenset() for t in TERMINAL_STATES},
}


class IllegalTransition(ValueError):
    def __init__(self, old: TaskState, new: TaskState) -> None:
        super().__init__(f"illegal task transition {old.name} -> {new.name}")
        self.old = old
        self.new = new


def is_terminal(state: TaskState) -> bool:
    return state in TERMINAL_STATES


def can_transition(old: TaskState, new: TaskState) -> bool:
    """True if ``old -> new`` is legal. Repeating a non-terminal state is allowed (a resend)."""
    if old is new:
        return not is_terminal(old)
    return new in TRANSITIONS[old]


def check_transition(old: TaskState, new: TaskState) -> None:
    if not can_transition(old, new):
        raise IllegalTransition(old, new)


def for_framework(state: TaskState, partition_aware: bool) -> TaskState:
    """The state a framework is shown: non-partition-aware frameworks see TASK_LOST instead."""
    if not partition_aware and state in PARTITION_AWARE_ONLY:
        return S.TASK_LOST
    return state
