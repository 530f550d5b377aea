"""Reusable-offer latency: from a task's terminal update to the next task RUNNING on the same
resources, with REUSABLE_OFFERS against the classic path (offer consumed by ACCEPT, a new offer
after the allocator's next round — 1 s allocation interval in Mesos).

    .venv/bin/python scripts/bench/reuse.py                    # real master + real agent processes
    .venv/bin/python scripts/bench/reuse.py --agent sim        # real master, simulated agent (no processes)
    .venv/bin/python scripts/bench/reuse.py --tasks 50 --runs 1

One master process and one agent with room for exactly one task (``--resources``). A framework on
the client library (``SchedulerDriver`` + ``HttpTransport``, msgpack) launches ``--tasks`` tasks
one after the other (``true`` with a real agent; the simulated agent reports RUNNING then
FINISHED at once). Each next task is launched as soon as the framework's offer cache has room
again. Latency per task = arrival of task i's TASK_RUNNING − arrival of task i−1's terminal
update, measured in the framework. Both modes run side by side in each of ``--runs`` runs
(medians with min..max over runs). Target: p50 ≤ 5 ms with reusable offers.

Agora's allocator is event-driven (a few ms batch window), so its classic path is already quick;
``--mesos-interval 1`` (the default) also runs both modes, with ``--interval-tasks`` tasks, on a
second master whose allocation batch is 1 s — the classic path as Mesos runs it, where freed
resources wait for the next allocation round while a lease still regrows at once.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from frameworks.client.driver import Scheduler, SchedulerDriver
from frameworks.client.placement import Ask, first_fit
from frameworks.client.transport import HttpTransport
from protocol.mesos import (
    Capability,
    CapabilityType,
    CommandInfo,
    FrameworkInfo,
    Offer,
    TaskInfo,
    TaskStatus,
)
from protocol.mesos_common import TaskID
from protocol.resources import Resources
from protocol.task_states import TaskState, is_terminal
from scripts.bench.common import (
    BenchError,
    Proc,
    bench_user,
    emit_json,
    latency_ms,
    log,
    percentile,
    print_table,
    run_main,
    spread,
    start_agent,
    start_master,
    stop_all,
)

TARGET_P50_MS = 5.0
WARMUP = 3


class ReuseProbe(Scheduler):
    """Launches ``total`` tasks strictly one at a time and timestamps the hand-over."""

    def __init__(self, total: int, shape: Resources, prefix: str, command: str) -> None:
        self.total = total
        self.shape = shape
        self.prefix = prefix
        self.command = command
        self.launched = 0
        self.busy = False
        self.ended_at: dict[int, float] = {}
        self.running_at: dict[int, float] = {}
        self.offer_of: dict[int, str] = {}
        self.launch_at: dict[int, float] = {}  # the launch decision (offer room seen)
        self.accepted_at: dict[int, float] = {}  # the ACCEPT call answered 202
        self.failed: list[str] = []
        self.done = asyncio.Event()
        self.first_launch = 0.0
        self.last_end = 0.0

    async def offers(self, driver: SchedulerDriver, offers: list[Offer]) -> None:
        await self.launch_next(driver)

    async def launch_next(self, driver: SchedulerDriver) -> None:
        if self.busy or self.launched >= self.total or not driver.connected:
            return
        p = first_fit(list(driver.offers), Ask(self.shape))
        if p is None:
            return
        i = self.launched
        self.launched += 1
        self.busy = True
        self.offer_of[i] = p.offer_id
        self.launch_at[i] = time.perf_counter()
        if i == 0:
            self.first_launch = time.perf_counter()
        info = TaskInfo(
            name=f"{self.prefix}-{i}",
            task_id=TaskID(f"{self.prefix}-{i}"),
            resources=p.resources.to_mesos(),
            command=CommandInfo(shell=False, value=self.command, arguments=(self.command,)),
        )
        await driver.launch(p.offer_id, [info])
        self.accepted_at[i] = time.perf_counter()

    async def update(self, driver: SchedulerDriver, status: TaskStatus) -> None:
        now = time.perf_counter()
        try:
            i = int(status.task_id.value.rsplit("-", 1)[1])
        except (IndexError, ValueError):
            return
        if status.state is TaskState.TASK_RUNNING:
            self.running_at.setdefault(i, now)
        elif is_terminal(status.state) and i not in self.ended_at:
            self.ended_at[i] = now
            self.last_end = now
            if status.state is not TaskState.TASK_FINISHED:
                self.failed.append(f"{status.task_id.value}: {status.state.name} {status.message or ''}")
            self.busy = False
            if len(self.ended_at) >= self.total:
                self.done.set()
            else:
                await self.launch_next(driver)

    def handovers(self) -> list[float]:
        out = []
        for i in range(1, self.launched):
            if i - 1 in self.ended_at and i in self.running_at:
                out.append(self.running_at[i] - self.ended_at[i - 1])
        return out[WARMUP:] if len(out) > WARMUP * 3 else out

    def segments(self) -> dict[str, list[float]]:
        """Where a hand-over's time goes: waiting for room in the offer (the regrowth OFFERS),
        the ACCEPT round trip, and ACCEPT sent -> TASK_RUNNING back (master + agent launch)."""
        out: dict[str, list[float]] = {"wait_offer": [], "accept_rtt": [], "launch_to_running": []}
        for i in range(1, self.launched):
            if i - 1 in self.ended_at and i in self.launch_at and i in self.running_at and i in self.accepted_at:
                out["wait_offer"].append(self.launch_at[i] - self.ended_at[i - 1])
                out["accept_rtt"].append(self.accepted_at[i] - self.launch_at[i])
                out["launch_to_running"].append(self.running_at[i] - self.launch_at[i])
        return {k: v[WARMUP:] if len(v) > WARMUP * 3 else v for k, v in out.items()}

    def same_offer_ratio(self) -> float:
        pairs = [(self.offer_of[i - 1], self.offer_of[i]) for i in range(1, self.launched) if i - 1 in self.offer_of]
        return sum(a == b for a, b in pairs) / len(pairs) if pairs else float("nan")


async def run_phase(master_url: str, reusable: bool, tasks: int, shape: Resources, command: str,
                    run: int, within: float) -> dict[str, Any]:
    # GPU_RESOURCES: an agent with GPUs (--resources naming gpus) is offered to it too
    gpu = (Capability(type=CapabilityType.GPU_RESOURCES),)
    caps = (Capability(type=CapabilityType.REUSABLE_OFFERS), *gpu) if reusable else gpu
    name = "reuse-bench" if reusable else "classic-bench"
    info = FrameworkInfo(user=bench_user(), name=name, capabilities=caps)
    probe = ReuseProbe(tasks, shape, f"{'r' if reusable else 'c'}{run}", command)
    async with SchedulerDriver(info, HttpTransport(master_url), probe) as driver:
        await driver.wait_subscribed(30)
        try:
            async with asyncio.timeout(within):
                await probe.done.wait()
        except TimeoutError:
            raise BenchError(
                f"{name}: only {len(probe.ended_at)}/{tasks} tasks ended within {within:.0f}s"
            ) from None
        await driver.teardown()
    lat = probe.handovers()
    seg = probe.segments()
    elapsed = probe.last_end - probe.first_launch
    return {
        "mode": "reusable" if reusable else "classic",
        **latency_ms(lat),
        "p90_ms": round(percentile(lat, 90) * 1000, 3),
        "mean_ms": round(sum(lat) / len(lat) * 1000, 3) if lat else float("nan"),
        "tasks_per_s": round(tasks / elapsed, 1) if elapsed > 0 else float("nan"),
        "same_offer": round(probe.same_offer_ratio(), 3),
        **{f"{k}_p50_ms": round(percentile(v, 50) * 1000, 3) for k, v in seg.items()},
        "failed": len(probe.failed),
    }


def agent_main_available() -> bool:
    return importlib.util.find_spec("agent.main") is not None


class Cluster:
    """One master process and one agent (a real process or an in-process SimAgent)."""

    def __init__(self, work: Path, agent: str, resources: str) -> None:
        self.work = work
        self.agent = agent
        self.resources = resources
        self.procs: list[Proc] = []
        self.sim: Any = None
        self.url = ""

    async def start(self, *master_args: str) -> str:
        master = await start_master(self.work / "master", *master_args)
        self.procs.append(master)
        self.url = master.address
        if self.agent == "real":
            self.procs.append(await start_agent(self.url, self.work / "agent-0", self.resources))
        else:
            from frameworks.client.testing import SimAgent

            self.sim = SimAgent(self.url, self.resources, hostname="sim-0", auto_finish=True)
            await self.sim.start()
            await self.sim.wait_registered(30)
        return self.url

    async def stop(self) -> None:
        if self.sim is not None:
            await self.sim.stop()
        await stop_all(self.procs)


KEYS = ("p50_ms", "p90_ms", "p99_ms", "max_ms", "mean_ms", "tasks_per_s", "same_offer",
        "wait_offer_p50_ms", "accept_rtt_p50_ms", "launch_to_running_p50_ms")


async def main_async(args: argparse.Namespace) -> int:
    work = Path(tempfile.mkdtemp(prefix="agora-reuse-"))
    mode = args.agent
    if mode == "auto":
        mode = "real" if agent_main_available() else "sim"
    shape = Resources.parse(args.resources)
    clusters: list[Cluster] = []
    results: list[dict[str, Any]] = []
    try:
        main_cluster = Cluster(work / "a", mode, args.resources)
        clusters.append(main_cluster)
        url = await main_cluster.start(*args.master_arg)
        log(f"master {url}, agent: {mode}, resources {args.resources}")
        slow_url = None
        if args.mesos_interval > 0 and args.interval_tasks > 0:
            # the classic path as Mesos runs it: freed resources are offered at the next allocation
            # round (1 s by default); a lease regrows at once regardless
            cfg = work / "mesos-interval.toml"
            cfg.write_text(f"[master]\nallocation_batch = {args.mesos_interval}\n")
            slow = Cluster(work / "b", mode, args.resources)
            clusters.append(slow)
            slow_url = await slow.start("--config", str(cfg), *args.master_arg)
            log(f"master {slow_url}: allocation interval {args.mesos_interval:g} s")
        for run in range(args.runs):
            phases: list[tuple[str, str, bool, int]] = [
                ("reusable", url, True, args.tasks),
                ("classic", url, False, args.tasks),
            ]
            if slow_url is not None:
                tag = f"@{args.mesos_interval:g}s"
                phases += [(f"reusable{tag}", slow_url, True, args.interval_tasks),
                           (f"classic{tag}", slow_url, False, args.interval_tasks)]
            for label, u, reusable, n in phases:
                r = await run_phase(u, reusable, n, shape, args.command, run, args.within)
                r["mode"] = label
                r["tasks"] = n
                log(f"run {run}: {label}: p50 {r['p50_ms']} ms, p99 {r['p99_ms']} ms, {r['tasks_per_s']} tasks/s")
                results.append(r)
    finally:
        for c in clusters:
            await c.stop()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)

    summary: dict[str, dict[str, Any]] = {}
    rows = []
    seg_rows = []
    for m in dict.fromkeys(r["mode"] for r in results):
        rs = [r for r in results if r["mode"] == m]
        s = {k: spread(r[k] for r in rs) for k in KEYS}
        summary[m] = {**s, "tasks": rs[0]["tasks"], "runs": rs, "failed": sum(r["failed"] for r in rs)}
        rows.append([m, rs[0]["tasks"], s["p50_ms"], s["p90_ms"], s["p99_ms"], s["max_ms"], s["tasks_per_s"],
                     s["same_offer"]])
        seg_rows.append([m, s["wait_offer_p50_ms"], s["accept_rtt_p50_ms"], s["launch_to_running_p50_ms"]])
    print_table(
        f"Reusable-offer hand-over latency (terminal update -> next TASK_RUNNING), agent={mode}, "
        f"{args.runs} run(s), median [min..max]",
        ["mode", "tasks", "p50 ms", "p90 ms", "p99 ms", "max ms", "tasks/s", "same offer"],
        [[str(c) for c in row] for row in rows],
    )
    print_table(
        "Where the hand-over goes (p50 ms): terminal update -> room in an offer -> ACCEPT answered; "
        "ACCEPT sent -> TASK_RUNNING",
        ["mode", "wait for offer", "ACCEPT round trip", "ACCEPT -> RUNNING"],
        [[str(c) for c in row] for row in seg_rows],
    )
    p50_reuse = summary["reusable"]["p50_ms"].median
    p50_classic = summary["classic"]["p50_ms"].median
    speedup = p50_classic / p50_reuse if p50_reuse > 0 else float("nan")
    met = p50_reuse <= TARGET_P50_MS
    print(f"\nreusable p50 {p50_reuse:.3f} ms vs classic p50 {p50_classic:.3f} ms "
          f"({speedup:.1f}x); target p50 <= {TARGET_P50_MS} ms: {'met' if met else 'NOT met'}")
    extra: dict[str, Any] = {}
    slow_classic = summary.get(f"classic@{args.mesos_interval:g}s")
    if slow_classic is not None:
        ratio = slow_classic["p50_ms"].median / p50_reuse if p50_reuse > 0 else float("nan")
        extra["speedup_p50_vs_mesos_interval"] = round(ratio, 1)
        print(f"classic with a {args.mesos_interval:g} s allocation interval (Mesos default): p50 "
              f"{slow_classic['p50_ms'].median:.1f} ms ({ratio:.0f}x the reusable p50)")
    emit_json(
        "reuse",
        {
            "agent": mode,
            "tasks": args.tasks,
            "runs": args.runs,
            "resources": args.resources,
            "modes": summary,
            "speedup_p50": round(speedup, 2),
            **extra,
            "target_p50_ms": TARGET_P50_MS,
            "target_met": met,
        },
    )
    failed = sum(v["failed"] for v in summary.values())
    return 0 if failed == 0 else 1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", type=int, default=200, help="tasks per mode and run")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--agent", choices=("auto", "real", "sim"), default="auto")
    ap.add_argument("--resources", default="cpus:1;mem:256", help="the agent's resources = one task's shape")
    ap.add_argument("--command", default="true")
    ap.add_argument("--within", type=float, default=300.0, help="seconds allowed per phase")
    ap.add_argument("--master-arg", action="append", default=[], help="extra agora-master flag (repeatable)")
    ap.add_argument("--mesos-interval", type=float, default=1.0,
                    help="also run both modes on a master with this allocation interval (Mesos: 1 s; 0 = skip)")
    ap.add_argument("--interval-tasks", type=int, default=15, help="tasks per mode on the interval master")
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    args = ap.parse_args()
    try:
        return run_main(main_async(args))
    except BenchError as exc:
        print(f"reuse: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
