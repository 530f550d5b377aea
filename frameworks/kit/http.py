"""What the framework services' HTTP APIs share: bodies in JSON or msgpack (``Content-Type`` /
``Accept: application/x-msgpack``), errors as ``{"error": message}``, HTML pages."""

from __future__ import annotations

from typing import Any

import msgpack
from aiohttp import web

from protocol.codec import JSON, MSGPACK, loads_json


class BodyError(ValueError):
    """A request body that is not valid JSON (or msgpack)."""


async def read_body(request: web.Request) -> Any:
    """The request's body, decoded by its content type (an empty body is ``{}``)."""
    raw = await request.read()
    ctype = request.content_type
    try:
        if ctype == MSGPACK:
            return msgpack.unpackb(raw, raw=False, strict_map_key=True)
        return loads_json(raw or b"{}")  # strict: every string it gives encodes
    except (ValueError, msgpack.UnpackException) as exc:
        raise BodyError(f"body is not valid {ctype or JSON}: {exc}") from exc


def wants_msgpack(request: web.Request) -> bool:
    return MSGPACK in request.headers.get("Accept", "")


def reply(request: web.Request, body: Any, status: int = 200) -> web.Response:
    """``body`` in the encoding the request accepts (msgpack if it asks, else JSON)."""
    if wants_msgpack(request):
        return web.Response(body=msgpack.packb(body, use_bin_type=True), status=status, content_type=MSGPACK)
    return web.json_response(body, status=status)


def error(request: web.Request, status: int, message: str) -> web.Response:
    return reply(request, {"error": message}, status=status)


def html(markup: str, status: int = 200) -> web.Response:
    return web.Response(text=markup, status=status, content_type="text/html")
