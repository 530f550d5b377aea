"""``agora up --auth``: throwaway credentials and ACLs for a local cluster with authentication on.

``make_local_auth(dir)`` writes ``credentials.json`` (the master's ``--credentials``: one secret
per agent principal and framework service, an operator bearer token), ``acls.json`` (the master's
``--acls``: each principal may do exactly its job, default deny) and ``agent.json`` (the agents'
``--credential``). Files are created mode 0600. With ``--tls`` too, each agent is its own
principal (``agent_principal(i)``), named by its client certificate instead of a shared secret
(``frameworks/cli/certs.py``); ``register_agents`` then lists those principals.
"""

from __future__ import annotations

import getpass
import json
import os
import secrets
from pathlib import Path

import attrs

AGENT = "agora-agent"
OPERATOR = "agora-operator"
FRAMEWORKS = ("agora-batch", "agora-elastic")


def agent_principal(index: int) -> str:
    """The principal of local agent ``index`` when its certificate names it (``agora up --tls --auth``)."""
    return f"{AGENT}-{index}"


@attrs.frozen
class LocalAuth:
    credentials: Path
    acls: Path
    agent_credential: Path
    operator_token: str
    framework_secrets: dict[str, str]  # principal -> secret (HTTP Basic)

    def master_args(self) -> tuple[str, ...]:
        return ("--credentials", str(self.credentials), "--acls", str(self.acls), "--authenticate-frameworks",
                "--authenticate-agents", "--authenticate-http-readwrite", "--authenticate-http-readonly")

    def agent_args(self) -> tuple[str, ...]:
        return ("--credential", str(self.agent_credential))


def _write(path: Path, data: object) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(data, f, indent=2)


def acls_for(user: str, agents: tuple[str, ...] = (AGENT,)) -> dict[str, object]:
    """Each principal does its job and nothing else. Tasks run as ``user`` (the one running the
    cluster, named so that even root is allowed when that is who runs it) or any other non-root."""
    ops = {"principals": {"values": [OPERATOR]}}
    fws = {"principals": {"values": list(FRAMEWORKS)}}
    anything = {"type": "ANY"}
    return {
        "permissive": False,
        "register_frameworks": [fws | {"roles": anything}],
        "run_tasks": [fws | {"users": {"values": [user]}}, fws | {"users": anything}],
        "register_agents": [{"principals": {"values": list(agents)}, "agents": anything}],
        "teardown_frameworks": [ops | {"framework_principals": anything}],
        "update_quotas": [ops | {"roles": anything}],
        "update_weights": [ops | {"roles": anything}],
        "reserve_resources": [ops | {"roles": anything}],
        "unreserve_resources": [ops | {"reserver_principals": anything}],
        "drain_agents": [ops | {"agents": anything}],
        "deactivate_agents": [ops | {"agents": anything}],
        "reactivate_agents": [ops | {"agents": anything}],
    }


def make_local_auth(directory: Path, user: str | None = None, cert_agents: tuple[str, ...] = ()) -> LocalAuth:
    """``cert_agents``: agent principals that authenticate with their certificate (may register
    too, besides the shared ``AGENT`` credential)."""
    directory.mkdir(parents=True, exist_ok=True)
    agent_secret = secrets.token_urlsafe(24)
    operator_token = secrets.token_urlsafe(32)
    fw_secrets = {p: secrets.token_urlsafe(24) for p in FRAMEWORKS}
    creds = {
        "credentials": [{"principal": AGENT, "secret": agent_secret, "kind": "agent"}]
        + [{"principal": p, "secret": s, "kind": "framework"} for p, s in fw_secrets.items()],
        "tokens": [{"principal": OPERATOR, "token": operator_token, "kind": "operator"}],
    }
    auth = LocalAuth(
        credentials=directory / "credentials.json",
        acls=directory / "acls.json",
        agent_credential=directory / "agent.json",
        operator_token=operator_token,
        framework_secrets=fw_secrets,
    )
    _write(auth.credentials, creds)
    _write(auth.acls, acls_for(user or getpass.getuser(), (AGENT, *cert_agents)))
    _write(auth.agent_credential, {"principal": AGENT, "secret": agent_secret})
    return auth
