"""End-to-end task throughput with real processes, against the machine's own spawn limit.

    .venv/bin/python scripts/bench/e2e.py                      # issue-level sizes, 3 runs
    .venv/bin/python scripts/bench/e2e.py --tasks 40 --runs 1  # smoke (a few seconds)

One master and ``--agents`` real agents on loopback (subprocesses, ``--slots`` concurrent tasks
each). Each run measures, side by side:

* **raw** — the machine's limit: ``--tasks`` ``true`` processes spawned and reaped with
  ``asyncio.create_subprocess_exec`` at the cluster's concurrency (agents × slots);
* **native** — a framework on the client library (``SchedulerDriver`` + ``HttpTransport``,
  msgpack, ``REUSABLE_OFFERS``) launching ``--tasks`` ``true`` tasks through the public path
  (offers, ACCEPT, agent launch, status updates, acknowledgements): tasks/s from the first ACCEPT
  to the last terminal update, and the launch latency ACCEPT → TASK_RUNNING (p50/p99);
* **batch** — the batch framework (``python -m frameworks.batch``): ``POST /api/v1/jobs`` with
  ``count`` = ``--tasks``, until the job is SUCCEEDED.

The ratio native/raw and batch/raw is the figure (target ≥ 0.5). Prints a table and a JSON line.
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

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from protocol.mesos import CommandInfo
from scripts.bench.common import (
    BenchError,
    Proc,
    PySpy,
    aggregate,
    emit_json,
    latency_ms,
    log,
    machine,
    print_profile,
    print_table,
    run_framework,
    run_main,
    start_agent,
    start_batch,
    start_master,
    stop_all,
)

HERE = Path(__file__).resolve()


# --- the machine's limit -----------------------------------------------------------------------


async def raw_spawn(n: int, concurrency: int, argv: tuple[str, ...] = ("true",)) -> dict[str, Any]:
    """Spawn and reap ``n`` processes with at most ``concurrency`` alive; processes per second."""
    exe = shutil.which(argv[0]) or argv[0]
    left = n
    latencies: list[float] = []

    async def worker() -> None:
        nonlocal left
        while left > 0:
            left -= 1
            t = time.perf_counter()
            p = await asyncio.create_subprocess_exec(
                exe,
                *argv[1:],
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.DEVNULL,
            )
            await p.wait()
            latencies.append(time.perf_counter() - t)

    t0 = time.perf_counter()
    c0 = _self_cpu()
    await asyncio.gather(*(worker() for _ in range(max(1, min(concurrency, n)))))
    dt = time.perf_counter() - t0
    return {
        "tasks": n,
        "concurrency": concurrency,
        "seconds": dt,
        "rate": n / dt,
        "cpu_ms_per_task": 1000 * (_self_cpu() - c0) / n,  # the spawning process (not the children)
        **_prefixed("spawn", latencies),
    }


def _self_cpu() -> float:
    t = os.times()
    return t.user + t.system


async def raw_spawn_isolated(n: int, concurrency: int) -> dict[str, Any]:
    """``raw_spawn`` in a fresh interpreter on the stdlib asyncio loop (the plain-asyncio limit,
    not skewed by this process's size or loop)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(HERE),
        "--raw-only",
        "--tasks",
        str(n),
        "--raw-concurrency",
        str(concurrency),
        stdout=asyncio.subprocess.PIPE,
    )
    out, _ = await proc.communicate()
    if proc.returncode != 0:
        raise BenchError(f"raw spawn child failed ({proc.returncode})")
    result: dict[str, Any] = json.loads(out.decode().strip().splitlines()[-1])
    return result


def _prefixed(prefix: str, seconds: list[float]) -> dict[str, float]:
    return {f"{prefix}_{k}": v for k, v in latency_ms(seconds).items() if k != "n"}


# --- the native framework ----------------------------------------------------------------------


async def run_native(
    master: str, n: int, cpus: float, mem: float, within: float, ack_workers: int = 0
) -> dict[str, Any]:
    return await run_framework(
        master,
        n,
        cpus,
        mem,
        within,
        command=CommandInfo(shell=False, value="true", arguments=("true",)),
        ack_workers=ack_workers,
        name="bench-e2e",
    )


