"""Authentication and ACLs on a framework service's own HTTP API (batch, elastic).

The services take the master's files: ``--credentials`` (Mesos principals with secrets, sent as
HTTP Basic, and Agora bearer tokens; ``protocol.authn``) and ``--acls`` (``protocol.acls``). With
``--credentials`` every request but ``/health`` must authenticate: a missing, wrong or expired
credential is answered ``401`` with ``WWW-Authenticate`` (the master's challenges) and nothing
is done; the principal is put on the request for the handlers, which ask ``protocol.acls``
(``job_problem``, ``submit_problem``) and answer ``403``. A credential of a ``kind`` is good here
only if it is an ``operator`` one (a person or a tool at the API) or has no kind. Without
``--credentials`` the API is open, as before, and the handlers see no principal. ``SIGHUP`` (the
service's ``reload``) reads both files again; a file that fails keeps the previous set.

The same ``--acls`` file serves the master: the services' actions (``manage_jobs``,
``view_job_logs``, ``submit_jobs``) are ones the master ignores.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import attrs
from aiohttp import web

from protocol.acls import AclError, Acls
from protocol.authn import OPERATOR, WWW_AUTHENTICATE, AuthFailed, CredentialError, Credentials

log = logging.getLogger(__name__)

PRINCIPAL = web.RequestKey("agora.api_principal", str)  # the authenticated principal (absent: none)
OPEN_PATHS = frozenset({"/health", "/api/v1/service/channel"})  # the channel: a per-job token (frameworks/batch/warm.py)


class ApiAuthError(ValueError):
    """A credentials or ACL file that cannot be used."""


@attrs.frozen
class ApiAuth:
    """Who may call a service's API: ``credentials`` None means authentication is off."""

    credentials: Credentials | None = None
    acls: Acls = attrs.field(factory=Acls.allow_all)
    credentials_path: str | None = None
    acls_path: str | None = None

    @property
    def enabled(self) -> bool:
        return self.credentials is not None

    @classmethod
    def load(cls, credentials: str | Path | None, acls: str | Path | None) -> ApiAuth:
        """Read the files (``ApiAuthError`` naming the file and what is wrong). ACLs without
        credentials are refused: nobody would be authenticated for them to apply to. With
        credentials and no ACL file every principal may act only on its own jobs (default deny)."""
        if acls and not credentials:
            raise ApiAuthError("--acls needs --credentials (ACLs apply to authenticated principals)")
        if not credentials:
            return cls()
        try:
            creds = Credentials.parse(Path(credentials).read_text())
        except (OSError, UnicodeError) as e:
            raise ApiAuthError(f"cannot read --credentials {credentials}: {e}") from e
        except CredentialError as e:
            raise ApiAuthError(f"bad --credentials file {credentials}: {e}") from e
        parsed = Acls(permissive=False)
        if acls:
            try:
                parsed = Acls.parse(Path(acls).read_text(), default_permissive=False)
            except (OSError, UnicodeError) as e:
                raise ApiAuthError(f"cannot read --acls {acls}: {e}") from e
            except AclError as e:
                raise ApiAuthError(f"bad --acls file {acls}: {e}") from e
        return cls(creds, parsed, str(credentials), None if not acls else str(acls))

    def reloaded(self) -> ApiAuth:
        """The same files read again (``ApiAuthError`` if they no longer parse)."""
        return ApiAuth.load(self.credentials_path, self.acls_path)


def principal_of(request: web.Request) -> str | None:
    return request.get(PRINCIPAL)


def unauthorized(reason: str) -> web.Response:
    """``401`` with the challenges a client can answer (the master's), the reason as JSON."""
    return web.json_response(
        {"error": f"Unauthorized: {reason}"}, status=401, headers={"WWW-Authenticate": WWW_AUTHENTICATE}
    )


def forbidden(reason: str) -> web.Response:
    return web.json_response({"error": reason}, status=403)


def middleware(
    get: Callable[[], ApiAuth], now: Callable[[], float] = time.time, failures: dict[str, int] | None = None
) -> Callable[..., Awaitable[web.StreamResponse]]:
    """Authenticate every request (``get()``: the auth in force now, so a reload applies to the
    next request): ``401`` before the handler runs, or the principal on the request."""

    @web.middleware
    async def authenticate(
        request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> Any:
        auth = get()
        if auth.credentials is None or request.path in OPEN_PATHS:
            return await handler(request)
        result = auth.credentials.authenticate(request.headers.get("Authorization"), OPERATOR, now())
        if isinstance(result, AuthFailed):
            if failures is not None:
                failures["api"] = failures.get("api", 0) + 1
            log.warning("authentication failed (%s) for %s %s from %s", result.reason, request.method, request.path,
                        request.remote)
            return unauthorized(result.reason)
        request[PRINCIPAL] = result.principal
        return await handler(request)

    return authenticate


def whoami(request: web.Request, auth: ApiAuth) -> dict[str, Any]:
    """``GET /api/v1/whoami``: the principal the request authenticated as (None: the API does not
    authenticate)."""
    return {"principal": principal_of(request), "authenticated": auth.enabled}


class OwnerError(ValueError):
    """A submission's claimed owner that is refused: ``status`` 400 (not a name) or 403."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


def job_owner(principal: str | None, claimed: Any) -> str | None:
    """The owner of a job being submitted: the authenticated ``principal``, never what the body
    claims (``user``): a claim of anybody else is refused (``OwnerError`` 403). Without
    authentication the claim is taken as given (like Mesos' ``FrameworkInfo.user``), else None."""
    if claimed is not None and (not isinstance(claimed, str) or not claimed or len(claimed) > 128):
        raise OwnerError("user: expected a non-empty name of at most 128 characters", 400)
    if principal is None:
        return claimed
    if claimed is not None and claimed != principal:
        raise OwnerError(
            f"Forbidden: authenticated as {principal!r}, a job may not claim user {claimed!r} (jobs are "
            "owned by the principal that submits them)",
            403,
        )
    return principal
