"""Warm service instances: no-op service tasks through the batch framework, against the
machine's raw spawn rate and Dask distributed, side by side in each run.

    .venv/bin/python scripts/bench/service.py                            # issue-level sizes, 3 runs
    .venv/bin/python scripts/bench/service.py --tasks 2000 --latency-tasks 200 --dask-tasks 0 --runs 1

One master, one agent (``--instances`` cpus) and the batch framework on loopback. Each run:

* **raw** -- ``--raw-tasks`` ``true`` processes spawned and reaped at concurrency
  ``--raw-concurrency`` (the same measure as ``e2e.py``): the rate a task that is a process pays;
* **service** -- ``POST /api/v1/jobs`` of a service job (``service: true``, ``count`` =
  ``--instances``, ``window`` = ``--window``) whose command is a no-op on the worker library
  (``for t in agora_service(): t.done()``) with ``--tasks`` inputs. The figure is service tasks
  per second from the first dispatch to the last result (the batch service's own timestamps of
  each service task, from ``GET /api/v1/jobs/{id}/results``); also submit -> SUCCEEDED, which
  includes starting the instances;
* **latency** -- a service job with one instance and ``window`` 1 (one service task at a time on
  an otherwise idle cluster): dispatch -> result per task, p50/p99;
* **dask** -- ``dask.distributed.LocalCluster`` with ``--instances`` worker processes of one
  thread, already started, ``client.map`` of a no-op over ``--dask-tasks`` inputs and
  ``client.gather``: tasks per second. Skipped (with a note) when dask is not installed
  (``AGORA_WITH_DASK=1 scripts/install`` installs it from PyPI) or ``--dask-tasks 0``.

Ratios: service/raw (target >= 10) and service/dask (target >= 2). Prints a table and a JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
import msgpack

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from scripts.bench.common import (
    BenchError,
    Proc,
    aggregate,
    emit_json,
    latency_ms,
    log,
    machine,
    print_table,
    run_main,
    start_agent,
    start_batch,
    start_master,
    stop_all,
)
from scripts.bench.e2e import raw_spawn_isolated

NOOP_WORKER = "from frameworks.service import agora_service\nfor t in agora_service():\n    t.done()\n"
MSGPACK = "application/x-msgpack"
HERE = str(Path(__file__).resolve())


async def service_job(
    http: aiohttp.ClientSession, url: str, worker: Path, inputs: list[str], instances: int, window: int, within: float
) -> dict[str, Any]:
    """Submit a service job and wait for it; its service tasks' timestamps."""
    t0 = time.perf_counter()
    body = {
        "shell": f"exec {sys.executable} {worker}", "service": True, "count": instances, "window": window,
        "cpus": 1.0, "mem": 128, "name": "bench-service", "inputs": inputs,
    }
    async with http.post(f"{url}/api/v1/jobs", data=msgpack.packb(body), headers={"Content-Type": MSGPACK, "Accept": MSGPACK}) as resp:
        answer = msgpack.unpackb(await resp.read())
        if resp.status != 201:
            raise BenchError(f"service submit: HTTP {resp.status} {answer}")
        job_id = answer["id"]
    deadline = t0 + within
    while True:
        async with http.get(f"{url}/api/v1/jobs/{job_id}?summary=1") as resp:
            job = await resp.json()
        if job["state"] in ("SUCCEEDED", "FAILED", "CANCELLED"):
            break
        if time.perf_counter() > deadline:
            raise BenchError(f"service job {job_id} not done after {within:.0f}s: {job}")
        await asyncio.sleep(0.02)
    wall = time.perf_counter() - t0
    if job["state"] != "SUCCEEDED":
        raise BenchError(f"service job {job_id} ended {job['state']}: {job.get('reason')}")
    tasks: list[dict[str, Any]] = []
    offset: int | None = 0
    while offset is not None:
        async with http.get(
            f"{url}/api/v1/jobs/{job_id}/results?offset={offset}&limit=100000", headers={"Accept": MSGPACK}
        ) as resp:
            page = msgpack.unpackb(await resp.read())
        tasks += page["tasks"]
        offset = page.get("next")
    if len(tasks) != len(inputs) or any(t["state"] != "DONE" for t in tasks):
        raise BenchError(f"service job {job_id}: {len(tasks)} service tasks, not all DONE")
    first = min(t["sent_at"] for t in tasks)
    last = max(t["ended_at"] for t in tasks)
    return {
        "job_id": job_id,
        "rate": len(tasks) / (last - first),
        "wall_rate": len(tasks) / wall,
        "latencies": [t["ended_at"] - t["sent_at"] for t in tasks],
    }


