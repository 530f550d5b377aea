"""Each check of the ACCEPT chain (``master/accept_checks.py``) alone: the exact rejection code
and message, and the one mapping from a rejection to the task state and reason."""

from __future__ import annotations

from typing import Any

import attrs
import pytest

from master.accept_checks import (
    OUTCOME,
    TASK_CHECKS,
    LaunchScope,
    Refused,
    Rejection,
    agent_problem,
    allocator_rejection,
    fits,
    group_problem,
    held_roles,
    offers_problem,
    on_offer_agent,
    sane_refuse,
    task_refused,
    unique_id,
    user_problem,
    well_formed,
)
from master.allocator import decisions as ad
from master.testing import task
from protocol import mesos
from protocol.acls import Acls
from protocol.resources import Resources
from protocol.task_states import TaskState

R = mesos.Reason
ONLY_ALICE = Acls.parse(
    '{"run_tasks": [{"principals": {"values": ["fw"]}, "users": {"values": ["alice"]}}]}', default_permissive=False
)


def offer(oid: str, fid: str = "f1", agent: str = "a1") -> ad.Offer:
    return ad.Offer(offer_id=oid, framework_id=fid, agent_id=agent, hostname="h", role="*",
                    resources=Resources.of(cpus=1, mem=64), created=0.0, idle_since=None,
                    revocable=Resources(), reusable=False)


def scope(**kw: Any) -> LaunchScope:
    finished = {"done"}
    base = LaunchScope(offer_agent="a1", roles=("*", "web"), live={"live"},
                       ran=lambda tid: tid if tid in finished else None)
    return attrs.evolve(base, **kw)


def test_every_rejection_has_one_outcome() -> None:
    assert set(OUTCOME) == set(Rejection)
    dropped = {r for r, (state, _) in OUTCOME.items() if state is TaskState.TASK_DROPPED}
    assert dropped == {Rejection.INVALID_OFFERS, Rejection.ALLOCATOR_OFFERS}
    assert OUTCOME[Rejection.INVALID_OFFERS] == (TaskState.TASK_DROPPED, R.REASON_INVALID_OFFERS)
    assert OUTCOME[Rejection.UNAUTHORIZED] == (TaskState.TASK_ERROR, R.REASON_TASK_UNAUTHORIZED)
    assert OUTCOME[Rejection.GROUP_UNAUTHORIZED] == (TaskState.TASK_ERROR, R.REASON_TASK_GROUP_UNAUTHORIZED)
    others = set(Rejection) - dropped - {Rejection.UNAUTHORIZED, Rejection.GROUP_UNAUTHORIZED}
    assert {OUTCOME[r] for r in others} == {(TaskState.TASK_ERROR, R.REASON_TASK_INVALID)}


def test_offers_problem() -> None:
    stale = Refused(Rejection.INVALID_OFFERS, "Offer is no longer valid")
    assert offers_problem([], "f1") == stale
    assert offers_problem([None], "f1") == stale
    assert offers_problem([offer("o1"), offer("o2", fid="f2")], "f1") == stale
    assert offers_problem([offer("o1"), offer("o2")], "f1") is None


def test_agent_problem() -> None:
    assert agent_problem(True, True) is None
    assert agent_problem(False, True) == Refused(Rejection.INVALID_OFFERS, "Offer is no longer valid")
    assert agent_problem(True, False) == Refused(Rejection.INVALID_OFFERS, "Offer is no longer valid")


def test_user_problem() -> None:
    t = task("t1")
    assert user_problem(Acls.allow_all(), None, t, "bob", None) is None
    assert user_problem(ONLY_ALICE, "fw", t, "alice", None) is None
    refused = user_problem(ONLY_ALICE, "fw", t, "bob", None)
    assert refused is not None and refused.code is Rejection.UNAUTHORIZED and "bob" in refused.message
    grouped = user_problem(ONLY_ALICE, "fw", t, "bob", None, Rejection.GROUP_UNAUTHORIZED)
    assert grouped == Refused(Rejection.GROUP_UNAUTHORIZED, refused.message)


def test_well_formed() -> None:
    assert well_formed(scope(), task("t1"), False) is None
    assert well_formed(scope(), task("../x"), False) == Refused(
        Rejection.INVALID_TASK, "invalid task ID '../x': must match [A-Za-z0-9._-]{1,200} without a leading dot"
    )
    refused = well_formed(scope(), task("t1", cmd=None), False)
    assert refused is not None and refused.code is Rejection.INVALID_TASK


