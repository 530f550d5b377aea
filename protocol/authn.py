"""Authentication, pure: credentials, the ``Authorization`` header, and how one is checked.

Shared by the master (frameworks, agents, operators), the agent (its own HTTP endpoints) and the
clients (they build the header). Two kinds of credential:

* a Mesos credential, ``{"principal": ..., "secret": ...}``, sent as HTTP Basic
  (``Authorization: Basic base64(principal:secret)``: what pymesos and Mesos send);
* an Agora bearer token, ``{"principal": ..., "token": ...}``, sent as ``Authorization: Bearer``.

Either may carry ``expires_at`` (Unix seconds) and ``kind`` (``framework`` / ``agent`` /
``operator``: the credential is then good only for that kind of peer). A credentials file is
Mesos' JSON shape plus a ``tokens`` list::

    {"credentials": [{"principal": "fw", "secret": "s3cret"}],
     "tokens": [{"principal": "ops", "token": "t0k3n", "kind": "operator", "expires_at": 1.9e9}]}

Secrets are compared with ``hmac.compare_digest`` (a Basic secret against each of its principal's,
an unknown principal against a dummy; a token is found by its SHA-256, then compared), so the
time taken does not tell how much of a secret was right, and a check costs the same with 10 or
10,000 credentials.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
from collections.abc import Iterable, Mapping
from typing import Any

import attrs

__pure__ = True

FRAMEWORK = "framework"
AGENT = "agent"
OPERATOR = "operator"
KINDS = (FRAMEWORK, AGENT, OPERATOR)
# RFC 7235 allows several challenges in one header; Mesos sends ``Basic realm="mesos"``
WWW_AUTHENTICATE = 'Basic realm="agora", Bearer realm="agora"'
_DUMMY = b"\x00" * 32


class CredentialError(ValueError):
    """A credentials file or entry that cannot be used."""


@attrs.frozen
class Credential:
    principal: str
    secret: str = attrs.field(repr=False)
    kind: str | None = None  # None: good for any kind of peer
    expires_at: float | None = None
    bearer: bool = False  # an Agora token (Authorization: Bearer) rather than a Mesos secret

    def good_for(self, kind: str | None, now: float) -> bool:
        if self.expires_at is not None and now >= self.expires_at:
            return False
        return kind is None or self.kind is None or self.kind == kind


@attrs.frozen
class Authenticated:
    principal: str
    kind: str | None = None


@attrs.frozen
class AuthFailed:
    reason: str


AuthResult = Authenticated | AuthFailed


def basic_header(principal: str, secret: str) -> str:
    raw = f"{principal}:{secret}".encode()
    return "Basic " + base64.b64encode(raw).decode("ascii")


def bearer_header(token: str) -> str:
    return f"Bearer {token}"


def client_header(principal: str | None = None, secret: str | None = None, token: str | None = None) -> str | None:
    """The ``Authorization`` value a client sends: a token wins, else principal+secret, else none."""
    if token:
        return bearer_header(token)
    if principal and secret is not None:
        return basic_header(principal, secret)
    return None


def _digest(secret: bytes) -> bytes:
    return hashlib.sha256(secret).digest()


def _entry(raw: Any, bearer: bool) -> Credential:
    if not isinstance(raw, Mapping):
        raise CredentialError("each credential must be a JSON object")
    principal = raw.get("principal")
    secret = raw.get("token" if bearer else "secret")
    if not isinstance(principal, str) or not principal:
        raise CredentialError("a credential needs a non-empty 'principal'")
    if not isinstance(secret, str) or not secret:
        raise CredentialError(f"credential {principal!r} needs a non-empty {'token' if bearer else 'secret'!r}")
    kind = raw.get("kind")
    if kind is not None and kind not in KINDS:
        raise CredentialError(f"credential {principal!r}: kind must be one of {', '.join(KINDS)}")
    expires = raw.get("expires_at")
    if expires is not None and (isinstance(expires, bool) or not isinstance(expires, int | float)):
        raise CredentialError(f"credential {principal!r}: expires_at must be a number (Unix seconds)")
    return Credential(principal, secret, kind, None if expires is None else float(expires), bearer)


@attrs.frozen
class Credentials:
    """The principals a master (or an agent's HTTP endpoints) accepts."""

    entries: tuple[Credential, ...] = ()
    # lookups that keep the comparison constant-time: Basic by principal (not a secret), then
    # compare_digest on that principal's secrets; Bearer by the SHA-256 of the token (a lookup
    # that tells nothing about the token's bytes), then compare_digest on the match
    _basic_by_principal: dict[str, tuple[Credential, ...]] = attrs.field(init=False, repr=False, eq=False)
    _bearer_by_digest: dict[bytes, Credential] = attrs.field(init=False, repr=False, eq=False)

    def __attrs_post_init__(self) -> None:
        basic: dict[str, tuple[Credential, ...]] = {}
        bearer: dict[bytes, Credential] = {}
        for c in self.entries:
            if c.bearer:
                bearer.setdefault(_digest(c.secret.encode()), c)
            else:
                basic[c.principal] = (*basic.get(c.principal, ()), c)
        object.__setattr__(self, "_basic_by_principal", basic)
        object.__setattr__(self, "_bearer_by_digest", bearer)

    @classmethod
    def parse(cls, text: str) -> Credentials:
        """Mesos' JSON credentials (plus ``tokens``), or its text form: one ``principal secret``
        per line."""
        stripped = text.strip()
        if not stripped.startswith("{"):
            out = []
            for line in stripped.splitlines():
                parts = line.split()
                if not parts or parts[0].startswith("#"):
                    continue
                if len(parts) != 2:
                    raise CredentialError("text credentials are one 'principal secret' per line")
                out.append(Credential(parts[0], parts[1]))
            return cls(tuple(out))
        try:
            data = json.loads(stripped)
        except ValueError as e:
            raise CredentialError(f"credentials are not valid JSON: {e}") from e
        if not isinstance(data, dict):
            raise CredentialError("credentials must be a JSON object")
        unknown = set(data) - {"credentials", "tokens"}
        if unknown:
            raise CredentialError(f"unknown keys in credentials: {', '.join(sorted(unknown))}")
        entries: list[Credential] = []
        for key, bearer in (("credentials", False), ("tokens", True)):
            items = data.get(key, [])
            if not isinstance(items, list):
                raise CredentialError(f"'{key}' must be a list")
            entries.extend(_entry(item, bearer) for item in items)
        tokens = [c.secret for c in entries if c.bearer]
        if len(set(tokens)) != len(tokens):
            raise CredentialError("the same token is given twice")
        return cls(tuple(entries))

    def authenticate(self, header: str | None, kind: str | None, now: float) -> AuthResult:
        """Check one ``Authorization`` header for a peer of ``kind`` at ``now``."""
        if not header:
            return AuthFailed("no credentials")
        scheme, _, value = header.strip().partition(" ")
        value = value.strip()
        scheme = scheme.lower()
        if scheme == "basic":
            return self._basic(value, kind, now)
        if scheme == "bearer":
            return self._bearer(value, kind, now)
        return AuthFailed(f"unsupported authentication scheme {scheme!r}")

    def _basic(self, value: str, kind: str | None, now: float) -> AuthResult:
        try:
            raw = base64.b64decode(value.encode("ascii"), validate=True).decode("utf-8")
        except (binascii.Error, UnicodeError, ValueError):
            return AuthFailed("malformed Basic credentials")
        principal, sep, secret = raw.partition(":")
        if not sep:
            return AuthFailed("malformed Basic credentials")
        given = secret.encode()
        match: Credential | None = None
        candidates = self._basic_by_principal.get(principal, ())
        if not candidates:
            hmac.compare_digest(_DUMMY, given)  # an unknown principal costs a comparison too
        for c in candidates:  # every candidate is compared: no early exit on a match
            if hmac.compare_digest(c.secret.encode(), given):
                match = c
        if match is None:
            return AuthFailed("invalid credentials")
        return self._usable(match, kind, now)

    def _bearer(self, value: str, kind: str | None, now: float) -> AuthResult:
        given = value.encode()
        found = self._bearer_by_digest.get(_digest(given))
        if found is None or not hmac.compare_digest(found.secret.encode(), given):
            return AuthFailed("invalid token")
        return self._usable(found, kind, now)

    @staticmethod
    def _usable(c: Credential, kind: str | None, now: float) -> AuthResult:
        if c.expires_at is not None and now >= c.expires_at:
            return AuthFailed("expired credentials")
        if not c.good_for(kind, now):
            return AuthFailed(f"credentials of kind {c.kind!r} cannot be used by a {kind}")
        return Authenticated(c.principal, c.kind)

    def principals(self) -> Iterable[str]:
        return (c.principal for c in self.entries)


def parse_client_credential(text: str) -> Credential:
    """An agent's or a client's own credential (Mesos ``--credential``): JSON
    ``{"principal", "secret"}`` (or ``{"principal", "token"}``), or one ``principal secret`` line."""
    stripped = text.strip()
    if stripped.startswith("{"):
        try:
            data = json.loads(stripped)
        except ValueError as e:
            raise CredentialError(f"credential is not valid JSON: {e}") from e
        if not isinstance(data, dict):
            raise CredentialError("credential must be a JSON object")
        if "credentials" in data or "tokens" in data:
            creds = Credentials.parse(stripped).entries
            if len(creds) != 1:
                raise CredentialError("a credential file for one peer holds exactly one credential")
            return creds[0]
        return _entry(data, "token" in data and "secret" not in data)
    parts = stripped.split()
    if len(parts) != 2:
        raise CredentialError("a text credential is one 'principal secret' line")
    return Credential(parts[0], parts[1])


def credential_header(c: Credential) -> str:
    """The ``Authorization`` value that presents ``c``."""
    return bearer_header(c.secret) if c.bearer else basic_header(c.principal, c.secret)


# --- an agent's certificate as its credential (mTLS with --authenticate-agents) --------------------


def certificate_names(cert: Mapping[str, Any] | None) -> tuple[str, ...]:
    """The names a verified client certificate (as ``ssl`` decodes it) vouches for: its subject
    CN first, then its subjectAltName DNS names, URIs and IP addresses, in order, without repeats."""
    out: list[str] = []
    for rdn in (cert or {}).get("subject", ()):
        for key, value in rdn:
            if key == "commonName" and str(value) not in out:
                out.append(str(value))
    for kind, value in (cert or {}).get("subjectAltName", ()):
        if kind in ("DNS", "URI", "IP Address") and str(value) not in out:
            out.append(str(value))
    return tuple(out)


def certificate_identity(header_result: AuthResult | None, names: tuple[str, ...]) -> AuthResult:
    """The principal of an agent that presented a verified client certificate naming ``names``
    (``header_result``: its ``Authorization`` header checked, None when it sent none).

    Without a header the certificate is the credential: the principal is its first name (the
    subject CN, else the first subjectAltName). With a header, both must agree: the header must
    authenticate and its principal must be one of the certificate's names, so a shared secret
    cannot speak for another agent's certificate, nor one certificate for another principal."""
    if not names:
        return AuthFailed("the client certificate names no principal (no subject CN or subjectAltName)")
    if header_result is None:
        return Authenticated(names[0], AGENT)
    if isinstance(header_result, AuthFailed):
        return header_result
    if header_result.principal not in names:
        return AuthFailed(
            f"principal {header_result.principal!r} is not named by the client certificate ({', '.join(names)})"
        )
    return header_result
