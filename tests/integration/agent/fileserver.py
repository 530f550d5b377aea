"""A local HTTP server for fetcher tests (aiohttp on 127.0.0.1:0) and archive builders."""

from __future__ import annotations

import asyncio
import contextlib
import io
import stat
import tarfile
import zipfile
from collections import Counter

from aiohttp import web


def tgz(members: dict[str, tuple[bytes, int]], *, evil: str | None = None) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, (data, mode) in members.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), mode
            tar.addfile(info, io.BytesIO(data))
        if evil is not None:
            info = tarfile.TarInfo(evil)
            info.size = 3
            tar.addfile(info, io.BytesIO(b"bad"))
    return buf.getvalue()


def zipped(members: dict[str, tuple[bytes, int]]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, (data, mode) in members.items():
            info = zipfile.ZipInfo(name)
            info.external_attr = (stat.S_IFREG | mode) << 16
            zf.writestr(info, data)
    return buf.getvalue()


class FileServer:
    """Serves ``files`` at ``/f/<name>``, counts requests; ``/slow/<n>`` streams n MiB;
    ``/stall`` sends a little and then nothing until the test ends."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}
        self.hits: Counter[str] = Counter()
        self.release = asyncio.Event()
        self.runner: web.AppRunner | None = None
        self.port = 0

    async def start(self) -> FileServer:
        app = web.Application()
        app.router.add_get("/f/{name}", self._file)
        app.router.add_get("/slow/{mib}", self._slow)
        app.router.add_get("/stall", self._stall)
        app.router.add_get("/moved", self._moved)
        self.runner = web.AppRunner(app, handle_signals=False)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return self

    async def stop(self) -> None:
        self.release.set()
        if self.runner is not None:
            await self.runner.cleanup()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    async def _file(self, request: web.Request) -> web.StreamResponse:
        name = request.match_info["name"]
        self.hits[name] += 1
        if name not in self.files:
            raise web.HTTPNotFound()
        return web.Response(body=self.files[name])

    async def _moved(self, request: web.Request) -> web.StreamResponse:
        raise web.HTTPFound("/f/hello.txt")

    async def _slow(self, request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse()
        await resp.prepare(request)
        with contextlib.suppress(ConnectionError):
            for _ in range(int(request.match_info["mib"]) * 16):
                await resp.write(b"\0" * 65536)
        return resp

    async def _stall(self, request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Length": "1000"})
        await resp.prepare(request)
        await resp.write(b"x" * 10)
        await self.release.wait()
        return resp