def _noop(x: str) -> str:
    return x


async def dask_isolated(n: int, workers: int) -> dict[str, Any] | None:
    """``dask_rate`` in a fresh interpreter (Dask's own event loop and threads, not this one's)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, HERE, "--dask-only", "--dask-tasks", str(n), "--instances", str(workers),
        stdout=asyncio.subprocess.PIPE,
    )
    out, _ = await proc.communicate()
    if proc.returncode != 0:
        raise BenchError(f"dask child failed ({proc.returncode})")
    result: dict[str, Any] | None = json.loads(out.decode().strip().splitlines()[-1])
    return result


def dask_rate(n: int, workers: int) -> dict[str, Any] | None:
    """Tasks/s of ``client.map`` of a no-op on a running LocalCluster (None: no dask here)."""
    try:
        from dask.distributed import Client, LocalCluster
    except ImportError:
        return None
    import logging

    logging.getLogger("distributed").setLevel(logging.ERROR)
    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        client.gather(client.map(_noop, [str(i) for i in range(min(n, 200))], pure=False))  # warm
        inputs = [str(i) for i in range(n)]
        t0 = time.perf_counter()
        futures = client.map(_noop, inputs, pure=False)
        out = client.gather(futures)
        dt = time.perf_counter() - t0
    if out != inputs:
        raise BenchError("dask returned other results")
    return {"rate": n / dt, "seconds": dt}


async def main(args: argparse.Namespace) -> int:
    base = Path(args.work_dir or tempfile.mkdtemp(prefix="agora-bench-service-"))
    procs: list[Proc] = []
    rows: list[dict[str, Any]] = []
    notes: list[str] = []
    worker = base / "noop_worker.py"
    await asyncio.to_thread(base.mkdir, parents=True, exist_ok=True)
    await asyncio.to_thread(worker.write_text, NOOP_WORKER)
    resources = f"cpus:{args.instances};mem:{256 * args.instances + 256};disk:1024"
    try:
        log(f"starting master + agent ({resources}) + batch in {base}")
        master = await start_master(base / "master")
        procs.append(master)
        procs.append(await start_agent(master.address, base / "agent", resources))
        batch = await start_batch(master.address, base / "batch")
        procs.append(batch)
        inputs = [str(i) for i in range(args.tasks)]
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=args.timeout)) as http:
            for i in range(args.runs):
                row: dict[str, Any] = {"run": i}
                log(f"run {i + 1}/{args.runs}: raw spawn of {args.raw_tasks} x true at concurrency {args.raw_concurrency}")
                raw = await raw_spawn_isolated(args.raw_tasks, args.raw_concurrency)
                row["raw_rate"] = raw["rate"]
                log(f"run {i + 1}/{args.runs}: service job, {args.tasks} no-op service tasks on {args.instances} instances")
                cpu0 = {p.name: p.cpu_seconds() for p in procs}
                s = await service_job(http, batch.url, worker, inputs, args.instances, args.window, args.timeout)
                cpu = {p.name: p.cpu_seconds() - cpu0[p.name] for p in procs}
                row.update(
                    service_rate=s["rate"], service_wall_rate=s["wall_rate"], service_ratio=s["rate"] / raw["rate"],
                    batch_cpu_us_per_task=1e6 * cpu[batch.name] / args.tasks,
                )
                if args.latency_tasks:
                    log(f"run {i + 1}/{args.runs}: latency, {args.latency_tasks} service tasks one at a time")
                    lat = await service_job(
                        http, batch.url, worker, [str(k) for k in range(args.latency_tasks)], 1, 1, args.timeout
                    )
                    ms = latency_ms(lat["latencies"])
                    row.update(latency_p50_ms=ms["p50_ms"], latency_p99_ms=ms["p99_ms"])
                if args.dask_tasks:
                    log(f"run {i + 1}/{args.runs}: dask LocalCluster, {args.dask_tasks} no-op tasks on {args.instances} workers")
                    d = await dask_isolated(args.dask_tasks, args.instances)
                    if d is None:
                        if not notes:
                            notes.append("dask is not installed (AGORA_WITH_DASK=1 scripts/install): no comparison")
                    else:
                        row.update(dask_rate=d["rate"], service_vs_dask=s["rate"] / d["rate"])
                rows.append(row)
                log("  " + "  ".join(f"{k} {v:.3g}" for k, v in row.items() if k != "run"))
    finally:
        await stop_all(procs)
        if not args.keep and not args.work_dir:
            shutil.rmtree(base, ignore_errors=True)

    agg = aggregate(rows)
    labels = [
        ("raw_rate", "raw spawn+reap of true (tasks/s)"),
        ("service_rate", "service tasks, first dispatch -> last result (tasks/s)"),
        ("service_wall_rate", "service job, submit -> SUCCEEDED (tasks/s)"),
        ("service_ratio", "service / raw (target >= 10)"),
        ("latency_p50_ms", "dispatch -> result p50, idle cluster (ms; target <= 1)"),
        ("latency_p99_ms", "dispatch -> result p99 (ms)"),
        ("dask_rate", "dask LocalCluster client.map (tasks/s)"),
        ("service_vs_dask", "service / dask (target >= 2)"),
        ("batch_cpu_us_per_task", "batch service CPU per service task (us)"),
    ]
    table = [(label, agg[k].median, agg[k].min, agg[k].max) for k, label in labels if k in agg]
    print_table(
        f"service: {args.tasks} no-op service tasks on {args.instances} warm instances (window {args.window}), "
        f"{args.runs} run(s)",
        ["figure", "median", "min", "max"],
        table,
    )
    for note in notes:
        print(note)
    m = machine()
    print(f"machine: {m['cores']} cores, {m['memory_gb']} GB, {m['cpu']}")
    met = {}
    if "service_ratio" in agg:
        met["service_ratio"] = agg["service_ratio"].median >= 10
    if "latency_p50_ms" in agg:
        met["latency_p50_ms"] = agg["latency_p50_ms"].median <= 1.0
    if "service_vs_dask" in agg:
        met["service_vs_dask"] = agg["service_vs_dask"].median >= 2
    emit_json(
        "service",
        {
            "params": {
                "tasks": args.tasks, "instances": args.instances, "window": args.window,
                "latency_tasks": args.latency_tasks, "dask_tasks": args.dask_tasks, "raw_tasks": args.raw_tasks,
                "raw_concurrency": args.raw_concurrency, "runs": args.runs,
            },
            "figures": agg,
            "met": met,
            "notes": notes,
            "runs": rows,
        },
    )
    return 0


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tasks", type=int, default=100_000, help="no-op service tasks per run")
    p.add_argument("--instances", type=int, default=os.cpu_count() or 2, help="warm instances (and dask workers)")
    p.add_argument("--window", type=int, default=256, help="service tasks in flight per instance")
    p.add_argument("--latency-tasks", type=int, default=2000, help="service tasks of the one-at-a-time latency job (0: skip)")
    p.add_argument("--dask-tasks", type=int, default=5000, help="tasks of the dask comparison (0: skip)")
    p.add_argument("--raw-tasks", type=int, default=1500, help="true processes of the raw spawn measure")
    p.add_argument("--raw-concurrency", type=int, default=64, help="as e2e.py's default cluster (2 agents x 32 slots)")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--timeout", type=float, default=300.0, help="seconds per measured phase")
    p.add_argument("--work-dir", help="keep everything (logs, sandboxes) under this directory")
    p.add_argument("--keep", action="store_true", help="keep the temporary work directory")
    p.add_argument("--dask-only", action="store_true", help=argparse.SUPPRESS)
    return p.parse_args(argv)


if __name__ == "__main__":
    _args = parse()
    if _args.dask_only:
        print(json.dumps(dask_rate(_args.dask_tasks, _args.instances)))
        sys.exit(0)
    sys.exit(run_main(main(_args)))
