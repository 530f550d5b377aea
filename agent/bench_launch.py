"""Launch-rate benchmark: the agent's whole launch pipeline vs. raw asyncio spawning.

``python -m agent.bench_launch [--tasks 500] [--batch 50]`` prints both rates for ``true`` tasks:

- *raw*: ``asyncio.create_subprocess_exec("true")`` + ``wait()``, ``batch`` at a time (uvloop);
- *agent*: a real ``AgentService`` (checkpointing with fsync, wrapper processes, reaping, reliable
  status updates) driven by a minimal in-process master that sends ``RunTasks`` frames of
  ``batch`` tasks and acknowledges every update; a task counts when its TASK_FINISHED arrives.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import resource
import tempfile
import time
from pathlib import Path

import uvloop
from aiohttp import WSMsgType, web

from agent.config import AgentConfig
from agent.service import AgentService
from protocol import codec
from protocol.agent_channel import (
    PATH,
    AcknowledgeMsg,
    Frame,
    Register,
    Registered,
    RunTasks,
    StatusUpdateMsg,
    frame,
)
from protocol.mesos import CommandInfo, FrameworkInfo, TaskInfo
from protocol.mesos_common import AgentID, FrameworkID, TaskID
from protocol.resources import Resources
from protocol.task_states import TaskState


async def raw_rate(n: int, batch: int) -> float:
    sem = asyncio.Semaphore(batch)

    async def one() -> None:
        async with sem:
            p = await asyncio.create_subprocess_exec("true")
            await p.wait()

    t0 = time.perf_counter()
    await asyncio.gather(*(one() for _ in range(n)))
    return n / (time.perf_counter() - t0)


async def agent_rate(n: int, batch: int, work_dir: Path, fsync: bool = True) -> tuple[float, list[float]]:
    """Launches per second and each task's RunTasks-sent -> TASK_RUNNING-received latency."""
    done = asyncio.Event()
    sent_at: dict[str, float] = {}
    latencies: list[float] = []
    finished: set[str] = set()
    ws_ready: asyncio.Future[web.WebSocketResponse] = asyncio.get_running_loop().create_future()
    window = asyncio.Semaphore(batch)

    async def handle(request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(max_msg_size=4 * 1024 * 1024)
        await ws.prepare(request)
        async for msg in ws:
            if msg.type != WSMsgType.BINARY:
                continue
            acks = []
            for m in codec.decode_msgpack(Frame, msg.data).messages:
                body = m.body()
                if isinstance(body, Register):
                    reg = Registered(AgentID("bench"), "bench", 1, 30.0, 120.0)
                    await ws.send_bytes(codec.encode_msgpack(frame(reg, epoch=1)))
                    if not ws_ready.done():
                        ws_ready.set_result(ws)
                elif isinstance(body, StatusUpdateMsg) and body.status.uuid:
                    acks.append(AcknowledgeMsg(body.framework_id, body.status.task_id, body.status.uuid))
                    tid = body.status.task_id.value
                    if body.status.state is TaskState.TASK_RUNNING and tid in sent_at:
                        latencies.append(time.perf_counter() - sent_at.pop(tid))
                    if body.status.state is TaskState.TASK_FINISHED and tid not in finished:
                        finished.add(tid)
                        window.release()
                        if len(finished) == n:
                            done.set()
            if acks:
                await ws.send_bytes(codec.encode_msgpack(frame(*acks, epoch=1)))
        return ws

    app = web.Application()
    app.router.add_get(PATH, handle)
    runner = web.AppRunner(app, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = int(runner.addresses[0][1])
    cfg = AgentConfig(master=f"127.0.0.1:{port}", work_dir=work_dir, resources="cpus:64;mem:65536", fsync=fsync)
    agent = AgentService(cfg)
    await agent.start()
    try:
        ws = await asyncio.wait_for(ws_ready, 10)
        fi = FrameworkInfo(user="bench", name="bench", id=FrameworkID("bench"))
        res = Resources.of(cpus=0.01, mem=1).to_mesos()
        t0 = time.perf_counter()
        sent = 0
        while sent < n:
            k = 0
            tasks = []
            while sent < n and k < batch and window._value > 0:
                await window.acquire()
                tasks.append(TaskInfo(name="t", task_id=TaskID(f"t{sent}"), resources=res, command=CommandInfo(value="true", shell=False)))
                sent += 1
                k += 1
            if tasks:
                t_send = time.perf_counter()
                for t in tasks:
                    sent_at[t.task_id.value] = t_send
                await ws.send_bytes(codec.encode_msgpack(frame(RunTasks(FrameworkID("bench"), fi, tuple(tasks)), epoch=1)))
            else:
                await window.acquire()
                window.release()
        await asyncio.wait_for(done.wait(), 600)
        return n / (time.perf_counter() - t0), latencies
    finally:
        await agent.stop()
        with contextlib.suppress(Exception):
            await runner.cleanup()


def _cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


async def main_async(n: int, batch: int, fsync: bool) -> None:
    c0 = _cpu()
    raw = await raw_rate(n, batch)
    c1 = _cpu()
    with tempfile.TemporaryDirectory(prefix="agora-bench-") as d:
        ag, lat = await agent_rate(n, batch, Path(d), fsync)
    c2 = _cpu()
    print(f"raw asyncio spawn of `true`: {raw:8.1f} launches/s, {1000 * (c1 - c0) / n:.2f} ms CPU per launch (this process)")
    print(
        f"agora agent pipeline:        {ag:8.1f} launches/s, {1000 * (c2 - c1) / n:.2f} ms CPU per launch "
        f"(agent + in-process master; {100 * ag / raw:.0f}% of raw; fsync={'on' if fsync else 'off'})"
    )
    if lat:
        lat.sort()
        p50, p99 = lat[len(lat) // 2], lat[min(len(lat) - 1, int(len(lat) * 0.99))]
        print(f"RUN_TASKS -> TASK_RUNNING latency: p50 {1000 * p50:.1f} ms, p99 {1000 * p99:.1f} ms (batches of {batch})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=500)
    ap.add_argument("--batch", type=int, default=50)
    ap.add_argument("--no-fsync", action="store_true")
    a = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    uvloop.run(main_async(a.tasks, a.batch, not a.no_fsync))


if __name__ == "__main__":
    main()
