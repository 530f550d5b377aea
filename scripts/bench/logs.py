"""What a task writing a lot to stdout pays for the agent's log rotation, with real processes.

    .venv/bin/python scripts/bench/logs.py                  # 1 GB, 3 runs
    .venv/bin/python scripts/bench/logs.py --mb 256 --runs 1

A task runs ``dd if=/dev/zero bs=1M count=MB`` to its stdout and times itself (``date`` before
and after, printed on stderr). It runs five ways: outside Agora with stdout to /dev/null (the
writes alone), into a pipe drained by ``cat`` (a pipe's cost) and into a file in the same temporary
directory as the agent's work dir (what a task writing its own file pays), then as a
task of the batch service on a real master and agent, once with the agent's defaults
(``--log-max-size 10MB --log-max-files 5``, the log writer process rotating) and once with
``--log-max-size 0`` (plain files). Printed per way: the task's MB/s, the sandbox's stdout
bytes at the end, and the agent's RSS before and after.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from scripts.bench.common import (
    emit_json,
    print_table,
    spread,
    start_agent,
    start_batch,
    start_master,
    stop_all,
    wait_until,
)

TIMED = "s=$(date +%s.%N); dd if=/dev/zero bs=1M count={mb} status=none{sink}; e=$(date +%s.%N); echo \"took $s $e\" >&2"


def _took(stderr: str) -> float:
    line = next(ln for ln in stderr.splitlines() if ln.startswith("took "))
    _, s, e = line.split()
    return float(e) - float(s)


async def outside(mb: int, sink: str) -> float:
    proc = await asyncio.create_subprocess_shell(
        TIMED.format(mb=mb, sink=sink), stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE
    )
    _, err = await proc.communicate()
    return _took(err.decode())


async def as_task(mb: int, work: Path, agent_args: tuple[str, ...]) -> dict[str, Any]:
    master = await start_master(work / "master")
    procs = [master]
    try:
        agent = await start_agent(master.url, work / "agent", "cpus:2;mem:1024;disk:100000", "--isolation", "psutil",
                                  *agent_args)
        procs.append(agent)
        batch = await start_batch(master.url, work / "batch")
        procs.append(batch)
        me = psutil.Process(agent.pid)
        rss0 = me.memory_info().rss
        async with aiohttp.ClientSession() as http:
            async with http.post(f"{batch.url}/api/v1/jobs",
                                 json={"shell": TIMED.format(mb=mb, sink=""), "cpus": 1, "mem": 64}) as r:
                job = (await r.json())["id"]

            async def done() -> bool:
                async with http.get(f"{batch.url}/api/v1/jobs/{job}?summary=1") as r:
                    return (await r.json())["state"] in ("SUCCEEDED", "FAILED", "CANCELLED")

            await wait_until(done, 600, interval=0.2, what="the task")
            async with http.get(f"{batch.url}/api/v1/jobs/{job}/logs", params={"stream": "stderr"}) as r:
                took = _took((await r.json())["data"])
            async with http.get(f"{batch.url}/api/v1/jobs/{job}/logs", params={"offset": "-1"}) as r:
                stream = (await r.json())["offset"]
        kept = sum(p.stat().st_size for p in (work / "agent" / "sandboxes").rglob("stdout*") if p.is_file())
        return {"seconds": took, "kept_bytes": kept, "stream_bytes": stream, "agent_rss_before": rss0,
                "agent_rss_after": me.memory_info().rss}
    finally:
        await stop_all(procs)


async def main(args: argparse.Namespace) -> int:
    mb = args.mb
    ways: dict[str, list[dict[str, Any]]] = {"/dev/null": [], "pipe to cat": [], "a file": [],
                                             "agent, rotation": [], "agent, plain files": []}
    for _ in range(args.runs):
        ways["/dev/null"].append({"seconds": await outside(mb, "")})
        ways["pipe to cat"].append({"seconds": await outside(mb, " | cat > /dev/null")})
        with tempfile.TemporaryDirectory(prefix="agora-bench-logs-") as tmp:
            ways["a file"].append({"seconds": await outside(mb, f" > {tmp}/out")})
            (Path(tmp) / "out").unlink()
            ways["agent, rotation"].append(await as_task(mb, Path(tmp) / "rot", ()))
            ways["agent, plain files"].append(await as_task(mb, Path(tmp) / "plain", ("--log-max-size", "0")))
    rows, out = [], {}
    for name, runs in ways.items():
        rate = spread(mb / r["seconds"] for r in runs)
        last = runs[-1]
        kept = f"{last['kept_bytes'] >> 20} MB of {last['stream_bytes'] >> 20} MB" if "kept_bytes" in last else "-"
        rss = (f"{last['agent_rss_before'] >> 20} -> {last['agent_rss_after'] >> 20} MB"
               if "agent_rss_before" in last else "-")
        rows.append([name, f"{rate.median:.0f}", f"{rate.min:.0f}-{rate.max:.0f}", kept, rss])
        out[name] = {"mb_per_s": rate, "last": last}
    print_table(f"{mb} MB to stdout ({args.runs} runs; the task's own timing)",
                ["where stdout goes", "MB/s (median)", "min-max", "sandbox stdout", "agent RSS"], rows)
    emit_json("logs", {"mb": mb, "runs": args.runs, "ways": out, "at": time.time()})
    return 0


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mb", type=int, default=1024, help="megabytes the task writes")
    p.add_argument("--runs", type=int, default=3)
    return p.parse_args(argv)


if __name__ == "__main__":
    sys.exit(asyncio.run(main(parse())))
