"""The master's authentication settings and which HTTP requests they cover.

``MasterAuth`` bundles the credentials (``protocol.authn.Credentials``), the ACLs
(``protocol.acls.Acls``) and the four Mesos flags. ``MasterAuth.realm(path)`` says which kind of
peer a request is (framework, agent, operator, read-only) and whether it must authenticate;
``MasterAuth.check`` authenticates its ``Authorization`` header. The HTTP edge (a middleware in
``master.service``) answers a failure with ``401`` and ``WWW-Authenticate`` and puts the
authenticated principal on the request; the pure core decides everything else (roles, users,
agent ids) from the principal carried in its events.

``load_auth(config)`` reads the files named by ``credentials``, ``acls`` and
``agent_http_credential`` (the web UI's credential towards agents). With any authentication flag
on, ACLs default to deny (``permissive: false``): no ``acls`` file then means nothing is
authorized. ``reload_auth(svc)`` (SIGHUP) re-reads them all, keeping the old set on any error.

With mTLS and ``--authenticate-agents`` (``agent_certs``) an agent's verified client certificate
names its principal (``protocol.authn.certificate_identity``). ``visible_state`` /
``visible_response`` / ``sandbox_denied`` apply the read ACLs (``view_frameworks``,
``view_tasks``, ``access_sandboxes``; decided in ``protocol.acls``) to what the master serves.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
from aiohttp import web

from master.events import AclsReplaced
from protocol import agent_channel as ac
from protocol.acls import (
    AclError,
    Acls,
    Action,
    Owners,
    filter_frameworks_json,
    filter_operator_response,
    may_read,
    sandbox_problem,
    task_info_user,
)
from protocol.authn import (
    AGENT,
    FRAMEWORK,
    OPERATOR,
    WWW_AUTHENTICATE,
    AuthFailed,
    AuthResult,
    CredentialError,
    Credentials,
    certificate_identity,
    certificate_names,
    credential_header,
    parse_client_credential,
)
from protocol.tls import peer_certificate

if TYPE_CHECKING:
    from master.config import MasterConfig
    from master.ports import AclReader, AuthPort

log = logging.getLogger(__name__)
PRINCIPAL = web.RequestKey("agora.principal", str)  # the authenticated principal (absent: none)

READONLY = "readonly"  # a GET view: any authenticated principal may read it
SCHEDULER_PATH = "/api/v1/scheduler"
OPERATOR_PATHS = frozenset({"/api/v1", "/api/v1/operator"})
OPEN_PATHS = frozenset({"/version", "/health", "/master/health", "/redirect", "/master/redirect"})
# Mesos' write endpoints besides /api/v1 (POST/PUT/DELETE): an operator's, as the v1 calls they are
OPERATOR_WRITE_PATHS = frozenset({
    "/teardown", "/reserve", "/unreserve", "/weights", "/quota", "/maintenance/schedule", "/machine/down",
    "/machine/up", "/create-volumes", "/destroy-volumes",
})


def is_operator_write(path: str) -> bool:
    """``path`` (with or without Mesos' ``/master`` prefix) is one of Mesos' write endpoints."""
    p = path.removeprefix("/master")
    return p in OPERATOR_WRITE_PATHS or p.startswith("/quota/")


class AuthConfigError(ValueError):
    pass


@attrs.frozen
class MasterAuth:
    credentials: Credentials = attrs.field(factory=Credentials)
    acls: Acls = attrs.field(factory=Acls.allow_all)
    frameworks: bool = False
    agents: bool = False
    http_readwrite: bool = False
    http_readonly: bool = False
    # mTLS with --authenticate-agents: an agent's verified client certificate names its principal
    # (protocol.authn.certificate_identity), so the agent id <-> principal binding holds per cert
    agent_certs: bool = False
    # the Authorization header the web UI's sandbox proxy presents to agents (--agent-http-credential)
    agent_http_header: str | None = attrs.field(default=None, repr=False)

    @property
    def enabled(self) -> bool:
        return self.frameworks or self.agents or self.http_readwrite or self.http_readonly

    def realm(self, path: str, method: str = "GET") -> str | None:
        """The kind of peer a request to ``path`` is, when that kind must authenticate."""
        if path in OPEN_PATHS:
            return None
        if method not in ("GET", "HEAD") and is_operator_write(path):
            return OPERATOR if self.http_readwrite else None
        if path == SCHEDULER_PATH:
            return FRAMEWORK if self.frameworks else None
        if path == ac.PATH:
            return AGENT if self.agents else None
        if path in OPERATOR_PATHS:
            return OPERATOR if self.http_readwrite else None
        return READONLY if self.http_readonly else None

    def check(
        self, path: str, header: str | None, now: float, cert: Mapping[str, Any] | None = None, method: str = "GET"
    ) -> tuple[str | None, AuthResult | None]:
        """``(realm, result)``; ``result`` is None when the request need not authenticate.
        ``cert``: the peer's verified client certificate (``ssl``'s dict), if it presented one."""
        realm = self.realm(path, method)
        if realm is None:
            return None, None
        kind = None if realm == READONLY else realm
        if realm == AGENT and self.agent_certs and cert is not None:
            checked = self.credentials.authenticate(header, kind, now) if header else None
            return realm, certificate_identity(checked, certificate_names(cert))
        return realm, self.credentials.authenticate(header, kind, now)


def load_auth(cfg: MasterConfig) -> MasterAuth:
    """Read the credentials and ACL files named in ``cfg`` (``AuthConfigError`` if unusable)."""
    on = cfg.authenticate_frameworks or cfg.authenticate_agents or cfg.authenticate_http_readwrite or cfg.authenticate_http_readonly
    creds = Credentials()
    if cfg.credentials:
        try:
            creds = Credentials.parse(Path(cfg.credentials).read_text())
        except OSError as e:
            raise AuthConfigError(f"cannot read credentials {cfg.credentials}: {e}") from e
        except CredentialError as e:
            raise AuthConfigError(f"bad credentials file {cfg.credentials}: {e}") from e
    elif on:
        raise AuthConfigError("authentication is on but no --credentials file is given")
    acls = Acls(permissive=not on)
    if on and not cfg.acls:
        log.warning("authentication is on and no --acls file is given: every action is denied (default deny)")
    if cfg.acls:
        try:
            acls = Acls.parse(Path(cfg.acls).read_text(), default_permissive=not on)
        except OSError as e:
            raise AuthConfigError(f"cannot read ACLs {cfg.acls}: {e}") from e
        except AclError as e:
            raise AuthConfigError(f"bad ACL file {cfg.acls}: {e}") from e
    agent_header = None
    if cfg.agent_http_credential:
        try:
            agent_header = credential_header(parse_client_credential(Path(cfg.agent_http_credential).read_text()))
        except (OSError, UnicodeError) as e:
            raise AuthConfigError(f"cannot read --agent-http-credential {cfg.agent_http_credential}: {e}") from e
        except CredentialError as e:
            raise AuthConfigError(f"bad --agent-http-credential {cfg.agent_http_credential}: {e}") from e
    return MasterAuth(
        credentials=creds,
        acls=acls,
        frameworks=cfg.authenticate_frameworks,
        agents=cfg.authenticate_agents,
        http_readwrite=cfg.authenticate_http_readwrite,
        http_readonly=cfg.authenticate_http_readonly,
        agent_certs=cfg.authenticate_agents and cfg.tls_require_client_cert,
        agent_http_header=agent_header,
    )


async def reload_auth(svc: AuthPort) -> bool:
    """Re-read the credentials and ACL files (SIGHUP, ``master/main.py``): a removed or changed
    token or secret is refused from the next request on, and the core decides with the new ACLs
    from the next fact on (``AclsReplaced`` through ``dispatch``, in order with every other fact).
    A file that is missing or fails to parse keeps the previous set (logged as an error, counted in
    ``auth_reload_failures_total``): never fall open. True when the new set is in force."""
    try:
        new = load_auth(svc.config)
    except AuthConfigError as e:
        svc.metrics_inc("auth_reload_failures_total")
        log.error("reload: keeping the previous credentials and ACLs: %s", e)
        return False
    svc.auth = new
    if svc.running and svc.state is not None:
        await svc.dispatch(AclsReplaced(new.acls))
    svc.metrics_inc("auth_reloads_total")
    log.info("reload: %d credentials and the ACLs re-read", len(new.credentials.entries))
    return True


# --- read ACLs applied to what the master serves (pure decisions in protocol.acls) -----------------


def owners(svc: AclReader) -> Owners:
    """Each framework's and task's user, for the view filters and ``access_sandboxes``."""
    fws: dict[str, str | None] = {}
    tasks: dict[tuple[str, str], str | None] = {}
    st = svc.state
    for fw in (*st.frameworks.values(), *st.completed_frameworks):
        fw_user = fw.info.user or None
        fws[fw.framework_id] = fw_user
        for t in (*fw.tasks.values(), *fw.completed.values()):
            info = t.info
            if info is None:
                continue
            tasks[(fw.framework_id, t.task_id)] = task_info_user(info, fw_user)
    return Owners(fws, tasks)


def task_owner(svc: AclReader, framework_id: str, task_id: str) -> str | None:
    """One task's user as ``owners`` reads it (live, finished or of a completed framework; else
    its framework's user), without a scan of every task."""
    st = svc.state
    fw = st.frameworks.get(framework_id) or next(
        (f for f in reversed(st.completed_frameworks) if f.framework_id == framework_id), None)
    if fw is None:
        return None
    rec = fw.tasks.get(task_id) or fw.finished(task_id)
    fw_user = fw.info.user or None
    return task_info_user(rec.info, fw_user) if rec is not None and rec.info is not None else fw_user


