"""The fetcher's decisions (pure): what each ``CommandInfo.uris`` entry asks for, the cache's
book, and the words of its messages.

A URI (Mesos' ``CommandInfo.URI``) names a file to put into the task's sandbox before the task
starts: ``value`` is an ``http``/``https``/``ftp`` URL, a ``file://`` URL or a local path
(a relative one is taken under the agent's ``--frameworks-home``, as in Mesos); ``output_file``
renames it (a relative path inside the sandbox; default: the URI's last path component);
``executable`` makes it executable (and is never extracted); ``extract`` (default true)
unpacks a ``.tar``/``.tar.gz``/``.tgz``/``.tar.bz2``/``.tbz2``/``.tar.xz``/``.txz`` or ``.zip``
into the sandbox and gunzips a plain ``.gz`` next to itself (the archive stays, as in Mesos);
``cache`` serves it from the agent's fetcher cache, keyed by the URI, filled on first use and
kept under a size limit by evicting the least recently used entries not being copied.

``check_uri`` is the static check (a bad URI is ``TASK_ERROR`` before anything runs);
``plan_item`` resolves one URI at fetch time; ``CacheBook`` decides hits, admissions and
evictions; ``summary``/``progress``/``failure`` word the task's status messages.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable
from urllib.parse import unquote, urlsplit

import attrs

from protocol.mesos import URI

__pure__ = True

REMOTE_SCHEMES = frozenset({"http", "https", "ftp"})
TAR_SUFFIXES = (".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tbz2", ".tar.xz", ".txz")
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")


class UriError(ValueError):
    """A URI the fetcher refuses outright (the task is answered TASK_ERROR)."""


class FetchFailure(Exception):
    """Fetching one URI failed (the task ends TASK_FAILED with the message)."""

    def __init__(self, uri: str, why: str) -> None:
        super().__init__(f"Failed to fetch '{uri}': {why}")
        self.uri = uri
        self.why = why


@attrs.frozen
class FetchItem:
    """One URI, resolved: where it comes from and what becomes of it in the sandbox."""

    uri: str  # as the framework gave it (the cache key)
    scheme: str  # "http" | "https" | "ftp" | "file" (a local file)
    source: str  # the URL, or the local file's absolute path
    dest: str  # the path inside the sandbox (relative, normalised, never leaves it)
    extract: str | None  # "tar" | "gz" | "zip" | None
    executable: bool
    cache: bool


def scheme_of(value: str) -> str | None:
    m = _SCHEME.match(value)
    return m.group(1).lower() if m else None


def _safe_relative(path: str, what: str) -> str:
    if not path or "\x00" in path:
        raise UriError(f"{what} is empty or contains a NUL byte")
    if path.startswith("/"):
        raise UriError(f"{what} {path!r} must be a path relative to the sandbox")
    norm = posixpath.normpath(path)
    parts = norm.split("/")
    if norm in (".", "") or ".." in parts:
        raise UriError(f"{what} {path!r} must stay inside the sandbox")
    return norm


def _basename(value: str, scheme: str | None) -> str:
    path = unquote(urlsplit(value).path) if scheme is not None else value
    name = posixpath.basename(path.rstrip("/") if scheme is None else path)
    if name in ("", ".", ".."):
        raise UriError(f"cannot name the file of URI '{value}' (it has no file name): give output_file")
    return name


def check_uri(uri: URI) -> None:
    """The static checks of one URI: a value, a supported scheme, a file name in the sandbox."""
    value = uri.value
    if not value or "\x00" in value:
        raise UriError("URI value is empty or contains a NUL byte")
    scheme = scheme_of(value)
    if scheme is not None and scheme not in REMOTE_SCHEMES and scheme != "file":
        raise UriError(
            f"URI '{value}': scheme '{scheme}' is not supported by this agent's fetcher "
            "(http, https, ftp, file or a local path)"
        )
    if scheme in REMOTE_SCHEMES and not urlsplit(value).hostname:
        raise UriError(f"URI '{value}' has no host")
    if uri.output_file is not None:
        _safe_relative(uri.output_file, "URI output_file")
    else:
        _safe_relative(_basename(value, scheme), f"the file name of URI '{value}'")


def archive_kind(name: str) -> str | None:
    if name.endswith(TAR_SUFFIXES):
        return "tar"
    if name.endswith(".gz"):
        return "gz"
    if name.endswith(".zip"):
        return "zip"
    return None


def plan_item(uri: URI, frameworks_home: str | None) -> FetchItem:
    """Resolve one (checked) URI. A relative local path needs ``frameworks_home`` (Mesos'
    ``--frameworks_home``); without it the fetch fails with Mesos' advice."""
    check_uri(uri)
    value = uri.value
    scheme = scheme_of(value)
    if scheme in REMOTE_SCHEMES:
        source = value
        kind = scheme
    else:
        path = unquote(urlsplit(value).path) if scheme == "file" else value
        if not path.startswith("/"):
            if not frameworks_home:
                raise FetchFailure(
                    value,
                    "A relative path was passed for the resource but the framework home was not "
                    "specified: start the agent with --frameworks-home or give an absolute path",
                )
            path = posixpath.join(frameworks_home, path)
        source = posixpath.normpath(path)
        kind = "file"
    dest = _safe_relative(uri.output_file, "URI output_file") if uri.output_file else _basename(value, scheme)
    executable = bool(uri.executable)
    extract = None if executable or uri.extract is False else archive_kind(dest)
    return FetchItem(value, kind, source, dest, extract, executable, bool(uri.cache))


