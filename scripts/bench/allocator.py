"""Allocator benchmarks (no network): the Mesos allocator benchmark shapes, in Python.

    .venv/bin/python scripts/bench/allocator.py                      # full size (slow-ish)
    .venv/bin/python scripts/bench/allocator.py --agents 1000 --frameworks 100 --quota-agents 300 \
        --small-roles 250 --large-roles 50 --add-agents 1000           # quick

(a) ``DeclineOffers`` (Mesos ``HierarchicalAllocator_BENCHMARK_Test.DeclineOffers``): N agents of
``cpus:24;mem:4096;disk:4096;ports:[31000-32000]``, F frameworks, ``cpus:16;mem:1024;disk:1024``
of every agent pre-allocated round-robin; each round every offer is declined with a very long
filter and one allocation pass is timed (wall clock and process CPU time: on a shared machine
the CPU figure is the one that measures the allocator; the first pass is reported apart; the
CPU time CPython's cyclic GC takes during the passes is reported too). (b) ``LargeAndSmallQuota``: agents of 2 cpus / 2 GB,
small roles with 1 cpu / 1 GB quota and large roles with 4 cpus / 4 GB, one framework each; the
pass that satisfies all quota is timed. (c) Adding agents: the time to register N agents.
Prints a table, then one JSON line with every figure.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import json
import pstats
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from master.allocator import (
    AgentAdded,
    AllocationRecovered,
    Allocator,
    AllocatorConfig,
    FrameworkAdded,
    OfferCreated,
    OffersDeclined,
    OfferUpdated,
    QuotaSet,
)
from protocol.resources import Resources

AGENT = Resources.parse("cpus:24;mem:4096;disk:4096;ports:[31000-32000]")
USED = Resources.parse("cpus:16;mem:1024;disk:1024")


def _config() -> AllocatorConfig:
    return AllocatorConfig(offer_id_prefix="b", sweep_interval=1e12)


def decline_offers(agents: int, frameworks: int, rounds: int, profile: bool, freeze: bool = False) -> dict[str, float]:
    alloc = Allocator(_config())
    now = 0.0
    for f in range(frameworks):
        alloc.handle(FrameworkAdded(f"f{f}", ("*",)), now)
    for a in range(agents):
        alloc.handle(AgentAdded(f"a{a}", f"host{a}", AGENT), now)
        alloc.handle(AllocationRecovered(f"f{a % frameworks}", f"a{a}", f"t{a}", USED), now)
    if freeze:  # what a long-running service can do after recovery: keep the heap out of GC scans
        gc.collect()
        gc.freeze()
    times: list[float] = []
    cpu: list[float] = []
    gc_time: list[float] = []
    offers_made: list[int] = []
    in_gc = [0.0, 0.0]  # [start of the running collection, total in this pass]

    def on_gc(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            in_gc[0] = time.process_time()
        else:
            in_gc[1] += time.process_time() - in_gc[0]

    gc.callbacks.append(on_gc)
    prof = cProfile.Profile() if profile else None
    for _ in range(rounds):
        now += 1.0
        if prof is not None:
            prof.enable()
        in_gc[1] = 0.0
        t0, c0 = time.perf_counter(), time.process_time()
        decisions = alloc.allocate(now)
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
        gc_time.append(in_gc[1])
        if prof is not None:
            prof.disable()
        offers = [d.offer for d in decisions if isinstance(d, OfferCreated | OfferUpdated)]
        offers_made.append(len(offers))
        for offer in offers:
            alloc.handle(OffersDeclined(offer.framework_id, (offer.offer_id,), 1e9), now)
    if prof is not None:
        pstats.Stats(prof).sort_stats("cumulative").print_stats(25)
    gc.callbacks.remove(on_gc)
    if freeze:
        gc.unfreeze()
    steady = times[1:] if len(times) > 1 else times
    steady_cpu = cpu[1:] if len(cpu) > 1 else cpu
    return {
        "decline_first_pass_s": times[0],
        "decline_pass_p50_s": statistics.median(steady),
        "decline_pass_p50_cpu_s": statistics.median(steady_cpu),
        "decline_pass_p50_cpu_minus_gc_s": statistics.median(
            c - g for c, g in zip(steady_cpu, gc_time[1:] if len(gc_time) > 1 else gc_time, strict=True)
        ),
        "decline_gc_per_pass_mean_s": statistics.mean(gc_time),
        "decline_pass_max_s": max(steady),
        "decline_offers_per_pass": statistics.mean(offers_made),
    }


def large_and_small_quota(agents: int, small: int, large: int, profile: bool) -> dict[str, float]:
    alloc = Allocator(_config())
    now = 0.0
    agent = Resources.parse("cpus:2;mem:2048")
    for a in range(agents):
        alloc.handle(AgentAdded(f"a{a}", f"host{a}", agent), now)
    for i in range(small + large):
        role = f"role{i}"
        quota = Resources.parse("cpus:1;mem:1024") if i < small else Resources.parse("cpus:4;mem:4096")
        alloc.handle(QuotaSet(role, quota), now)
        alloc.handle(FrameworkAdded(f"f{i}", (role,)), now)
    prof = cProfile.Profile() if profile else None
    if prof is not None:
        prof.enable()
    t0 = time.perf_counter()
    decisions = alloc.allocate(now + 1.0)
    elapsed = time.perf_counter() - t0
    if prof is not None:
        prof.disable()
        pstats.Stats(prof).sort_stats("cumulative").print_stats(25)
    unmet = 0
    for i in range(small + large):
        need = 1.0 if i < small else 4.0
        if alloc.quota_consumed(f"role{i}").get("cpus", 0.0) + 1e-9 < need:
            unmet += 1
    return {"quota_pass_s": elapsed, "quota_offers": float(len(decisions)), "quota_roles_unsatisfied": float(unmet)}


def add_agents(agents: int, frameworks: int) -> dict[str, float]:
    alloc = Allocator(_config())
    for f in range(frameworks):
        alloc.handle(FrameworkAdded(f"f{f}", ("*",)), 0.0)
    events = [AgentAdded(f"a{a}", f"host{a}", AGENT) for a in range(agents)]
    t0 = time.perf_counter()
    for ev in events:
        alloc.handle(ev, 0.0)
    added = time.perf_counter() - t0
    t0 = time.perf_counter()
    alloc.allocate(1.0)
    first = time.perf_counter() - t0
    return {"add_agents_s": added, "add_agents_first_pass_s": first}


def _row(name: str, value: float, target: float | None, unit: str = "s") -> str:
    verdict = "" if target is None else ("ok" if value <= target else "OVER")
    tgt = "" if target is None else f"{target:g}"
    return f"{name:<34} {value:>12.4f} {unit:<4} {tgt:>8} {verdict:>5}"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--agents", type=int, default=10_000, help="DeclineOffers agents")
    p.add_argument("--frameworks", type=int, default=1_000, help="DeclineOffers frameworks")
    p.add_argument("--rounds", type=int, default=5, help="DeclineOffers allocation passes")
    p.add_argument("--quota-agents", type=int, default=3_000)
    p.add_argument("--small-roles", type=int, default=2_500)
    p.add_argument("--large-roles", type=int, default=500)
    p.add_argument("--add-agents", type=int, default=10_000)
    p.add_argument("--only", choices=["decline", "quota", "add"], action="append")
    p.add_argument("--profile", action="store_true", help="print a cProfile summary of the timed passes")
    p.add_argument("--gc-freeze", action="store_true", help="gc.freeze() after the DeclineOffers setup")
    args = p.parse_args(argv)
    which = set(args.only or ["decline", "quota", "add"])
    results: dict[str, float] = {}
    runs: list[tuple[str, Callable[[], dict[str, float]]]] = [
        ("decline", lambda: decline_offers(args.agents, args.frameworks, args.rounds, args.profile, args.gc_freeze)),
        ("quota", lambda: large_and_small_quota(args.quota_agents, args.small_roles, args.large_roles, args.profile)),
        ("add", lambda: add_agents(args.add_agents, args.frameworks)),
    ]
    for name, run in runs:
        if name in which:
            results.update(run())
    print(f"{'figure':<34} {'value':>12} {'unit':<4} {'target':>8} {'':>5}")
    targets = {"decline_pass_p50_s": 0.1, "decline_pass_p50_cpu_s": 0.1, "quota_pass_s": 1.5, "add_agents_s": 1.0}
    for key, value in results.items():
        unit = "s" if key.endswith("_s") else ""
        print(_row(key, value, targets.get(key), unit))
    sizes = {
        "agents": args.agents,
        "frameworks": args.frameworks,
        "rounds": args.rounds,
        "gc_freeze": args.gc_freeze,
        "quota_agents": args.quota_agents,
        "small_roles": args.small_roles,
        "large_roles": args.large_roles,
        "add_agents": args.add_agents,
    }
    print(json.dumps({"bench": "allocator", "sizes": sizes, **{k: round(v, 6) for k, v in results.items()}}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
