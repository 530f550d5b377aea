"""The ACCEPT chain through the core (``master/accept.py`` over ``master/accept_checks.py``):
for each rejection, exactly which update the framework gets (state, reason, message, agent) and
what still reaches the agent."""

from __future__ import annotations

import attrs
import pytest

from master.testing import Harness, framework_info, offers, task, to_agent, updates
from protocol import agent_channel as ac
from protocol import mesos
from protocol.acls import Acls
from protocol.resources import Resources
from protocol.task_states import TaskState as TS

R = mesos.Reason
OT = mesos.OperationType


def launch(*tasks: mesos.TaskInfo) -> mesos.Operation:
    return mesos.Operation(type=OT.LAUNCH, launch=mesos.Launch(task_infos=tasks))


def group(executor_id: str, *tasks: mesos.TaskInfo, cpus: float = 0.1) -> mesos.Operation:
    ex = mesos.ExecutorInfo(executor_id=mesos.ExecutorID(executor_id), type=mesos.ExecutorType.DEFAULT,
                            resources=Resources.of(cpus=cpus, mem=32).to_mesos())
    return mesos.Operation(type=OT.LAUNCH_GROUP, launch_group=mesos.LaunchGroup(
        executor=ex, task_group=mesos.TaskGroupInfo(tasks=tasks)))


def setup(*caps: str, **cfg: object) -> tuple[Harness, str, str, str, mesos.Offer]:
    h = Harness(**cfg)
    fid, sid = h.subscribe(framework_info("f", *caps, roles=("*",), principal="fw"))
    aid, _ = h.agent("cpus:2;mem:1024")
    (offer,) = offers(h.allocate(), sid)
    return h, fid, sid, aid, offer


def accept(h: Harness, fid: str, sid: str, offer_ids: tuple[str, ...], *ops: mesos.Operation) -> tuple[list, list]:
    call = mesos.Call.make_accept(mesos.FrameworkID(fid), tuple(mesos.OfferID(o) for o in offer_ids), ops,
                                  mesos.Filters(refuse_seconds=0))
    fx = h.call(fid, sid, call)
    shown = [(s.task_id.value, s.state, s.reason, s.message, s.agent_id.value if s.agent_id else None)
             for s in updates(fx, sid)]
    launched = [t.task_id.value for run in to_agent(fx, ac.RunTasks) for t in run.tasks]
    return shown, launched


def in_role(t: mesos.TaskInfo, role: str) -> mesos.TaskInfo:
    return attrs.evolve(t, resources=tuple(attrs.evolve(r, allocation_info=mesos.AllocationInfo(role=role))
                                           for r in t.resources))


@pytest.mark.parametrize("partition_aware", [False, True])
def test_stale_offers_drop_every_task(partition_aware: bool) -> None:
    h, fid, sid, _aid, _offer = setup(*(("PARTITION_AWARE",) if partition_aware else ()))
    shown, launched = accept(h, fid, sid, ("nope",), launch(task("t1")), group("ex", task("g1")))
    state = TS.TASK_DROPPED if partition_aware else TS.TASK_LOST
    msg = "Invalid offers: offer nope is no longer valid"
    assert shown == [("t1", state, R.REASON_INVALID_OFFERS, msg, None), ("g1", state, R.REASON_INVALID_OFFERS, msg, None)]
    assert launched == [] and h.state.counters["invalid_offers"] == 1


