"""Sandbox file access: browse/read/download, confinement to the sandbox."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from agent.files import add_routes


@pytest.fixture
def sandbox_root(tmp_path: Path) -> Path:
    root = tmp_path / "sandboxes"
    box = root / "fw1" / "task1"
    box.mkdir(parents=True)
    (box / "stdout").write_bytes(b"hello world\n")
    (box / "stderr").write_bytes(b"")
    (box / "sub").mkdir()
    (box / "sub" / "data.bin").write_bytes(bytes(range(256)) * 4)
    (box / "inside-link").symlink_to(box / "stdout")
    (box / "etc-link").symlink_to("/etc")
    (box / "passwd-link").symlink_to("/etc/passwd")
    (box / "rel-escape").symlink_to("../../../outside.txt")
    (tmp_path / "outside.txt").write_text("secret\n")
    os.mkfifo(box / "fifo")
    return root


@pytest.fixture
async def client(sandbox_root: Path) -> AsyncIterator[TestClient[web.Request, web.Application]]:
    app = web.Application()
    add_routes(app, sandbox_root)
    async with TestClient(TestServer(app, host="127.0.0.1", port=0)) as c:
        yield c


Client = TestClient[web.Request, web.Application]


async def test_browse_lists_sandbox(client: Client) -> None:
    resp = await client.get("/files/browse", params={"path": "fw1/task1"})
    assert resp.status == 200
    listing = await resp.json()
    names = [e["path"] for e in listing]
    assert names == sorted(names)
    assert "fw1/task1/stdout" in names and "fw1/task1/sub" in names
    by_path = {e["path"]: e for e in listing}
    assert by_path["fw1/task1/stdout"]["size"] == 12
    assert by_path["fw1/task1/stdout"]["mode"].startswith("-rw")
    assert by_path["fw1/task1/sub"]["mode"].startswith("d")
    assert by_path["fw1/task1/etc-link"]["mode"].startswith("l")  # listed, not followed
    assert set(by_path["fw1/task1/stdout"]) == {"path", "nlink", "size", "mtime", "mode", "uid", "gid"}


async def test_browse_absolute_and_file(client: Client, sandbox_root: Path) -> None:
    box = sandbox_root / "fw1" / "task1"
    resp = await client.get("/files/browse", params={"path": str(box / "stdout")})
    assert resp.status == 200
    [info] = await resp.json()
    assert info["path"] == str(box / "stdout") and info["size"] == 12


async def test_read_with_offset_and_length(client: Client) -> None:
    resp = await client.get("/files/read", params={"path": "fw1/task1/stdout", "offset": "6", "length": "5"})
    assert resp.status == 200
    assert await resp.json() == {"data": "world", "offset": 6}
    resp = await client.get("/files/read", params={"path": "fw1/task1/stdout", "offset": "0"})
    assert await resp.json() == {"data": "hello world\n", "offset": 0}
    resp = await client.get("/files/read", params={"path": "fw1/task1/stdout", "offset": "-1"})
    assert await resp.json() == {"data": "", "offset": 12}
    resp = await client.get("/files/read", params={"path": "fw1/task1/stdout", "offset": "100"})
    assert await resp.json() == {"data": "", "offset": 12}
    resp = await client.get(
        "/files/read", params={"path": "fw1/task1/inside-link", "offset": "0", "length": "5"}
    )
    assert await resp.json() == {"data": "hello", "offset": 0}


async def test_read_is_capped(sandbox_root: Path) -> None:
    app = web.Application()
    add_routes(app, sandbox_root, max_read=100)
    async with TestClient(TestServer(app, host="127.0.0.1", port=0)) as c:
        resp = await c.get("/files/read", params={"path": "fw1/task1/sub/data.bin", "offset": "0"})
        body = await resp.json()
        assert body["offset"] == 0 and len(body["data"]) == 100


async def test_download(client: Client, sandbox_root: Path) -> None:
    resp = await client.get("/files/download", params={"path": "fw1/task1/sub/data.bin"})
    assert resp.status == 200
    assert resp.headers["Content-Type"] == "application/octet-stream"
    assert 'filename="data.bin"' in resp.headers["Content-Disposition"]
    assert await resp.read() == (sandbox_root / "fw1/task1/sub/data.bin").read_bytes()


@pytest.mark.parametrize(
    "path",
    [
        "../../etc/passwd",
        "fw1/task1/../../../etc/passwd",
        "/etc/passwd",
        "fw1/task1/etc-link/passwd",
        "fw1/task1/passwd-link",
        "fw1/task1/rel-escape",
        "fw1/task1/etc-link",
    ],
)
@pytest.mark.parametrize("endpoint", ["browse", "read", "download"])
async def test_escapes_are_forbidden(client: Client, endpoint: str, path: str) -> None:
    resp = await client.get(f"/files/{endpoint}", params={"path": path, "offset": "0"})
    assert resp.status == 403, await resp.text()
    assert "root:" not in await resp.text() and "secret" not in await resp.text()


async def test_absolute_outside_root_missing_is_still_403(client: Client) -> None:
    resp = await client.get("/files/read", params={"path": "/nonexistent/file", "offset": "0"})
    assert resp.status == 403


@pytest.mark.parametrize(
    ("endpoint", "params", "status"),
    [
        ("read", {"path": "fw1/task1/nope", "offset": "0"}, 404),
        ("browse", {"path": "fw1/nope"}, 404),
        ("download", {"path": "fw1/task1/nope"}, 404),
        ("read", {}, 400),
        ("read", {"path": ""}, 400),
        ("read", {"path": "fw1/task1/stdout", "offset": "x"}, 400),
        ("read", {"path": "fw1/task1/stdout", "offset": "-2"}, 400),
        ("read", {"path": "fw1/task1/stdout", "offset": "0", "length": "-5"}, 400),
        ("read", {"path": "fw1/task1/sub", "offset": "0"}, 400),
        ("download", {"path": "fw1/task1/sub"}, 400),
        ("read", {"path": "fw1/task1/fifo", "offset": "0"}, 400),
        ("download", {"path": "fw1/task1/fifo"}, 400),
        ("browse", {"path": "fw1/task1/st\x00dout"}, 400),
    ],
)
async def test_errors(client: Client, endpoint: str, params: dict[str, str], status: int) -> None:
    resp = await client.get(f"/files/{endpoint}", params=params)
    assert resp.status == status, await resp.text()


async def test_swapped_symlink_final_component_is_refused(sandbox_root: Path) -> None:
    # The race the O_NOFOLLOW/proc check guards against: resolution says "inside", the open
    # then meets a symlink. Simulate by opening a resolved path that became a symlink.
    from agent.files import SandboxFiles, _Refused

    files = SandboxFiles(sandbox_root)
    box = sandbox_root / "fw1" / "task1"
    target = box / "swapme"
    target.write_text("ok")
    real = files.resolve("fw1/task1/swapme")
    target.unlink()
    target.symlink_to("/etc/passwd")
    orig = files.resolve
    files.resolve = lambda requested: real  # type: ignore[method-assign]
    try:
        with pytest.raises(_Refused) as info:
            files.open("fw1/task1/swapme")
        assert info.value.status == 403
    finally:
        files.resolve = orig  # type: ignore[method-assign]