def _views_enforced(acls: Acls) -> bool:
    return acls.enforces(Action.VIEW_FRAMEWORKS) or acls.enforces(Action.VIEW_TASKS)


def visible_state(svc: AclReader, request: web.Request, state: dict[str, Any]) -> dict[str, Any]:
    """``/state`` (or its summary's source) with the frameworks and tasks the request's principal
    may not view (``view_frameworks`` / ``view_tasks``) left out."""
    acls = svc.auth.acls
    if not _views_enforced(acls):
        return state
    who, own = principal_of(request), owners(svc)
    out = dict(state)
    for key in ("frameworks", "completed_frameworks"):
        out[key] = filter_frameworks_json(acls, who, state.get(key, ()), own)
    return out


def task_filter(svc: AclReader, request: web.Request) -> Callable[[str, str, str | None], bool] | None:
    """``ok(framework_id, task_id, framework_user)``: whether the request's principal may view
    that task (``view_frameworks`` and ``view_tasks``, as ``visible_state``); None when no read
    ACL applies (every task is shown)."""
    acls = svc.auth.acls
    if not _views_enforced(acls):
        return None
    who, own = principal_of(request), owners(svc)
    see_tasks = acls.enforces(Action.VIEW_TASKS)

    def ok(framework_id: str, task_id: str, framework_user: str | None) -> bool:
        if not may_read(acls, Action.VIEW_FRAMEWORKS, who, framework_user):
            return False
        return not see_tasks or acls.allows(Action.VIEW_TASKS, who, own.task(framework_id, task_id) or framework_user)

    return ok


