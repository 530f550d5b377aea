"""CPU throttling accuracy of the agent's kernel isolator, on this machine's real cgroups.

    .venv/bin/python scripts/bench/isolation.py              # cpus 0.25, 0.5, 1.0; 3 s each, 3 runs
    .venv/bin/python scripts/bench/isolation.py --seconds 1 --runs 1

A busy loop (``python -c 'while True: pass'``) is started the way the agent starts a task (its
``/bin/sh`` wrapper joining the task's cgroups, ``agent/launcher.py``) in a cgroup the isolator
``--isolation auto`` picks here prepared for ``cpus`` (cgroup v1: ``cpu.cfs_quota_us`` =
cpus x 100 ms per 100 ms period, ``cpu.shares``; v2: ``cpu.max``). After a 0.3 s start the
task's CPU-seconds (the cgroup's counter) are read over ``--seconds`` of wall time: the rate
against the limit is the figure, with the periods the kernel throttled. A rate below the limit
on a busy machine is the machine, not the quota: the load average is printed with the table.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from agent.isolation import CgroupOptions, MonitorIsolator, detect
from agent.launcher import Launcher
from scripts.bench.common import emit_json, print_table, spread

SPIN = "while True: pass"


def _throttled(iso: Any, key: str) -> int | None:
    """Periods throttled so far (cgroup v1 ``cpu.stat``; v2 the same file in the task's cgroup)."""
    dirs = getattr(iso, "_dirs", None)
    path = dirs(key)["cpu"] / "cpu.stat" if dirs is not None else iso.cgroup_dir(key) / "cpu.stat"
    try:
        stat = dict(ln.split() for ln in Path(path).read_text().splitlines())
    except (OSError, ValueError):
        return None
    return int(stat.get("nr_throttled", 0))


async def measure(iso: Any, work: Path, cpus: float | None, seconds: float, n: int) -> dict[str, Any]:
    loop = asyncio.get_running_loop()
    ended: asyncio.Future[int | None] = loop.create_future()
    def on_exit(_key: str, code: int | None) -> None:
        if not ended.done():
            ended.set_result(code)

    la = Launcher(on_exit)
    key = f"t/bench/spin-{n}"
    join = iso.prepare(key, None, cpus)
    sb = work / f"spin-{n}"
    la.launch(key, [sys.executable, "-c", SPIN], {"PATH": os.environ["PATH"]}, sb, work / f"spin-{n}.exit", join)
    try:
        await asyncio.sleep(0.3)  # the interpreter's start
        u0, th0, t0 = iso.usage(key), _throttled(iso, key), time.monotonic()
        await asyncio.sleep(seconds)
        u1, th1, t1 = iso.usage(key), _throttled(iso, key), time.monotonic()
        rate = (u1.cpu_seconds - u0.cpu_seconds) / (t1 - t0)
        throttled = None if th0 is None or th1 is None else th1 - th0
        return {"rate": rate, "throttled_periods": throttled}
    finally:
        la.signal(key, "KILL")
        await asyncio.wait_for(ended, 20)
        iso.release(key)


async def main(args: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory(prefix="agora-bench-iso-") as tmp:
        work = Path(tmp)
        iso = detect(args.isolation, work / "agent", CgroupOptions(cgroups_root="agora-bench"))
        if isinstance(iso, MonitorIsolator):
            print(f"no cgroup isolator here: {iso.describe().get('why')}", file=sys.stderr)
            return 2
        try:
            rows, out = [], []
            for cpus in args.cpus:
                runs = [await measure(iso, work, cpus, args.seconds, i) for i in range(args.runs)]
                rates = spread(r["rate"] for r in runs)
                throttled = [r["throttled_periods"] for r in runs if r["throttled_periods"] is not None]
                err = 100.0 * (rates.median - cpus) / cpus
                rows.append([f"{cpus:g}", f"{rates.median:.3f}", f"{rates.min:.3f}-{rates.max:.3f}", f"{err:+.1f}%",
                             f"{min(throttled) if throttled else '-'}"])
                out.append({"cpus": cpus, "rate": rates, "error_pct": err, "throttled_periods": throttled})
            load = os.getloadavg()
            print_table(
                f"CPU quota accuracy ({iso.describe().get('name', type(iso).__name__)}; "
                f"{args.seconds:g} s per run, {args.runs} runs; load {load[0]:.2f} on {os.cpu_count()} CPUs)",
                ["cpus", "CPU-s/s (median)", "min-max", "vs limit", "throttled periods (min)"], rows,
            )
            emit_json("isolation", {"isolator": iso.describe(), "seconds": args.seconds, "results": out,
                                    "loadavg": load})
        finally:
            iso.cleanup(set())
            iso.close()
    return 0


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cpus", type=float, nargs="+", default=[0.25, 0.5, 1.0])
    p.add_argument("--seconds", type=float, default=3.0, help="wall seconds measured per run")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--isolation", default="auto", choices=["auto", "cgroups-v1", "cgroups-v2"])
    return p.parse_args(argv)


if __name__ == "__main__":
    sys.exit(asyncio.run(main(parse())))
