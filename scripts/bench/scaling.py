"""Scaling with cores: ``e2e.py`` (native client, real ``true`` processes) with 1, 2, 4, ...
agents up to the machine's cores, each against the raw spawn rate at the same concurrency.

    .venv/bin/python scripts/bench/scaling.py                       # 1, 2, 4, ... cores agents, 3 runs each
    .venv/bin/python scripts/bench/scaling.py --max-agents 2 --tasks 200 --runs 1

Each size is one ``e2e.py --skip-batch`` run (a fresh master and N agents of ``--slots`` slots;
concurrency N x slots), so the sizes never share processes. Prints the scaling table (tasks/s,
the raw spawn rate at the same concurrency, their ratio, and the speed-up over one agent) and a
JSON line. Runs unattended on any machine, GPUs or not (``e2e.py`` gives its agents ``gpus:0``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from scripts.bench.common import BenchError, emit_json, log, machine, print_table, run_main

E2E = str(Path(__file__).resolve().parent / "e2e.py")


def sizes(max_agents: int) -> list[int]:
    """1, 2, 4, ... up to ``max_agents``, and ``max_agents`` itself."""
    out, n = [], 1
    while n < max_agents:
        out.append(n)
        n *= 2
    return [*out, max_agents]


async def e2e(agents: int, args: argparse.Namespace) -> dict[str, Any]:
    argv = [
        sys.executable, E2E, "--skip-batch", "--agents", str(agents), "--slots", str(args.slots),
        "--tasks", str(args.tasks * agents if args.tasks_per_agent else args.tasks), "--runs", str(args.runs),
        "--timeout", str(args.timeout),
    ]
    proc = await asyncio.create_subprocess_exec(*argv, stdout=asyncio.subprocess.PIPE)
    out, _ = await proc.communicate()
    if proc.returncode != 0:
        raise BenchError(f"e2e.py with {agents} agents failed ({proc.returncode})")
    result: dict[str, Any] = json.loads(out.decode().strip().splitlines()[-1])
    return result


async def main(args: argparse.Namespace) -> int:
    rows: list[dict[str, Any]] = []
    for n in sizes(args.max_agents or os.cpu_count() or 1):
        log(f"{n} agent(s) x {args.slots} slots")
        figures = (await e2e(n, args))["figures"]
        rows.append(
            {
                "agents": n,
                "concurrency": n * args.slots,
                "raw_rate": figures["raw_rate"],
                "native_rate": figures["native_rate"],
                "native_ratio": figures["native_ratio"],
            }
        )
    base = rows[0]["native_rate"]["median"]
    table = [
        (
            r["agents"], r["concurrency"], r["raw_rate"]["median"],
            f"{r['native_rate']['median']:,.0f} [{r['native_rate']['min']:,.0f}..{r['native_rate']['max']:,.0f}]",
            f"{r['native_ratio']['median']:.2f} [{r['native_ratio']['min']:.2f}..{r['native_ratio']['max']:.2f}]",
            f"{r['native_rate']['median'] / base:.2f}x",
        )
        for r in rows
    ]
    print_table(
        f"scaling: e2e.py native client, {args.runs} run(s) per size, median [min..max]",
        ["agents", "concurrency", "raw tasks/s", "native tasks/s", "native / raw", "vs 1 agent"],
        table,
    )
    m = machine()
    print(f"machine: {m['cores']} cores, {m['memory_gb']} GB, {m['cpu']}")
    emit_json("scaling", {"params": vars(args), "sizes": rows})
    return 0


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--max-agents", type=int, default=0, help="the largest size (default: the machine's cores)")
    p.add_argument("--slots", type=int, default=32, help="concurrent tasks per agent")
    p.add_argument("--tasks", type=int, default=1500, help="tasks per run (per agent with --tasks-per-agent)")
    p.add_argument("--tasks-per-agent", action="store_true", help="scale the tasks with the agents")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--timeout", type=float, default=300.0)
    return p.parse_args(argv)


if __name__ == "__main__":
    sys.exit(run_main(main(parse())))
