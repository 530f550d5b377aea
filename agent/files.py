"""Sandbox file access over HTTP, confined to the sandbox root (Mesos ``/files/*``).

Routes (``add_routes(app, sandbox_root)``):

- ``GET /files/browse?path=P``: a JSON array of Mesos ``FileInfo`` objects
  (``path``, ``nlink``, ``size``, ``mtime``, ``mode`` as ``-rw-r--r--``, ``uid``, ``gid`` as names)
  for the entries of directory P (sorted by name; symlinks are listed, not followed), or for P
  itself when it is a file.
- ``GET /files/read?path=P&offset=O&length=L``: ``{"data": "...", "offset": O}`` — up to L bytes
  (at most ``max_read``) from byte O of the regular file P. ``offset=-1`` answers
  ``{"data": "", "offset": <file size>}`` (how log tailers find the end); an offset at or past the
  end answers empty data at the file size. ``offset`` defaults to 0 and ``length`` to ``max_read``.
  Data is decoded as UTF-8 (undecodable bytes replaced). For a task's rotated ``stdout``/``stderr``
  (a ``.stdout.logrotate`` beside it, ``agent/logrotate.py``) offsets count from the stream's first
  byte and the data may come from ``stdout.1`` ... too: a follower keeps its place across
  rotations, and one that fell behind the kept window gets the oldest kept byte (the answer's
  ``offset`` says where its data starts, and is the size to follow from for ``offset=-1``).
- ``GET /files/download?path=P``: the regular file P as ``application/octet-stream`` attachment.
- ``GET /files/tails?path=F&task=T1&task=T2...&length=L`` (an Agora addition): the last ``L``
  bytes (at most ``max_read``) of ``stdout`` and ``stderr`` of each named task's sandbox
  ``F/T`` in one answer, ``{"T1": {"stdout": {"offset": O, "data": "..."}, "stderr": ...}, ...}``,
  read as ``/files/read`` reads them (rotation-aware offsets, the same confinement); a sandbox
  that is missing or refused is left out, and so is an empty or missing stream. At most
  ``MAX_TAILS`` tasks per request. It is how a framework keeps the ends of many finished tasks'
  output with one request instead of a listing and reads per task (the batch service does).

``P`` is either relative to ``sandbox_root`` or an absolute path inside it (what ``/state``'s
``directory`` fields give). Confinement: a ``..`` component is refused
outright; the path is resolved with every symlink followed and must stay inside the sandbox it
*names* -- its first two components, ``<framework>/<task or executor>`` (the framework directory
for a one-component path, the root for none) -- so a symlink a task makes in its own sandbox to
another task's serves nothing, whoever asks and through whichever proxy (the master's web UI, the
batch and elastic services' log endpoints, the CLI); the final component is opened with
``O_NOFOLLOW`` (and ``O_NONBLOCK``, so a FIFO a task made cannot hang the agent), and the opened
descriptor's real path (``/proc/self/fd``) is checked against that sandbox again, so a component
swapped for a symlink between check and open is caught.

Status codes: 403 for anything that escapes the sandbox, 404 for a missing path, 400 for bad or
missing parameters or the wrong kind of file (reading a directory, a FIFO, a device).
"""

from __future__ import annotations

import asyncio
import errno
import grp
import json
import os
import posixpath
import pwd
import stat
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from aiohttp import web

from agent import logrotate

__all__ = ["DEFAULT_MAX_READ", "MAX_TAILS", "SandboxFiles", "add_routes"]

DEFAULT_MAX_READ = 16 * 4096  # Mesos caps a read at 16 pages
MAX_TAILS = 256  # tasks per /files/tails request
_CHUNK = 64 * 1024


