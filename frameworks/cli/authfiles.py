"""``agora up --auth``: throwaway credentials and ACLs for a local cluster with authentication on.

``make_local_auth(dir, agents=N)`` writes ``credentials.json`` (the master's ``--credentials``:
one secret per agent -- agent ``i`` is principal ``agent_principal(i)``, so no agent can pose as
another -- one per framework service and for the web UI, an operator bearer token, and two example
users, ``alice`` and ``bob``, each with a bearer token that is also their HTTP Basic password for
a browser), ``acls.json`` (the master's ``--acls``: each principal may do exactly its job, default
deny; the operator may also manage and read the logs of anybody's batch and elastic jobs, a user
only their own), ``agent-<i>.json`` (agent ``i``'s ``--credential``), ``webui.json`` (the master's
``--agent-http-credential``), ``<framework>.json`` (each service's ``--agent-http-credential``)
and one ``<principal>.token`` file per user and the operator. The batch and elastic services take
the same credentials and ACLs for their own APIs. The agents' own endpoints check the same
``credentials.json`` (``--authenticate-http``) and ``acls.json``: an operator's token, a
framework's or the web UI's secret may read any sandbox there (``access_sandboxes``), a user's
none (a user reads their own jobs' logs through the service, which checks the job's owner), an
agent's credential nothing. Files are created mode 0600. With ``--tls`` too, each agent's client
certificate names its principal and is its credential on the channel
(``frameworks/cli/certs.py``).
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
USERS = ("alice", "bob")  # example users of the framework services (their jobs, their logs)


def agent_principal(index: int) -> str:
    """The principal of local agent ``index`` (its secret's, or its certificate's with ``--tls``)."""
    return f"{AGENT}-{index}"


@attrs.frozen
class LocalAuth:
    credentials: Path
    acls: Path
    agent_credentials: tuple[Path, ...]  # agent i's --credential
    webui_credential: Path  # the master's --agent-http-credential
    operator_token: str
    framework_secrets: dict[str, str]  # principal -> secret (HTTP Basic)
    framework_credentials: dict[str, Path]  # principal -> its --agent-http-credential file
    user_tokens: dict[str, str] = attrs.field(factory=dict)  # user -> bearer token (= Basic password)

    def service_args(self) -> tuple[str, ...]:
        """The batch and elastic services' own API: the same credentials and ACLs as the master."""
        return ("--credentials", str(self.credentials), "--acls", str(self.acls))

    def token_file(self, principal: str) -> Path:
        return self.credentials.parent / f"{principal}.token"

    def master_args(self) -> tuple[str, ...]:
        return ("--credentials", str(self.credentials), "--acls", str(self.acls), "--authenticate-frameworks",
                "--authenticate-agents", "--authenticate-http-readwrite", "--authenticate-http-readonly",
                "--agent-http-credential", str(self.webui_credential))

    def agent_args(self, index: int, *, channel: bool = True) -> tuple[str, ...]:
        """Agent ``index``'s flags: its own channel credential (unless a certificate is), and its
        endpoints' authentication."""
        own = ("--credential", str(self.agent_credentials[index])) if channel else ()
        return (*own, "--authenticate-http", "--http-credentials", str(self.credentials), "--acls", str(self.acls))


def _write(path: Path, data: object) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(data, f, indent=2)


def _write_text(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)


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
        "update_maintenance_schedules": [ops | {"machines": anything}],
        "start_maintenances": [ops | {"machines": anything}],
        "stop_maintenances": [ops | {"machines": anything}],
        # the framework services: the operator acts on anybody's jobs; a user only on their own
        "manage_jobs": [ops | {"users": anything}],
        "view_job_logs": [ops | {"users": anything}],
        # sandboxes (the agents' /files, the web UI's log views): the operator, the services and
        # the web UI's proxy read any; a user none directly (their jobs' logs come through the
        # service, which checks the owner)
        "access_sandboxes": [{"principals": {"values": [OPERATOR, WEBUI, *FRAMEWORKS]}, "users": anything}],
    }


WEBUI = "agora-webui"


def make_local_auth(
    directory: Path, user: str | None = None, cert_agents: tuple[str, ...] = (), agents: int = 1
) -> LocalAuth:
    """Credentials for ``agents`` agents (one principal and secret each), the framework services,
    the web UI and the operator. ``cert_agents``: agent principals that authenticate with their
    certificate instead (``--tls``)."""
    directory.mkdir(parents=True, exist_ok=True)
    agent_secrets = {agent_principal(i): secrets.token_urlsafe(24) for i in range(agents)}
    operator_token = secrets.token_urlsafe(32)
    fw_secrets = {p: secrets.token_urlsafe(24) for p in FRAMEWORKS}
    webui_secret = secrets.token_urlsafe(24)
    user_tokens = {u: secrets.token_urlsafe(24) for u in USERS}
    creds = {
        "credentials": [{"principal": p, "secret": s, "kind": "agent"} for p, s in agent_secrets.items()]
        + [{"principal": p, "secret": s, "kind": "framework"} for p, s in fw_secrets.items()]
        + [{"principal": WEBUI, "secret": webui_secret, "kind": "operator"}]
        # a user's token is also their password for HTTP Basic (a browser on the services' pages)
        + [{"principal": u, "secret": t, "kind": "operator"} for u, t in user_tokens.items()],
        "tokens": [{"principal": OPERATOR, "token": operator_token, "kind": "operator"}]
        + [{"principal": u, "token": t, "kind": "operator"} for u, t in user_tokens.items()],
    }
    auth = LocalAuth(
        credentials=directory / "credentials.json",
        acls=directory / "acls.json",
        agent_credentials=tuple(directory / f"agent-{i}.json" for i in range(agents)),
        webui_credential=directory / "webui.json",
        operator_token=operator_token,
        framework_secrets=fw_secrets,
        framework_credentials={p: directory / f"{p}.json" for p in FRAMEWORKS},
        user_tokens=user_tokens,
    )
    _write(auth.credentials, creds)
    _write(auth.acls, acls_for(user or getpass.getuser(), (*agent_secrets, *cert_agents)))
    for i, path in enumerate(auth.agent_credentials):
        _write(path, {"principal": agent_principal(i), "secret": agent_secrets[agent_principal(i)]})
    _write(auth.webui_credential, {"principal": WEBUI, "secret": webui_secret})
    for p, path in auth.framework_credentials.items():
        _write(path, {"principal": p, "secret": fw_secrets[p]})
    for principal, tok in ((OPERATOR, operator_token), *user_tokens.items()):
        _write_text(auth.token_file(principal), tok + "\n")
    return auth
