"""Credentials (protocol.authn) and ACL evaluation (protocol.acls): pure, exhaustive."""

from __future__ import annotations

import base64
import itertools
import json
from pathlib import Path

import pytest

from master.auth import READONLY, MasterAuth
from protocol import mesos, mesos_common
from protocol.acls import (
    AclError,
    Acls,
    Action,
    Entity,
    EntityType,
    Rule,
    agent_problem,
    operator_requests,
    subscribe_problem,
    task_problem,
    task_user,
)
from protocol.authn import (
    AGENT,
    FRAMEWORK,
    OPERATOR,
    Authenticated,
    AuthFailed,
    Credential,
    CredentialError,
    Credentials,
    basic_header,
    bearer_header,
    client_header,
    credential_header,
    parse_client_credential,
)

CREDS = Credentials.parse(
    json.dumps(
        {
            "credentials": [
                {"principal": "fw", "secret": "s3cret"},
                {"principal": "ag", "secret": "agent-secret", "kind": "agent"},
            ],
            "tokens": [
                {"principal": "ops", "token": "tok-ops", "kind": "operator"},
                {"principal": "old", "token": "tok-old", "expires_at": 100.0},
                {"principal": "any", "token": "tok-any"},
            ],
        }
    )
)


def test_basic_and_bearer_authenticate_the_right_principal() -> None:
    assert CREDS.authenticate(basic_header("fw", "s3cret"), FRAMEWORK, 0.0) == Authenticated("fw")
    assert CREDS.authenticate(bearer_header("tok-ops"), OPERATOR, 0.0) == Authenticated("ops", OPERATOR)
    assert CREDS.authenticate(bearer_header("tok-any"), AGENT, 0.0) == Authenticated("any")
    assert CREDS.authenticate("bearer  tok-any ", None, 0.0) == Authenticated("any")  # scheme is case-insensitive


@pytest.mark.parametrize(
    "header",
    [
        None,
        "",
        basic_header("fw", "s3creT"),  # one wrong byte
        basic_header("fw", "s3cret "),
        basic_header("fw", "s3cre"),
        basic_header("nobody", "s3cret"),  # unknown principal
        basic_header("ops", "tok-ops"),  # a token is not a Basic secret
        bearer_header("tok-opS"),
        bearer_header("s3cret"),  # a Basic secret is not a token
        bearer_header(""),
        "Basic !!!notbase64",
        "Basic " + base64.b64encode(b"no-colon").decode(),
        "Basic " + base64.b64encode(b"\xff\xfe:x").decode(),
        "Digest abc",
        "tok-any",
    ],
)
def test_anything_but_the_exact_secret_fails(header: str | None) -> None:
    assert isinstance(CREDS.authenticate(header, FRAMEWORK, 0.0), AuthFailed)


def test_expiry_and_kind() -> None:
    assert CREDS.authenticate(bearer_header("tok-old"), FRAMEWORK, 99.9) == Authenticated("old")
    failed = CREDS.authenticate(bearer_header("tok-old"), FRAMEWORK, 100.0)
    assert isinstance(failed, AuthFailed) and "expired" in failed.reason
    assert isinstance(CREDS.authenticate(basic_header("ag", "agent-secret"), FRAMEWORK, 0.0), AuthFailed)
    assert CREDS.authenticate(basic_header("ag", "agent-secret"), AGENT, 0.0) == Authenticated("ag", AGENT)
    assert CREDS.authenticate(bearer_header("tok-ops"), None, 0.0) == Authenticated("ops", OPERATOR)  # read-only: any kind
    assert isinstance(CREDS.authenticate(bearer_header("tok-ops"), AGENT, 0.0), AuthFailed)


def test_credentials_files() -> None:
    text = Credentials.parse("fw s3cret\n# comment\n\nag other\n")
    assert [c.principal for c in text.entries] == ["fw", "ag"]
    assert Credentials.parse("{}").entries == ()
    for bad in (
        "[1]",
        "{",
        '{"credentials": {}}',
        '{"credentials": [{"principal": "a"}]}',
        '{"credentials": [{"principal": "", "secret": "x"}]}',
        '{"credentials": [{"principal": "a", "secret": "x", "kind": "root"}]}',
        '{"tokens": [{"principal": "a", "token": "x", "expires_at": "soon"}]}',
        '{"tokens": [{"principal": "a", "token": "x", "expires_at": true}]}',
        '{"credentials": ["a"]}',
        '{"users": []}',
        '{"tokens": [{"principal": "a", "token": "x"}, {"principal": "b", "token": "x"}]}',
        "one two three",
    ):
        with pytest.raises(CredentialError):
            Credentials.parse(bad)


