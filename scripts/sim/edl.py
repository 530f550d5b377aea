"""EDL simulation: static gang scheduling against the elastic fulfillment policy, in virtual time.

A seeded synthetic trace (Poisson arrivals; each job's maximum worker count and its total work
log-uniform; its minimum a random fraction of the maximum) runs on a cluster of ``--agents``
agents with ``--slots-per-agent`` worker slots each, twice:

* **static** — every job needs its maximum as one gang, strict FIFO (no backfill): the head of the
  queue starts when its whole maximum is free;
* **elastic** — ``frameworks.elastic.policy.plan`` decides after every arrival and completion:
  a job starts as soon as its minimum fits (taken from the most-fulfilled jobs if needed), spare
  slots go to the least-fulfilled jobs, and every change of a running job's size costs it
  ``--rescale-cost`` seconds without progress (restart from checkpoint).

A job with ``n`` workers does ``n`` units of work per second (ideal data parallelism, the same in
both modes). Placement goes through a capacity model behind a small interface (``CapacityModel``):
``slots`` is an internal per-agent slot ledger; ``allocator`` drives the real allocator core
(``master.allocator``) with agents, one framework, offers and ACCEPTs.

Printed: utilization over time, average and p95 pending time (submission -> first worker) and job
completion time, and a final JSON line. Utilization is allocated slots / total slots, averaged over
the arrival window (first to last submission: the steady state, not the drain of the last jobs);
the whole-run figure is printed too.

    .venv/bin/python scripts/sim/edl.py --seed 1
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

import attrs

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from frameworks.elastic.policy import Capacity, JobView, plan
from master.allocator import (
    Accepted,
    AgentAdded,
    Allocator,
    AllocatorConfig,
    Decision,
    FrameworkAdded,
    Launch,
    Offer,
    OfferCreated,
    OfferRescinded,
    OffersAccepted,
    OfferUpdated,
    ResourcesRecovered,
)
from protocol.resources import Resources

EPS = 1e-9


# --- trace -------------------------------------------------------------------------------------


@attrs.frozen
class TraceJob:
    job_id: str
    arrival: float
    min_workers: int
    max_workers: int
    work: float  # worker-seconds


@attrs.frozen
class TraceConfig:
    seed: int = 1
    jobs: int = 300
    agents: int = 128
    slots_per_agent: int = 1  # one worker per agent (e.g. one GPU machine)
    max_lo: int = 4
    max_hi: int = 128
    min_fraction_lo: float = 0.1
    min_fraction_hi: float = 0.5
    work_lo: float = 10_000.0
    work_hi: float = 1_000_000.0
    load: float = 1.1  # offered work / capacity

    @property
    def slots(self) -> int:
        return self.agents * self.slots_per_agent


def log_uniform(rng: random.Random, lo: float, hi: float) -> float:
    return math.exp(rng.uniform(math.log(lo), math.log(hi)))


def make_trace(cfg: TraceConfig) -> list[TraceJob]:
    rng = random.Random(cfg.seed)
    mean_work = (cfg.work_hi - cfg.work_lo) / math.log(cfg.work_hi / cfg.work_lo)
    rate = cfg.load * cfg.slots / mean_work  # arrivals per second
    t = 0.0
    out = []
    for i in range(cfg.jobs):
        t += rng.expovariate(rate)
        hi = min(cfg.slots, max(1, round(log_uniform(rng, cfg.max_lo, cfg.max_hi))))
        lo = max(1, min(hi, math.ceil(hi * rng.uniform(cfg.min_fraction_lo, cfg.min_fraction_hi))))
        out.append(TraceJob(f"job-{i:04d}", t, lo, hi, log_uniform(rng, cfg.work_lo, cfg.work_hi)))
    return out


# --- capacity models ---------------------------------------------------------------------------


class CapacityModel(Protocol):
    total: int

    def free(self) -> int: ...

    def place(self, job_id: str, n: int, now: float) -> int:
        """Start ``n`` more workers of the job; returns how many were placed."""
        ...

    def release(self, job_id: str, n: int, now: float) -> None: ...

    def held(self, job_id: str) -> int: ...


class SlotModel:
    """Internal model: per-agent slot counters, workers placed first-fit."""

    def __init__(self, agents: int, slots_per_agent: int) -> None:
        self.total = agents * slots_per_agent
        self._free_per_agent = [slots_per_agent] * agents
        self._placed: dict[str, list[int]] = {}  # job -> agent index per worker
        self._free = self.total

    def free(self) -> int:
        return self._free

    def place(self, job_id: str, n: int, now: float) -> int:
        placed = self._placed.setdefault(job_id, [])
        done = 0
        for a, f in enumerate(self._free_per_agent):
            while f > 0 and done < n:
                f -= 1
                placed.append(a)
                done += 1
            self._free_per_agent[a] = f
            if done == n:
                break
        self._free -= done
        return done

    def release(self, job_id: str, n: int, now: float) -> None:
        placed = self._placed.get(job_id, [])
        for _ in range(min(n, len(placed))):
            self._free_per_agent[placed.pop()] += 1
            self._free += 1

    def held(self, job_id: str) -> int:
        return len(self._placed.get(job_id, []))


# --- simulation --------------------------------------------------------------------------------


@attrs.define
class JobRun:
    spec: TraceJob
    remaining: float
    workers: int = 0
    started: float | None = None
    finished: float | None = None
    paused_until: float = 0.0
    rescales: int = 0


@attrs.frozen
class Result:
    mode: str
    utilization: float  # over the arrival window
    utilization_all: float  # over the whole run
    useful_utilization: float  # excluding workers paused by a rescale
    pending_avg: float
    pending_p95: float
    jct_avg: float
    jct_p95: float
    makespan: float
    rescales: int
    samples: tuple[tuple[float, float, int], ...]  # (from, to, allocated slots)
    total: int

    def timeline(self, horizon: float, buckets: int = 20) -> list[tuple[float, float]]:
        """(bucket start, allocated share) over ``[0, horizon)``."""
        width = horizon / buckets if horizon else 1.0
        out = []
        for b in range(buckets):
            b0, b1 = b * width, (b + 1) * width
            area = sum(busy * max(0.0, min(s1, b1) - max(s0, b0)) for s0, s1, busy in self.samples)
            out.append((b0, area / (self.total * width)))
        return out


def p95(xs: list[float]) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, math.ceil(0.95 * len(s)) - 1)] if s else 0.0


def simulate(
    trace: list[TraceJob],
    mode: str,
    capacity: CapacityModel,
    rescale_cost: float = 10.0,
    margin: float = 0.0,
) -> Result:
    runs = {j.job_id: JobRun(j, j.work) for j in trace}
    queue: list[str] = []  # not started, FIFO
    running: set[str] = set()
    t = 0.0
    nxt = 0
    busy_area = useful_area = 0.0
    window_end = trace[-1].arrival if trace else 0.0
    window_area = 0.0
    samples: list[tuple[float, float, int]] = []  # (t0, t1, busy)
    total_rescales = 0

    def rate(r: JobRun, now: float) -> int:
        return r.workers if now + EPS >= r.paused_until else 0

    def schedule(now: float) -> None:
        nonlocal total_rescales
        if mode == "static":
            while queue and runs[queue[0]].spec.max_workers <= capacity.free():
                r = runs[queue.pop(0)]
                r.workers = capacity.place(r.spec.job_id, r.spec.max_workers, now)
                assert r.workers == r.spec.max_workers
                r.started = now
                running.add(r.spec.job_id)
            return
        views = [
            JobView(
                jid,
                runs[jid].spec.min_workers,
                runs[jid].spec.max_workers,
                regular=runs[jid].workers,
                order=runs[jid].spec.arrival,
            )
            for jid in sorted(running | set(queue), key=lambda j: runs[j].spec.arrival)
        ]
        p = plan(views, Capacity(capacity.free()), margin=margin)
        # shrink first so growth finds the freed slots
        for ch in sorted(p.changes, key=lambda c: c.regular):
            r = runs[ch.job_id]
            if ch.regular < 0:
                capacity.release(r.spec.job_id, -ch.regular, now)
                r.workers -= -ch.regular
            elif ch.regular > 0:
                got = capacity.place(r.spec.job_id, ch.regular, now)
                r.workers += got
            if r.started is None and r.workers > 0:
                r.started = now
                running.add(r.spec.job_id)
                queue.remove(r.spec.job_id)
            elif ch.regular != 0:
                r.paused_until = now + rescale_cost
                r.rescales += 1
                total_rescales += 1

    while nxt < len(trace) or queue or running:
        t_arr = trace[nxt].arrival if nxt < len(trace) else math.inf
        t_fin = math.inf
        for jid in running:
            r = runs[jid]
            if r.workers and t + EPS < r.paused_until:
                t_fin = min(t_fin, r.paused_until)  # resume is an event: rates change
            elif r.workers:
                t_fin = min(t_fin, t + r.remaining / r.workers)
        t_next = min(t_arr, t_fin)
        if t_next == math.inf:
            raise RuntimeError(f"stuck at t={t}: queue {queue[:3]} cannot start on {capacity.total} slots")
        dt = t_next - t
        busy = sum(runs[j].workers for j in running)
        useful = sum(rate(runs[j], t) for j in running)
        busy_area += busy * dt
        useful_area += useful * dt
        if t < window_end:
            window_area += busy * (min(t_next, window_end) - t)
        samples.append((t, t_next, busy))
        for jid in running:
            r = runs[jid]
            r.remaining -= rate(r, t) * dt
        t = t_next
        changed = False
        for jid in [j for j in running if runs[j].remaining <= EPS * max(1.0, runs[j].spec.work)]:
            r = runs[jid]
            r.finished = t
            capacity.release(jid, r.workers, t)
            r.workers = 0
            running.discard(jid)
            changed = True
        while nxt < len(trace) and trace[nxt].arrival <= t:
            queue.append(trace[nxt].job_id)
            nxt += 1
            changed = True
        if changed:
            schedule(t)

    makespan = t
    first = trace[0].arrival if trace else 0.0
    pend = [r.started - r.spec.arrival for r in runs.values() if r.started is not None]
    jct = [r.finished - r.spec.arrival for r in runs.values() if r.finished is not None]
    return Result(
        mode=mode,
        utilization=window_area / (capacity.total * (window_end - first)) if window_end > first else 0.0,
        utilization_all=busy_area / (capacity.total * makespan) if makespan else 0.0,
        useful_utilization=useful_area / (capacity.total * makespan) if makespan else 0.0,
        pending_avg=sum(pend) / len(pend) if pend else 0.0,
        pending_p95=p95(pend),
        jct_avg=sum(jct) / len(jct) if jct else 0.0,
        jct_p95=p95(jct),
        makespan=makespan,
        rescales=total_rescales,
        samples=tuple(samples),
        total=capacity.total,
    )


class AllocatorModel:
    """The real allocator core (``master.allocator``): ``agents`` agents register, the elastic
    framework subscribes with ``REUSABLE_OFFERS``, every worker is a task LAUNCHed by an ACCEPT on
    a held offer, and a stopped worker's resources come back with ``ResourcesRecovered`` (they
    flow back into the lease). Free capacity is what the allocator currently offers, counted in
    worker shapes."""

    FRAMEWORK = "edl"

    def __init__(self, agents: int, slots_per_agent: int) -> None:
        self.total = agents * slots_per_agent
        self.shape = Resources.of(cpus=1, mem=1024)
        self.alloc = Allocator(
            AllocatorConfig(offer_idle_timeout=1e15, default_refuse_seconds=0.0, sweep_interval=1e15)
        )
        self.offers: dict[str, Offer] = {}
        self.tasks: dict[str, list[tuple[str, str]]] = {}  # job -> [(task id, agent id)]
        self._seq = 0
        self._apply(
            self.alloc.handle(FrameworkAdded(self.FRAMEWORK, ("*",), frozenset({"REUSABLE_OFFERS"})), 0.0)
        )
        for i in range(agents):
            total = Resources.of(cpus=slots_per_agent, mem=1024 * slots_per_agent)
            self._apply(self.alloc.handle(AgentAdded(f"agent-{i:04d}", f"host-{i:04d}", total), 0.0))
        self._now = 0.0
        self._sync(0.0)

    def _apply(self, decisions: list[Decision] | tuple[Decision, ...]) -> None:
        for d in decisions:
            if isinstance(d, OfferCreated | OfferUpdated):
                self.offers[d.offer.offer_id] = d.offer
            elif isinstance(d, OfferRescinded):
                self.offers.pop(d.offer_id, None)

    def _sync(self, now: float) -> None:
        self._now = max(self._now, now)
        self._apply(self.alloc.allocate(self._now))

    def _slots(self, offer: Offer) -> int:
        res = offer.resources.non_revocable()
        return int(min(res.scalar("cpus") // 1, res.scalar("mem") // 1024))

    def free(self) -> int:
        self._sync(self._now)
        return sum(self._slots(o) for o in self.offers.values())

    def place(self, job_id: str, n: int, now: float) -> int:
        self._sync(now)
        placed = 0
        for oid in sorted(self.offers):
            if placed == n:
                break
            k = min(n - placed, self._slots(self.offers[oid]))
            if k <= 0:
                continue
            launches = []
            for _ in range(k):
                self._seq += 1
                launches.append(Launch(f"{job_id}.w{self._seq}", self.shape))
            res = self.alloc.accept(OffersAccepted(self.FRAMEWORK, (oid,), tuple(launches)), self._now)
            if not isinstance(res, Accepted):
                raise RuntimeError(f"allocator rejected a launch on {oid}: {res}")
            self._apply(res.decisions)
            self.tasks.setdefault(job_id, []).extend((t.task_id, t.agent_id) for t in res.launched)
            placed += len(res.launched)
        return placed

    def release(self, job_id: str, n: int, now: float) -> None:
        self._now = max(self._now, now)
        held = self.tasks.get(job_id, [])
        for _ in range(min(n, len(held))):
            task_id, agent_id = held.pop()
            self._apply(self.alloc.handle(ResourcesRecovered(self.FRAMEWORK, agent_id, task_id), self._now))

    def held(self, job_id: str) -> int:
        return len(self.tasks.get(job_id, []))


def slot_model(cfg: TraceConfig) -> CapacityModel:
    return SlotModel(cfg.agents, cfg.slots_per_agent)


def allocator_model(cfg: TraceConfig) -> CapacityModel:
    return AllocatorModel(cfg.agents, cfg.slots_per_agent)


MODELS: dict[str, Callable[[TraceConfig], CapacityModel]] = {
    "slots": slot_model,
    "allocator": allocator_model,
}


def bar(u: float, width: int = 40) -> str:
    n = round(max(0.0, min(1.0, u)) * width)
    return "#" * n + "." * (width - n)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--jobs", type=int, default=300)
    p.add_argument("--agents", type=int, default=128)
    p.add_argument("--slots-per-agent", type=int, default=1)
    p.add_argument("--load", type=float, default=1.1, help="offered work / cluster capacity")
    p.add_argument("--rescale-cost", type=float, default=10.0, help="seconds without progress after a resize")
    p.add_argument("--margin", type=float, default=0.0, help="fulfillment gap needed before rebalancing")
    p.add_argument("--model", choices=sorted(MODELS), default="allocator")
    p.add_argument("--quiet", action="store_true", help="only the final JSON line")
    args = p.parse_args(argv)
    cfg = TraceConfig(
        seed=args.seed,
        jobs=args.jobs,
        agents=args.agents,
        slots_per_agent=args.slots_per_agent,
        load=args.load,
    )
    trace = make_trace(cfg)
    results = {
        mode: simulate(trace, mode, MODELS[args.model](cfg), args.rescale_cost, args.margin)
        for mode in ("static", "elastic")
    }
    s, e = results["static"], results["elastic"]
    if not args.quiet:
        print(
            f"trace: seed {cfg.seed}, {cfg.jobs} jobs, {cfg.agents} agents x {cfg.slots_per_agent} slots, "
            f"load {cfg.load}, max workers log-uniform [{cfg.max_lo}, {cfg.max_hi}], "
            f"work log-uniform [{cfg.work_lo:g}, {cfg.work_hi:g}] worker-s, model {args.model}"
        )
        horizon = max(s.makespan, e.makespan)
        print(
            f"\nutilization over time (bucket start in hours; last arrival at {trace[-1].arrival / 3600:.1f}h)"
        )
        print(f"  {'':8} {'static':<48} elastic")
        for (t0, us), (_, ue) in zip(s.timeline(horizon), e.timeline(horizon), strict=True):
            print(f"  {t0 / 3600:7.1f}h {bar(us, 30)} {us:6.1%}   {bar(ue, 30)} {ue:6.1%}")
        print()
        print(
            f"{'':10}{'util(window)':>13}{'util(all)':>11}{'pend avg':>11}{'pend p95':>11}{'JCT avg':>11}{'JCT p95':>11}"
        )
        for r in (s, e):
            print(
                f"{r.mode:10}{r.utilization:13.1%}{r.utilization_all:11.1%}{r.pending_avg:10.0f}s{r.pending_p95:10.0f}s"
                f"{r.jct_avg:10.0f}s{r.jct_p95:10.0f}s"
            )
        print(
            f"elastic rescales: {e.rescales}; useful utilization over the whole run (excluding rescale pauses) {e.useful_utilization:.1%}"
        )
    summary = {
        "seed": cfg.seed,
        "jobs": cfg.jobs,
        "agents": cfg.agents,
        "slots": cfg.slots,
        "load": cfg.load,
        "model": args.model,
        "rescale_cost": args.rescale_cost,
        "static": {k: round(v, 4) for k, v in attrs.asdict(s).items() if isinstance(v, float)},
        "elastic": {k: round(v, 4) for k, v in attrs.asdict(e).items() if isinstance(v, float)},
        "elastic_rescales": e.rescales,
        "pending_reduction": round(1 - e.pending_avg / s.pending_avg, 4) if s.pending_avg else None,
        "jct_reduction": round(1 - e.jct_avg / s.jct_avg, 4) if s.jct_avg else None,
    }
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
