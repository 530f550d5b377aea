"""``agora up --auth`` wiring (frameworks/cli/up.py + authfiles.py): a real master, agent and
batch service as processes, authentication on everywhere with default-deny ACLs; the batch
service subscribes under its own principal and runs a job; a request without the operator token
gets 401."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from frameworks.cli import common
from frameworks.cli import task as task_cli
from frameworks.cli.authfiles import (
    FRAMEWORKS,
    OPERATOR,
    USERS,
    WEBUI,
    acls_for,
    agent_principal,
    make_local_auth,
)
from frameworks.cli.up import start_cluster
from protocol.acls import Acls, Action
from protocol.authn import Authenticated, Credentials, basic_header, bearer_header


def test_local_auth_files_give_each_principal_its_job(tmp_path: Path) -> None:
    local = make_local_auth(tmp_path / "auth", user="root", agents=2)
    for f in (local.credentials, local.acls, local.webui_credential, *local.agent_credentials,
              *local.framework_credentials.values()):
        assert f.stat().st_mode & 0o777 == 0o600
    acls = Acls.parse(local.acls.read_text(), default_permissive=False)
    assert acls.allows(Action.REGISTER_AGENTS, agent_principal(1), None)
    assert not acls.allows(Action.REGISTER_AGENTS, OPERATOR, None)
    # one credential per agent: no agent holds another's secret
    creds = [json.loads(f.read_text()) for f in local.agent_credentials]
    assert [c["principal"] for c in creds] == [agent_principal(0), agent_principal(1)]
    assert creds[0]["secret"] != creds[1]["secret"]
    assert local.agent_args(1) == ("--credential", str(local.agent_credentials[1]), "--authenticate-http",
                                   "--http-credentials", str(local.credentials), "--acls", str(local.acls))
    assert "--agent-http-credential" in local.master_args()
    for fw in FRAMEWORKS:
        assert acls.allows(Action.RUN_TASKS, fw, "root")  # the user running the cluster, named
        assert acls.allows(Action.RUN_TASKS, fw, "nobody")
        assert not acls.allows(Action.TEARDOWN_FRAMEWORKS, fw, fw)
    assert not Acls.parse(json.dumps(acls_for("me")), default_permissive=False).allows(Action.RUN_TASKS, FRAMEWORKS[0], "root")
    assert acls.allows(Action.TEARDOWN_FRAMEWORKS, OPERATOR, FRAMEWORKS[0])
    # the example users: a token each (also their HTTP Basic password), in a file of its own;
    # the operator manages and reads anybody's jobs, a user nobody else's
    creds = Credentials.parse(local.credentials.read_text())
    for user in USERS:
        tok = local.user_tokens[user]
        assert local.token_file(user).read_text().strip() == tok
        assert local.token_file(user).stat().st_mode & 0o777 == 0o600
        assert creds.authenticate(bearer_header(tok), "operator", 0.0) == Authenticated(user, "operator")
        assert creds.authenticate(basic_header(user, tok), "operator", 0.0) == Authenticated(user, "operator")
        assert not acls.allows(Action.MANAGE_JOBS, user, "alice" if user == "bob" else "bob")
        assert not acls.allows(Action.VIEW_JOB_LOGS, user, "alice" if user == "bob" else "bob")
    assert local.token_file(OPERATOR).read_text().strip() == local.operator_token
    assert acls.allows(Action.MANAGE_JOBS, OPERATOR, "alice") and acls.allows(Action.VIEW_JOB_LOGS, OPERATOR, "bob")
    # sandboxes at the agents: the operator, the services and the web UI read any; a user none
    # (their jobs' logs come through the service, which checks the owner)
    for reader in (OPERATOR, WEBUI, *FRAMEWORKS):
        assert acls.allows(Action.ACCESS_SANDBOXES, reader, "root")
    assert not acls.allows(Action.ACCESS_SANDBOXES, "alice", "alice")


@pytest.mark.slow
def test_agora_up_auth_runs_a_batch_job(tmp_path: Path) -> None:
    cluster = start_cluster(1, tmp_path / "c", port=0, with_batch=True, with_elastic=False,
                            resources="cpus:1;mem:512;disk:256", ready_timeout=60.0, auth=True)
    try:
        assert cluster.token is not None and cluster.batch_url is not None
        with pytest.raises(urllib.error.HTTPError) as e:  # no token: 401
            urllib.request.urlopen(cluster.master_url + "/state", timeout=5.0)
        assert e.value.code == 401
        e.value.close()
        state = common.master_state(cluster.master_url)  # this process presents the operator token
        assert [f["principal"] for f in state["frameworks"]] == ["agora-batch"]
        # the agent's own endpoints are authenticated too
        agent_url = task_cli.agent_url(state, state["slaves"][0]["id"])
        assert agent_url is not None
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(agent_url + "/state", timeout=5.0)
        assert e.value.code == 401
        e.value.close()
        assert common.http_get_json(agent_url + "/state")["id"] == state["slaves"][0]["id"]  # the operator's token
        batch = next(p for p in cluster.processes if p.name == "batch")  # its secret is not in `ps`
        assert "--secret" not in batch.argv and batch.argv[batch.argv.index("--principal") + 1] == "agora-batch"
        api = cluster.batch_url + "/api/v1"
        job = common.http_post_json(f"{api}/jobs", {"name": "hi", "shell": "echo hi", "cpus": 0.1, "mem": 32})
        common.wait_until(
            lambda: common.http_get_json(f"{api}/jobs/{job['id']}")["state"] in ("SUCCEEDED", "FAILED"),
            60, "the job to end", interval=0.1,
        )
        assert common.http_get_json(f"{api}/jobs/{job['id']}")["state"] == "SUCCEEDED"
        # the batch service reads the task's stdout from the agent with its own credential
        logs = common.http_get_json(f"{api}/jobs/{job['id']}/logs?task=0&stream=stdout&offset=0&length=100")
        assert logs["data"] == "hi\n"
    finally:
        cluster.stop(grace=5.0)
        common.set_token(None)
