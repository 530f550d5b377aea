"""Launch benchmark: the agent's whole launch pipeline vs. raw asyncio spawning, with the agent's
own CPU per task.

``python -m agent.bench_launch [--tasks 500] [--batch 50] [--lone 200]`` prints, for ``true``
tasks:

- *raw*: ``asyncio.create_subprocess_exec("true")`` + ``wait()``, ``batch`` at a time, in a fresh
  interpreter on the stdlib asyncio loop (the plain-asyncio limit, as ``scripts/bench/e2e.py``
  measures it; uvloop's spawn is slower here);
- *agent*: a real ``AgentService`` (checkpointing with fsync, wrapper processes, reaping, reliable
  status updates) in this process, driven by a minimal master in a **separate** process that
  sends ``RunTasks`` frames of ``batch`` tasks and acknowledges every update; a task counts when
  its TASK_FINISHED arrives. Because the master runs elsewhere, this process's CPU time is the
  agent's own (all its threads, not the tasks);
- *lone*: ``--lone N`` tasks one at a time (the next is sent when the previous one finished):
  RUN_TASKS sent -> TASK_RUNNING received, the agent's share of a reusable-offer hand-over.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import uvloop
from aiohttp import WSMsgType, web

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

_RAW = """
import asyncio, json, os, sys, time
async def main(n, batch):
    sem = asyncio.Semaphore(batch)
    async def one():
        async with sem:
            p = await asyncio.create_subprocess_exec("true")
            await p.wait()
    t = os.times(); c0 = t.user + t.system; t0 = time.perf_counter()
    await asyncio.gather(*(one() for _ in range(n)))
    dt = time.perf_counter() - t0; t = os.times()
    print(json.dumps({"rate": n / dt, "cpu_ms": 1000 * (t.user + t.system - c0) / n}))
asyncio.run(main(int(sys.argv[1]), int(sys.argv[2])))
"""


async def raw_rate(n: int, batch: int) -> dict[str, float]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", _RAW, str(n), str(batch), stdout=asyncio.subprocess.PIPE
    )
    out, _ = await proc.communicate()
    result: dict[str, float] = json.loads(out.decode().strip().splitlines()[-1])
    return result


# --- the driver (a minimal master, run in its own process) ------------------------------------


async def drive(n: int, batch: int, lone: int) -> dict[str, Any]:
    """Serve the agent channel on port 0 (printed first), then run ``n`` tasks ``batch`` at a
    time and ``lone`` tasks one at a time; return rates and RunTasks -> RUNNING latencies."""
    sent_at: dict[str, float] = {}
    latencies: dict[str, list[float]] = {"batch": [], "lone": []}
    finished: set[str] = set()
    done: dict[str, asyncio.Event] = {}
    ws_ready: asyncio.Future[web.WebSocketResponse] = asyncio.get_running_loop().create_future()
    window = asyncio.Semaphore(max(1, batch))
    phase = "batch"

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
                        latencies[phase].append(time.perf_counter() - sent_at.pop(tid))
                    if body.status.state is TaskState.TASK_FINISHED and tid not in finished:
                        finished.add(tid)
                        window.release()
                        if tid in done:
                            done[tid].set()
            if acks:
                await ws.send_bytes(codec.encode_msgpack(frame(*acks, epoch=1)))
        return ws

    app = web.Application()
    app.router.add_get(PATH, handle)
    # the agent keeps its channel open: close it at once when the run is over, not after aiohttp's
    # default 60 s graceful shutdown
    runner = web.AppRunner(app, handle_signals=False, shutdown_timeout=0.5)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    print(int(runner.addresses[0][1]), flush=True)
    fi = FrameworkInfo(user="bench", name="bench", id=FrameworkID("bench"))
    res = Resources.of(cpus=0.01, mem=1).to_mesos()

    def task(name: str) -> TaskInfo:
        return TaskInfo(name="t", task_id=TaskID(name), resources=res, command=CommandInfo(value="true", shell=False))

    async def send(ws: web.WebSocketResponse, tasks: list[TaskInfo]) -> None:
        t_send = time.perf_counter()
        for t in tasks:
            sent_at[t.task_id.value] = t_send
        await ws.send_bytes(codec.encode_msgpack(frame(RunTasks(FrameworkID("bench"), fi, tuple(tasks)), epoch=1)))

    try:
        ws = await asyncio.wait_for(ws_ready, 30)
        out: dict[str, Any] = {}
        if n:
            t0 = time.perf_counter()
            sent = 0
            while sent < n:
                await window.acquire()
                tasks = [task(f"t{sent}")]
                sent += 1
                while sent < n and len(tasks) < batch and window._value > 0:  # what the window allows now
                    await window.acquire()
                    tasks.append(task(f"t{sent}"))
                    sent += 1
                await send(ws, tasks)
            await asyncio.wait_for(asyncio.gather(*(window.acquire() for _ in range(batch))), 600)
            out["rate"] = n / (time.perf_counter() - t0)
        phase = "lone"
        for i in range(lone):
            ev = done[f"l{i}"] = asyncio.Event()
            await send(ws, [task(f"l{i}")])
            await asyncio.wait_for(ev.wait(), 60)
        out["latency_batch"] = sorted(latencies["batch"])
        out["latency_lone"] = sorted(latencies["lone"])
        return out
    finally:
        if ws_ready.done() and not ws_ready.cancelled():
            with contextlib.suppress(Exception):
                await ws_ready.result().close()
        with contextlib.suppress(Exception):
            await runner.cleanup()


# --- the agent side (this process) -----------------------------------------------------------


def _cpu() -> float:
    t = os.times()
    return t.user + t.system


async def agent_run(n: int, batch: int, lone: int, work_dir: Path, fsync: bool = True,
                    **agent_flags: Any) -> tuple[dict[str, Any], float]:
    """Start the driver, run a real agent against it; return the driver's figures and this
    process's CPU seconds from the agent's start to the driver's last figure."""
    from agent.config import AgentConfig
    from agent.service import AgentService

    driver = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "agent.bench_launch", "--drive", "--tasks", str(n), "--batch", str(batch),
        "--lone", str(lone), stdout=asyncio.subprocess.PIPE,
    )
    assert driver.stdout is not None
    port = int((await driver.stdout.readline()).decode())
    cfg = AgentConfig(master=f"127.0.0.1:{port}", work_dir=work_dir, resources="cpus:64;mem:65536", fsync=fsync,
                      **agent_flags)
    agent = AgentService(cfg)
    await agent.start()
    try:
        assert agent.channel is not None
        await asyncio.wait_for(agent.channel.registered_event.wait(), 30)
        c0 = _cpu()
        out, _ = await driver.communicate()
        cpu = _cpu() - c0
    finally:
        await agent.stop()
    return json.loads(out.decode().strip().splitlines()[-1]), cpu


