"""How the driver reaches a master: the ``Transport`` interface and its HTTP implementation.

``subscribe(call)`` opens the event stream (``POST /api/v1/scheduler`` answered by a chunked
RecordIO body and a ``Mesos-Stream-Id`` header); ``send(call, stream_id)`` posts every other call
(answered ``202``). msgpack (``application/x-msgpack``) is the native encoding, JSON is there for
parity with Mesos clients. A 307 from a standby master is followed (``Location: //host:port/...``).
A ``zk://host:port/path`` master is looked up in ZooKeeper (``protocol.detector``) at every
subscription, so the driver's reconnect follows a new leader.
``https://`` masters are reached over TLS: ``ca`` (a PEM file) pins the master's CA (else the system
trust store), ``tls`` passes a ready ``ssl.SSLContext`` instead (e.g. with a client certificate).
``token`` adds ``Authorization: Bearer <token>``, or ``principal`` + ``secret`` HTTP Basic (the
framework's principal -- set ``FrameworkInfo.principal`` to it -- when the master has
authentication on). The in-memory transport used by the fake master lives in ``fake.py``.

Errors: ``MasterUnavailable`` (connection refused/reset, 503, timeouts, a broken stream — retry
with backoff), ``CallRejected`` (4xx: the call itself is wrong — do not retry as is),
``NotConnected`` (a call made while no subscription is live).
"""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Protocol
from urllib.parse import urlsplit

import aiohttp

from frameworks.client.errors import CallRejected, MasterUnavailable, NotConnected, TransportError
from frameworks.client.session import EventFrames
from protocol import codec
from protocol.authn import client_header
from protocol.detector import DetectorError, MasterResolver, is_zk_url
from protocol.mesos import Call, Event
from protocol.tls import client_context

SCHEDULER_PATH = "/api/v1/scheduler"
STREAM_ID_HEADER = "Mesos-Stream-Id"

__all__ = [
    "SCHEDULER_PATH",
    "STREAM_ID_HEADER",
    "CallRejected",
    "EventStream",
    "HttpEventStream",
    "HttpTransport",
    "MasterUnavailable",
    "NotConnected",
    "Transport",
    "TransportError",
    "base_url",
]


class EventStream(Protocol):
    stream_id: str

    def __aiter__(self) -> AsyncIterator[Event]: ...

    async def close(self) -> None: ...


class Transport(Protocol):
    media_type: str

    async def subscribe(self, call: Call) -> EventStream: ...

    async def send(self, call: Call, stream_id: str | None) -> None: ...

    async def close(self) -> None: ...


def base_url(master: str, scheme: str = "http") -> str:
    """``host:port``, ``http(s)://host:port[/...]`` or a ``//host:port/...`` Location → ``http://host:port``
    (``scheme`` where ``master`` names none: a scheme-relative redirect keeps the current one)."""
    m = master.strip()
    if m.startswith("//"):
        m = f"{scheme}:" + m
    elif "://" not in m:
        m = f"{scheme}://" + m
    parts = urlsplit(m)
    if not parts.netloc:
        raise ValueError(f"bad master address {master!r}")
    return f"{parts.scheme or 'http'}://{parts.netloc}"


class HttpEventStream:
    def __init__(self, resp: aiohttp.ClientResponse, media_type: str, max_record: int) -> None:
        self.stream_id = resp.headers.get(STREAM_ID_HEADER, "")
        self._resp = resp
        # decode what the master says it sent (a Mesos-only master answers JSON whatever we asked)
        answered = resp.headers.get("Content-Type", "").split(";")[0].strip().lower()
        media = answered if answered in (codec.MSGPACK, codec.JSON) else media_type
        self._frames = EventFrames(media, max_record)  # a bad frame raises BadFrame (MasterUnavailable)

    async def __aiter__(self) -> AsyncIterator[Event]:
        try:
            async for chunk in self._resp.content.iter_any():
                for event in self._frames.feed(chunk):
                    yield event
        except (TimeoutError, aiohttp.ClientError, ConnectionError) as exc:
            raise MasterUnavailable(f"event stream broke: {exc!r}") from exc

    async def close(self) -> None:
        self._resp.close()


