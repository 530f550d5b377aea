"""Task stdout/stderr through the agent's log writer (agent/logger.py), on real processes: output
rotates within ``--log-max-files`` x ``--log-max-size`` and nothing inside that window is lost;
``/files/read`` and the CLI's follower keep their place across rotations; a task's end is reported
once its logs are complete; the writer survives an agent ``kill -9`` (and is replaced, taking the
pipes over, when it dies itself) without the task noticing; a task writing 1 GB leaves the
agent's memory flat and the sandbox within its window."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp
import psutil
import pytest

from agent.service import AgentService
from frameworks.cli.follow import LogStream, follow
from frameworks.cli.task import _reader
from protocol.task_states import TaskState

pytestmark = pytest.mark.slow

KB = 1024
LINES = "import sys\nfor i in range({n}):\n    sys.stdout.write('%07d\\n' % i)\n"  # 8 bytes a line


def expected(n: int) -> bytes:
    return b"".join(b"%07d\n" % i for i in range(n))


def kept(sandbox: Path, stream: str = "stdout") -> bytes:
    """The window, oldest file first: stdout.N ... stdout.1, stdout."""
    def age(p: Path) -> int:
        suffix = p.name[len(stream) + 1:]
        return int(suffix) if p.name != stream and suffix.isdigit() else 0

    names = [p for p in sandbox.iterdir() if p.name == stream or age(p) > 0]
    return b"".join(p.read_bytes() for p in sorted(names, key=age, reverse=True))


def writers(work: Path) -> list[psutil.Process]:
    out = []
    for p in psutil.process_iter(["cmdline"]):
        cmd = p.info["cmdline"] or []
        if len(cmd) >= 4 and cmd[-2].endswith("agent/logger.py") and cmd[-1] == str(work / "meta"):
            out.append(p)
    return out


async def read(agent_url: str, path: str, offset: int, length: int = 64 * KB) -> dict[str, Any]:
    async with aiohttp.ClientSession() as s, s.get(f"{agent_url}/files/read", params={
            "path": path, "offset": str(offset), "length": str(length)}) as r:
        assert r.status == 200, await r.text()
        return await r.json()  # type: ignore[no-any-return]


async def test_output_rotates_within_the_window_and_reads_follow(master: Any, make_agent: Any) -> None:
    agent: AgentService = await make_agent(log_max_size="64KB", log_max_files=3)
    await master.wait_connected()
    n = 125_000  # 1,000,000 bytes
    await master.run("many", f"{sys.executable} -c \"{LINES.format(n=n)}\"; echo done >&2")
    st = await master.wait_terminal("many")
    assert st.state is TaskState.TASK_FINISHED
    sb = agent.checkpoint.sandbox("fw1", "many")
    names = sorted(p.name for p in sb.iterdir())
    assert names == [".stdout.logrotate", "stderr", "stdout", "stdout.1", "stdout.2"], names
    assert all((sb / f).stat().st_size <= 64 * KB for f in ("stdout", "stdout.1", "stdout.2"))
    window = kept(sb)
    assert len(window) == 64 * KB * 2 + (1_000_000 % (64 * KB)) and expected(n).endswith(window)
    assert (sb / "stderr").read_text() == "done\n"  # complete when the end was reported
    # /files/read in stream offsets: the end, a read from 0 starting at the oldest kept byte,
    # and one read spanning two files
    end = await read(agent.url, "fw1/many/stdout", -1)
    assert end == {"data": "", "offset": 1_000_000}
    first = await read(agent.url, "fw1/many/stdout", 0)
    oldest = 1_000_000 - len(window)
    assert first["offset"] == oldest and first["data"].encode() == window[:64 * KB]
    boundary = oldest + 64 * KB - 100
    span = await read(agent.url, "fw1/many/stdout", boundary, 200)
    assert span["offset"] == boundary and span["data"].encode() == expected(n)[boundary:boundary + 200]


async def test_cli_follow_keeps_its_place_across_rotations(master: Any, make_agent: Any) -> None:
    agent: AgentService = await make_agent(log_max_size="4KB", log_max_files=4)
    await master.wait_connected()
    slow = "import sys, time\nfor i in range(3000):\n    sys.stdout.write('%07d\\n' % i); sys.stdout.flush()\n    time.sleep(0.002) if i % 10 == 0 else None\n"
    await master.run("slow", f"exec {sys.executable} -c \"{slow}\"")
    await master.wait_state("slow", TaskState.TASK_RUNNING)
    row = {"agent_url": agent.url, "framework_id": "fw1", "id": "slow", "agent_id": "a"}
    got: list[str] = []
    stream = LogStream(_reader(row, "stdout", must_exist=False))
    # the CLI's own loop (agora task logs -f), polling every 5 ms instead of 0.5 s
    await asyncio.to_thread(follow, [stream], keep_following=True, done=lambda: master.terminal("slow") is not None,
                            sleep=time.sleep, write=got.append, poll=0.005)
    # 24,000 bytes through a 16 KB window: the follower saw every line, in order
    assert "".join(got).encode() == expected(3000) and stream.skipped == 0


async def test_writer_survives_agent_kill9_and_is_replaced_when_it_dies(master: Any, agent_procs: Any,
                                                                        tmp_path: Path) -> None:
    work = tmp_path / "agent"
    agent = await agent_procs(work, "--log-max-size", "16KB", "--log-max-files", "50", fork=True).start()
    await master.wait_connected()
    ticker = "import sys, time\nfor i in range(100000):\n    sys.stdout.write('%07d\\n' % i); sys.stdout.flush(); time.sleep(0.001)\n"
    await master.run("tick", f"exec {sys.executable} -c \"{ticker}\"")
    await master.wait_state("tick", TaskState.TASK_RUNNING)
    sb = work / "sandboxes" / "fw1" / "tick"

    def lines() -> int:
        return len(kept(sb)) // 8

    await master.wait_for(lambda: lines() > 200)
    await agent.kill9()  # the task and its writer go on without the agent
    at = lines()
    await master.wait_for(lambda: lines() > at + 200)
    [w] = writers(work)
    n = len(master.registrations)
    agent = await agent_procs(work, "--log-max-size", "16KB", "--log-max-files", "50", fork=True).start()
    await master.wait_connected(n + 1)
    assert writers(work) == [w]  # the same writer: the new agent found it
    w.kill()  # the writer dies: the task's writes wait in its pipe, a new writer takes it over
    await asyncio.to_thread(w.wait, 10)
    await master.wait_for(lambda: len(writers(work)) == 1)
    at = lines()
    await master.wait_for(lambda: lines() > at + 300)
    await master.kill("tick")
    await master.wait_terminal("tick")
    data = kept(sb)
    first = int(data[:7])
    assert data == b"".join(b"%07d\n" % i for i in range(first, first + len(data) // 8))  # no gap, no loss
    assert psutil.Process(os.getpid()).is_running()


async def test_a_gigabyte_of_stdout_keeps_the_agent_flat(master: Any, agent_procs: Any, tmp_path: Path) -> None:
    work = tmp_path / "agent"
    agent = await agent_procs(work, fork=True).start()  # the defaults: 10MB x 5 per stream
    await master.wait_connected()
    me = psutil.Process(agent.child.pid)
    before = me.memory_info().rss
    await master.run("gb", "dd if=/dev/zero bs=1M count=1024 status=none; echo end", mem=64)
    await master.wait_state("gb", TaskState.TASK_RUNNING)
    [writer] = await master.wait_for(lambda: writers(work))
    writer_rss = 0
    while master.terminal("gb") is None:
        writer_rss = max(writer_rss, writer.memory_info().rss)
        await asyncio.sleep(0.05)  # sampling the writer's memory while it works
    st = await master.wait_terminal("gb", within=120)
    assert st.state is TaskState.TASK_FINISHED
    sb = work / "sandboxes" / "fw1" / "gb"
    files = {p.name: p.stat().st_size for p in sb.iterdir() if p.name.startswith("stdout")}
    assert sorted(files) == ["stdout", "stdout.1", "stdout.2", "stdout.3", "stdout.4"]
    assert sum(files.values()) <= 50 * 1024 * KB
    assert (sb / "stdout").read_bytes().endswith(b"\0end\n")
    grew = me.memory_info().rss - before
    print(f"1 GB of stdout: agent RSS {before >> 20} MB -> {me.memory_info().rss >> 20} MB, "
          f"log writer at most {writer_rss >> 20} MB")
    assert grew < 16 * 1024 * KB and writer_rss < 48 * 1024 * KB
