"""Master benchmarks: ``python -m master.bench``.

1. core: launches per second through ``MasterState`` + the real allocator (no network):
   agents, frameworks, ACCEPT, status updates RUNNING -> FINISHED, reallocation.
2. edge: a real in-process master on loopback with the in-test agent and a msgpack scheduler:
   scheduler calls per second (202 path) and ACCEPT -> the agent's RunTasks latency.
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from pathlib import Path

import aiohttp
import click

from master.config import MasterConfig
from master.main import new_master
from master.testing import Harness, framework_info, offers, task
from master.testing_agent import FakeAgent
from protocol import codec, mesos, recordio
from protocol.task_states import TaskState


def bench_core(agents: int, frameworks: int, rounds: int) -> dict[str, float]:
    h = Harness(ping_interval=1e9, ping_timeout=1e9)
    conns: dict[str, int] = {}
    for i in range(agents):
        aid, conn = h.agent("cpus:8;mem:16384", hostname=f"h{i}")
        conns[aid] = conn
    fws = [h.subscribe(framework_info(f"f{i}")) for i in range(frameworks)]
    sid_of = {sid: fid for fid, sid in fws}
    launched = 0
    seq = 0
    t0 = time.perf_counter()
    for _ in range(rounds):
        fx = h.allocate()
        for sid, fid in sid_of.items():
            for o in offers(fx, sid):
                tasks = []
                for _ in range(4):
                    tasks.append(task(f"t{seq}", cpus=1, mem=256))
                    seq += 1
                op = mesos.Operation(type=mesos.OperationType.LAUNCH, launch=mesos.Launch(task_infos=tuple(tasks)))
                h.call(fid, sid, mesos.Call.make_accept(mesos.FrameworkID(fid), (o.id,), (op,), mesos.Filters(refuse_seconds=0)))
                for t in tasks:
                    h.status(conns[o.agent_id.value], fid, t.task_id.value, TaskState.TASK_RUNNING)
                    h.status(conns[o.agent_id.value], fid, t.task_id.value, TaskState.TASK_FINISHED)
                launched += len(tasks)
    dt = time.perf_counter() - t0
    return {"tasks": launched, "seconds": dt, "tasks_per_sec": launched / dt if dt else 0.0}


async def bench_edge(calls: int, launches: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        cfg = MasterConfig(port=0, work_dir=str(Path(tmp) / "m"), heartbeat_interval=5.0, rate_limit_qps=1e9,
                           rate_limit_burst=1e9)
        svc = new_master(cfg)
        await svc.start()
        agent = FakeAgent(svc.url, "cpus:64;mem:65536")
        await agent.connect()
        try:
            async with aiohttp.ClientSession() as s:
                body = codec.encode_msgpack(mesos.Call.make_subscribe(mesos.FrameworkInfo(
                    user="u", name="bench", capabilities=(mesos.Capability(mesos.CapabilityType.REUSABLE_OFFERS),))))
                resp = await s.post(svc.url + "/api/v1/scheduler", data=body,
                                    headers={"Content-Type": codec.MSGPACK, "Accept": codec.MSGPACK})
                sid = resp.headers["Mesos-Stream-Id"]
                dec = recordio.RecordIODecoder()
                events: asyncio.Queue[mesos.Event] = asyncio.Queue()

                async def read() -> None:
                    async for chunk in resp.content.iter_any():
                        for rec in dec.feed(chunk):
                            await events.put(codec.decode_msgpack(mesos.Event, rec))

                reader = asyncio.get_running_loop().create_task(read())
                fid: mesos.FrameworkID | None = None
                offer: mesos.Offer | None = None
                while offer is None:
                    ev = await asyncio.wait_for(events.get(), 10)
                    if ev.subscribed is not None:
                        fid = ev.subscribed.framework_id
                    if ev.offers is not None and ev.offers.offers:
                        offer = ev.offers.offers[0]
                assert fid is not None
                hdrs = {"Content-Type": codec.MSGPACK, "Mesos-Stream-Id": sid}
                revive = codec.encode_msgpack(mesos.Call.make_revive(fid))
                t0 = time.perf_counter()
                for _ in range(calls):
                    async with s.post(svc.url + "/api/v1/scheduler", data=revive, headers=hdrs) as r:
                        assert r.status == 202
                call_rate = calls / (time.perf_counter() - t0)
                lat: list[float] = []
                for i in range(launches):
                    op = mesos.Operation(type=mesos.OperationType.LAUNCH, launch=mesos.Launch(
                        task_infos=(task(f"b{i}", cpus=0.1, mem=32),)))
                    call = codec.encode_msgpack(mesos.Call.make_accept(fid, (offer.id,), (op,)))
                    before = agent.launches
                    t1 = time.perf_counter()
                    async with s.post(svc.url + "/api/v1/scheduler", data=call, headers=hdrs) as r:
                        assert r.status == 202
                    await agent.wait_for(lambda b=before: agent.launches > b)
                    lat.append((time.perf_counter() - t1) * 1000)
                reader.cancel()
                resp.close()
        finally:
            await agent.close()
            await svc.stop()
    lat.sort()
    return {
        "calls_per_sec": call_rate,
        "accept_to_agent_ms_p50": statistics.median(lat),
        "accept_to_agent_ms_p99": lat[int(len(lat) * 0.99) - 1],
    }


@click.command()
@click.option("--agents", default=200)
@click.option("--frameworks", default=5)
@click.option("--rounds", default=20)
@click.option("--calls", default=2000)
@click.option("--launches", default=200)
def main(agents: int, frameworks: int, rounds: int, calls: int, launches: int) -> None:
    core = bench_core(agents, frameworks, rounds)
    click.echo(f"core: {core['tasks']} tasks launched+finished in {core['seconds']:.2f}s "
               f"= {core['tasks_per_sec']:.0f} tasks/s ({agents} agents, {frameworks} frameworks)")
    import uvloop

    edge = uvloop.run(bench_edge(calls, launches))
    click.echo(f"edge: {edge['calls_per_sec']:.0f} scheduler calls/s (msgpack, one connection); ACCEPT -> agent "
               f"RunTasks p50 {edge['accept_to_agent_ms_p50']:.2f} ms, p99 {edge['accept_to_agent_ms_p99']:.2f} ms")


if __name__ == "__main__":  # pragma: no cover
    main()