# --- the batch framework -----------------------------------------------------------------------


async def run_batch(url: str, n: int, cpus: float, mem: float, within: float) -> dict[str, Any]:
    async with aiohttp.ClientSession() as http:
        t0 = time.perf_counter()
        wall0 = time.time()
        async with http.post(
            f"{url}/api/v1/jobs", json={"argv": ["true"], "count": n, "cpus": cpus, "mem": mem, "name": "bench"}
        ) as resp:
            body = await resp.json()
            if resp.status != 201:
                raise BenchError(f"batch submit: HTTP {resp.status} {body}")
            job_id = body["id"]
        deadline = t0 + within
        job: dict[str, Any] = {}
        while True:
            async with http.get(f"{url}/api/v1/jobs") as resp:
                jobs = (await resp.json())["jobs"]
            job = next((j for j in jobs if j["id"] == job_id), {})
            if job.get("state") in ("SUCCEEDED", "FAILED", "CANCELLED"):
                break
            if time.perf_counter() > deadline:
                raise BenchError(f"batch job {job_id} not done after {within:.0f}s: {job}")
            await asyncio.sleep(0.02)
        dt = time.perf_counter() - t0
        failures: list[str] = []
        if job["state"] != "SUCCEEDED":
            async with http.get(f"{url}/api/v1/jobs/{job_id}") as resp:
                detail = await resp.json()
            for t in detail.get("task_list", []):
                for a in t.get("history", []):
                    if a.get("state") not in (None, "TASK_FINISHED", "TASK_RUNNING", "TASK_STARTING"):
                        failures.append(f"task {t['index']}: {a.get('state')} {a.get('message')}")
    if job["state"] == "CANCELLED" or (job["state"] == "FAILED" and not failures):
        raise BenchError(f"batch job {job_id} ended {job['state']}: {job.get('reason')} {job.get('tasks')}")
    if failures:
        log(f"  batch job {job_id} ended {job['state']} {job.get('tasks')}: {failures[:3]}")
    out: dict[str, Any] = {"tasks": n, "seconds": dt, "rate": n / dt, "job_id": job_id, "failed": len(failures)}
    started, ended = job.get("started_at"), job.get("ended_at")
    if isinstance(started, int | float) and isinstance(ended, int | float) and ended > started:
        # the job's own first-start -> last-end (wall clock), excluding submission and polling
        out["job_seconds"] = ended - started
        out["job_rate"] = n / (ended - started)
        out["queue_delay_s"] = max(0.0, started - wall0)
    return out


# --- the benchmark -----------------------------------------------------------------------------


