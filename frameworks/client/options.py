"""How a framework service's command line reaches the master: one set of options for every service.

``connection_options(default_master)`` adds to a click command the options every framework service
shares -- ``--master`` (``host:port``, a URL, or ``zk://host:port/path`` to follow the leader),
``--ca`` (the cluster CA: the master and agents are https), ``--tls-cert``/``--tls-key`` (the
service's own API is https), ``--principal`` with ``--secret`` (HTTP Basic) or ``--token``
(Bearer), the last three also from ``AGORA_PRINCIPAL``/``AGORA_SECRET``/``AGORA_TOKEN`` (a secret
and a token: the one on the command line wins, as the CLI's ``AGORA_TOKEN`` may be exported) -- and
hands the command one ``conn: ServiceConnection`` instead of seven parameters. Bad combinations
(a certificate without its key, a secret without a principal, a malformed master) are usage
errors before anything starts.

``run_service(make, label, errors)`` runs a service (an async context manager with a ``url``)
until SIGINT/SIGTERM, printing ``<label> listening on <url>``; an expected failure (a TLS file, a
port in use, ZooKeeper unreachable, ``errors``) becomes a one-line message, not a traceback.

``python -m frameworks.batch`` and ``python -m frameworks.elastic`` are written with these.
"""

from __future__ import annotations

import asyncio
import functools
import signal
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

import attrs
import click

from frameworks.client.transport import base_url
from protocol.detector import DetectorError, is_zk_url, parse_zk_url
from protocol.tls import TlsError

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

    def __attrs_post_init__(self) -> None:
        if (self.tls_cert is None) != (self.tls_key is None):
            raise ValueError("--tls-cert and --tls-key go together (the API's certificate and its key)")
        if self.secret is not None and not self.principal:
            raise ValueError("--secret needs --principal (HTTP Basic is principal:secret)")
        if is_zk_url(self.master):
            parse_zk_url(self.master)  # DetectorError (a ValueError) names what is wrong
        else:
            base_url(self.master)

    def service_kwargs(self) -> dict[str, Any]:
        """The keyword arguments ``BatchService``/``ElasticService`` take (all but ``master``)."""
        return {
            "ca": self.ca,
            "tls_cert": self.tls_cert,
            "tls_key": self.tls_key,
            "principal": self.principal,
            "secret": self.secret,
            "token": self.token,
        }


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
    ]
    names = ("master", "ca", "tls_cert", "tls_key", "principal", "secret", "token")

    def decorate(f: F) -> F:
        @functools.wraps(f)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            values = {n: kwargs.pop(n) for n in names}
            if values["secret"] is not None and values["token"] is not None:
                values.update(_one_credential(click.get_current_context()))
            try:
                conn = ServiceConnection(**values)
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

    url: str

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
        async with service:
            print(f"{label} listening on {service.url}", flush=True)
            await stop.wait()

    expected: tuple[type[BaseException], ...] = (OSError, TlsError, DetectorError, *errors)
    try:
        uvloop.run(run())
    except expected as exc:  # a clear message, not a traceback
        raise click.ClickException(f"{label}: {exc}") from exc
