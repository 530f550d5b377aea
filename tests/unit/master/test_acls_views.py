"""The read ACLs (protocol.acls): view_frameworks / view_tasks filter what a principal sees in
/state and the operator API's GET_*; access_sandboxes decides whose sandboxes it reads. Unlike
the write actions they are enforced only once the ACL file has rules for them."""

from __future__ import annotations

import json

from protocol import mesos
from protocol.acls import (
    Acls,
    Action,
    Owners,
    filter_frameworks_json,
    filter_operator_response,
    may_read,
    sandbox_problem,
)
from protocol.mesos_common import AgentID, FrameworkID, TaskID
from protocol.task_states import TaskState

ACLS = Acls.parse(json.dumps({
    "permissive": False,
    "view_frameworks": [{"principals": {"values": ["ops"]}, "users": {"type": "ANY"}},
                        {"principals": {"values": ["alice-ui"]}, "users": {"values": ["alice"]}}],
    "view_tasks": [{"principals": {"values": ["ops"]}, "users": {"type": "ANY"}},
                   {"principals": {"values": ["alice-ui"]}, "users": {"values": ["alice"]}}],
    "access_sandboxes": [{"principals": {"values": ["alice-ui"]}, "users": {"values": ["alice"]}},
                         {"principals": {"values": ["ops"]}, "users": {"type": "ANY"}}],
}), default_permissive=False)


def test_read_actions_without_rules_are_not_enforced() -> None:
    deny_writes = Acls.parse(json.dumps({"register_agents": []}), default_permissive=False)
    for action in (Action.VIEW_FRAMEWORKS, Action.VIEW_TASKS, Action.ACCESS_SANDBOXES):
        assert not deny_writes.enforces(action) and may_read(deny_writes, action, "anyone", "root")
    assert deny_writes.enforces(Action.REGISTER_AGENTS)  # a write action always is
    assert sandbox_problem(deny_writes, "anyone", "alice") is None


def test_access_sandboxes() -> None:
    assert sandbox_problem(ACLS, "alice-ui", "alice") is None
    problem = sandbox_problem(ACLS, "alice-ui", "bob")
    assert problem is not None and problem.startswith("Forbidden: access_sandboxes denied for alice-ui")
    assert sandbox_problem(ACLS, "alice-ui", None) is not None  # an unknown user: only ANY rules
    assert sandbox_problem(ACLS, "ops", None) is None and sandbox_problem(ACLS, "ops", "root") is None
    assert sandbox_problem(ACLS, None, "alice") is not None  # unauthenticated: no rule names it


def _fw(fid: str, user: str, *tids: str) -> dict[str, object]:
    return {"id": fid, "user": user, "tasks": [{"id": t} for t in tids], "completed_tasks": [], "unreachable_tasks": []}


def test_state_json_keeps_what_the_principal_may_view() -> None:
    fws = [_fw("f1", "alice", "t1", "t2"), _fw("f2", "bob", "t3")]
    owners = Owners({"f1": "alice", "f2": "bob"}, {("f1", "t2"): "root"})  # t2 runs as root (its command's user)
    assert [f["id"] for f in filter_frameworks_json(ACLS, "ops", fws, owners)] == ["f1", "f2"]
    mine = filter_frameworks_json(ACLS, "alice-ui", fws, owners)
    assert [f["id"] for f in mine] == ["f1"] and [t["id"] for t in mine[0]["tasks"]] == ["t1"]
    assert filter_frameworks_json(ACLS, "eve", fws, owners) == []
    assert fws[0]["tasks"] == [{"id": "t1"}, {"id": "t2"}]  # the input is not changed


def _task(fid: str, tid: str, user: str | None = None) -> mesos.Task:
    return mesos.Task(name=tid, task_id=TaskID(tid), framework_id=FrameworkID(fid), agent_id=AgentID("a"),
                      state=TaskState.TASK_RUNNING, user=user)


def _record(fid: str, user: str) -> mesos.FrameworkRecord:
    info = mesos.FrameworkInfo(user=user, name=fid, id=FrameworkID(fid))
    return mesos.FrameworkRecord(framework_info=info, active=True, connected=True, recovered=False)


def test_operator_get_state_and_get_tasks_are_filtered() -> None:
    owners = Owners({"f1": "alice", "f2": "bob"}, {})
    tasks = mesos.GetTasks(tasks=(_task("f1", "t1"), _task("f2", "t3"), _task("f1", "t9", user="bob")))
    frameworks = mesos.GetFrameworks(frameworks=(_record("f1", "alice"), _record("f2", "bob")))
    RT = mesos.OperatorResponseType
    state = mesos.OperatorResponse(type=RT.GET_STATE, get_state=mesos.GetState(get_tasks=tasks, get_frameworks=frameworks))
    got = filter_operator_response(ACLS, "alice-ui", state, owners).get_state
    assert got is not None and got.get_tasks is not None and got.get_frameworks is not None
    assert [t.task_id.value for t in got.get_tasks.tasks] == ["t1"]  # t9's own user is bob
    assert [f.framework_info.user for f in got.get_frameworks.frameworks] == ["alice"]
    only_tasks = mesos.OperatorResponse(type=RT.GET_TASKS, get_tasks=tasks)
    out = filter_operator_response(ACLS, "ops", only_tasks, owners).get_tasks
    assert out is not None and len(out.tasks) == 3
    health = mesos.OperatorResponse(type=RT.GET_HEALTH, get_health=mesos.GetHealth(healthy=True))
    assert filter_operator_response(ACLS, "eve", health, owners) is health