def test_client_credentials_and_headers() -> None:
    c = parse_client_credential('{"principal": "ag", "secret": "x"}')
    assert c == Credential("ag", "x") and credential_header(c) == basic_header("ag", "x")
    t = parse_client_credential('{"principal": "ag", "token": "tk"}')
    assert t.bearer and credential_header(t) == "Bearer tk"
    assert parse_client_credential("ag x") == Credential("ag", "x")
    assert parse_client_credential('{"credentials": [{"principal": "ag", "secret": "y"}]}') == Credential("ag", "y")
    for bad in ("a", '{"credentials": []}', "[]", "{"):
        with pytest.raises(CredentialError):
            parse_client_credential(bad)
    assert client_header(token="t") == "Bearer t"
    assert client_header("p", "s") == basic_header("p", "s") and client_header() is None
    assert base64.b64decode(basic_header("p", "s:x").split()[1]) == b"p:s:x"  # a secret may hold ':'
    assert CREDS.authenticate(basic_header("fw", "s3cret"), FRAMEWORK, 0.0) == Authenticated("fw")


# --- ACL evaluation ----------------------------------------------------------------------------

ENTITIES = {
    "ANY": Entity(EntityType.ANY),
    "NONE": Entity(EntityType.NONE),
    "a": Entity(EntityType.SOME, frozenset({"a"})),
    "ab": Entity(EntityType.SOME, frozenset({"a", "b"})),
}


def _expected(subj: str, obj: str, principal: str | None, value: str | None) -> bool | None:
    """Mesos' local authorizer for one rule: None when the rule does not match."""

    def matches(e: str, v: str | None) -> bool:
        if e in ("ANY", "NONE"):
            return True
        return v is not None and v in e  # "a" / "ab" name the values they hold

    if not (matches(subj, principal) and matches(obj, value)):
        return None
    return subj != "NONE" and obj != "NONE"


@pytest.mark.parametrize("permissive", [True, False])
def test_one_rule_every_entity_pair_every_request(permissive: bool) -> None:
    for (sn, se), (on, oe) in itertools.product(ENTITIES.items(), repeat=2):
        acls = Acls(permissive=permissive, rules={Action.REGISTER_FRAMEWORKS: (Rule(se, oe),)})
        for principal, role in itertools.product(("a", "b", "c", None), ("a", "b", "c", None)):
            want = _expected(sn, on, principal, role)
            got = acls.allows(Action.REGISTER_FRAMEWORKS, principal, role)
            assert got == (permissive if want is None else want), (sn, on, principal, role)
            # other actions are untouched by this rule
            assert acls.allows(Action.UPDATE_QUOTAS, principal, role) is permissive


def test_first_matching_rule_wins() -> None:
    acls = Acls.parse(
        json.dumps(
            {
                "register_frameworks": [
                    {"principals": {"values": ["a"]}, "roles": {"type": "NONE"}},
                    {"principals": {"type": "ANY"}, "roles": {"values": ["x"]}},
                ]
            }
        ),
        default_permissive=False,
    )
    assert not acls.allows(Action.REGISTER_FRAMEWORKS, "a", "x")  # the NONE rule matched first
    assert acls.allows(Action.REGISTER_FRAMEWORKS, "b", "x")
    assert not acls.allows(Action.REGISTER_FRAMEWORKS, "b", "y")  # no match: default deny
    assert not acls.permissive


def test_run_tasks_any_does_not_cover_root() -> None:
    any_user = Acls.parse('{"run_tasks": [{"principals": {"type": "ANY"}, "users": {"type": "ANY"}}]}', default_permissive=False)
    assert any_user.allows(Action.RUN_TASKS, "p", "nobody")
    assert not any_user.allows(Action.RUN_TASKS, "p", "root")
    named = Acls.parse('{"run_tasks": [{"principals": {"values": ["p"]}, "users": {"values": ["root"]}}]}', default_permissive=False)
    assert named.allows(Action.RUN_TASKS, "p", "root") and not named.allows(Action.RUN_TASKS, "q", "root")


def test_acl_files() -> None:
    assert Acls.parse("{}", default_permissive=True).allows_everything
    assert Acls.parse('{"permissive": true}', default_permissive=False).permissive
    assert not Acls.parse("{}", default_permissive=False).allows(Action.RUN_TASKS, "p", "u")
    for bad in (
        "[]",
        "{",
        '{"permissive": "no"}',
        '{"launch_rockets": []}',
        '{"run_tasks": {}}',
        '{"run_tasks": [1]}',
        '{"run_tasks": [{"principals": {"type": "ALL"}}]}',
        '{"run_tasks": [{"principals": {"values": "a"}}]}',
        '{"run_tasks": [{"principals": {"values": ["a"], "type": "ANY"}}]}',
        '{"run_tasks": [{"principals": {"type": "ANY"}, "roles": {"type": "ANY"}}]}',
        '{"run_tasks": [{"principals": []}]}',
    ):
        with pytest.raises(AclError):
            Acls.parse(bad, default_permissive=False)


