"""The fetcher against a local HTTP server (aiohttp on 127.0.0.1:0): downloads, archives,
executables, output_file, local files, the cache (one download for many tasks, LRU eviction,
a file too big for it), the failures a framework sees, progress and cancellation."""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import os
import pwd
import stat
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from agent.fetcher import Fetched, Fetcher, FetchFailed
from protocol.mesos import URI

from .fileserver import FileServer, tgz, zipped


@pytest.fixture
async def server() -> AsyncIterator[FileServer]:
    s = await FileServer().start()
    yield s
    await s.stop()


@pytest.fixture
def fetcher(tmp_path: Path) -> Any:
    made: list[Fetcher] = []

    def make(**kw: Any) -> Fetcher:
        kw.setdefault("stall_timeout", 10.0)
        size = kw.pop("cache_size", 1 << 20)
        f = Fetcher(tmp_path / "cache", size, **kw)
        f.init()
        made.append(f)
        return f

    yield make
    for f in made:
        f.close()


async def fetch(f: Fetcher, sandbox: Path, *uris: URI, owner: tuple[int, int] | None = None,
                progress: list[str] | None = None) -> Fetched | FetchFailed | None:
    seen = progress if progress is not None else []
    return await f.fetch(str(sandbox), sandbox.name, uris, sandbox, owner, seen.append)


async def test_downloads_extracts_and_renames(server: FileServer, fetcher: Any, tmp_path: Path) -> None:
    server.files.update({
        "app.tgz": tgz({"bin/run.sh": (b"#!/bin/sh\necho run\n", 0o755), "data/a.txt": (b"A", 0o644)}),
        "tool": b"#!/bin/sh\necho tool\n",
        "numbers.gz": gzip.compress(b"1 2 3\n"),
        "lib.zip": zipped({"lib/x.py": (b"print(1)\n", 0o644), "lib/go": (b"#!/bin/sh\n", 0o755)}),
        "keep.tgz": tgz({"inner": (b"i", 0o644)}),
        "hello.txt": b"hello\n",
    })
    sb = tmp_path / "sb"
    uris = (
        URI(server.url("/f/app.tgz")),
        URI(server.url("/f/tool"), executable=True),
        URI(server.url("/f/numbers.gz")),
        URI(server.url("/f/lib.zip")),
        URI(server.url("/f/keep.tgz"), extract=False),
        URI(server.url("/moved"), output_file="conf/greeting"),  # a redirect, then renamed
    )
    got = await fetch(fetcher(), sb, *uris)
    assert isinstance(got, Fetched), got
    assert got.message.startswith("fetched 6 URIs: ") and got.message.endswith(" s")
    assert [r.dest for r in got.results] == ["app.tgz", "tool", "numbers.gz", "lib.zip", "keep.tgz", "conf/greeting"]
    assert (sb / "bin/run.sh").read_bytes() == b"#!/bin/sh\necho run\n" and os.access(sb / "bin/run.sh", os.X_OK)
    assert (sb / "data/a.txt").read_text() == "A" and (sb / "app.tgz").exists()  # the archive stays (Mesos)
    assert stat.S_IMODE((sb / "tool").stat().st_mode) == 0o755
    assert (sb / "numbers").read_text() == "1 2 3\n" and (sb / "numbers.gz").exists()
    assert (sb / "lib/x.py").read_text() == "print(1)\n" and os.access(sb / "lib/go", os.X_OK)
    assert (sb / "keep.tgz").exists() and not (sb / "inner").exists()
    assert (sb / "conf/greeting").read_text() == "hello\n"
    log = (sb / "stderr").read_text()
    assert f"Fetching URI '{server.url('/f/app.tgz')}'" in log and "Extracted 'app.tgz' into the sandbox" in log
    assert not list(sb.rglob(".*.fetching"))


async def test_local_files_and_the_tasks_user(fetcher: Any, tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "job.sh").write_text("echo job\n")
    home = tmp_path / "home"
    (home / "rel").mkdir(parents=True)
    (home / "rel/x.txt").write_text("x")
    f = fetcher(frameworks_home=str(home))
    sb = tmp_path / "sb"
    got = await fetch(f, sb, URI(str(src / "job.sh")), URI(f"file://{src / 'job.sh'}", output_file="again.sh"),
                      URI("rel/x.txt"))
    assert isinstance(got, Fetched), got
    assert (sb / "job.sh").read_text() == (sb / "again.sh").read_text() == "echo job\n"
    assert (sb / "x.txt").read_text() == "x"
    if os.geteuid() == 0:  # a task running as another user: its files are its own, it reads only what it may
        nobody = pwd.getpwnam("nobody")
        owner = (nobody.pw_uid, nobody.pw_gid)
        with tempfile.TemporaryDirectory() as public:  # under /tmp, which anyone may traverse
            os.chmod(public, 0o755)
            shared = Path(public) / "job.sh"
            shared.write_text("echo job\n")
            sb2 = tmp_path / "sb2"
            got = await fetch(f, sb2, URI(str(shared)), owner=owner)
            assert isinstance(got, Fetched), got
            assert (sb2 / "job.sh").stat().st_uid == nobody.pw_uid and sb2.stat().st_uid == nobody.pw_uid
            os.chmod(shared, 0o600)
            got = await fetch(f, tmp_path / "sb3", URI(str(shared)), owner=owner)
            assert isinstance(got, FetchFailed) and "not readable by the task's user" in got.message
        # nor a file in a directory it may not enter (the test's own directory is root's alone)
        got = await fetch(f, tmp_path / "sb4", URI(str(src / "job.sh")), owner=owner)
        assert isinstance(got, FetchFailed) and "not readable by the task's user" in got.message