def visible_response(svc: AclReader, request: web.Request, resp: Any) -> Any:
    """An operator GET_* response as the request's principal may see it."""
    acls = svc.auth.acls
    if not _views_enforced(acls):
        return resp
    return filter_operator_response(acls, principal_of(request), resp, owners(svc))


def sandbox_denied(svc: AclReader, request: web.Request, framework_id: str, task_id: str) -> str | None:
    """Why the request's principal may not read this task's sandbox (``access_sandboxes``), or None."""
    acls = svc.auth.acls
    if not acls.enforces(Action.ACCESS_SANDBOXES):
        return None
    return sandbox_problem(acls, principal_of(request), task_owner(svc, framework_id, task_id))


def unauthorized(reason: str) -> web.Response:
    """``401`` with the challenges a client can answer (Basic for Mesos principals, Bearer for tokens)."""
    return web.Response(
        status=401, text=f"Unauthorized: {reason}", content_type="text/plain",
        headers={"WWW-Authenticate": WWW_AUTHENTICATE},
    )


def forbidden(reason: str) -> web.Response:
    return web.Response(status=403, text=reason, content_type="text/plain")


def principal_of(request: web.Request) -> str | None:
    return request.get(PRINCIPAL)


def middleware(svc: AuthPort) -> Callable[..., Awaitable[web.StreamResponse]]:
    """Authenticate every request whose realm needs it: ``401`` (counted per kind in
    ``auth_failures``) or the principal put on the request for the handlers."""

    @web.middleware
    async def authenticate(request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]) -> Any:
        auth = svc.auth
        if not auth.enabled:
            return await handler(request)
        realm, result = auth.check(
            request.path, request.headers.get("Authorization"), svc.clock.now(), peer_certificate(request.transport),
            request.method,
        )
        if result is None:
            return await handler(request)
        if isinstance(result, AuthFailed):
            assert realm is not None
            svc.auth_failed(realm)
            log.warning("authentication failed (%s) for %s %s from %s", result.reason, request.method, request.path, request.remote)
            return unauthorized(result.reason)
        request[PRINCIPAL] = result.principal
        return await handler(request)

    return authenticate