def test_subscribe_agent_and_task_questions() -> None:
    acls = Acls.parse(
        '{"register_frameworks": [{"principals": {"values": ["fw"]}, "roles": {"values": ["eng"]}}],'
        ' "register_agents": [{"principals": {"values": ["ag"]}, "agents": {"type": "ANY"}}],'
        ' "run_tasks": [{"principals": {"values": ["fw"]}, "users": {"values": ["nobody"]}}]}',
        default_permissive=False,
    )
    ok = subscribe_problem(acls, True, "fw", "fw", ("eng",), None, False)
    assert ok is None
    assert "not authorized for role 'ops'" in (subscribe_problem(acls, True, "fw", "fw", ("eng", "ops"), None, False) or "")
    assert "does not match" in (subscribe_problem(acls, True, "fw", "other", ("eng",), None, False) or "")
    assert "does not match" in (subscribe_problem(acls, True, "fw", None, ("eng",), None, False) or "")
    assert "not authenticated" in (subscribe_problem(acls, True, None, "fw", ("eng",), None, False) or "")
    assert "changed" in (subscribe_problem(acls, True, "fw", "fw", ("eng",), "fw2", True) or "")
    # authentication off: the claimed principal is the ACL subject (as in Mesos)
    assert subscribe_problem(acls, False, None, "fw", ("eng",), None, False) is None
    assert subscribe_problem(acls, False, None, "x", ("eng",), None, False) is not None
    assert subscribe_problem(Acls.allow_all(), False, None, None, ("*",), None, False) is None

    assert agent_problem(acls, True, "ag", None, None) is None
    assert agent_problem(acls, True, "ag", "a1", "ag") is None
    assert "another principal" in (agent_problem(acls, True, "ag2", "a1", "ag") or "")
    assert "not authenticated" in (agent_problem(acls, True, None, None, None) or "")
    assert "not authorized" in (agent_problem(acls, True, "ag2", None, None) or "")
    assert agent_problem(Acls.allow_all(), False, None, "a1", None) is None

    assert task_user("u", "e", "f") == "u" and task_user(None, "e", "f") == "e" and task_user(None, None, "f") == "f"
    assert task_user(None, None, "") is None
    assert task_problem(acls, "fw", "nobody") is None
    assert task_problem(acls, "fw", "root") is not None and task_problem(acls, "other", "nobody") is not None
    assert task_problem(Acls.allow_all(), None, "root") is None  # auth off: the agent decides about root


def test_operator_calls_map_to_mesos_actions() -> None:
    OT = mesos.OperatorCallType

    def res(role: str, principal: str) -> mesos_common.Resource:
        return mesos_common.Resource(
            name="cpus", type=mesos_common.ValueType.SCALAR, scalar=mesos_common.Scalar(1.0),
            reservations=(mesos_common.ReservationInfo(type=mesos_common.ReservationType.DYNAMIC, role=role, principal=principal),),
        )

    owner = {"f1": "alice"}.get
    calls = [
        (mesos.OperatorCall(type=OT.TEARDOWN, teardown=mesos.Teardown(framework_id=mesos.FrameworkID("f1"))),
         [(Action.TEARDOWN_FRAMEWORKS, "alice")]),
        (mesos.OperatorCall(type=OT.UPDATE_WEIGHTS, update_weights=mesos.UpdateWeights(
            weight_infos=(mesos.WeightInfo(weight=2.0, role="eng"),))), [(Action.UPDATE_WEIGHTS, "eng")]),
        (mesos.OperatorCall(type=OT.REMOVE_QUOTA, remove_quota=mesos.RemoveQuota(role="eng")), [(Action.UPDATE_QUOTAS, "eng")]),
        (mesos.OperatorCall(type=OT.DRAIN_AGENT, drain_agent=mesos.DrainAgent(agent_id=mesos.AgentID("a1"))),
         [(Action.DRAIN_AGENTS, "a1")]),
        (mesos.OperatorCall(type=OT.RESERVE_RESOURCES, reserve_resources=mesos.ReserveResources(
            agent_id=mesos.AgentID("a1"), resources=(res("eng", "bob"),))), [(Action.RESERVE_RESOURCES, "eng")]),
        (mesos.OperatorCall(type=OT.UNRESERVE_RESOURCES, unreserve_resources=mesos.UnreserveResources(
            agent_id=mesos.AgentID("a1"), resources=(res("eng", "bob"),))), [(Action.UNRESERVE_RESOURCES, "bob")]),
        (mesos.OperatorCall(type=OT.GET_STATE), []),
        # maintenance: one question per machine named (hostname, else IP); an empty schedule one
        (mesos.OperatorCall(type=OT.UPDATE_MAINTENANCE_SCHEDULE, update_maintenance_schedule=mesos.UpdateMaintenanceSchedule(
            mesos.MaintenanceSchedule((mesos.MaintenanceWindow(
                (mesos.MachineID("H1", "10.0.0.1"), mesos.MachineID(ip="10.0.0.2")),
                mesos.Unavailability(mesos.TimeInfo(1))),)))),
         [(Action.UPDATE_MAINTENANCE_SCHEDULES, "10.0.0.2"), (Action.UPDATE_MAINTENANCE_SCHEDULES, "h1")]),
        (mesos.OperatorCall(type=OT.UPDATE_MAINTENANCE_SCHEDULE,
                            update_maintenance_schedule=mesos.UpdateMaintenanceSchedule(mesos.MaintenanceSchedule())),
         [(Action.UPDATE_MAINTENANCE_SCHEDULES, None)]),
        (mesos.OperatorCall(type=OT.START_MAINTENANCE, start_maintenance=mesos.StartMaintenance((mesos.MachineID("h1"),))),
         [(Action.START_MAINTENANCES, "h1")]),
        (mesos.OperatorCall(type=OT.STOP_MAINTENANCE, stop_maintenance=mesos.StopMaintenance((mesos.MachineID("h1"),))),
         [(Action.STOP_MAINTENANCES, "h1")]),
        (mesos.OperatorCall(type=OT.GET_MAINTENANCE_STATUS), []),
    ]
    for call, want in calls:
        assert operator_requests(call, owner) == want


