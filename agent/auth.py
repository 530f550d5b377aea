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


def http_credentials(cfg: AgentConfig) -> Credentials | None:
    """The credentials the agent's own endpoints accept (None: they are open)."""
    if not cfg.authenticate_http:
        return None
    assert cfg.http_credentials is not None
    try:
        return Credentials.parse(Path(cfg.http_credentials).read_text())
    except OSError as e:
        raise StartupError(f"cannot read --http-credentials {cfg.http_credentials}: {e}") from e
    except CredentialError as e:
        raise StartupError(f"bad --http-credentials {cfg.http_credentials}: {e}") from e


def middleware(creds: Credentials) -> Callable[..., Awaitable[web.StreamResponse]]:
    """Operators and frameworks (any kind of credential but an agent's) may read the endpoints."""

    @web.middleware
    async def authenticate(request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]) -> Any:
        if request.path in OPEN_PATHS:
            return await handler(request)
        result = creds.authenticate(request.headers.get("Authorization"), None, time.time())
        if isinstance(result, AuthFailed) or result.kind == "agent":
            reason = result.reason if isinstance(result, AuthFailed) else "agent credentials cannot read agents"
            log.warning("agent HTTP: authentication failed (%s) for %s", reason, request.path)
            return web.Response(
                status=401, text=f"Unauthorized: {reason}", content_type="text/plain",
                headers={"WWW-Authenticate": WWW_AUTHENTICATE},
            )
        return await handler(request)

    return authenticate