class HttpTransport:
    """The scheduler API over HTTP/1.1 with aiohttp (one pooled session for calls and stream)."""

    def __init__(
        self,
        master: str,
        media_type: str = codec.MSGPACK,
        connect_timeout: float = 5.0,
        call_timeout: float = 30.0,
        max_record: int = 64 * 1024 * 1024,
        max_redirects: int = 3,
        token: str | None = None,
        ca: str | Path | None = None,
        tls: ssl.SSLContext | None = None,
        principal: str | None = None,
        secret: str | None = None,
    ) -> None:
        if media_type not in (codec.MSGPACK, codec.JSON):
            raise ValueError(f"unsupported media type {media_type!r}")
        # a CA or a TLS context means TLS: a bare host:port then becomes https:// (never plaintext)
        self._tls = tls if tls is not None else (client_context(ca) if ca is not None else None)
        self.base = base_url(master, "https" if self._tls is not None else "http")
        self.media_type = media_type
        self._connect_timeout = connect_timeout
        self._call_timeout = call_timeout
        self._max_record = max_record
        self._max_redirects = max_redirects
        # a zk:// master: the leader is looked up in ZooKeeper at every (re-)subscription
        self._resolver = MasterResolver(master) if is_zk_url(master) else None
        # token -> Bearer, else principal + secret -> Basic (what Mesos and pymesos send)
        self._authorization = client_header(principal, secret, token)
        self._session: aiohttp.ClientSession | None = None

    @property
    def scheme(self) -> str:
        return self.base.partition("://")[0]

    @property
    def authorization(self) -> str | None:
        """The ``Authorization`` value sent to the master (Bearer or Basic), or None: for other
        reads of the same master (``/state``)."""
        return self._authorization

    def _sess(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(
                    limit=16, force_close=False, ssl=self._tls if self._tls is not None else True
                ),
                auto_decompress=False,
            )
        return self._session

    def _headers(self, stream_id: str | None) -> dict[str, str]:
        h = {"Content-Type": self.media_type, "Accept": self.media_type}
        if stream_id:
            h[STREAM_ID_HEADER] = stream_id
        if self._authorization:
            h["Authorization"] = self._authorization
        return h

    async def subscribe(self, call: Call) -> HttpEventStream:
        if self._resolver is not None:  # follow the current leader (protocol/detector.py)
            try:
                leader = await self._resolver.resolve(within=self._connect_timeout)
                self.base = base_url(leader, "https" if self._tls is not None else "http")
            except (TimeoutError, DetectorError) as exc:
                raise MasterUnavailable(f"no leading master found at {self._resolver.master}: {exc!r}") from exc
        body = codec.encode(call, self.media_type)
        timeout = aiohttp.ClientTimeout(total=None, connect=self._connect_timeout, sock_read=None)
        for _ in range(self._max_redirects + 1):
            try:
                resp = await self._sess().post(
                    self.base + SCHEDULER_PATH,
                    data=body,
                    headers=self._headers(None),
                    timeout=timeout,
                    allow_redirects=False,
                )
            except (TimeoutError, aiohttp.ClientError, OSError) as exc:
                raise MasterUnavailable(f"cannot subscribe at {self.base}: {exc!r}") from exc
            if resp.status == 200:
                return HttpEventStream(resp, self.media_type, self._max_record)
            text = await _text(resp)
            if resp.status == 307 and resp.headers.get("Location"):
                self.base = base_url(resp.headers["Location"], self.scheme)
                continue
            if resp.status in (502, 503, 504):
                raise MasterUnavailable(f"master at {self.base} unavailable: HTTP {resp.status} {text}")
            raise CallRejected(resp.status, text)
        raise MasterUnavailable(f"too many redirects subscribing at {self.base}")

    async def send(self, call: Call, stream_id: str | None) -> None:
        body = codec.encode(call, self.media_type)
        timeout = aiohttp.ClientTimeout(total=self._call_timeout, connect=self._connect_timeout)
        for _ in range(self._max_redirects + 1):
            try:
                async with self._sess().post(
                    self.base + SCHEDULER_PATH,
                    data=body,
                    headers=self._headers(stream_id),
                    timeout=timeout,
                    allow_redirects=False,
                ) as resp:
                    if resp.status in (200, 202):
                        await resp.read()
                        return
                    text = await _text(resp)
                    if resp.status == 307 and resp.headers.get("Location"):
                        self.base = base_url(resp.headers["Location"], self.scheme)
                        continue
                    if resp.status in (502, 503, 504):
                        raise MasterUnavailable(f"master unavailable: HTTP {resp.status} {text}")
                    raise CallRejected(resp.status, text)
            except (TimeoutError, aiohttp.ClientError, OSError) as exc:
                raise MasterUnavailable(f"{call.type} call to {self.base} failed: {exc!r}") from exc
        raise MasterUnavailable(f"too many redirects calling {self.base}")

    async def close(self) -> None:
        if self._resolver is not None:
            await self._resolver.close()
        if self._session is not None:
            await self._session.close()
            self._session = None


async def _text(resp: aiohttp.ClientResponse) -> str:
    try:
        raw = await resp.read()
    except (TimeoutError, aiohttp.ClientError):
        raw = b""
    finally:
        resp.release()
    return raw[:500].decode("utf-8", "replace").strip()