class _Refused(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def _forbidden(path: str) -> _Refused:
    return _Refused(403, f"path {path!r} is outside the sandbox")


class SandboxFiles:
    """Resolves and opens paths under one sandbox root; the request handlers."""

    def __init__(self, sandbox_root: Path, *, max_read: int = DEFAULT_MAX_READ) -> None:
        self.sandbox_root = Path(sandbox_root)
        self.max_read = max_read

    # --- confinement ----------------------------------------------------------------------------

    def _root(self) -> str:
        return os.path.realpath(self.sandbox_root)

    def _inside(self, real: str, root: str) -> bool:
        return real == root or real.startswith(root.rstrip("/") + "/")

    def named_sandbox(self, requested: str) -> str:
        """The real path of the sandbox ``requested`` names lexically (``<framework>/<task>``, the
        framework directory, or the root); ``_Refused`` if that itself lies outside the root."""
        root = self._root()
        lexical = posixpath.normpath(requested if requested.startswith("/") else posixpath.join(root, requested))
        for base in (root, posixpath.normpath(os.path.abspath(self.sandbox_root))):
            if lexical == base or lexical.startswith(base.rstrip("/") + "/"):
                rel = lexical[len(base):].strip("/")
                parts = rel.split("/")[:2] if rel else []
                named = os.path.realpath(os.path.join(root, *parts))
                if not self._inside(named, root):
                    raise _forbidden(requested)
                return named
        raise _forbidden(requested)

    def resolve(self, requested: str) -> str:
        """The real path of ``requested`` if it lies inside the sandbox it names (else ``_Refused``)."""
        return self._resolve(requested)[0]

    def _resolve(self, requested: str) -> tuple[str, str]:
        """``(real path, real path of the named sandbox)``."""
        if "\x00" in requested:
            raise _Refused(400, "path contains a NUL byte")
        if ".." in requested.split("/"):
            raise _forbidden(requested)
        root = self._root()
        within = self.named_sandbox(requested)
        candidate = requested if requested.startswith("/") else os.path.join(root, requested)
        real = os.path.realpath(candidate)
        if not self._inside(real, within):
            raise _forbidden(requested)
        if not os.path.lexists(real):
            raise _Refused(404, f"{requested!r} does not exist")
        return real, within

    def open(self, requested: str, *, directory: bool = False) -> tuple[int, os.stat_result]:
        """Open ``requested`` confined to the sandbox; returns (fd, fstat). The caller closes fd."""
        real, within = self._resolve(requested)
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
        if directory:
            flags |= os.O_DIRECTORY
        try:
            fd = os.open(real, flags)
        except OSError as e:
            if e.errno == errno.ELOOP:  # the final component became a symlink after resolution
                raise _forbidden(requested) from e
            if e.errno == errno.ENOENT:
                raise _Refused(404, f"{requested!r} does not exist") from e
            if e.errno == errno.ENOTDIR:
                raise _Refused(400, f"{requested!r} is not a directory") from e
            if e.errno in (errno.EACCES, errno.EPERM):
                raise _Refused(403, f"{requested!r}: permission denied") from e
            raise _Refused(400, f"{requested!r}: {e.strerror}") from e
        try:
            st = os.fstat(fd)
            if not self._opened_inside(fd, st, real, within):
                raise _forbidden(requested)
        except BaseException:
            os.close(fd)
            raise
        return fd, st

    def _opened_inside(self, fd: int, st: os.stat_result, real: str, root: str) -> bool:
        try:
            opened = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            # No /proc: the descriptor must be the very file at the checked real path.
            try:
                now = os.stat(real, follow_symlinks=False)
            except OSError:
                return False
            return (now.st_dev, now.st_ino) == (st.st_dev, st.st_ino) and self._inside(real, root)
        return self._inside(opened, root)

    # --- handlers -------------------------------------------------------------------------------

    async def browse(self, request: web.Request) -> web.Response:
        requested = _path_param(request)
        return await asyncio.to_thread(self._browse, requested)

    def _browse(self, requested: str) -> web.Response:
        real = self.resolve(requested)
        if not os.path.isdir(real):
            fd, st = self.open(requested)
            os.close(fd)
            return _json([_file_info(posixpath.normpath(requested), st)])
        fd, _ = self.open(requested, directory=True)
        try:
            entries = []
            with os.scandir(fd) as it:
                for entry in it:
                    try:
                        st = entry.stat(follow_symlinks=False)
                    except OSError:
                        continue  # vanished meanwhile
                    entries.append((entry.name, st))
        finally:
            os.close(fd)
        base = posixpath.normpath(requested)
        out = [_file_info(posixpath.normpath(posixpath.join(base, n)), st) for n, st in sorted(entries)]
        return _json(out)

    async def read(self, request: web.Request) -> web.Response:
        requested = _path_param(request)
        offset = _int_param(request, "offset", default=0, minimum=-1)
        length = _int_param(request, "length", default=-1, minimum=-1)
        if length < 0 or length > self.max_read:
            length = self.max_read
        return await asyncio.to_thread(self._read, requested, offset, length)

    def _read(self, requested: str, offset: int, length: int) -> web.Response:
        start, data = self._read_raw(requested, offset, length)
        return _json({"data": data.decode("utf-8", errors="replace"), "offset": start})

    def _read_raw(self, requested: str, offset: int, length: int) -> tuple[int, bytes]:
        """``(where the data starts, data)`` as ``/files/read`` answers (``_Refused`` as it does)."""
        for attempt in range(_ROTATION_RETRIES):
            fd, st = self.open(requested)
            try:
                _require_regular(requested, st)
                got = self._stream_read(requested, fd, st, offset, length, last=attempt == _ROTATION_RETRIES - 1)
                if got is None:  # a plain file
                    size = st.st_size
                    if offset == -1 or offset >= size:
                        return size, b""
                    return offset, os.pread(fd, length, offset)
            finally:
                os.close(fd)
            if isinstance(got, tuple):
                return got
            time.sleep(0.001)  # a rotation is under way (microseconds): look again
        raise AssertionError("unreachable: the last attempt reads the file as it is")  # pragma: no cover

    async def tails(self, request: web.Request) -> web.Response:
        framework = _path_param(request)
        tasks = request.query.getall("task", [])
        if not tasks:
            raise _Refused(400, "missing 'task' parameter")
        if len(tasks) > MAX_TAILS:
            raise _Refused(400, f"at most {MAX_TAILS} 'task' parameters")
        if "/" in framework.strip("/") or any("/" in t or t in ("", ".", "..") for t in tasks):
            raise _Refused(400, "'path' names a framework's directory and each 'task' one of its sandboxes")
        length = _int_param(request, "length", default=-1, minimum=-1)
        if length < 0 or length > self.max_read:
            length = self.max_read
        return _json(await asyncio.to_thread(self._tails, framework.strip("/"), tasks, length))

    def _tails(self, framework: str, tasks: list[str], length: int) -> dict[str, dict[str, dict[str, Any]]]:
        out: dict[str, dict[str, dict[str, Any]]] = {}
        for tid in dict.fromkeys(tasks):
            streams: dict[str, dict[str, Any]] = {}
            for stream in ("stdout", "stderr"):
                path = f"{framework}/{tid}/{stream}"
                try:
                    size, _ = self._read_raw(path, -1, 0)
                    if size == 0:
                        continue
                    at = max(0, size - length)
                    start, data = self._read_raw(path, at, size - at)
                except _Refused:
                    continue  # no such sandbox or stream (or not one to serve): nothing kept
                if data:
                    streams[stream] = {"offset": start, "data": data.decode("utf-8", errors="replace")}
            if streams:
                out[tid] = streams
        return out

    def _stream_read(
        self, requested: str, fd: int, st: os.stat_result, offset: int, length: int, last: bool
    ) -> tuple[int, bytes] | bool | None:
        """A rotated log (``agent/logrotate.py``): ``offset`` counts from the stream's first byte,
        and the data may come from ``stdout.1`` ... as well. None: not a rotated log (no state file
        beside it; or, on the ``last`` attempt, one that does not describe it); False: a rotation
        was under way while the files were opened (the state names another file, or one file has
        two of the names), read again."""
        real = self.resolve(requested)
        directory, name = os.path.split(real)
        parsed = logrotate.parse_state(_read_small(os.path.join(directory, logrotate.state_name(name))) or b"")
        if parsed is None:
            return None
        base, ino = parsed
        if ino != st.st_ino:
            return None if last else False
        older: list[int] = []  # the rotated files' descriptors, stream.1 first
        try:
            inodes = {st.st_ino}
            for i in range(1, 1000):
                try:
                    rfd = os.open(os.path.join(directory, logrotate.rotated_name(name, i)),
                                  os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
                except OSError:
                    break
                older.append(rfd)
                rst = os.fstat(rfd)
                if not stat.S_ISREG(rst.st_mode):
                    older.pop()
                    os.close(rfd)
                    break
                if rst.st_ino in inodes:  # the names moved while we opened them
                    return None if last else False
                inodes.add(rst.st_ino)
            segments = logrotate.layout(base, st.st_size, [os.fstat(x).st_size for x in older])
            start, reads = logrotate.locate(segments, offset, length)
            chunks = [os.pread(fd if i == 0 else older[i - 1], n, at) for i, at, n in reads]
        finally:
            for x in older:
                os.close(x)
        return start, b"".join(chunks)

    async def download(self, request: web.Request) -> web.StreamResponse:
        requested = _path_param(request)
        fd, st = await asyncio.to_thread(self.open, requested)
        try:
            _require_regular(requested, st)
            name = posixpath.basename(posixpath.normpath(requested)) or "download"
            resp = web.StreamResponse(
                headers={
                    "Content-Type": "application/octet-stream",
                    "Content-Disposition": f'attachment; filename="{_quote_filename(name)}"',
                }
            )
            resp.content_length = st.st_size
            await resp.prepare(request)
            offset = 0
            while offset < st.st_size:
                chunk = await asyncio.to_thread(os.pread, fd, min(_CHUNK, st.st_size - offset), offset)
                if not chunk:
                    break
                await resp.write(chunk)
                offset += len(chunk)
            await resp.write_eof()
            return resp
        finally:
            os.close(fd)


_ROTATION_RETRIES = 50


def _read_small(path: str) -> bytes | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        return os.read(fd, 4096)
    except OSError:
        return None
    finally:
        os.close(fd)


def _quote_filename(name: str) -> str:
    return "".join(c if c.isascii() and c.isprintable() and c not in '"\\' else "_" for c in name)


def _require_regular(requested: str, st: os.stat_result) -> None:
    if stat.S_ISDIR(st.st_mode):
        raise _Refused(400, f"{requested!r} is a directory")
    if not stat.S_ISREG(st.st_mode):
        raise _Refused(400, f"{requested!r} is not a regular file")


def _path_param(request: web.Request) -> str:
    path = request.query.get("path")
    if not path:
        raise _Refused(400, "expecting 'path' in the query")
    return path


def _int_param(request: web.Request, name: str, *, default: int, minimum: int) -> int:
    raw = request.query.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise _Refused(400, f"{name!r} must be an integer, got {raw!r}") from None
    if value < minimum:
        raise _Refused(400, f"{name!r} must be >= {minimum}, got {value}")
    return value


def _owner(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def _group(gid: int) -> str:
    try:
        return grp.getgrgid(gid).gr_name
    except KeyError:
        return str(gid)


def _file_info(path: str, st: os.stat_result) -> dict[str, Any]:
    return {
        "path": path,
        "nlink": st.st_nlink,
        "size": st.st_size,
        "mtime": int(st.st_mtime),
        "mode": stat.filemode(st.st_mode),
        "uid": _owner(st.st_uid),
        "gid": _group(st.st_gid),
    }


def _json(value: object) -> web.Response:
    return web.Response(
        body=json.dumps(value, ensure_ascii=True, separators=(",", ":")).encode("ascii"),
        content_type="application/json",
    )


def _guard(
    handler: Callable[[web.Request], Awaitable[web.StreamResponse]],
) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    async def guarded(request: web.Request) -> web.StreamResponse:
        try:
            return await handler(request)
        except _Refused as e:
            return web.Response(status=e.status, text=e.message + "\n")

    return guarded


def add_routes(app: web.Application, sandbox_root: Path, *, max_read: int = DEFAULT_MAX_READ) -> SandboxFiles:
    """Mount ``/files/browse``, ``/files/read``, ``/files/download`` and ``/files/tails`` for
    ``sandbox_root``."""
    files = SandboxFiles(sandbox_root, max_read=max_read)
    app.router.add_get("/files/browse", _guard(files.browse))
    app.router.add_get("/files/read", _guard(files.read))
    app.router.add_get("/files/download", _guard(files.download))
    app.router.add_get("/files/tails", _guard(files.tails))
    return files
