"""The master's core under authentication and ACLs (S10-S14, S17 on virtual time)."""

from __future__ import annotations

from master import registry_ops as ops
from master.events import (
    AclsReplaced,
    AgentConnected,
    AgentConnectionLost,
    CloseAgent,
    Effect,
    SubscribeReceived,
)
from master.testing import Harness, closed, events, framework_info, offers, persisted, task, to_agent, updates
from protocol import agent_channel as ac
from protocol import mesos
from protocol.acls import Acls
from protocol.resources import Resources

ET = mesos.EventType
ACLS = Acls.parse(
    """{"register_frameworks": [{"principals": {"values": ["fw", "fw2"]}, "roles": {"values": ["eng", "*"]}}],
        "register_agents": [{"principals": {"values": ["ag", "ag2"]}, "agents": {"type": "ANY"}}],
        "run_tasks": [{"principals": {"values": ["fw"]}, "users": {"type": "ANY"}}]}""",
    default_permissive=False,
)


def harness() -> Harness:
    return Harness(acls=ACLS, authenticate_frameworks=True, authenticate_agents=True)


def subscribe(h: Harness, sid: str, info: mesos.FrameworkInfo, authenticated: str | None) -> list[mesos.Event]:
    fx = h.feed(SubscribeReceived(sid, mesos.Subscribe(framework_info=info), authenticated=authenticated))
    return events(fx, sid)


def register(h: Harness, conn: int, principal: str | None, agent_id: str | None = None,
             tasks: tuple[ac.RunningTask, ...] = ()) -> list[Effect]:
    reg = ac.Register(
        hostname="h", port=5051, resources=Resources.parse("cpus:4;mem:4096").to_mesos(),
        agent_id=mesos.AgentID(agent_id) if agent_id else None, tasks=tasks,
    )
    return list(h.feed(AgentConnected(conn, reg, principal=principal)))


def registered_id(fx: list[Effect]) -> str:
    (reg,) = to_agent(fx, ac.Registered)
    return str(reg.agent_id.value)


def test_s12_role_not_allowed_is_refused_and_gets_no_offers() -> None:
    h = harness()
    registered_id(register(h, 1, "ag"))
    evs = subscribe(h, "s1", framework_info("x", roles=("ops",), principal="fw"), "fw")
    assert [e.type for e in evs] == [ET.ERROR] and evs[0].error is not None
    assert "not authorized for role 'ops'" in evs[0].error.message
    assert closed(h.effects) == ["s1"] and h.state.frameworks == {} and h.state.unauthorized == 1
    assert offers(h.allocate()) == []
    # an allowed role subscribes and gets offers
    evs = subscribe(h, "s2", framework_info("y", roles=("eng",), principal="fw"), "fw")
    assert evs[0].type is ET.SUBSCRIBED
    assert offers(h.allocate(), "s2")


def test_s13_principal_mismatch_and_change_on_resubscribe() -> None:
    h = harness()
    evs = subscribe(h, "s1", framework_info("x", principal="fw2"), "fw")
    assert evs[0].type is ET.ERROR and "does not match" in (evs[0].error.message if evs[0].error else "")
    evs = subscribe(h, "s2", framework_info("x", principal=None), "fw")
    assert evs[0].type is ET.ERROR
    evs = subscribe(h, "s3", framework_info("x", principal="fw"), "fw")
    assert evs[0].type is ET.SUBSCRIBED and evs[0].subscribed is not None
    fid = evs[0].subscribed.framework_id.value
    # fw2 (a valid principal) tries to take the framework id over
    evs = subscribe(h, "s4", framework_info("x", principal="fw2", fid=fid), "fw2")
    assert evs[0].type is ET.ERROR and "changed" in (evs[0].error.message if evs[0].error else "")
    fw = h.state.frameworks[fid]
    assert fw.stream_id == "s3" and fw.principal == "fw" and fw.connected
    # the owner re-subscribes fine
    assert subscribe(h, "s5", framework_info("x", principal="fw", fid=fid), "fw")[0].type is ET.SUBSCRIBED


def test_s13_principal_change_is_refused_after_a_restart_too() -> None:
    h = harness()
    info = mesos.FrameworkInfo(user="nobody", name="x", principal="fw", id=mesos.FrameworkID("f1"), failover_timeout=60.0)
    from protocol import codec

    snap = ops.RegistrySnapshot(frameworks=(ops.FrameworkEntry("f1", codec.encode_msgpack(info), 60.0),))
    h.state.recover(snap, h.now)
    evs = subscribe(h, "s1", framework_info("x", principal="fw2", fid="f1"), "fw2")
    assert evs[0].type is ET.ERROR
    assert subscribe(h, "s2", framework_info("x", principal="fw", fid="f1"), "fw")[0].type is ET.SUBSCRIBED


def _launch(h: Harness, fid: str, sid: str, *tasks: mesos.TaskInfo, group: bool = False) -> list[Effect]:
    (offer,) = offers(h.allocate(), sid)
    if group:
        ex = mesos.ExecutorInfo(executor_id=mesos.ExecutorID("e"), type=mesos.ExecutorType.DEFAULT,
                                resources=Resources.of(cpus=0.1, mem=32).to_mesos())
        op = mesos.Operation(type=mesos.OperationType.LAUNCH_GROUP, launch_group=mesos.LaunchGroup(
            executor=ex, task_group=mesos.TaskGroupInfo(tasks=tasks)))
    else:
        op = mesos.Operation(type=mesos.OperationType.LAUNCH, launch=mesos.Launch(task_infos=tasks))
    return list(h.call(fid, sid, mesos.Call.make_accept(mesos.FrameworkID(fid), (offer.id,), (op,))))


