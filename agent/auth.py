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
"""

from __future__ import annotations

import logging
import time
import weakref
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from aiohttp import web

from agent.config import AgentConfig
from agent.executor_api import PATH as EXECUTOR_PATH
from agent.recovery import StartupError
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

    def __init__(self, path: str, current: Credentials) -> None:
        self.path = path
        self.current = current
        self.reloads = 0
        self.reload_failures = 0
        _LIVE.add(self)

    def reload(self) -> bool:
        try:
            self.current = Credentials.parse(Path(self.path).read_text())
        except (OSError, UnicodeError, CredentialError) as e:
            self.reload_failures += 1
            log.error("reload: keeping the previous --http-credentials: %s: %s", self.path, e)
            return False
        self.reloads += 1
        log.info("reload: --http-credentials %s re-read (%d credentials)", self.path, len(self.current.entries))
        return True


_LIVE: weakref.WeakSet[HttpCredentials] = weakref.WeakSet()


def reload_all() -> int:
    """SIGHUP: re-read every live ``--http-credentials`` of this process (an agent process has
    one); how many were replaced."""
    return sum(1 for h in list(_LIVE) if h.reload())


def http_credentials(cfg: AgentConfig) -> HttpCredentials | None:
    """The credentials the agent's own endpoints accept (None: they are open)."""
    if not cfg.authenticate_http:
        return None
    assert cfg.http_credentials is not None
    try:
        return HttpCredentials(str(cfg.http_credentials), Credentials.parse(Path(cfg.http_credentials).read_text()))
    except OSError as e:
        raise StartupError(f"cannot read --http-credentials {cfg.http_credentials}: {e}") from e
    except CredentialError as e:
        raise StartupError(f"bad --http-credentials {cfg.http_credentials}: {e}") from e


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
        return await handler(request)

    return authenticate