def gunzip_name(dest: str) -> str:
    """Where a plain ``.gz`` is unpacked: next to it, without the suffix."""
    return dest[: -len(".gz")]


# --- the cache's book ---------------------------------------------------------------------------


@attrs.define
class CacheEntry:
    size: int
    last_used: float
    users: int = 0  # copies into sandboxes in progress: never evicted meanwhile


@attrs.frozen
class Admission:
    ok: bool  # the entry is in the book (and in use once); False: fetch it without the cache
    evict: tuple[str, ...] = ()  # entries to delete from disk first
    why: str | None = None


class CacheBook:
    """Which URIs the per-agent cache holds, their sizes and use; evicts least recently used
    entries that no fetch is copying. ``limit`` in bytes."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.entries: dict[str, CacheEntry] = {}

    def total(self) -> int:
        return sum(e.size for e in self.entries.values())

    def hit(self, key: str, now: float) -> bool:
        """Whether ``key`` is cached; if so it is taken (``users`` + 1) until ``release``."""
        e = self.entries.get(key)
        if e is None:
            return False
        e.users += 1
        e.last_used = now
        return True

    def admit(self, key: str, size: int, now: float) -> Admission:
        """Make room for a new entry of ``size`` bytes and take it. Refused (nothing evicted)
        when it is larger than the cache, or when the entries in use leave too little room."""
        if key in self.entries:
            self.hit(key, now)
            return Admission(True)
        if size > self.limit:
            return Admission(False, why=f"{size} bytes is more than the fetcher cache holds ({self.limit} bytes)")
        free = self.limit - self.total()
        evict: list[str] = []
        for k, e in sorted(self.entries.items(), key=lambda kv: (kv[1].last_used, kv[0])):
            if free >= size:
                break
            if e.users:
                continue
            evict.append(k)
            free += e.size
        if free < size:
            return Admission(False, why="the fetcher cache is full of entries in use")
        for k in evict:
            del self.entries[k]
        self.entries[key] = CacheEntry(size, now, 1)
        return Admission(True, tuple(evict))

    def release(self, key: str) -> None:
        e = self.entries.get(key)
        if e is not None and e.users > 0:
            e.users -= 1

    def drop(self, key: str) -> None:
        self.entries.pop(key, None)


# --- words ---------------------------------------------------------------------------------------


@attrs.frozen
class ItemResult:
    uri: str
    dest: str
    size: int
    from_cache: bool
    extracted: bool = False


def human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{int(n)} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def _uris(n: int) -> str:
    return f"{n} URI" if n == 1 else f"{n} URIs"


def summary(results: Iterable[ItemResult], seconds: float) -> str:
    """What the task's TASK_RUNNING message says about its fetch."""
    rs = list(results)
    size = sum(r.size for r in rs)
    cached = sum(1 for r in rs if r.from_cache)
    extra = f", {cached} from the cache" if cached else ""
    return f"fetched {_uris(len(rs))}: {human_bytes(size)}{extra}, in {seconds:.2f} s"


def starting(count: int) -> str:
    return f"Fetching {_uris(count)} into the sandbox"


def progress(count: int, done: int, received: int, seconds: float) -> str:
    return f"Fetching {_uris(count)}: {done} done, {human_bytes(received)} received, {seconds:.0f} s"


def failure(task_id: str, why: str) -> str:
    """The TASK_FAILED message (Mesos' fetcher words, then the cause)."""
    return f"Failed to fetch all URIs for container '{task_id}': {why}"


_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(?:I?B)?\s*$", re.IGNORECASE)


def parse_bytes(text: str) -> int:
    """``"2GB"``, ``"512MB"``, ``"1048576"`` (Mesos' Bytes: binary units) -> bytes."""
    m = _SIZE.match(text)
    if not m:
        raise ValueError(f"not a size: {text!r} (e.g. 2GB, 512MB, 1048576)")
    scale = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}[m.group(2).upper()]
    return int(float(m.group(1)) * scale)
