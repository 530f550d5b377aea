"""The checks an ACCEPT goes through, as a chain of small typed checks (pure).

Each check looks at one thing and returns ``None`` (pass) or a ``Refused(code, message)``; the
code is a ``Rejection``, and ``OUTCOME`` is the one mapping from a rejection to the task state
and reason the framework is told (``master/accept.py`` applies it; TASK_DROPPED is shown as
TASK_LOST to a framework that is not PARTITION_AWARE).

Order, for one ACCEPT (``master/accept.py``):

1. the offers (``offers_problem``, ``agent_problem``): stale, foreign, duplicate or mixed offers,
   or an agent that is gone, drop every task of the ACCEPT;
2. per LAUNCH task (``TASK_CHECKS`` after ``user_problem``): run-as user, well-formed TaskInfo,
   unique id (live, or ran before), agent, allocation roles, then ``fits`` (the running sum
   over the ACCEPT, skipped when it also (un)reserves: the allocator checks that one);
3. per LAUNCH_GROUP: the user of every task, the executor, non-empty, ``TASK_CHECKS`` for each
   task, then ``fits`` for the whole group (one failure fails the whole group);
4. the allocator's own verdict on the rest (``allocator_rejection``).
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable, Container, Mapping, Sequence
from typing import NamedTuple

import attrs

from master.allocator import decisions as ad
from master.validation import check_executor, check_task
from protocol import mesos
from protocol.acls import Acls, task_info_user, task_problem
from protocol.resources import Resources
from protocol.task_states import TaskState

__pure__ = True

R = mesos.Reason


class Rejection(enum.Enum):
    """Why a task of an ACCEPT is not launched."""

    INVALID_OFFERS = "INVALID_OFFERS"  # unknown, foreign, duplicate or mixed offers; the agent is gone
    UNAUTHORIZED = "UNAUTHORIZED"  # run_tasks: the principal may not run the task as its user
    GROUP_UNAUTHORIZED = "GROUP_UNAUTHORIZED"  # the same, for one task of a LAUNCH_GROUP
    INVALID_TASK = "INVALID_TASK"  # the TaskInfo itself (master/validation.py)
    INVALID_EXECUTOR = "INVALID_EXECUTOR"  # a LAUNCH_GROUP's ExecutorInfo
    EMPTY_GROUP = "EMPTY_GROUP"
    DUPLICATE_ID = "DUPLICATE_ID"  # a live task, or one earlier in this ACCEPT, has the id
    ALREADY_RAN = "ALREADY_RAN"  # a finished task had the id (a replayed ACCEPT)
    WRONG_AGENT = "WRONG_AGENT"  # TaskInfo.agent_id is not the offers' agent
    FOREIGN_ROLE = "FOREIGN_ROLE"  # resources allocated to a role the framework does not hold
    OVER_CLAIM = "OVER_CLAIM"  # more than offered and unused (summed over the ACCEPT)
    ALLOCATOR_OFFERS = "ALLOCATOR_OFFERS"  # the allocator refused the offers
    ALLOCATOR_INVALID = "ALLOCATOR_INVALID"  # the allocator refused an operation


_ERROR = (TaskState.TASK_ERROR, R.REASON_TASK_INVALID)
_DROPPED = (TaskState.TASK_DROPPED, R.REASON_INVALID_OFFERS)

OUTCOME: Mapping[Rejection, tuple[TaskState, mesos.Reason]] = {
    Rejection.INVALID_OFFERS: _DROPPED,
    Rejection.ALLOCATOR_OFFERS: _DROPPED,
    Rejection.UNAUTHORIZED: (TaskState.TASK_ERROR, R.REASON_TASK_UNAUTHORIZED),
    Rejection.GROUP_UNAUTHORIZED: (TaskState.TASK_ERROR, R.REASON_TASK_GROUP_UNAUTHORIZED),
    Rejection.INVALID_TASK: _ERROR,
    Rejection.INVALID_EXECUTOR: _ERROR,
    Rejection.EMPTY_GROUP: _ERROR,
    Rejection.DUPLICATE_ID: _ERROR,
    Rejection.ALREADY_RAN: _ERROR,
    Rejection.WRONG_AGENT: _ERROR,
    Rejection.FOREIGN_ROLE: _ERROR,
    Rejection.OVER_CLAIM: _ERROR,
    Rejection.ALLOCATOR_INVALID: _ERROR,
}

# the allocator's codes that mean "the offers", not "the operations"
OFFER_PROBLEMS = frozenset({
    ad.RejectCode.UNKNOWN_FRAMEWORK, ad.RejectCode.NO_OFFERS, ad.RejectCode.UNKNOWN_OFFER,
    ad.RejectCode.NOT_OWNER, ad.RejectCode.DUPLICATE_OFFER, ad.RejectCode.DIFFERENT_AGENTS,
})  # fmt: skip


class Refused(NamedTuple):
    code: Rejection
    message: str


@attrs.define(slots=True, eq=False)
class LaunchScope:
    """What the per-task checks of one ACCEPT read: the framework's side and the offers' agent,
    and ``seen`` (the task ids taken earlier in this ACCEPT)."""

    offer_agent: str
    roles: Container[str]
    live: Container[str]  # the framework's live and unreachable task ids
    ran: Callable[[str], object]  # a finished task with this id, or None
    seen: set[str] = attrs.field(factory=set)


# --- 1. the offers -------------------------------------------------------------------------------


def offers_problem(book: Sequence[ad.Offer | None], framework_id: str) -> Refused | None:
    """Every offer known to the allocator and this framework's (the allocator refuses mixed
    agents and duplicates itself)."""
    if not book or not all(o is not None and o.framework_id == framework_id for o in book):
        return Refused(Rejection.INVALID_OFFERS, "Offer is no longer valid")
    return None


def agent_problem(reachable: bool, connected: bool) -> Refused | None:
    """The offers' agent is still registered and connected (else the offers are stale)."""
    if reachable and connected:
        return None
    return Refused(Rejection.INVALID_OFFERS, "Offer is no longer valid")


