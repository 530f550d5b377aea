"""How a framework service's command line reaches the master: one set of options for every service.

``connection_options(default_master)`` adds to a click command the options every framework service
shares -- ``--master`` (``host:port``, a URL, or ``zk://host:port/path`` to follow the leader),
``--ca`` (the cluster CA: the master and agents are https), ``--tls-cert``/``--tls-key`` (the
service's own API is https), ``--principal`` with ``--secret`` (HTTP Basic) or ``--token``
(Bearer), the last three also from ``AGORA_PRINCIPAL``/``AGORA_SECRET``/``AGORA_TOKEN`` (a secret
and a token: the one on the command line wins, as the CLI's ``AGORA_TOKEN`` may be exported), and
``--agent-http-credential FILE`` (what the service presents to agents run with
``--authenticate-http`` when it reads task logs from their ``/files``; the master's option of
that name, same format: ``protocol.authn.parse_client_credential``), and ``--credentials FILE``
with ``--acls FILE`` (the master's files: who may call the service's own API, see
``frameworks/client/api_auth.py``) -- and hands the command one
``conn: ServiceConnection`` instead of eight parameters. Bad combinations (a certificate without
its key, a secret without a principal, a malformed master, an unreadable credential file) are
usage errors before anything starts.

The services build the same ``ServiceConnection`` from their keyword arguments and take from it
everything they open: ``client_ssl()``/``server_ssl()``, ``transport()`` (to the master) and
``agent_session()`` (to agents, with the agent credential). ``advertised_host(host, advertise)``
is the address a service publishes (its ``webui_url``): never a wildcard bind.

``run_service(make, label, errors)`` runs a service (an async context manager with a ``url``)
until SIGINT/SIGTERM, printing ``<label> listening on <url>``; an expected failure (a TLS file, a
port in use, ZooKeeper unreachable, ``errors``) becomes a one-line message, not a traceback. A
service that stops itself with ``failed`` set -- ``stop_refused`` when the master refuses the
subscription (401 a bad credential, 403 an ACL: not transient, retrying would not help) -- exits
non-zero with ``<label>: <why>``.

``python -m frameworks.batch`` and ``python -m frameworks.elastic`` are written with these.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import signal
import socket
import ssl
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol, TypeVar

import aiohttp
import attrs
import click

from frameworks.client.api_auth import ApiAuth, ApiAuthError
from frameworks.client.transport import HttpTransport, base_url
from protocol.authn import CredentialError, credential_header, parse_client_credential
from protocol.detector import DetectorError, is_zk_url, parse_zk_url
from protocol.lifecycle import Service
from protocol.tls import TlsError, client_context, server_context

log = logging.getLogger(__name__)

F = TypeVar("F", bound=Callable[..., Any])


@attrs.frozen
class ServiceConnection:
    """What a framework service needs to reach the master (and agents) and to serve its own API."""

    master: str
    ca: str | None = None  # the cluster CA (PEM): master and agents are https
    tls_cert: str | None = None  # the service's own API certificate (PEM) ...
    tls_key: str | None = None  # ... and its key: the API is https
    principal: str | None = None  # FrameworkInfo.principal, and the Basic/Bearer identity
    secret: str | None = None
    token: str | None = None
    agent_http_credential: str | None = None  # file: the credential for agents' /files (--authenticate-http)
    # the service's own API: the master's --credentials and --acls files (frameworks/client/api_auth.py)
    credentials: str | None = None
    acls: str | None = None

    @classmethod
    def of(cls, master: str, **paths_and_credentials: str | Path | None) -> ServiceConnection:
        """From a service's keyword arguments (files may be ``Path``s); not checked (``check``)."""
        return cls(master, **{k: None if v is None else str(v) for k, v in paths_and_credentials.items()})

    def check(self) -> None:
        """``ValueError`` naming what is wrong (the command line turns it into a usage error)."""
        if (self.tls_cert is None) != (self.tls_key is None):
            raise ValueError("--tls-cert and --tls-key go together (the API's certificate and its key)")
        if self.secret is not None and not self.principal:
            raise ValueError("--secret needs --principal (HTTP Basic is principal:secret)")
        if is_zk_url(self.master):
            parse_zk_url(self.master)  # DetectorError (a ValueError) names what is wrong
        else:
            base_url(self.master)
        self.agent_headers()
        self.api_auth()

    def service_kwargs(self) -> dict[str, Any]:
        """The keyword arguments ``BatchService``/``ElasticService`` take (all but ``master``)."""
        return {
            "ca": self.ca,
            "tls_cert": self.tls_cert,
            "tls_key": self.tls_key,
            "principal": self.principal,
            "secret": self.secret,
            "token": self.token,
            "agent_http_credential": self.agent_http_credential,
            "credentials": self.credentials,
            "acls": self.acls,
        }

    def api_auth(self) -> ApiAuth:
        """Who may call the service's own API (``ApiAuthError``, a ``ValueError``, if a file is bad)."""
        return ApiAuth.load(self.credentials, self.acls)

    def client_ssl(self) -> ssl.SSLContext | None:
        """Towards the master and agents: the cluster CA pinned, or None (system defaults)."""
        return client_context(self.ca) if self.ca is not None else None

    def server_ssl(self) -> ssl.SSLContext | None:
        """The service's own API: https with ``tls_cert``/``tls_key``, else None (http)."""
        return server_context(self.tls_cert, self.tls_key) if self.tls_cert and self.tls_key else None

    def transport(self, client_ssl: ssl.SSLContext | None) -> HttpTransport:
        """The scheduler API transport to the master (TLS, principal with secret or token)."""
        return HttpTransport(self.master, tls=client_ssl, principal=self.principal, secret=self.secret, token=self.token)

    def agent_headers(self) -> dict[str, str]:
        """``Authorization`` for agents run with ``--authenticate-http`` (empty without a credential).
        ``CredentialError`` (a ``ValueError``) when the file cannot be read or parsed."""
        if not self.agent_http_credential:
            return {}
        try:
            text = Path(self.agent_http_credential).read_text()
        except (OSError, UnicodeError) as e:
            raise CredentialError(f"cannot read --agent-http-credential {self.agent_http_credential}: {e}") from e
        try:
            return {"Authorization": credential_header(parse_client_credential(text))}
        except CredentialError as e:
            raise CredentialError(f"bad --agent-http-credential {self.agent_http_credential}: {e}") from e

    def agent_session(self, client_ssl: ssl.SSLContext | None) -> aiohttp.ClientSession:
        """The session task-log reads go through (``/files/read`` on agents, with ``agent_headers``
        per request: never sent to the master; 10 s per request)."""
        return aiohttp.ClientSession(
            timeout=aiohttp.ClientTimeout(total=10),
            connector=aiohttp.TCPConnector(ssl=client_ssl if client_ssl is not None else True),
        )