async def main(args: argparse.Namespace) -> int:
    base = Path(args.work_dir or tempfile.mkdtemp(prefix="agora-bench-e2e-"))
    procs: list[Proc] = []
    concurrency = args.agents * args.slots
    resources = (
        f"cpus:{args.slots * args.task_cpus:g};mem:{args.slots * args.task_mem + 256:g};"
        f"disk:1024;ports:[31000-31999]"
    )
    rows: list[dict[str, Any]] = []
    spies: dict[str, PySpy] = {}
    profiles: dict[str, Any] = {}
    try:
        log(f"starting master + {args.agents} agents ({resources}) in {base}")
        master = await start_master(base / "master", *args.master_arg)
        procs.append(master)
        agents = await asyncio.gather(
            *(start_agent(master.address, base / f"agent{i}", resources, *args.agent_arg) for i in range(args.agents))
        )
        procs.extend(agents)
        batch: Proc | None = None
        if not args.skip_batch:
            batch = await start_batch(master.address, base / "batch", *args.batch_arg)
            procs.append(batch)
        if args.warmup:
            log(f"warm-up: {args.warmup} tasks")
            await run_native(master.address, args.warmup, args.task_cpus, args.task_mem, args.timeout)
        for i in range(args.runs):
            row: dict[str, Any] = {"run": i}
            log(f"run {i + 1}/{args.runs}: raw spawn of {args.tasks} x true at concurrency {concurrency}")
            raw = await raw_spawn_isolated(args.tasks, concurrency)
            row["raw_rate"] = raw["rate"]
            row["raw_spawn_p50_ms"] = raw["spawn_p50_ms"]
            log(f"run {i + 1}/{args.runs}: native framework, {args.tasks} tasks")
            if args.profile and i == 0:
                spies = {
                    "master": PySpy(master.pid, base / "profile-master.txt"),
                    "agent": PySpy(agents[0].pid, base / "profile-agent.txt"),
                    "framework": PySpy(os.getpid(), base / "profile-framework.txt"),
                }
                for spy in spies.values():
                    await spy.start()
            cpu0 = {p.name: p.cpu_seconds() for p in procs}
            me0 = _self_cpu()
            nat = await run_native(
                master.address, args.tasks, args.task_cpus, args.task_mem, args.timeout, args.ack_workers
            )
            cpu = {p.name: p.cpu_seconds() - cpu0[p.name] for p in procs}
            per_task = 1000.0 / args.tasks
            row.update(
                master_cpu_ms_per_task=cpu["master"] * per_task,
                agents_cpu_ms_per_task=sum(v for k, v in cpu.items() if k.startswith("agent")) * per_task,
                framework_cpu_ms_per_task=(_self_cpu() - me0) * per_task,
                raw_cpu_ms_per_task=raw["cpu_ms_per_task"],
            )
            for who, spy in spies.items():
                await spy.stop()
                profiles[who] = spy.summary()
            spies = {}
            row.update(
                native_rate=nat["rate"],
                native_ratio=nat["rate"] / raw["rate"],
                launch_p50_ms=nat["launch_p50_ms"],
                launch_p99_ms=nat["launch_p99_ms"],
                native_failed=nat["failed"],
                native_replanned=nat["retried"] + nat["unsent"],
                native_overclaims=nat["overclaims"],
                native_accepts=nat["accepts"],
                native_max_in_flight=nat["max_in_flight"],
            )
            if nat["errors"]:
                log(f"  native errors: {nat['errors']}")
            if batch is not None:
                log(f"run {i + 1}/{args.runs}: batch job, count {args.tasks}")
                bspy = PySpy(batch.pid, base / "profile-batch.txt") if args.profile and i == 0 else None
                if bspy is not None:
                    await bspy.start()
                bcpu0 = {p.name: p.cpu_seconds() for p in procs}
                b = await run_batch(batch.url, args.tasks, args.task_cpus, args.task_mem, args.timeout)
                bcpu = {p.name: p.cpu_seconds() - bcpu0[p.name] for p in procs}
                row.update(
                    batch_service_cpu_ms_per_task=bcpu[batch.name] * per_task,
                    batch_master_cpu_ms_per_task=bcpu["master"] * per_task,
                    batch_agents_cpu_ms_per_task=sum(v for k, v in bcpu.items() if k.startswith("agent")) * per_task,
                )
                if bspy is not None:
                    await bspy.stop()
                    profiles["batch framework"] = bspy.summary()
                row.update(batch_rate=b["rate"], batch_ratio=b["rate"] / raw["rate"], batch_failed=b["failed"])
                if "job_rate" in b:
                    row["batch_job_rate"] = b["job_rate"]
            rows.append(row)
            batch_note = (
                f"  batch {row['batch_rate']:.0f}/s ({100 * row['batch_ratio']:.0f}%)" if "batch_rate" in row else ""
            )
            log(
                f"  raw {row['raw_rate']:.0f}/s  native {row['native_rate']:.0f}/s ({100 * row['native_ratio']:.0f}%)"
                f"  launch p50 {row['launch_p50_ms']:.1f} ms p99 {row['launch_p99_ms']:.1f} ms{batch_note}"
            )
        rss = {p.name: p.rss() for p in procs}
    finally:
        await stop_all(procs)
        if not args.keep and not args.work_dir:
            shutil.rmtree(base, ignore_errors=True)

    agg = aggregate(rows)
    labels = [
        ("raw_rate", "raw spawn+reap (tasks/s)"),
        ("native_rate", "native client (tasks/s)"),
        ("native_ratio", "native / raw"),
        ("launch_p50_ms", "launch latency p50 (ms)"),
        ("launch_p99_ms", "launch latency p99 (ms)"),
        ("batch_rate", "batch submit→SUCCEEDED (tasks/s)"),
        ("batch_job_rate", "batch first start→last end (tasks/s)"),
        ("batch_ratio", "batch / raw"),
        ("raw_cpu_ms_per_task", "raw: spawning process CPU per task (ms)"),
        ("master_cpu_ms_per_task", "native: master CPU per task (ms)"),
        ("agents_cpu_ms_per_task", "native: agents CPU per task (ms, w/o tasks)"),
        ("framework_cpu_ms_per_task", "native: framework CPU per task (ms)"),
        ("batch_service_cpu_ms_per_task", "batch: batch service CPU per task (ms)"),
        ("batch_master_cpu_ms_per_task", "batch: master CPU per task (ms)"),
        ("batch_agents_cpu_ms_per_task", "batch: agents CPU per task (ms, w/o tasks)"),
    ]
    table = [(label, agg[k].median, agg[k].min, agg[k].max) for k, label in labels if k in agg]
    print_table(
        f"e2e: {args.tasks} x true, {args.agents} agents x {args.slots} slots (concurrency {concurrency}), "
        f"{args.runs} run(s); target native/raw and batch/raw >= 0.5",
        ["figure", "median", "min", "max"],
        table,
    )
    for who, summary in profiles.items():
        print_profile(f"profile of the {who} (py-spy, native run 1)", summary)
    m = machine()
    print(f"machine: {m['cores']} cores, {m['memory_gb']} GB, {m['cpu']}")
    emit_json(
        "e2e",
        {
            "params": {
                "tasks": args.tasks,
                "agents": args.agents,
                "slots": args.slots,
                "concurrency": concurrency,
                "task_cpus": args.task_cpus,
                "task_mem": args.task_mem,
                "runs": args.runs,
                "ack_workers": args.ack_workers,
            },
            "figures": agg,
            "target_ratio": 0.5,
            "met": {
                k: agg[k].median >= 0.5 for k in ("native_ratio", "batch_ratio") if k in agg
            },
            "rss_bytes": rss,
            "profiles": profiles,
            "runs": rows,
        },
    )
    return 0


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tasks", type=int, default=1500, help="tasks per run (each of raw, native, batch)")
    p.add_argument("--agents", type=int, default=2, help="real agents")
    p.add_argument("--slots", type=int, default=32, help="concurrent tasks per agent")
    p.add_argument("--task-cpus", type=float, default=0.01)
    p.add_argument("--task-mem", type=float, default=1.0)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--warmup", type=int, default=0, help="tasks launched once before the measured runs")
    p.add_argument("--timeout", type=float, default=300.0, help="seconds per measured phase")
    p.add_argument("--ack-workers", type=int, default=0, help="the driver's ack_concurrency (0 = its default)")
    p.add_argument("--profile", action="store_true", help="py-spy the master, agent 0 and the framework (run 1)")
    p.add_argument("--skip-batch", action="store_true", help="do not measure the batch framework")
    p.add_argument("--raw-only", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--raw-concurrency", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--work-dir", help="keep everything (logs, sandboxes) under this directory")
    p.add_argument("--keep", action="store_true", help="keep the temporary work directory")
    p.add_argument("--master-arg", action="append", default=[], help="extra flag for agora-master")
    p.add_argument("--agent-arg", action="append", default=[], help="extra flag for agora-agent")
    p.add_argument("--batch-arg", action="append", default=[], help="extra flag for the batch service")
    return p.parse_args(argv)


if __name__ == "__main__":
    _args = parse()
    if _args.raw_only:
        print(json.dumps(asyncio.run(raw_spawn(_args.tasks, _args.raw_concurrency or 1))))
        sys.exit(0)
    sys.exit(run_main(main(_args)))