def test_s14_run_tasks_acl_gives_task_unauthorized() -> None:
    h = harness()
    registered_id(register(h, 1, "ag"))
    evs = subscribe(h, "s1", framework_info("x", principal="fw"), "fw")
    assert evs[0].subscribed is not None
    fid = evs[0].subscribed.framework_id.value
    root = mesos.TaskInfo(name="r", task_id=mesos.TaskID("as-root"), resources=task("x").resources,
                          command=mesos.CommandInfo(value="id", user="root"))
    fx = _launch(h, fid, "s1", root, task("ok"))
    (run,) = to_agent(fx, ac.RunTasks)
    assert [t.task_id.value for t in run.tasks] == ["ok"]  # users: ANY does not cover root
    (st,) = [s for s in updates(fx, "s1") if s.task_id.value == "as-root"]
    assert st.state.value == "TASK_ERROR" and st.reason is mesos.Reason.REASON_TASK_UNAUTHORIZED
    assert st.source is mesos.Source.SOURCE_MASTER


def _fw2() -> tuple[Harness, str]:
    h = harness()
    registered_id(register(h, 1, "ag"))
    evs = subscribe(h, "s1", framework_info("x", principal="fw2"), "fw2")
    assert evs[0].subscribed is not None
    return h, evs[0].subscribed.framework_id.value


def test_s14_principal_without_run_tasks_and_task_groups() -> None:
    h, fid = _fw2()
    fx = _launch(h, fid, "s1", task("a"))
    assert to_agent(fx, ac.RunTasks) == []
    assert [s.reason for s in updates(fx, "s1")] == [mesos.Reason.REASON_TASK_UNAUTHORIZED]
    h, fid = _fw2()
    fx = _launch(h, fid, "s1", task("g1"), task("g2"), group=True)
    assert to_agent(fx, ac.RunTasks) == []
    assert {s.reason for s in updates(fx, "s1")} == {mesos.Reason.REASON_TASK_GROUP_UNAUTHORIZED}


def test_s10_unauthenticated_or_unlisted_agent_is_refused() -> None:
    h = harness()
    for conn, principal in ((1, None), (2, "intruder")):
        fx = register(h, conn, principal)
        assert to_agent(fx, ac.Registered) == [] and to_agent(fx, ac.Refused)
        assert [e.conn_id for e in fx if isinstance(e, CloseAgent)] == [conn]
    assert h.state.agents == {} and persisted(h.effects) == [] and h.state.unauthorized == 2


def test_s11_agent_id_is_bound_to_its_first_principal() -> None:
    h = harness()
    fx = register(h, 1, "ag")
    aid = registered_id(fx)
    assert ops.AgentPrincipalBound(aid, "ag") in persisted(fx)
    evs = subscribe(h, "s1", framework_info("x", principal="fw"), "fw")
    assert evs[0].subscribed is not None
    fid = evs[0].subscribed.framework_id.value
    assert to_agent(_launch(h, fid, "s1", task("t1")), ac.RunTasks)
    # another valid agent credential claims the id: refused, nothing about the real agent changes
    fx = register(h, 2, "ag2", agent_id=aid)
    assert to_agent(fx, ac.Refused) and [e.conn_id for e in fx if isinstance(e, CloseAgent)] == [2]
    assert "another principal" in to_agent(fx, ac.Refused)[0].message
    assert persisted(fx) == [] and updates(fx) == []
    ag = h.state.agents[aid]
    assert ag.conn_id == 1 and (fid, "t1") in ag.tasks and h.state.frameworks[fid].tasks["t1"]
    # the real agent re-registers fine (after a restart: its first connection is gone)
    h.feed(AgentConnectionLost(1))
    assert registered_id(register(h, 3, "ag", agent_id=aid)) == aid
    # the binding survives a restart (read back from the registry)
    h2 = harness()
    h2.state.recover(ops.RegistrySnapshot(agents=(ops.AgentEntry(aid, "h", 5051, "cpus:4;mem:4096"),),
                                          agent_principals=((aid, "ag"),)), h2.now)
    assert to_agent(register(h2, 1, "ag2", agent_id=aid), ac.Refused)
    assert registered_id(register(h2, 2, "ag", agent_id=aid)) == aid


def test_auth_off_binds_nothing_and_allows_everything() -> None:
    h = Harness()
    fx = register(h, 1, None)
    registered_id(fx)
    assert not any(isinstance(op, ops.AgentPrincipalBound) for op in persisted(fx))
    evs = subscribe(h, "s1", framework_info("x", roles=("anything",)), None)
    assert evs[0].type is ET.SUBSCRIBED and h.state.unauthorized == 0


def test_acls_replaced_decide_from_the_next_fact_on() -> None:
    """``AclsReplaced`` (the master's SIGHUP re-read): a role allowed before is refused after, and
    a framework subscribed before keeps running (the ACLs decide new calls, not past ones)."""
    h = harness()
    assert subscribe(h, "s1", framework_info("x", roles=("eng",), principal="fw"), "fw")[0].type is ET.SUBSCRIBED
    narrower = Acls.parse(
        """{"register_frameworks": [{"principals": {"values": ["fw"]}, "roles": {"values": ["*"]}}]}""",
        default_permissive=False,
    )
    assert list(h.feed(AclsReplaced(narrower))) == []
    evs = subscribe(h, "s2", framework_info("y", roles=("eng",), principal="fw"), "fw")
    assert [e.type for e in evs] == [ET.ERROR] and "not authorized for role 'eng'" in (evs[0].error.message if evs[0].error else "")
    assert [fw.stream_id for fw in h.state.frameworks.values()] == ["s1"]