WILDCARD_HOSTS = frozenset({"0.0.0.0", "::", ""})


def advertised_host(host: str, advertise: str | None = None) -> str:
    """What a service bound to ``host`` publishes (its ``webui_url``, what workers are told):
    ``advertise`` if given, else ``host`` unless a wildcard nobody can connect to, else the
    machine's hostname (the agent's ``--advertise-host`` rule)."""
    if advertise:
        return advertise
    return socket.gethostname() if host in WILDCARD_HOSTS else host


class ServiceFailed(Exception):
    """The service stopped itself on an error (``failed``): ``run_service`` exits non-zero."""


class MasterRefused(Exception):
    """The master refused the service's subscription (a 4xx: 401 a bad credential, 403 an ACL)."""


def stop_refused(service: Service, message: str) -> asyncio.Task[None] | None:
    """A scheduler's ``error`` callback: the subscription was refused (4xx) or ended by an ERROR
    event (the framework removed), the driver has given up, so the service would serve with no
    master. It fails (``failed``) and stops; ``run_service``
    exits non-zero with the reason. Returns the stop task (keep it), None if already failing."""
    if service.failed is not None:
        return None
    refused = message.startswith("subscription refused: ")
    why = message.removeprefix("subscription refused: ")
    if "HTTP 401" in why:
        why += " (check --principal and --secret/--token)"
    elif "HTTP 403" in why:
        why += " (the master's ACLs do not allow this framework)"
    # else a Mesos ERROR event: the master closed the stream for good (the framework was removed)
    service.failed = MasterRefused(f"the master {'refused' if refused else 'ended'} the subscription: {why}")
    log.critical("%s: %s; stopping", service.name, service.failed)
    return asyncio.get_running_loop().create_task(service.stop())


