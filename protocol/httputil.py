"""Thin HTTP helpers shared by the master's and agent's endpoints: a size-capped body read and
``Accept`` negotiation between Mesos JSON and native msgpack, ``decode_body``: a call body
decoded by ``protocol.codec`` with Mesos' 400 wording, and ``RecordChunks``: a streaming body of
RecordIO records, one record per HTTP chunk as Mesos writes its event streams.

``read_body`` refuses by ``Content-Length`` before reading anything and otherwise counts bytes
while streaming, so an oversized body is never buffered (aiohttp's own ``client_max_size`` only
applies to ``request.read()``/``json()``, which we do not use).
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import TypeVar

from aiohttp import web
from aiohttp.abc import AbstractStreamWriter

from protocol import codec
from protocol.codec import JSON, MSGPACK

T = TypeVar("T")

SUPPORTED: tuple[str, ...] = (JSON, MSGPACK)
CHUNK = 64 * 1024


def decode_body(cls: type[T], body: bytes, ctype: str, what: str) -> tuple[T | None, str]:
    """``(message, "")`` or ``(None, the 400's text)`` in Mesos' wording: data that is not JSON
    (or msgpack) text -- bad syntax, not UTF-8, a lone surrogate -- "Failed to parse body into
    JSON", the rest (a required field missing, a bad id, ...) "Failed to convert JSON into
    <what> protobuf". Decoding is ``protocol.codec``'s, the same for every endpoint."""
    try:
        return codec.decode(cls, body, ctype), ""
    except codec.ParseError as e:
        kind = "JSON" if ctype == codec.JSON else "msgpack"
        return None, f"Failed to parse body into {kind}: {e}"
    except codec.DecodeError as e:
        if ctype == codec.JSON:
            return None, f"Failed to convert JSON into {what} protobuf: {e}"
        return None, f"Failed to decode msgpack into {what}: {e}"


def _too_large(limit: int, actual: int) -> web.HTTPRequestEntityTooLarge:
    exc = web.HTTPRequestEntityTooLarge(max_size=limit, actual_size=actual)
    exc.force_close()  # the rest of the body is never read: do not reuse the connection
    return exc


async def read_body(request: web.Request, limit: int) -> bytes:
    """The request body, at most ``limit`` bytes; raises ``HTTPRequestEntityTooLarge`` (413)."""
    declared = request.content_length
    if declared is not None and declared > limit:
        raise _too_large(limit, declared)
    buf = bytearray()
    async for chunk in request.content.iter_chunked(CHUNK):
        buf += chunk
        if len(buf) > limit:
            raise _too_large(limit, len(buf))
    return bytes(buf)


def media_type(content_type: str | None) -> str | None:
    """``"application/json; charset=utf-8"`` → ``"application/json"``; ``None``/empty → ``None``."""
    if content_type is None:
        return None
    mt = content_type.split(";", 1)[0].strip().lower()
    return mt or None


def _parse_accept(accept: str) -> list[tuple[str, float, int]]:
    ranges: list[tuple[str, float, int]] = []
    for index, part in enumerate(accept.split(",")):
        fields = part.split(";")
        mt = fields[0].strip().lower()
        if mt == "*":
            mt = "*/*"
        if "/" not in mt:
            continue
        q = 1.0
        for param in fields[1:]:
            key, _, value = param.partition("=")
            if key.strip().lower() == "q":
                try:
                    q = float(value.strip())
                except ValueError:
                    q = 0.0
                if not 0.0 <= q <= 1.0:  # also NaN
                    q = 0.0
        ranges.append((mt, q, index))
    return ranges


def negotiate(accept: str | None, supported: tuple[str, ...] = SUPPORTED) -> str | None:
    """The media type to answer with, or ``None`` when nothing supported is acceptable (→ 406).

    No or empty ``Accept`` → the first supported type (JSON). The most specific matching range
    gives a type its q; the highest q wins; on a tie, a type named explicitly (earliest first)
    beats one matched by a wildcard, then ``supported`` order decides.
    """
    if accept is None or not accept.strip():
        return supported[0] if supported else None
    ranges = _parse_accept(accept)
    best: str | None = None
    best_key: tuple[float, int, int, int] | None = None
    for pos, candidate in enumerate(supported):
        ctype = candidate.split("/", 1)[0]
        match: tuple[int, float, int] | None = None  # (specificity, q, index)
        for mt, q, index in ranges:
            if mt == candidate:
                spec = 2
            elif mt == f"{ctype}/*":
                spec = 1
            elif mt == "*/*":
                spec = 0
            else:
                continue
            if match is None or spec > match[0]:
                match = (spec, q, index)
        if match is None or match[1] <= 0.0:
            continue
        explicit = match[0] == 2
        key = (match[1], 1 if explicit else 0, -match[2] if explicit else 0, -pos)
        if best_key is None or key > best_key:
            best, best_key = candidate, key
    return best


def chunk_frames(records: Sequence[bytes]) -> bytes:
    """Each record as its own HTTP/1.1 chunk (``<hex len>\\r\\n<record>\\r\\n``), back to back."""
    return b"".join(b"%x\r\n%s\r\n" % (len(r), r) for r in records if r)


class RecordChunks:
    """The body of a chunked streaming response written as Mesos' libprocess writes its event
    streams: exactly one RecordIO record per HTTP chunk (a client that reads one record per chunk
    never falls behind), while a burst of records still leaves in one transport write.

    ``open`` prepares the response (chunked); ``write`` sends records; ``close`` ends the body
    (the ``0`` chunk). A closed or closing connection raises ``ConnectionResetError``."""

    def __init__(self, resp: web.StreamResponse, writer: AbstractStreamWriter) -> None:
        self.resp = resp
        self.writer = writer
        self.chunks = 0

    @classmethod
    async def open(cls, resp: web.StreamResponse, request: web.BaseRequest) -> RecordChunks:
        resp.enable_chunked_encoding()
        writer = await resp.prepare(request)
        if writer is None:
            raise ConnectionResetError("response already finished")
        return cls(resp, writer)

    async def write(self, records: Sequence[bytes]) -> None:
        data = chunk_frames(records)
        if not data:
            return
        self.writer.send_headers()  # (aiohttp holds the head back until the first body write)
        transport = self.writer.transport
        if transport is None or transport.is_closing():
            raise ConnectionResetError("connection closed")
        transport.write(data)
        self.chunks += sum(1 for r in records if r)
        await self.writer.drain()  # waits only while the transport is over its high-water mark

    async def close(self) -> None:
        with contextlib.suppress(ConnectionError, RuntimeError):
            await self.resp.write_eof()