def _pct(xs: list[float], q: float) -> float:
    return 1000 * xs[min(len(xs) - 1, int(len(xs) * q))] if xs else float("nan")


async def main_async(n: int, batch: int, lone: int, fsync: bool, **agent: Any) -> None:
    if n:
        raw = await raw_rate(n, batch)
        with tempfile.TemporaryDirectory(prefix="agora-bench-") as d:
            res, cpu = await agent_run(n, batch, 0, Path(d), fsync, **agent)
        print(f"raw asyncio spawn of `true`: {raw['rate']:8.1f} launches/s, {raw['cpu_ms']:.2f} ms CPU per launch (the spawner)")
        print(
            f"agora agent pipeline:        {res['rate']:8.1f} launches/s ({100 * res['rate'] / raw['rate']:.0f}% of raw, "
            f"batches of {batch}; fsync={'on' if fsync else 'off'}); agent CPU {1000 * cpu / n:.3f} ms per task"
        )
        lat = res["latency_batch"]
        print(f"  RUN_TASKS -> TASK_RUNNING: p50 {_pct(lat, 0.5):.1f} ms, p99 {_pct(lat, 0.99):.1f} ms")
    if lone:
        with tempfile.TemporaryDirectory(prefix="agora-bench-") as d:
            res, cpu = await agent_run(0, 1, lone, Path(d), fsync, **agent)
        lat = res["latency_lone"]
        print(
            f"lone tasks ({lone}, one at a time): RUN_TASKS -> TASK_RUNNING p50 {_pct(lat, 0.5):.2f} ms, "
            f"p90 {_pct(lat, 0.9):.2f} ms; agent CPU {1000 * cpu / lone:.3f} ms per task"
        )
    print("(agent CPU: the agent's process, all its threads, not the tasks; the master runs in another process)")


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--tasks", type=int, default=500)
    ap.add_argument("--batch", type=int, default=50)
    ap.add_argument("--lone", type=int, default=100, help="tasks launched one at a time after the batches")
    ap.add_argument("--no-fsync", action="store_true")
    ap.add_argument("--isolation", default="auto", help="the agent's --isolation")
    ap.add_argument("--log-max-size", default="10MB", help="the agent's --log-max-size (0: plain files)")
    ap.add_argument("--drive", action="store_true", help=argparse.SUPPRESS)  # the driver process
    a = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    if a.drive:
        print(json.dumps(uvloop.run(drive(a.tasks, a.batch, a.lone))))
        return
    uvloop.run(main_async(a.tasks, a.batch, a.lone, not a.no_fsync, isolation=a.isolation,
                          log_max_size=a.log_max_size))


if __name__ == "__main__":
    main()
