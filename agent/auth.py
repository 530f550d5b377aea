"""The agent's authentication (shell): its credential on the channel to the master, and the
check of its own HTTP endpoints.

* ``--credential FILE`` (Mesos' agent ``--credential``: JSON ``{"principal", "secret"}``, or
  ``{"principal", "token"}``, or one ``principal secret`` line) or ``--token TOKEN``: sent as the
  ``Authorization`` header of the channel's WebSocket upgrade (Basic or Bearer).
* ``--authenticate-http`` with ``--http-credentials FILE`` (the master's credentials format,
  ``protocol.authn``): every request to the agent's endpoints (``/files/*``, ``/state``,
  ``/metrics``) must carry one of those credentials, else ``401`` with ``WWW-Authenticate``.
  ``/health`` stays open, and so does the executor API (its callers are the agent's own
  executors on this host).
* ``--acls FILE`` (with ``--authenticate-http``): ``access_sandboxes`` decides whose sandboxes a
  principal reads through ``/files/*`` (the task's user from this agent's checkpoint).
* SIGHUP (``reload_all`` from ``agent/main.py``) re-reads ``--http-credentials`` and ``--acls``;
  a file that fails keeps both previous sets.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
import weakref
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from aiohttp import web

from agent.checkpoint import CheckpointError, load_json, read_records
from agent.config import AgentConfig
from agent.executor_api import PATH as EXECUTOR_PATH
from agent.recovery import StartupError
from protocol.acls import AclError, Acls, Action, sandbox_problem, task_user
from protocol.authn import (
    WWW_AUTHENTICATE,
    AuthFailed,
    CredentialError,
    Credentials,
    bearer_header,
    credential_header,
    parse_client_credential,
)

log = logging.getLogger(__name__)
OPEN_PATHS = frozenset({"/health", EXECUTOR_PATH})
PRINCIPAL = web.RequestKey("agora.agent.principal", str)  # the authenticated principal (absent: open)


def channel_authorization(cfg: AgentConfig) -> str | None:
    """The ``Authorization`` header the agent presents to the master (None: none)."""
    if cfg.token:
        return bearer_header(cfg.token)
    if cfg.credential is None:
        return None
    try:
        return credential_header(parse_client_credential(Path(cfg.credential).read_text()))
    except OSError as e:
        raise StartupError(f"cannot read --credential {cfg.credential}: {e}") from e
    except CredentialError as e:
        raise StartupError(f"bad --credential {cfg.credential}: {e}") from e


class HttpCredentials:
    """The credentials the agent's own endpoints accept, re-read on SIGHUP (``reload_all``, from
    ``agent/main.py``): a removed token is refused from the next request on; a file that is missing
    or fails to parse keeps the previous set (logged as an error): never fall open."""

    def __init__(
        self, path: str, current: Credentials, *, acls_path: str | None = None, acls: Acls | None = None,
        work_dir: Path | None = None,
    ) -> None:
        self.path = path
        self.current = current
        self.acls_path = acls_path  # --acls (access_sandboxes), re-read with the credentials
        self.acls = acls if acls is not None else Acls.allow_all()
        self.work_dir = work_dir  # where the sandboxes and the tasks' checkpoints are
        self.reloads = 0
        self.reload_failures = 0
        _LIVE.add(self)

    def reload(self) -> bool:
        """Re-read both files; either failing keeps both previous sets (all or nothing)."""
        try:
            creds = Credentials.parse(Path(self.path).read_text())
            acls = _read_acls(self.acls_path) if self.acls_path is not None else self.acls
        except (OSError, UnicodeError, CredentialError, AclError) as e:
            self.reload_failures += 1
            log.error("reload: keeping the previous --http-credentials and --acls: %s", e)
            return False
        self.current, self.acls = creds, acls
        self.reloads += 1
        log.info("reload: --http-credentials %s re-read (%d credentials)", self.path, len(self.current.entries))
        return True

    def sandbox_denied(self, principal: str, requested: str) -> str | None:
        """``access_sandboxes`` for a ``/files/*`` request of ``requested`` (its ``path``): the
        sandbox's user is its task's (command, else executor, else framework user, read from this
        agent's checkpoint). A path above a task's sandbox (the root, a framework's directory) has
        no user: only a rule for ANY user allows it."""
        if not self.acls.enforces(Action.ACCESS_SANDBOXES):
            return None
        user = None
        if self.work_dir is not None and (task := _sandbox_task(self.work_dir, requested)) is not None:
            user = _sandbox_user(self.work_dir, *task)
        return sandbox_problem(self.acls, principal, user)


_LIVE: weakref.WeakSet[HttpCredentials] = weakref.WeakSet()


def reload_all() -> int:
    """SIGHUP: re-read every live ``--http-credentials`` of this process (an agent process has
    one); how many were replaced."""
    return sum(1 for h in list(_LIVE) if h.reload())


def _read_acls(path: str) -> Acls:
    try:
        text = Path(path).read_text()
    except OSError as e:
        raise AclError(f"cannot read --acls {path}: {e}") from e
    try:
        return Acls.parse(text, default_permissive=False)
    except AclError as e:
        raise AclError(f"bad --acls {path}: {e}") from e


def _sandbox_task(work_dir: Path, requested: str) -> tuple[str, str] | None:
    """The (framework id, task id) whose sandbox ``requested`` lies in (as ``agent.files``
    resolves it: relative to the sandbox root, or absolute; symlinks followed), else None."""
    if "\x00" in requested:
        return None
    root = os.path.realpath(work_dir / "sandboxes")
    real = os.path.realpath(requested if requested.startswith("/") else os.path.join(root, requested))
    rel = os.path.relpath(real, root)
    parts = [p for p in rel.split(os.sep) if p not in ("", ".")]
    if not parts or parts[0] == ".." or len(parts) < 2:
        return None
    return parts[0], parts[1]


def _sandbox_user(work_dir: Path, fid: str, tid: str) -> str | None:
    """The user task ``tid`` of ``fid`` runs as, from this agent's checkpoint (None: unknown)."""
    meta = work_dir / "meta" / "frameworks" / fid
    fw_user = cmd_user = ex_user = None
    with contextlib.suppress(OSError, CheckpointError, AttributeError, TypeError):
        fw_user = load_json(meta / "framework.json").get("user")
    with contextlib.suppress(OSError, CheckpointError, AttributeError, TypeError, IndexError, KeyError):
        records, _ = read_records(meta / "tasks" / f"{tid}.log")
        first = records[0]["t"]
        cmd_user = (first["task"].get("command") or {}).get("user")
        ex_user = ((first.get("executor") or {}).get("command") or {}).get("user")
    return task_user(cmd_user, ex_user, fw_user)


def http_credentials(cfg: AgentConfig) -> HttpCredentials | None:
    """The credentials (and ``--acls``) the agent's own endpoints check (None: they are open)."""
    if not cfg.authenticate_http:
        return None
    assert cfg.http_credentials is not None
    try:
        creds = Credentials.parse(Path(cfg.http_credentials).read_text())
    except OSError as e:
        raise StartupError(f"cannot read --http-credentials {cfg.http_credentials}: {e}") from e
    except CredentialError as e:
        raise StartupError(f"bad --http-credentials {cfg.http_credentials}: {e}") from e
    acls_path = str(cfg.acls) if cfg.acls is not None else None
    try:
        acls = _read_acls(acls_path) if acls_path is not None else None
    except AclError as e:
        raise StartupError(str(e)) from e
    return HttpCredentials(str(cfg.http_credentials), creds, acls_path=acls_path, acls=acls, work_dir=cfg.work_dir)


def middleware(creds: HttpCredentials | Credentials) -> Callable[..., Awaitable[web.StreamResponse]]:
    """Operators and frameworks (any kind of credential but an agent's) may read the endpoints;
    the authenticated principal is put on the request (``PRINCIPAL``) for ``access_sandboxes``."""
    def current() -> Credentials:
        return creds.current if isinstance(creds, HttpCredentials) else creds

    @web.middleware
    async def authenticate(request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]) -> Any:
        if request.path in OPEN_PATHS:
            return await handler(request)
        result = current().authenticate(request.headers.get("Authorization"), None, time.time())
        if isinstance(result, AuthFailed) or result.kind == "agent":
            reason = result.reason if isinstance(result, AuthFailed) else "agent credentials cannot read agents"
            log.warning("agent HTTP: authentication failed (%s) for %s", reason, request.path)
            return web.Response(
                status=401, text=f"Unauthorized: {reason}", content_type="text/plain",
                headers={"WWW-Authenticate": WWW_AUTHENTICATE},
            )
        request[PRINCIPAL] = result.principal
        if isinstance(creds, HttpCredentials) and request.path.startswith("/files/"):
            # reads the task's checkpoint: off the event loop, like agent.files' own reads
            denied = await asyncio.to_thread(creds.sandbox_denied, result.principal, request.query.get("path", ""))
            if denied is not None:
                log.warning("agent HTTP: %s reading %s", denied, request.query.get("path", ""))
                return web.Response(status=403, text=denied, content_type="text/plain")
        return await handler(request)

    return authenticate