# --- 2. one task ---------------------------------------------------------------------------------


def user_problem(
    acls: Acls, principal: str | None, task: mesos.TaskInfo, framework_user: str | None,
    group_executor: mesos.ExecutorInfo | None, code: Rejection = Rejection.UNAUTHORIZED,
) -> Refused | None:
    """``run_tasks``: may the principal run ``task`` as its user?"""
    if acls.allows_everything:
        return None
    problem = task_problem(acls, principal, task_info_user(task, framework_user, group_executor))
    return None if problem is None else Refused(code, problem)


def well_formed(scope: LaunchScope, task: mesos.TaskInfo, in_group: bool) -> Refused | None:
    msg = check_task(task, in_group=in_group)
    return None if msg is None else Refused(Rejection.INVALID_TASK, msg)


def unique_id(scope: LaunchScope, task: mesos.TaskInfo, in_group: bool) -> Refused | None:
    tid = task.task_id.value
    if tid in scope.live or tid in scope.seen:
        return Refused(Rejection.DUPLICATE_ID, f"Task has duplicate ID: {tid}")
    if scope.ran(tid) is not None:
        # a replayed ACCEPT on a fresh offer must not run a finished task again
        return Refused(Rejection.ALREADY_RAN, f"Task has duplicate ID: {tid} (a task with this ID already ran)")
    return None


def on_offer_agent(scope: LaunchScope, task: mesos.TaskInfo, in_group: bool) -> Refused | None:
    if task.agent_id is not None and task.agent_id.value != scope.offer_agent:
        return Refused(
            Rejection.WRONG_AGENT,
            f"Task uses agent {task.agent_id.value} but the offers are for agent {scope.offer_agent}",
        )
    return None


def held_roles(scope: LaunchScope, task: mesos.TaskInfo, in_group: bool) -> Refused | None:
    for r in (task.resources, task.executor.resources if task.executor else ()):
        for res in r:
            if res.allocation_info is not None and res.allocation_info.role not in scope.roles:
                return Refused(
                    Rejection.FOREIGN_ROLE,
                    f"Task uses resources allocated to role {res.allocation_info.role!r} not held by the framework",
                )
    return None


TaskCheck = Callable[[LaunchScope, mesos.TaskInfo, bool], "Refused | None"]

TASK_CHECKS: tuple[TaskCheck, ...] = (well_formed, unique_id, on_offer_agent, held_roles)


def task_refused(scope: LaunchScope, task: mesos.TaskInfo, in_group: bool) -> Refused | None:
    """The first of ``TASK_CHECKS`` that refuses ``task``, or None."""
    for check in TASK_CHECKS:
        r = check(scope, task, in_group)
        if r is not None:
            return r
    return None


# --- 3. groups and resources ---------------------------------------------------------------------


def group_problem(executor: mesos.ExecutorInfo, tasks: Sequence[mesos.TaskInfo]) -> Refused | None:
    """A LAUNCH_GROUP's own checks before its tasks': the executor, and at least one task."""
    msg = check_executor(executor)
    if msg is not None:
        return Refused(Rejection.INVALID_EXECUTOR, msg)
    if not tasks:
        return Refused(Rejection.EMPTY_GROUP, "task group is empty")
    return None


def fits(need: Resources, remaining: Resources, what: str = "Task") -> Refused | None:
    """``need`` within what the offers still hold after the earlier launches of the ACCEPT."""
    if remaining.contains(need):
        return None
    return Refused(Rejection.OVER_CLAIM, f"{what} uses more resources ({need}) than offered and unused ({remaining})")


# --- 4. the allocator ----------------------------------------------------------------------------


def sane_refuse(value: float | None) -> float | None:
    """An ACCEPT's or DECLINE's ``refuse_seconds`` as the allocator takes it: None (the
    default) for a missing, negative or non-finite value, at most a year."""
    if value is None or not math.isfinite(value) or value < 0:
        return None
    return min(value, 365 * 24 * 3600.0)


def allocator_rejection(code: ad.RejectCode) -> Rejection:
    return Rejection.ALLOCATOR_OFFERS if code in OFFER_PROBLEMS else Rejection.ALLOCATOR_INVALID
