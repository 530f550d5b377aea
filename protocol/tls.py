"""TLS for every Agora connection, with the standard library ``ssl``: nothing need cross the
network in plaintext.

- ``server_context(cert, key, ca=None)``: what the master, an agent or a framework service serves
  with. With ``ca`` a client certificate is asked for and, when one is presented, it must chain to
  that CA (a foreign one fails the handshake); whether a certificate is *required* is decided per
  endpoint (``require_client_cert``: the master's agent channel with ``--tls-require-client-cert``),
  so schedulers and the CLI need none while every agent must present one.
- ``client_context(ca=None, cert=None, key=None)``: what a client connects with. ``ca`` pins the
  peer's CA (only that CA is trusted, not the system store); ``cert``/``key`` is the client
  certificate presented for mTLS. Hostnames are checked (local certificates carry ``localhost``,
  ``127.0.0.1`` and ``::1``).
- TLS 1.2 is the minimum everywhere; there is no plaintext fallback (a server with TLS serves only
  TLS, a client given a CA only connects with TLS).

Every unreadable, missing or malformed file is a ``TlsError`` naming the file and the flag it came
from, raised before anything listens or connects.
"""

from __future__ import annotations

import ssl
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # aiohttp is imported where the middleware is built: cores may import this module
    from aiohttp import web

Pathish = str | Path
MINIMUM_VERSION = ssl.TLSVersion.TLSv1_2


class TlsError(ValueError):
    """A TLS file is missing, unreadable or malformed (the message names it)."""


def _readable(path: Pathish, what: str) -> str:
    p = Path(path)
    try:
        with p.open("rb") as f:
            head = f.read(1 << 20)
    except FileNotFoundError as e:
        raise TlsError(f"{what} {p}: no such file") from e
    except IsADirectoryError as e:
        raise TlsError(f"{what} {p}: is a directory, not a PEM file") from e
    except OSError as e:
        raise TlsError(f"{what} {p}: cannot read it ({e.strerror or e})") from e
    if b"-----BEGIN" not in head:
        raise TlsError(f"{what} {p}: not a PEM file (no '-----BEGIN' line)")
    return str(p)


def _load_chain(ctx: ssl.SSLContext, cert: Pathish, key: Pathish, cert_flag: str, key_flag: str) -> None:
    c = _readable(cert, cert_flag)
    k = _readable(key, key_flag)
    def no_passphrase() -> bytes:  # OpenSSL would otherwise prompt on the terminal
        raise TlsError(f"{key_flag} {k}: the key is passphrase-protected; give an unencrypted key")

    try:
        ctx.load_cert_chain(c, k, password=no_passphrase)
    except ssl.SSLError as e:
        reason = e.reason or str(e)
        if "KEY_VALUES_MISMATCH" in str(e).upper():
            raise TlsError(f"{cert_flag} {c} and {key_flag} {k}: the key does not match the certificate") from e
        raise TlsError(f"{cert_flag} {c} / {key_flag} {k}: cannot load the certificate and key ({reason})") from e


def _load_ca(ctx: ssl.SSLContext, ca: Pathish, flag: str) -> None:
    path = _readable(ca, flag)
    try:
        ctx.load_verify_locations(cafile=path)
    except ssl.SSLError as e:
        raise TlsError(f"{flag} {path}: not a CA certificate in PEM ({e.reason or e})") from e


def server_context(
    cert: Pathish,
    key: Pathish,
    ca: Pathish | None = None,
    *,
    cert_flag: str = "--tls-cert",
    key_flag: str = "--tls-key",
    ca_flag: str = "--tls-ca",
) -> ssl.SSLContext:
    """A TLS 1.2+ server context serving ``cert`` (with its chain) and ``key``; with ``ca`` it asks
    for a client certificate and verifies any that is presented against ``ca`` only."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = MINIMUM_VERSION
    ctx.options |= ssl.OP_NO_COMPRESSION
    _load_chain(ctx, cert, key, cert_flag, key_flag)
    if ca is not None:
        _load_ca(ctx, ca, ca_flag)
        ctx.verify_mode = ssl.CERT_OPTIONAL  # required per endpoint: require_client_cert
    return ctx


def client_context(
    ca: Pathish | None = None,
    cert: Pathish | None = None,
    key: Pathish | None = None,
    *,
    ca_flag: str = "--ca",
    cert_flag: str = "--tls-cert",
    key_flag: str = "--tls-key",
) -> ssl.SSLContext:
    """A TLS 1.2+ client context that verifies the server's certificate and hostname: against
    ``ca`` alone when given (pinning), else the system's trust store; ``cert``/``key`` (both or
    neither) is the client certificate for mTLS."""
    if (cert is None) != (key is None):
        raise TlsError(f"{cert_flag} and {key_flag} go together (a client certificate needs its key)")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # CERT_REQUIRED and check_hostname
    ctx.minimum_version = MINIMUM_VERSION
    if ca is not None:
        _load_ca(ctx, ca, ca_flag)
    else:
        ctx.load_default_certs(ssl.Purpose.SERVER_AUTH)
    if cert is not None and key is not None:
        _load_chain(ctx, cert, key, cert_flag, key_flag)
    return ctx


def is_https(url: str) -> bool:
    return url.strip().lower().startswith(("https://", "wss://"))


def peer_certificate(transport: Any) -> dict[str, Any] | None:
    """The verified certificate the peer of ``transport`` presented (None: plaintext, or none)."""
    if transport is None:
        return None
    cert = transport.get_extra_info("peercert")
    return cert if cert else None


Handler = Callable[["web.Request"], Awaitable["web.StreamResponse"]]


def require_client_cert(
    paths: frozenset[str], on_refused: Callable[[], None] | None = None
) -> Callable[..., Awaitable[web.StreamResponse]]:
    """An aiohttp middleware answering ``403`` (before the handler runs, so nothing is processed)
    to a request for one of ``paths`` whose connection presented no verified client certificate
    (``on_refused`` counts it). Used with a ``server_context(..., ca=...)`` (which already refuses
    certificates of other CAs in the handshake)."""
    from aiohttp import web

    @web.middleware
    async def mtls(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.path in paths and peer_certificate(request.transport) is None:
            if on_refused is not None:
                on_refused()
            return web.Response(
                status=403,
                text="A client certificate from the cluster CA is required (mTLS is on)",
                headers={"Connection": "close"},
            )
        return await handler(request)

    return mtls