def test_master_auth_realms() -> None:
    off = MasterAuth()
    assert not off.enabled and off.check("/api/v1/scheduler", None, 0.0) == (None, None)
    on = MasterAuth(credentials=CREDS, frameworks=True, agents=True, http_readwrite=True, http_readonly=True)
    assert on.realm("/api/v1/scheduler") == FRAMEWORK and on.realm("/api/v1/agent") == AGENT
    assert on.realm("/api/v1") == OPERATOR and on.realm("/api/v1/operator") == OPERATOR
    assert on.realm("/state") == READONLY and on.realm("/metrics") == READONLY and on.realm("/") == READONLY
    assert on.realm("/version") is None and on.realm("/health") is None
    realm, result = on.check("/state", bearer_header("tok-ops"), 0.0)
    assert realm == READONLY and result == Authenticated("ops", OPERATOR)
    assert isinstance(on.check("/api/v1/agent", bearer_header("tok-ops"), 0.0)[1], AuthFailed)
    only_fw = MasterAuth(credentials=CREDS, frameworks=True)
    assert only_fw.realm("/state") is None and only_fw.realm("/api/v1/agent") is None


def test_master_config_and_flags(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from master.auth import AuthConfigError, load_auth
    from master.config import load
    from master.main import main

    creds = tmp_path / "creds.json"
    creds.write_text(json.dumps({"credentials": [{"principal": "fw", "secret": "s"}]}))
    toml = tmp_path / "m.toml"
    toml.write_text(f'[master]\ncredentials = "{creds}"\nauthenticate-frameworks = true\nauthenticate_agents = "yes"\n')
    cfg = load(toml)
    auth = load_auth(cfg)
    assert auth.frameworks and auth.agents and not auth.http_readonly
    assert not auth.acls.permissive  # auth on, no ACL file: default deny
    assert auth.credentials.authenticate(basic_header("fw", "s"), FRAMEWORK, 0.0) == Authenticated("fw")
    assert load_auth(load()).acls.allows_everything  # auth off: nothing changes
    bad = tmp_path / "bad.json"
    bad.write_text('{"credentials": [{"principal": "x"}]}')
    for changes in ({"credentials": str(bad)}, {"credentials": None}, {"acls": str(bad)}, {"acls": str(tmp_path / "none")}):
        with pytest.raises(AuthConfigError):
            load_auth(cfg.replace(**changes))
    # the flags reach the config: unusable files stop agora-master before it starts
    result = CliRunner().invoke(main, ["--work-dir", str(tmp_path / "w"), "--authenticate-agents"])
    assert result.exit_code == 2 and "no --credentials" in result.output
    result = CliRunner().invoke(main, ["--work-dir", str(tmp_path / "w"), "--credentials", str(bad)])
    assert result.exit_code == 2 and "bad credentials file" in result.output
