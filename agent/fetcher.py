"""The fetcher (shell): puts a task's ``CommandInfo.uris`` into its sandbox before it starts.

Decisions (what a URI means, the cache's book, the messages) are in ``agent/fetch_plan.py``;
this module does the I/O, each task's fetch in a worker thread of its own pool, never on the
agent's event loop: downloads (``urllib``: http, https, ftp; a stall of ``stall_timeout``
seconds without data fails it), local copies, extraction (``tarfile`` with the ``data`` filter,
so nothing lands outside the sandbox; ``zipfile``; ``gzip``), ``chmod`` for executables, the
cache directory, and ``chown`` of the fetched files to the task's user. Its log lines go to the
sandbox's ``stderr``, as Mesos' fetcher's do. A kill while fetching cancels it (checked
between chunks).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import gzip
import hashlib
import logging
import os
import shutil
import socket
import stat
import tarfile
import threading
import time
import urllib.error
import urllib.request
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Protocol

import attrs

from agent.fetch_plan import (
    CacheBook,
    FetchFailure,
    FetchItem,
    ItemResult,
    gunzip_name,
    human_bytes,
    plan_item,
    progress,
    summary,
)
from protocol.mesos import URI
from protocol.version import AGORA_VERSION

log = logging.getLogger(__name__)

CHUNK = 256 * 1024
EXECUTABLE_MODE = 0o755


class Cancelled(Exception):
    pass


class _Readable(Protocol):
    def read(self, n: int = ..., /) -> bytes: ...


@attrs.frozen
class Fetched:
    message: str  # for the TASK_RUNNING message: what was fetched, how much, how long
    results: tuple[ItemResult, ...]
    seconds: float


@attrs.frozen
class FetchFailed:
    message: str  # the cause, Mesos' fetcher words


@attrs.define
class _Job:
    task_id: str
    uris: tuple[URI, ...]
    sandbox: Path
    owner: tuple[int, int] | None  # (uid, gid) the task runs as, when not the agent's
    on_progress: Callable[[str], None]
    cancel: threading.Event = attrs.field(factory=threading.Event)
    started: float = attrs.field(factory=time.monotonic)
    received: int = 0
    done: int = 0
    last_report: float = attrs.field(factory=time.monotonic)
    log: IO[str] | None = None


def _readable_by(st: os.stat_result, uid: int, gids: Sequence[int]) -> bool:
    if uid == 0:
        return True
    if st.st_uid == uid:
        return bool(st.st_mode & stat.S_IRUSR)
    if st.st_gid in gids:
        return bool(st.st_mode & stat.S_IRGRP)
    return bool(st.st_mode & stat.S_IROTH)


def _searchable_by(st: os.stat_result, uid: int, gids: Sequence[int]) -> bool:
    if uid == 0:
        return True
    if st.st_uid == uid:
        return bool(st.st_mode & stat.S_IXUSR)
    if st.st_gid in gids:
        return bool(st.st_mode & stat.S_IXGRP)
    return bool(st.st_mode & stat.S_IXOTH)


def _user_groups(uid: int, gid: int) -> list[int]:
    import grp
    import pwd

    try:
        name = pwd.getpwuid(uid).pw_name
    except KeyError:
        return [gid]
    return [gid, *(g.gr_gid for g in grp.getgrall() if name in g.gr_mem)]


class Fetcher:
    """Fetches tasks' URIs. ``cache_dir`` is emptied at start (as Mesos' fetcher cache, it does
    not outlive the agent); ``cache_size`` bytes at most are kept there."""

    def __init__(
        self,
        cache_dir: Path,
        cache_size: int,
        *,
        stall_timeout: float = 60.0,
        frameworks_home: str | None = None,
        progress_interval: float = 10.0,
        workers: int = 4,
    ) -> None:
        self.cache_dir = Path(cache_dir)
        self.book = CacheBook(cache_size)
        self.stall_timeout = stall_timeout
        self.frameworks_home = frameworks_home
        self.progress_interval = progress_interval
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="agent-fetch")
        self._book_lock = threading.Lock()
        self._key_locks: dict[str, threading.Lock] = {}
        self._jobs: dict[str, _Job] = {}

    # --- lifecycle ------------------------------------------------------------------------------

    def init(self) -> None:
        """Blocking: an empty cache directory."""
        if self.cache_dir.exists():
            shutil.rmtree(self.cache_dir, ignore_errors=True)
        self.cache_dir.mkdir(parents=True, exist_ok=True)

    def close(self) -> None:
        for job in self._jobs.values():
            job.cancel.set()
        self._pool.shutdown(wait=False, cancel_futures=True)  # a stalled read ends on its own

    # --- the event loop's side ------------------------------------------------------------------

    async def fetch(
        self,
        key: str,
        task_id: str,
        uris: Sequence[URI],
        sandbox: Path,
        owner: tuple[int, int] | None,
        on_progress: Callable[[str], None],
    ) -> Fetched | FetchFailed | None:
        """Fetch ``uris`` into ``sandbox`` in a worker thread. None: cancelled (``cancel``)."""
        loop = asyncio.get_running_loop()

        def report(message: str) -> None:
            with contextlib.suppress(RuntimeError):  # the loop is closing
                loop.call_soon_threadsafe(on_progress, message)

        job = _Job(task_id, tuple(uris), sandbox, owner, report)
        self._jobs[key] = job
        try:
            return await asyncio.wrap_future(self._pool.submit(self._run, job))
        except asyncio.CancelledError:
            job.cancel.set()
            raise
        finally:
            if self._jobs.get(key) is job:
                del self._jobs[key]

    def cancel(self, key: str) -> None:
        job = self._jobs.get(key)
        if job is not None:
            job.cancel.set()

    def fetching(self, key: str) -> bool:
        return key in self._jobs

    # --- worker threads ---------------------------------------------------------------------------

    def _run(self, job: _Job) -> Fetched | FetchFailed | None:
        results: list[ItemResult] = []
        try:
            job.sandbox.mkdir(parents=True, exist_ok=True)
            with open(job.sandbox / "stderr", "a", encoding="utf-8", errors="replace") as job.log:
                try:
                    for uri in job.uris:
                        results.append(self._one(job, uri))
                        job.done += 1
                    if job.owner is not None:
                        self._chown_tree(job.sandbox, *job.owner)
                except FetchFailure as e:
                    self._log(job, str(e))
                    return FetchFailed(str(e))
                seconds = time.monotonic() - job.started
                message = summary(results, seconds)
                self._log(job, message[0].upper() + message[1:])
                return Fetched(message, tuple(results), seconds)
        except Cancelled:
            return None
        except OSError as e:  # the sandbox itself
            return FetchFailed(f"Failed to prepare the sandbox: {e}")

    def _log(self, job: _Job, line: str) -> None:
        if job.log is not None:
            stamp = time.strftime("%Y-%m-%d %H:%M:%S")
            job.log.write(f"{stamp} fetcher: {line}\n")
            job.log.flush()

    def _check(self, job: _Job) -> None:
        if job.cancel.is_set():
            raise Cancelled
        now = time.monotonic()
        if self.progress_interval > 0 and now - job.last_report >= self.progress_interval:
            job.last_report = now
            job.on_progress(progress(len(job.uris), job.done, job.received, now - job.started))

    def _one(self, job: _Job, uri: URI) -> ItemResult:
        item = plan_item(uri, self.frameworks_home)
        self._log(job, f"Fetching URI '{item.uri}'")
        dest = self._dest(job, item)
        if item.cache:
            size, cached = self._via_cache(job, item, dest)
        else:
            size, cached = self._download(job, item, dest), False
        self._log(job, f"{'Copied from the cache' if cached else 'Fetched'} '{item.uri}' to '{item.dest}' ({human_bytes(size)})")
        extracted = False
        if item.executable:
            os.chmod(dest, EXECUTABLE_MODE)
        elif item.extract is not None:
            self._extract(job, item, dest)
            extracted = True
        return ItemResult(item.uri, item.dest, size, cached, extracted)

    def _dest(self, job: _Job, item: FetchItem) -> Path:
        """The destination, its directories made; they must resolve inside the sandbox (an
        earlier URI's archive could have left a symlink there)."""
        dest = job.sandbox / item.dest
        dest.parent.mkdir(parents=True, exist_ok=True)
        root = os.path.realpath(job.sandbox)
        parent = os.path.realpath(dest.parent)
        if parent != root and not parent.startswith(root + os.sep):
            raise FetchFailure(item.uri, f"output path '{item.dest}' leads out of the sandbox")
        if dest.is_dir() and not dest.is_symlink():
            raise FetchFailure(item.uri, f"'{item.dest}' is a directory in the sandbox")
        return dest

    # --- sources ----------------------------------------------------------------------------------

    def _download(self, job: _Job, item: FetchItem, dest: Path) -> int:
        """Fetch ``item`` into ``dest`` (through a temporary file next to it). Returns its size."""
        tmp = dest.with_name(f".{dest.name}.fetching")
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
            with os.fdopen(fd, "wb") as out:
                if item.scheme == "file":
                    size = self._copy_local(job, item, out)
                else:
                    size = self._get(job, item, out)
            os.replace(tmp, dest)
            return size
        finally:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()

    def _pump(self, job: _Job, src: _Readable, out: IO[bytes]) -> int:
        size = 0
        while True:
            self._check(job)
            chunk = src.read(CHUNK)
            if not chunk:
                return size
            out.write(chunk)
            size += len(chunk)
            job.received += len(chunk)

    def _copy_local(self, job: _Job, item: FetchItem, out: IO[bytes]) -> int:
        path = item.source
        try:
            st = os.stat(path)
        except FileNotFoundError:
            raise FetchFailure(item.uri, f"Local resource '{path}' does not exist") from None
        except OSError as e:
            raise FetchFailure(item.uri, f"Failed to read local resource '{path}': {e.strerror}") from None
        if not stat.S_ISREG(st.st_mode):
            raise FetchFailure(item.uri, f"Local resource '{path}' is not a regular file")
        if job.owner is not None and not self._user_may_read(path, st, *job.owner):
            raise FetchFailure(item.uri, f"Local resource '{path}' is not readable by the task's user (uid {job.owner[0]})")
        try:
            with open(path, "rb") as src:
                return self._pump(job, src, out)
        except OSError as e:
            raise FetchFailure(item.uri, f"Failed to copy local resource '{path}': {e.strerror or e}") from None

    def _user_may_read(self, path: str, st: os.stat_result, uid: int, gid: int) -> bool:
        """The task's user (not the agent's) must be allowed to read a local resource: the file
        and every directory above it (the agent may run as root)."""
        gids = _user_groups(uid, gid)
        if not _readable_by(st, uid, gids):
            return False
        d = os.path.dirname(os.path.realpath(path))
        while True:
            if not _searchable_by(os.stat(d), uid, gids):
                return False
            if d == "/":
                return True
            d = os.path.dirname(d)

    def _get(self, job: _Job, item: FetchItem, out: IO[bytes]) -> int:
        req = urllib.request.Request(item.source, headers={"User-Agent": f"agora-fetcher/{AGORA_VERSION}"})
        try:
            with urllib.request.urlopen(req, timeout=self.stall_timeout) as resp:
                status = getattr(resp, "status", 200)
                if status is not None and not 200 <= status < 300:
                    raise FetchFailure(item.uri, f"Error downloading resource, received HTTP return code {status}")
                return self._pump(job, resp, out)
        except urllib.error.HTTPError as e:
            raise FetchFailure(item.uri, f"Error downloading resource, received HTTP return code {e.code}") from None
        except urllib.error.URLError as e:
            reason = e.reason
            if isinstance(reason, (socket.timeout, TimeoutError)):
                raise FetchFailure(item.uri, self._stalled()) from None
            raise FetchFailure(item.uri, f"Error downloading resource: {getattr(reason, 'strerror', None) or reason}") from None
        except TimeoutError:
            raise FetchFailure(item.uri, self._stalled()) from None
        except (OSError, ValueError) as e:
            if isinstance(e, FetchFailure):
                raise
            raise FetchFailure(item.uri, f"Error downloading resource: {e}") from None

    def _stalled(self) -> str:
        return f"Error downloading resource: no data for {self.stall_timeout:g} s (--fetcher-stall-timeout)"

    # --- the cache ----------------------------------------------------------------------------------

    def _cache_path(self, key: str) -> Path:
        return self.cache_dir / hashlib.sha256(key.encode()).hexdigest()

    def _via_cache(self, job: _Job, item: FetchItem, dest: Path) -> tuple[int, bool]:
        """Serve ``item`` from the cache, filling it first on a miss (one download for all the
        tasks that ask for the same URI meanwhile). Returns (size, served from the cache)."""
        key = item.uri
        with self._book_lock:
            lock = self._key_locks.setdefault(key, threading.Lock())
        with lock:
            with self._book_lock:
                hit = self.book.hit(key, time.monotonic())
            if not hit:
                cached = self._cache_path(key)
                tmp = self.cache_dir / f".{cached.name}.fetching"
                size = self._download(job, item, tmp)
                with self._book_lock:
                    adm = self.book.admit(key, size, time.monotonic())
                    for old in adm.evict:
                        with contextlib.suppress(FileNotFoundError):
                            self._cache_path(old).unlink()
                        if old != key:
                            self._key_locks.pop(old, None)
                if not adm.ok:
                    self._log(job, f"Not caching '{key}': {adm.why}")
                    os.replace(tmp, dest)
                    return size, False
                os.replace(tmp, cached)
                self._log(job, f"Cached '{key}' ({human_bytes(size)})")
        try:
            src_path = self._cache_path(key)
            try:
                size = self._copy_file(job, item, src_path, dest)
            except FileNotFoundError:  # removed behind the agent's back: fetch it directly
                with self._book_lock:
                    self.book.drop(key)
                return self._download(job, item, dest), False
            return size, hit
        finally:
            with self._book_lock:
                self.book.release(key)

    def _copy_file(self, job: _Job, item: FetchItem, src_path: Path, dest: Path) -> int:
        tmp = dest.with_name(f".{dest.name}.fetching")
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        try:
            with open(src_path, "rb") as src:
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
                with os.fdopen(fd, "wb") as out:
                    size = self._pump(job, src, out)
            os.replace(tmp, dest)
            return size
        finally:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()

    # --- extraction ----------------------------------------------------------------------------------

    def _extract(self, job: _Job, item: FetchItem, archive: Path) -> None:
        self._check(job)
        into = job.sandbox
        try:
            if item.extract == "tar":
                with tarfile.open(archive) as tar:
                    tar.extractall(into, filter="data")
                self._log(job, f"Extracted '{item.dest}' into the sandbox")
            elif item.extract == "zip":
                self._unzip(archive, into)
                self._log(job, f"Extracted '{item.dest}' into the sandbox")
            elif item.extract == "gz":
                out_name = gunzip_name(item.dest)
                target = job.sandbox / out_name
                with gzip.open(archive, "rb") as src:
                    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
                    with os.fdopen(fd, "wb") as out:
                        self._pump_plain(job, src, out)
                self._log(job, f"Decompressed '{item.dest}' to '{out_name}'")
        except Cancelled:
            raise
        except (tarfile.TarError, zipfile.BadZipFile, gzip.BadGzipFile, EOFError, OSError, ValueError) as e:
            raise FetchFailure(item.uri, f"Failed to extract '{item.dest}': {e}") from None

    def _pump_plain(self, job: _Job, src: _Readable, out: IO[bytes]) -> None:
        while True:
            self._check(job)
            chunk = src.read(CHUNK)
            if not chunk:
                return
            out.write(chunk)

    @staticmethod
    def _unzip(archive: Path, into: Path) -> None:
        """``zipfile`` keeps every member inside ``into`` (absolute names and ``..`` are
        stripped); members' Unix permission bits are kept (execute bits included)."""
        with zipfile.ZipFile(archive) as zf:
            for info in zf.infolist():
                path = Path(zf.extract(info, into))
                mode = (info.external_attr >> 16) & 0o777
                if mode and not info.is_dir():
                    os.chmod(path, (mode & 0o755) | 0o600)

    # --- ownership -------------------------------------------------------------------------------------

    @staticmethod
    def _chown_tree(root: Path, uid: int, gid: int) -> None:
        os.chown(root, uid, gid)
        for dirpath, dirnames, filenames in os.walk(root):
            for name in (*dirnames, *filenames):
                with contextlib.suppress(FileNotFoundError):
                    os.lchown(os.path.join(dirpath, name), uid, gid)


def default_cache_dir(work_dir: Path) -> Path:
    return Path(work_dir) / "fetcher-cache"


__all__ = ["FetchFailed", "Fetched", "Fetcher", "default_cache_dir"]
