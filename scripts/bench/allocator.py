"""Allocator benchmarks (no network): the Mesos allocator benchmark shapes, in Python.

    .venv/bin/python scripts/bench/allocator.py                      # full size (about 30 s)
    .venv/bin/python scripts/bench/allocator.py --agents 1000 --frameworks 100 --quota-agents 300 \
        --small-roles 250 --large-roles 50 --add-agents 1000           # quick

(a) ``DeclineOffers`` (Mesos ``HierarchicalAllocator_BENCHMARK_Test.DeclineOffers``): N agents of
``cpus:24;mem:4096;disk:4096;ports:[31000-32000]``, F frameworks, ``cpus:16;mem:1024;disk:1024``
of every agent pre-allocated round-robin; each round every offer is declined with a very long
filter and one allocation pass is timed. (b) ``LargeAndSmallQuota``: agents of 2 cpus / 2 GB,
small roles with 1 cpu / 1 GB quota and large roles with 4 cpus / 4 GB, one framework each; the
pass that satisfies all quota is timed. (c) Adding agents: the time to register N agents.

Every figure is **process CPU time** (``time.process_time``: on a shared machine it measures the
allocator, wall time measures the neighbours too), printed as median [min..max] over the timed
passes (DeclineOffers: the passes after the first, which is reported apart) or over ``--repeat``
fresh runs (the other shapes); the wall-clock median and the CPU time CPython's cyclic GC took
are printed too. ``--gc-freeze`` runs DeclineOffers after ``gc.freeze()`` (what a long-running
master can do after recovery); the allocator itself never touches the GC.
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
from collections.abc import Callable, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from master.allocator import (
    AgentAdded,
    AllocationRecovered,
    Allocator,
    AllocatorConfig,
    AttributeConstraint,
    FrameworkAdded,
    OfferCreated,
    OffersDeclined,
    OfferUpdated,
    Predicate,
    QuotaSet,
    RoleConstraints,
)
from protocol.resources import Resources

AGENT = Resources.parse("cpus:24;mem:4096;disk:4096;ports:[31000-32000]")
USED = Resources.parse("cpus:16;mem:1024;disk:1024")


def _spread(key: str, values: Sequence[float]) -> dict[str, float]:
    """``key`` (the median), ``key_min`` and ``key_max`` of the values (``key`` ends in ``_s``)."""
    stem = key[:-2] if key.endswith("_s") else key
    return {key: statistics.median(values), f"{stem}_min_s": min(values), f"{stem}_max_s": max(values)}


def _config() -> AllocatorConfig:
    return AllocatorConfig(offer_id_prefix="b", sweep_interval=1e12)


def decline_offers(agents: int, frameworks: int, rounds: int, profile: bool, freeze: bool = False,
                   constrained: int = 0) -> dict[str, float]:
    """``constrained``: that many frameworks subscribe with offer constraints (one rack of four,
    the agents spread over the racks), which puts the pass on the general DRF loop."""
    alloc = Allocator(_config())
    now = 0.0
    for f in range(frameworks):
        oc: dict[str, RoleConstraints] = {}
        if f < constrained:
            oc = {"*": ((AttributeConstraint.make(Predicate.TEXT_EQUALS, attribute="rack", text=f"r{f % 4}"),),)}
        alloc.handle(FrameworkAdded(f"f{f}", ("*",), offer_constraints=oc), now)
    for a in range(agents):
        alloc.handle(AgentAdded(f"a{a}", f"host{a}", AGENT, {"rack": f"r{a % 4}"} if constrained else {}), now)
        alloc.handle(AllocationRecovered(f"f{a % frameworks}", f"a{a}", f"t{a}", USED), now)
    if freeze:  # what a long-running service can do after recovery: keep the heap out of GC scans
        gc.collect()
        gc.freeze()
    wall: list[float] = []
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
    try:
        for _ in range(rounds):
            now += 1.0
            if prof is not None:
                prof.enable()
            in_gc[1] = 0.0
            t0, c0 = time.perf_counter(), time.process_time()
            decisions = alloc.allocate(now)
            cpu.append(time.process_time() - c0)
            wall.append(time.perf_counter() - t0)
            gc_time.append(in_gc[1])
            if prof is not None:
                prof.disable()
            offers = [d.offer for d in decisions if isinstance(d, OfferCreated | OfferUpdated)]
            offers_made.append(len(offers))
            for offer in offers:
                alloc.handle(OffersDeclined(offer.framework_id, (offer.offer_id,), 1e9), now)
    finally:
        gc.callbacks.remove(on_gc)
        if freeze:
            gc.unfreeze()
    if prof is not None:
        pstats.Stats(prof).sort_stats("tottime").print_stats(25)
    steady = slice(1, None) if rounds > 1 else slice(None)
    return {
        **_spread("decline_pass_cpu_s", cpu[steady]),
        "decline_pass_wall_s": statistics.median(wall[steady]),
        "decline_pass_gc_cpu_s": statistics.median(gc_time[steady]),
        "decline_first_pass_cpu_s": cpu[0],
        "decline_offers_per_pass": statistics.mean(offers_made),
    }


def large_and_small_quota(agents: int, small: int, large: int, repeat: int, profile: bool) -> dict[str, float]:
    cpu: list[float] = []
    wall: list[float] = []
    offers: list[int] = []
    unmet: list[int] = []
    for _ in range(repeat):
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
        t0, c0 = time.perf_counter(), time.process_time()
        decisions = alloc.allocate(now + 1.0)
        cpu.append(time.process_time() - c0)
        wall.append(time.perf_counter() - t0)
        if prof is not None:
            prof.disable()
            pstats.Stats(prof).sort_stats("tottime").print_stats(25)
            profile = False
        offers.append(len(decisions))
        missing = 0
        for i in range(small + large):
            need = 1.0 if i < small else 4.0
            if alloc.quota_consumed(f"role{i}").get("cpus", 0.0) + 1e-9 < need:
                missing += 1
        unmet.append(missing)
    return {
        **_spread("quota_pass_cpu_s", cpu),
        "quota_pass_wall_s": statistics.median(wall),
        "quota_offers": float(max(offers)),
        "quota_roles_unsatisfied": float(max(unmet)),
    }


def add_agents(agents: int, frameworks: int, repeat: int) -> dict[str, float]:
    added: list[float] = []
    first: list[float] = []
    for _ in range(repeat):
        alloc = Allocator(_config())
        for f in range(frameworks):
            alloc.handle(FrameworkAdded(f"f{f}", ("*",)), 0.0)
        events = [AgentAdded(f"a{a}", f"host{a}", AGENT) for a in range(agents)]
        c0 = time.process_time()
        for ev in events:
            alloc.handle(ev, 0.0)
        added.append(time.process_time() - c0)
        c0 = time.process_time()
        alloc.allocate(1.0)
        first.append(time.process_time() - c0)
    return {**_spread("add_agents_cpu_s", added), **_spread("add_agents_first_pass_cpu_s", first)}


TARGETS = {"decline_pass_cpu_s": 0.1, "quota_pass_cpu_s": 1.5, "add_agents_cpu_s": 1.0}


def _table(results: dict[str, float]) -> list[str]:
    lines = [f"{'figure (CPU s unless noted)':<30} {'median':>10} {'[min..max]':>20} {'target':>7} {'':>4}"]
    for key, value in results.items():
        if key.endswith(("_min_s", "_max_s")):
            continue
        stem = key[:-2] if key.endswith("_s") else key
        lo, hi = results.get(f"{stem}_min_s"), results.get(f"{stem}_max_s")
        spread = f"[{lo:.4f}..{hi:.4f}]" if lo is not None and hi is not None else ""
        target = TARGETS.get(key)
        verdict = "" if target is None else ("ok" if value <= target else "OVER")
        shown = f"{value:.4f}" if key.endswith("_s") else f"{value:g}"
        lines.append(f"{key:<30} {shown:>10} {spread:>20} {'' if target is None else f'{target:g}':>7} {verdict:>4}")
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--agents", type=int, default=10_000, help="DeclineOffers agents")
    p.add_argument("--frameworks", type=int, default=1_000, help="DeclineOffers frameworks")
    p.add_argument("--rounds", type=int, default=6, help="DeclineOffers passes (the first is reported apart)")
    p.add_argument("--quota-agents", type=int, default=3_000)
    p.add_argument("--small-roles", type=int, default=2_500)
    p.add_argument("--large-roles", type=int, default=500)
    p.add_argument("--add-agents", type=int, default=10_000)
    p.add_argument("--repeat", type=int, default=3, help="fresh runs of the quota and add-agents shapes")
    p.add_argument("--only", choices=["decline", "quota", "add"], action="append")
    p.add_argument("--profile", action="store_true", help="print a cProfile summary of the timed passes")
    p.add_argument("--gc-freeze", action="store_true", help="gc.freeze() after the DeclineOffers setup")
    p.add_argument("--constrained", type=int, default=0,
                   help="DeclineOffers frameworks with offer constraints (one rack of four; the general DRF loop)")
    args = p.parse_args(argv)
    which = set(args.only or ["decline", "quota", "add"])
    results: dict[str, float] = {}
    runs: list[tuple[str, Callable[[], dict[str, float]]]] = [
        ("decline", lambda: decline_offers(args.agents, args.frameworks, args.rounds, args.profile, args.gc_freeze,
                                           args.constrained)),
        ("quota", lambda: large_and_small_quota(
            args.quota_agents, args.small_roles, args.large_roles, args.repeat, args.profile)),
        ("add", lambda: add_agents(args.add_agents, args.frameworks, args.repeat)),
    ]
    for name, run in runs:
        if name in which:
            results.update(run())
    print("\n".join(_table(results)))
    sizes = {
        "agents": args.agents,
        "frameworks": args.frameworks,
        "rounds": args.rounds,
        "gc_freeze": args.gc_freeze,
        "constrained": args.constrained,
        "quota_agents": args.quota_agents,
        "small_roles": args.small_roles,
        "large_roles": args.large_roles,
        "add_agents": args.add_agents,
        "repeat": args.repeat,
    }
    print(json.dumps({"bench": "allocator", "sizes": sizes, **{k: round(v, 6) for k, v in results.items()}}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