def test_unique_id() -> None:
    s = scope()
    assert unique_id(s, task("new"), False) is None
    assert unique_id(s, task("live"), False) == Refused(Rejection.DUPLICATE_ID, "Task has duplicate ID: live")
    s.seen.add("new")
    assert unique_id(s, task("new"), False) == Refused(Rejection.DUPLICATE_ID, "Task has duplicate ID: new")
    assert unique_id(s, task("done"), False) == Refused(
        Rejection.ALREADY_RAN, "Task has duplicate ID: done (a task with this ID already ran)"
    )


def test_on_offer_agent() -> None:
    assert on_offer_agent(scope(), task("t1"), False) is None
    assert on_offer_agent(scope(), task("t1", agent_id=mesos.AgentID("a1")), False) is None
    assert on_offer_agent(scope(), task("t1", agent_id=mesos.AgentID("a2")), False) == Refused(
        Rejection.WRONG_AGENT, "Task uses agent a2 but the offers are for agent a1"
    )


def test_held_roles() -> None:
    def in_role(role: str) -> mesos.TaskInfo:
        base = task("t1")
        resources = tuple(attrs.evolve(r, allocation_info=mesos.AllocationInfo(role=role)) for r in base.resources)
        return attrs.evolve(base, resources=resources)

    assert held_roles(scope(), task("t1"), False) is None
    assert held_roles(scope(), in_role("web"), False) is None
    assert held_roles(scope(), in_role("db"), False) == Refused(
        Rejection.FOREIGN_ROLE, "Task uses resources allocated to role 'db' not held by the framework"
    )


def test_task_refused_runs_the_checks_in_order() -> None:
    assert [c.__name__ for c in TASK_CHECKS] == ["well_formed", "unique_id", "on_offer_agent", "held_roles"]
    # a task failing two checks gets the first one's rejection
    bad_and_dup = task("live", cmd=None)
    refused = task_refused(scope(), bad_and_dup, False)
    assert refused is not None and refused.code is Rejection.INVALID_TASK
    assert task_refused(scope(), task("live"), False) == Refused(Rejection.DUPLICATE_ID, "Task has duplicate ID: live")
    assert task_refused(scope(), task("fresh"), False) is None


def test_group_problem() -> None:
    ex = mesos.ExecutorInfo(executor_id=mesos.ExecutorID("ex"), type=mesos.ExecutorType.DEFAULT)
    assert group_problem(ex, [task("t1")]) is None
    assert group_problem(ex, []) == Refused(Rejection.EMPTY_GROUP, "task group is empty")
    bad = mesos.ExecutorInfo(executor_id=mesos.ExecutorID("../ex"), type=mesos.ExecutorType.DEFAULT)
    assert group_problem(bad, [task("t1")]) == Refused(
        Rejection.INVALID_EXECUTOR, "invalid executor ID '../ex': must match [A-Za-z0-9._-]{1,200} without a leading dot"
    )


def test_fits() -> None:
    two = Resources.of(cpus=2, mem=64)
    assert fits(Resources.of(cpus=2, mem=64), two) is None
    refused = fits(Resources.of(cpus=3), two)
    assert refused == Refused(
        Rejection.OVER_CLAIM, f"Task uses more resources ({Resources.of(cpus=3)}) than offered and unused ({two})"
    )
    group = fits(Resources.of(cpus=3), two, "Task group")
    assert group is not None and group.message.startswith("Task group uses more resources")


@pytest.mark.parametrize("code", list(ad.RejectCode))
def test_allocator_rejection(code: ad.RejectCode) -> None:
    offers = {
        ad.RejectCode.UNKNOWN_FRAMEWORK, ad.RejectCode.NO_OFFERS, ad.RejectCode.UNKNOWN_OFFER,
        ad.RejectCode.NOT_OWNER, ad.RejectCode.DUPLICATE_OFFER, ad.RejectCode.DIFFERENT_AGENTS,
    }  # fmt: skip
    want = Rejection.ALLOCATOR_OFFERS if code in offers else Rejection.ALLOCATOR_INVALID
    assert allocator_rejection(code) is want


def test_sane_refuse() -> None:
    assert [sane_refuse(v) for v in (None, -1.0, float("nan"), float("inf"), 0.0, 5.0, 1e12)] == [
        None, None, None, None, 0.0, 5.0, 365 * 24 * 3600.0,
    ]