def connection_options(default_master: str = "127.0.0.1:5050") -> Callable[[F], F]:
    """A decorator: the shared options, passed to the command as ``conn: ServiceConnection``."""
    pem = click.Path(dir_okay=False)
    options = [
        click.option(
            "--master", default=default_master, show_default=True,
            help="Master host:port or URL, or zk://host:port/path (HA: follows the leader).",
        ),
        click.option("--ca", default=None, type=pem, help="The cluster CA (PEM): the master and agents are https."),
        click.option("--tls-cert", default=None, type=pem, help="PEM certificate: the service's API is https."),
        click.option("--tls-key", default=None, type=pem, help="PEM private key of --tls-cert."),
        click.option("--principal", envvar="AGORA_PRINCIPAL", default=None, help="The framework's principal (master auth on)."),
        click.option("--secret", envvar="AGORA_SECRET", default=None, help="Its secret (HTTP Basic), or give --token."),
        click.option("--token", envvar="AGORA_TOKEN", default=None, help="A bearer token for the master (with --principal)."),
        click.option(
            "--agent-http-credential", default=None, type=pem,
            help="Credential file for agents run with --authenticate-http (task logs); the master's format.",
        ),
        click.option(
            "--credentials", default=None, type=pem,
            help="The master's --credentials file: every API call must then authenticate (401 otherwise).",
        ),
        click.option(
            "--acls", default=None, type=pem,
            help="The master's --acls file: manage_jobs, view_job_logs, submit_jobs (default deny but one's own jobs).",
        ),
    ]
    names = ("master", "ca", "tls_cert", "tls_key", "principal", "secret", "token", "agent_http_credential",
             "credentials", "acls")

    def decorate(f: F) -> F:
        @functools.wraps(f)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            values = {n: kwargs.pop(n) for n in names}
            if values["secret"] is not None and values["token"] is not None:
                values.update(_one_credential(click.get_current_context()))
            try:
                conn = ServiceConnection(**values)
                conn.check()
            except ValueError as exc:
                raise click.UsageError(str(exc)) from exc
            return f(*args, conn=conn, **kwargs)

        cmd: Any = wrapper
        for opt in reversed(options):
            cmd = opt(cmd)
        return cmd

    return decorate


def _one_credential(ctx: click.Context) -> dict[str, None]:
    """Both a secret and a token: the one given on the command line wins over one from the
    environment (``AGORA_TOKEN`` is also the CLI's operator token, which ``agora up --auth`` tells
    users to export); both on the command line, or both from the environment, is a usage error."""
    from click.core import ParameterSource

    typed = {n for n in ("secret", "token") if ctx.get_parameter_source(n) is not ParameterSource.ENVIRONMENT}
    if len(typed) == 1:
        return {"token": None} if typed == {"secret"} else {"secret": None}
    raise click.UsageError("give --secret or --token, not both (AGORA_SECRET / AGORA_TOKEN count too)")


class ApiService(Protocol):
    """A framework service: started and stopped by ``async with``, serving its API at ``url``."""

    failed: BaseException | None

    @property
    def url(self) -> str: ...

    async def wait_stopped(self) -> None: ...

    async def __aenter__(self) -> Any: ...

    async def __aexit__(self, *exc: object) -> Any: ...


def run_service(
    make: Callable[[], ApiService],
    label: str,
    errors: tuple[type[BaseException], ...] = (),
) -> None:
    """Run the service ``make()`` builds until SIGINT/SIGTERM (uvloop). Expected failures --
    ``OSError`` (a port in use), ``TlsError``, ``DetectorError`` and ``errors`` -- exit with
    ``<label>: <message>`` instead of a traceback."""
    import uvloop

    async def run() -> None:
        service = make()
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        reload = getattr(service, "reload", None)
        if callable(reload):  # SIGHUP: the service reads its credentials and ACLs again
            loop.add_signal_handler(signal.SIGHUP, reload)
        async with service:
            print(f"{label} listening on {service.url}", flush=True)
            stopped = asyncio.ensure_future(service.wait_stopped())  # it stopped itself (failed)
            waiter = asyncio.ensure_future(stop.wait())
            try:
                await asyncio.wait({stopped, waiter}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                stopped.cancel()
                waiter.cancel()
        if service.failed is not None:
            raise ServiceFailed(str(service.failed))

    expected: tuple[type[BaseException], ...] = (
        OSError, TlsError, DetectorError, CredentialError, ApiAuthError, ServiceFailed, *errors)
    try:
        uvloop.run(run())
    except expected as exc:  # a clear message, not a traceback
        raise click.ClickException(f"{label}: {exc}") from exc
