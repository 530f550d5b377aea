"""Submit to running: `agora job submit` to the task's TASK_RUNNING on an idle local cluster.

    .venv/bin/python scripts/bench/submit.py                  # 50 jobs one after the other, 3 runs
    .venv/bin/python scripts/bench/submit.py --jobs 5 --runs 1

One master, one agent and the batch framework on loopback. Each job is one ``true`` task,
submitted as the CLI does (``POST /api/v1/jobs`` with JSON); the figure is the time from just
before the POST to the batch service's record of the task's TASK_RUNNING (the attempt's
``started_at``: both clocks are this machine's). The next job is submitted once the previous one
has ended, so each meets an idle cluster. Also: the POST's own round trip (submit -> 201).
Target: p50 <= 20 ms (Slurm on a comparable machine: >= 1 s). Prints a table and a JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

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
    run_main,
    start_agent,
    start_batch,
    start_master,
    stop_all,
)


async def one_job(http: aiohttp.ClientSession, url: str, within: float) -> tuple[float, float]:
    """(submit -> TASK_RUNNING, submit -> 201) in seconds, for one job of one ``true`` task."""
    t0 = time.time()
    async with http.post(f"{url}/api/v1/jobs", json={"argv": ["true"], "cpus": 0.1, "mem": 16, "name": "bench-submit"}) as r:
        body = await r.json()
        if r.status != 201:
            raise BenchError(f"submit: HTTP {r.status} {body}")
    accepted = time.time() - t0
    job_id = body["id"]
    deadline = time.monotonic() + within
    while True:
        async with http.get(f"{url}/api/v1/jobs/{job_id}?task=0") as r:
            job = await r.json()
        if job["state"] in ("SUCCEEDED", "FAILED", "CANCELLED"):
            break
        if time.monotonic() > deadline:
            raise BenchError(f"job {job_id} not done after {within:.0f}s: {job.get('state')} {job.get('reason')}")
        await asyncio.sleep(0.005)
    if job["state"] != "SUCCEEDED":
        raise BenchError(f"job {job_id} ended {job['state']}: {job.get('reason')}")
    started = job["task_list"][0]["history"][0]["started_at"]
    if started is None:  # it finished before its RUNNING update was recorded
        started = job["task_list"][0]["history"][0]["ended_at"]
    return started - t0, accepted


async def main(args: argparse.Namespace) -> int:
    base = Path(args.work_dir or tempfile.mkdtemp(prefix="agora-bench-submit-"))
    procs: list[Proc] = []
    rows: list[dict[str, Any]] = []
    profiles: dict[str, Any] = {}
    try:
        log(f"starting master + agent + batch in {base}")
        master = await start_master(base / "master")
        procs.append(master)
        agent = await start_agent(master.address, base / "agent", "cpus:2;mem:1024;disk:1024")
        procs.append(agent)
        batch = await start_batch(master.address, base / "batch")
        procs.append(batch)
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=args.timeout)) as http:
            await one_job(http, batch.url, args.timeout)  # the first offers reach the framework
            for i in range(args.runs):
                spies: dict[str, PySpy] = {}
                if args.profile and i == 0:
                    spies = {
                        "batch service": PySpy(batch.pid, base / "profile-batch.txt"),
                        "master": PySpy(master.pid, base / "profile-master.txt"),
                        "agent": PySpy(agent.pid, base / "profile-agent.txt"),
                    }
                    for spy in spies.values():
                        await spy.start()
                running, accepted = [], []
                for _ in range(args.jobs):
                    r, a = await one_job(http, batch.url, args.timeout)
                    running.append(r)
                    accepted.append(a)
                for who, spy in spies.items():
                    await spy.stop()
                    profiles[who] = spy.summary()
                ms = latency_ms(running)
                row = {
                    "run": i, "submit_to_running_p50_ms": ms["p50_ms"], "submit_to_running_p99_ms": ms["p99_ms"],
                    "submit_to_accepted_p50_ms": latency_ms(accepted)["p50_ms"],
                }
                rows.append(row)
                log(f"run {i + 1}/{args.runs}: " + "  ".join(f"{k} {v:.3g}" for k, v in row.items() if k != "run"))
    finally:
        await stop_all(procs)
        if not args.keep and not args.work_dir:
            shutil.rmtree(base, ignore_errors=True)
    agg = aggregate(rows)
    labels = [
        ("submit_to_running_p50_ms", "submit -> TASK_RUNNING p50 (ms; target <= 20)"),
        ("submit_to_running_p99_ms", "submit -> TASK_RUNNING p99 (ms)"),
        ("submit_to_accepted_p50_ms", "submit -> 201 p50 (ms)"),
    ]
    print_table(
        f"submit: {args.jobs} one-task jobs one after the other on an idle cluster, {args.runs} run(s)",
        ["figure", "median", "min", "max"],
        [(label, agg[k].median, agg[k].min, agg[k].max) for k, label in labels if k in agg],
    )
    for who, summary in profiles.items():
        print_profile(f"profile of the {who} (py-spy, run 1)", summary)
    m = machine()
    print(f"machine: {m['cores']} cores, {m['memory_gb']} GB, {m['cpu']}")
    emit_json(
        "submit",
        {
            "params": {"jobs": args.jobs, "runs": args.runs},
            "figures": agg,
            "met": {"submit_to_running_p50_ms": agg["submit_to_running_p50_ms"].median <= 20.0} if agg else {},
            "profiles": profiles,
            "runs": rows,
        },
    )
    return 0


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--jobs", type=int, default=50, help="jobs per run, one after the other")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--timeout", type=float, default=60.0, help="seconds per job")
    p.add_argument("--work-dir", help="keep everything (logs, sandboxes) under this directory")
    p.add_argument("--keep", action="store_true", help="keep the temporary work directory")
    p.add_argument("--profile", action="store_true", help="py-spy the batch service, master and agent (run 1)")
    return p.parse_args(argv)


if __name__ == "__main__":
    sys.exit(run_main(main(parse())))
