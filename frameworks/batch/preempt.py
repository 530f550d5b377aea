"""Priority preemption: which running tasks to evict so that a higher-priority job can start.

A job may preempt (``spec.preempt``, or its queue is a preempting queue) when it cannot place
all it needs now. The victims are running tasks of *lower-priority*, *preemptible* jobs of the
same queue (the freed resources come back into this framework's offer of that role), on agents
that meet the preemptor's constraints. The planner chooses the **fewest** tasks whose eviction
lets the preemptor's need fit; among sets of that size it prefers lower priorities, then the
tasks that started last (the least work lost); on a full tie single tasks go before a gang, and
lower job ids before higher. A gang is evicted as a whole (every running task of the job, on
whatever agent) or not at all, never half.

What "fits" means: on each agent, the resources this framework holds free there for the
preemptor's queue (its offer) plus what the chosen victims on that agent hold; the preemptor
needs ``need`` tasks of its shape across agents (a gang that has not started: its whole gang).
Across frameworks nothing is evicted here: another framework's tasks are the master's
(quota, revocation) to decide on.

Pure and exact: per agent every subset of its ``MAX_PER_AGENT`` most preferred candidates is
tried (smallest first), agents are combined by dynamic programming over the number of tasks
they make room for, and gang victims (at most ``MAX_GANGS`` of them, in preference order) by
trying each combination of them.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Protocol

import attrs

__pure__ = True

MAX_PER_AGENT = 10
MAX_GANGS = 4
MAX_NEED = 64  # tasks made room for in one decision; a bigger preemptor preempts again later

Cost = tuple[int, int, float]  # (tasks evicted, sum of their priorities, -sum of their start times)
INFINITE: Cost = (1 << 60, 0, 0.0)


@attrs.frozen
class Candidate:
    """A running task that could be evicted."""

    job_id: int
    index: int
    task_id: str
    agent_id: str
    priority: int
    resources: Mapping[str, float]  # the scalars it holds
    started_at: float
    gang: bool = False  # its job is a gang: all its tasks go together


@attrs.frozen
class Need:
    """What the preemptor must place: ``count`` tasks of ``shape``."""

    job_id: int
    priority: int
    shape: Mapping[str, float]
    count: int


def fits(have: Mapping[str, float], shape: Mapping[str, float]) -> int:
    """How many tasks of ``shape`` fit in ``have``."""
    n = None
    for name, amount in shape.items():
        if amount <= 0:
            continue
        k = int((have.get(name, 0.0) + 1e-9) // amount)
        n = k if n is None else min(n, k)
    return 0 if n is None else max(n, 0)


def _add(a: Mapping[str, float], b: Mapping[str, float]) -> dict[str, float]:
    out = dict(a)
    for k, v in b.items():
        out[k] = out.get(k, 0.0) + v
    return out


def _pref(c: Candidate) -> tuple[int, float, int, int]:
    return (c.priority, -c.started_at, c.job_id, c.index)


def _cost(cs: Sequence[Candidate]) -> Cost:
    return (len(cs), sum(c.priority for c in cs), -sum(c.started_at for c in cs))


def _plus(a: Cost, b: Cost) -> Cost:
    return (a[0] + b[0], a[1] + b[1], a[2] + b[2])


def _agent_options(
    have: Mapping[str, float], singles: Sequence[Candidate], shape: Mapping[str, float], cap: int
) -> dict[int, tuple[Cost, tuple[Candidate, ...]]]:
    """For each number k of extra tasks (1..cap) this agent can make room for: the cheapest
    set of its single-task candidates that does it."""
    base = fits(have, shape)
    pool = sorted(singles, key=_pref)[:MAX_PER_AGENT]
    best: dict[int, tuple[Cost, tuple[Candidate, ...]]] = {}
    for size in range(1, len(pool) + 1):
        for combo in itertools.combinations(pool, size):
            freed = have
            for c in combo:
                freed = _add(freed, c.resources)
            extra = min(fits(freed, shape) - base, cap)
            if extra <= 0:
                continue
            cost = _cost(combo)
            for k in range(1, extra + 1):
                if k not in best or cost < best[k][0]:
                    best[k] = (cost, combo)
    return best


class VictimPolicy(Protocol):
    """The victim-selection hook of batch preemption (``Evictions(..., victims=...)``): given the
    preemptor's need, what is free for it per agent and the candidate tasks, the tasks to evict
    (``()`` when none need to go, None when evicting every candidate would not be enough).
    ``choose`` (fewest tasks, then lowest priorities, then the last started) is the default."""

    def __call__(
        self, need: Need, free: Mapping[str, Mapping[str, float]], candidates: Sequence[Candidate]
    ) -> tuple[Candidate, ...] | None: ...


def choose(
    need: Need,
    free: Mapping[str, Mapping[str, float]],
    candidates: Sequence[Candidate],
) -> tuple[Candidate, ...] | None:
    """The victims to evict so that ``need.count`` tasks fit, or None when evicting every
    candidate would not be enough (nothing is evicted then). ``free``: per agent (those where
    the preemptor may run), what is free for it there now."""
    shape = {k: v for k, v in need.shape.items() if v > 0}
    agents = sorted(free)
    usable = [c for c in candidates if c.priority < need.priority and c.agent_id in free]
    base = sum(fits(free[a], shape) for a in agents)
    want = min(need.count, MAX_NEED) - base
    if want <= 0:
        return ()
    gang_jobs: dict[int, list[Candidate]] = {}
    singles: list[Candidate] = []
    for c in usable:
        if c.gang:
            gang_jobs.setdefault(c.job_id, []).append(c)
        else:
            singles.append(c)
    # a gang's tasks on agents the preemptor cannot use still go with it (never half a gang)
    for c in candidates:
        if c.gang and c.job_id in gang_jobs and c not in gang_jobs[c.job_id]:
            gang_jobs[c.job_id].append(c)
    gangs = sorted(gang_jobs.values(), key=lambda g: (len(g), min(_pref(c) for c in g)))[:MAX_GANGS]
    best: tuple[Cost, tuple[Candidate, ...]] | None = None
    for r in range(len(gangs) + 1):
        for chosen in itertools.combinations(gangs, r):
            evicted = [c for g in chosen for c in g]
            have = {a: dict(free[a]) for a in agents}
            for c in evicted:
                if c.agent_id in have:
                    have[c.agent_id] = _add(have[c.agent_id], c.resources)
            got = sum(fits(have[a], shape) for a in agents) - base
            rest = want - got
            fixed = _cost(evicted)
            if rest <= 0:
                found: tuple[Cost, tuple[Candidate, ...]] | None = (fixed, ())
            else:
                found = _combine(agents, have, singles, shape, rest)
                if found is not None:
                    found = (_plus(fixed, found[0]), found[1])
            if found is None:
                continue
            total = (found[0], tuple(evicted) + found[1])
            if best is None or total[0] < best[0]:
                best = total
    if best is None:
        return None
    return tuple(sorted(best[1], key=lambda c: (c.job_id, c.index)))


def _combine(
    agents: Sequence[str],
    have: Mapping[str, Mapping[str, float]],
    singles: Sequence[Candidate],
    shape: Mapping[str, float],
    want: int,
) -> tuple[Cost, tuple[Candidate, ...]] | None:
    """The cheapest choice of single-task victims over all agents making room for ``want``
    more tasks (a knapsack over agents: dp[k] = cheapest way to make room for k)."""
    dp: list[tuple[Cost, tuple[Candidate, ...]] | None] = [None] * (want + 1)
    dp[0] = ((0, 0, 0.0), ())
    by_agent: dict[str, list[Candidate]] = {}
    for c in singles:
        by_agent.setdefault(c.agent_id, []).append(c)
    for a in agents:
        options = _agent_options(have[a], by_agent.get(a, []), shape, want)
        if not options:
            continue
        nxt = list(dp)
        for k0, cur in enumerate(dp):
            if cur is None:
                continue
            for k, (cost, combo) in options.items():
                k1 = min(want, k0 + k)
                cand = (_plus(cur[0], cost), cur[1] + combo)
                slot = nxt[k1]
                if slot is None or cand[0] < slot[0]:
                    nxt[k1] = cand
        dp = nxt
    return dp[want]