async def test_cache_downloads_once_evicts_and_bypasses(server: FileServer, fetcher: Any, tmp_path: Path) -> None:
    server.files.update({"a.bin": b"a" * 400, "b.bin": b"b" * 400, "c.bin": b"c" * 400, "big.bin": b"x" * 2000})
    f = fetcher(cache_size=1000)
    a = URI(server.url("/f/a.bin"), cache=True)
    # three tasks want the same URI at once: one download, the others wait for it and copy it
    got = await asyncio.gather(*(fetch(f, tmp_path / f"s{i}", a) for i in range(3)))
    assert server.hits["a.bin"] == 1
    assert all(isinstance(g, Fetched) for g in got)
    assert sorted(g.results[0].from_cache for g in got if isinstance(g, Fetched)) == [False, True, True]
    assert all((tmp_path / f"s{i}" / "a.bin").read_bytes() == b"a" * 400 for i in range(3))
    again = await fetch(f, tmp_path / "s3", a)
    assert isinstance(again, Fetched) and again.results[0].from_cache and "1 from the cache" in again.message
    # b fits beside a; c does not: the least recently used (b... then a is used again first)
    await fetch(f, tmp_path / "s4", URI(server.url("/f/b.bin"), cache=True))
    await fetch(f, tmp_path / "s5", a)
    await fetch(f, tmp_path / "s6", URI(server.url("/f/c.bin"), cache=True))
    assert set(f.book.entries) == {a.value, server.url("/f/c.bin")}
    assert len(list((tmp_path / "cache").iterdir())) == 2
    # bigger than the whole cache: fetched directly, not cached, nothing evicted
    got1 = await fetch(f, tmp_path / "s7", URI(server.url("/f/big.bin"), cache=True))
    assert isinstance(got1, Fetched) and (tmp_path / "s7/big.bin").stat().st_size == 2000
    assert "Not caching" in (tmp_path / "s7/stderr").read_text()
    assert len(f.book.entries) == 2
    # without cache=true a URI is downloaded every time
    for i in range(2):
        await fetch(f, tmp_path / f"n{i}", URI(server.url("/f/b.bin")))
    assert server.hits["b.bin"] == 3


async def test_failures_say_why(server: FileServer, fetcher: Any, tmp_path: Path) -> None:
    server.files["bad.tgz"] = b"this is not a tarball"
    server.files["evil.tgz"] = tgz({"ok": (b"ok", 0o644)}, evil="../../escaped")
    f = fetcher(stall_timeout=0.5)
    closed = server.port  # a port with nothing listening: the server's own port after it stops is racy
    with contextlib.closing(__import__("socket").socket()) as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    cases = [
        (URI(server.url("/f/missing")), "received HTTP return code 404"),
        (URI(f"http://127.0.0.1:{closed}/x"), "Error downloading resource: "),
        (URI(server.url("/stall")), "no data for 0.5 s (--fetcher-stall-timeout)"),
        (URI(server.url("/f/bad.tgz")), "Failed to extract 'bad.tgz'"),
        (URI(server.url("/f/evil.tgz")), "Failed to extract 'evil.tgz'"),
        (URI(str(tmp_path / "nope")), f"Local resource '{tmp_path / 'nope'}' does not exist"),
        (URI("relative/file"), "framework home was not specified"),
        (URI(str(tmp_path)), "is not a regular file"),
    ]
    for i, (uri, why) in enumerate(cases):
        got = await fetch(f, tmp_path / f"sb{i}", uri)
        assert isinstance(got, FetchFailed), (uri, got)
        assert got.message.startswith(f"Failed to fetch '{uri.value}': ") and why in got.message, got.message
        assert got.message in (tmp_path / f"sb{i}" / "stderr").read_text()
    assert not (tmp_path / "escaped").exists()


async def test_progress_and_cancel(server: FileServer, fetcher: Any, tmp_path: Path) -> None:
    f = fetcher(progress_interval=1e-6)
    seen: list[str] = []
    got = await fetch(f, tmp_path / "p", URI(server.url("/slow/4")), progress=seen)
    assert isinstance(got, Fetched) and got.results[0].size == 4 << 20
    assert seen and seen[0].startswith("Fetching 1 URI: 0 done, ")
    # a kill cancels between chunks: the fetch ends at once, without a result
    cancelled = asyncio.Event()

    def on_progress(_: str) -> None:
        f.cancel("c")
        cancelled.set()

    got2 = await f.fetch("c", "c", (URI(server.url("/slow/1000")),), tmp_path / "c", None, on_progress)
    assert got2 is None and cancelled.is_set()
    assert not f.fetching("c")