def test_each_task_check_refuses_alone_and_the_rest_launch() -> None:
    h, fid, sid, aid, offer = setup()
    assert accept(h, fid, sid, (offer.id.value,), launch(task("done")))[1] == ["done"]
    h.status(1, fid, "done", TS.TASK_FINISHED)
    (offer,) = offers(h.allocate(), sid)
    shown, launched = accept(h, fid, sid, (offer.id.value,), launch(
        task("../bad"),
        task("ok", cpus=1),
        task("ok"),
        task("done"),
        task("elsewhere", agent_id=mesos.AgentID("other")),
        in_role(task("foreign"), "db"),
        task("big", cpus=1.5),
        task("fits", cpus=0.5),
    ))
    err = (TS.TASK_ERROR, R.REASON_TASK_INVALID)
    one_cpu_left = Resources.parse("cpus:1;mem:992")
    assert shown == [
        ("../bad", *err, "invalid task ID '../bad': must match [A-Za-z0-9._-]{1,200} without a leading dot", aid),
        ("ok", *err, "Task has duplicate ID: ok", aid),
        ("done", *err, "Task has duplicate ID: done (a task with this ID already ran)", aid),
        ("elsewhere", *err, f"Task uses agent other but the offers are for agent {aid}", aid),
        ("foreign", *err, "Task uses resources allocated to role 'db' not held by the framework", aid),
        ("big", *err, f"Task uses more resources ({Resources.of(cpus=1.5, mem=32)}) than offered and unused "
                      f"({one_cpu_left})", aid),
    ]
    assert launched == ["ok", "fits"]


def test_run_tasks_acl_refuses_the_task_or_the_whole_group() -> None:
    acls = Acls.parse('{"run_tasks": [{"principals": {"values": ["fw"]}, "users": {"values": ["alice"]}}, '
                      '{"principals": {"values": ["fw"]}, "users": {"type": "NONE"}}]}',
                      default_permissive=True)
    h, fid, sid, _aid, offer = setup(acls=acls)
    as_alice = attrs.evolve(task("alice"), command=mesos.CommandInfo(value="true", user="alice"))
    as_alice_g = attrs.evolve(as_alice, task_id=mesos.TaskID("g2"))
    shown, launched = accept(h, fid, sid, (offer.id.value,), launch(task("t1"), as_alice),
                             group("ex", task("g1"), as_alice_g))
    assert [(t, s, r) for t, s, r, _, _ in shown] == [
        ("t1", TS.TASK_ERROR, R.REASON_TASK_UNAUTHORIZED),
        ("g1", TS.TASK_ERROR, R.REASON_TASK_GROUP_UNAUTHORIZED),
        ("g2", TS.TASK_ERROR, R.REASON_TASK_GROUP_UNAUTHORIZED),
    ]
    assert shown[0][3] == shown[1][3] == shown[2][3] and "nobody" in shown[0][3]
    assert launched == ["alice"] and h.state.unauthorized == 2


def test_group_checks_fail_the_whole_group() -> None:
    h, fid, sid, aid, offer = setup()
    err = (TS.TASK_ERROR, R.REASON_TASK_INVALID)
    shown, launched = accept(
        h, fid, sid, (offer.id.value,),
        group("../ex", task("a1")),
        group("ex2", task("b1"), task("../b2")),
        group("ex3", task("c1", cpus=1), task("c2", cpus=1)),
        group("ex4", task("d1")),
    )
    assert shown == [
        ("a1", *err, "invalid executor ID '../ex': must match [A-Za-z0-9._-]{1,200} without a leading dot", aid),
        ("b1", *err, "invalid task ID '../b2': must match [A-Za-z0-9._-]{1,200} without a leading dot", aid),
        ("../b2", *err, "invalid task ID '../b2': must match [A-Za-z0-9._-]{1,200} without a leading dot", aid),
        ("c1", *err, f"Task group uses more resources ({Resources.of(cpus=2.1, mem=96)}) than offered and unused "
                     f"({Resources.parse('cpus:2;mem:1024')})", aid),
        ("c2", *err, f"Task group uses more resources ({Resources.of(cpus=2.1, mem=96)}) than offered and unused "
                     f"({Resources.parse('cpus:2;mem:1024')})", aid),
    ]
    assert launched == ["d1"]


def test_empty_group() -> None:
    h, fid, sid, _aid, offer = setup()
    shown, launched = accept(h, fid, sid, (offer.id.value,), group("ex"), launch(task("t1")))
    assert shown == [] and launched == ["t1"]
