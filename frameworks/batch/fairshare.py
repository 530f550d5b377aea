"""Fair share between the users of a queue: Slurm's multifactor priority, pure.

**Usage.** Each (queue, user) accrues *usage*: the resource-seconds its running tasks hold, cpus,
gpus and memory apart, and as one *billing* figure (``billing_cpus`` per cpu-second,
``billing_mem_gb`` per GB-second, ``billing_gpus`` per gpu-second; Slurm's
``TRESBillingWeights``). Usage decays: it loses half its weight every ``half_life`` seconds
(Slurm's ``PriorityDecayHalfLife``), so last week counts less than this morning. Charging is
exact whatever the rounds' spacing: a rate ``r`` held over ``dt`` adds
``r * h/ln2 * (1 - 2^(-dt/h))`` after the older usage decayed by ``2^(-dt/h)``.

**Fair-share factor** (Slurm's classic formula), per queue over the users with live jobs in it:
``F = 2^(-U/S)``, ``U`` the user's share of the queue's usage (its billing usage over theirs all)
and ``S`` its share of the shares (``users.shares``, 1 each by default). A user who used nothing
has ``F = 1``; one who used exactly their share has ``F = 0.5``.

**Job priority**: ``weight_fairshare*F + weight_priority*P + weight_age*A + weight_size*Z``, each
factor in [0, 1]: ``P`` the job's ``priority`` normalised over the queue's live jobs
(``(p - lowest) / (highest - lowest)``, 0 when they are all alike), ``A`` the time it has waited
over ``max_age`` (at most 1), ``Z`` its cpus (all its tasks) over the cluster's (0 when the
cluster is not known). The defaults (10000, 1000, 100, 0) make the owner's usage decide between
users first, then the job's own priority (between one user's jobs it is strict: 1000 points
against at most 100 of age), then how long it waited; size counts once its weight is set. The
planner serves jobs highest first (``JobView.rank``); ties go by priority, then age, then id.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

import attrs

__pure__ = True

DAY = 24 * 3600.0
LN2 = math.log(2.0)


@attrs.frozen
class FairShareConfig:
    half_life: float = 7 * DAY
    weight_fairshare: float = 10000.0
    weight_priority: float = 1000.0
    weight_age: float = 100.0
    weight_size: float = 0.0
    max_age: float = 7 * DAY
    billing_cpus: float = 1.0  # per cpu-second
    billing_mem_gb: float = 0.25  # per GB-second
    billing_gpus: float = 2.0  # per gpu-second

    def billing(self, cpus: float, mem_mb: float, gpus: float) -> float:
        return cpus * self.billing_cpus + mem_mb / 1024.0 * self.billing_mem_gb + gpus * self.billing_gpus


@attrs.frozen
class Rate:
    """What a (queue, user)'s running tasks hold now, per second."""

    cpus: float = 0.0
    mem: float = 0.0  # MB
    gpus: float = 0.0

    def __add__(self, other: Rate) -> Rate:
        return Rate(self.cpus + other.cpus, self.mem + other.mem, self.gpus + other.gpus)

    def __sub__(self, other: Rate) -> Rate:
        return Rate(_floor(self.cpus - other.cpus), _floor(self.mem - other.mem), _floor(self.gpus - other.gpus))

    @property
    def idle(self) -> bool:
        return self.cpus <= 0 and self.mem <= 0 and self.gpus <= 0


def _floor(x: float) -> float:
    return 0.0 if abs(x) < 1e-9 else x


@attrs.frozen
class Usage:
    """Decayed resource-seconds of one (queue, user) as of ``at``."""

    cpu: float = 0.0  # cpu-seconds
    mem: float = 0.0  # MB-seconds
    gpu: float = 0.0  # gpu-seconds
    billing: float = 0.0
    at: float = 0.0

    def charged(self, rate: Rate, now: float, cfg: FairShareConfig) -> Usage:
        """Decayed to ``now``, plus what ``rate`` accrued since ``at`` (itself decayed)."""
        dt = max(0.0, now - self.at)
        if dt == 0.0 and rate.idle:
            return self if now <= self.at else attrs.evolve(self, at=now)
        keep = 2.0 ** (-dt / cfg.half_life)
        grown = cfg.half_life / LN2 * (1.0 - keep)  # the integral of the decay over dt
        return Usage(
            cpu=self.cpu * keep + rate.cpus * grown,
            mem=self.mem * keep + rate.mem * grown,
            gpu=self.gpu * keep + rate.gpus * grown,
            billing=self.billing * keep + cfg.billing(rate.cpus, rate.mem, rate.gpus) * grown,
            at=max(now, self.at),
        )


Key = tuple[str, str]  # (queue, user); a job without an owner is user ""


class UsageBook:
    """Every (queue, user)'s usage and what it runs now. ``advance(now)`` charges the running
    tasks up to ``now``; ``start``/``stop`` change what runs (advance first: the core does, at the
    top of every call that may change it)."""

    def __init__(self, config: FairShareConfig | None = None) -> None:
        self.config = config or FairShareConfig()
        self.usage: dict[Key, Usage] = {}
        self.running: dict[Key, Rate] = {}

    def advance(self, now: float) -> None:
        for key in set(self.usage) | set(self.running):
            rate = self.running.get(key, Rate())
            self.usage[key] = self.usage.get(key, Usage(at=now)).charged(rate, now, self.config)

    def start(self, key: Key, rate: Rate) -> None:
        self.running[key] = self.running.get(key, Rate()) + rate

    def stop(self, key: Key, rate: Rate) -> None:
        left = self.running.get(key, Rate()) - rate
        if left.idle:
            self.running.pop(key, None)
        else:
            self.running[key] = left

    def restore(self, key: Key, usage: Usage) -> None:
        """Usage read back from the store (decay goes on from its ``at``)."""
        self.usage[key] = usage

    def of(self, key: Key, now: float) -> Usage:
        """The usage of ``key`` decayed to ``now`` (nothing changed)."""
        return self.usage.get(key, Usage(at=now)).charged(self.running.get(key, Rate()), now, self.config)


@attrs.frozen
class Share:
    """One user's standing in one queue (``agora share``, like ``sshare``)."""

    queue: str
    user: str
    shares: float  # raw shares
    norm_shares: float  # S
    usage: Usage  # raw decayed usage (billing and per resource)
    norm_usage: float  # U
    factor: float  # F = 2^(-U/S)


def shares_of(
    usage: Mapping[Key, Usage], active: Iterable[Key], shares: Mapping[str, float]
) -> dict[Key, Share]:
    """The fair-share standing of every ``active`` (queue, user) (those with live jobs), each
    queue on its own: ``S`` over the queue's active users' shares, ``U`` over their usage."""
    by_queue: dict[str, list[str]] = {}
    for queue, user in sorted(set(active)):
        by_queue.setdefault(queue, []).append(user)
    out: dict[Key, Share] = {}
    for queue, users in by_queue.items():
        raw = {u: shares.get(u, 1.0) for u in users}
        total_shares = sum(raw.values()) or 1.0
        total_usage = sum(usage.get((queue, u), Usage()).billing for u in users)
        for u in users:
            got = usage.get((queue, u), Usage())
            s = raw[u] / total_shares
            norm = got.billing / total_usage if total_usage > 0 else 0.0
            out[(queue, u)] = Share(queue, u, raw[u], s, got, norm, 2.0 ** (-norm / s))
    return out


@attrs.frozen
class Factors:
    """A pending job's priority and its factors (``agora job priority``, like ``sprio``)."""

    job_id: int
    user: str
    queue: str
    fairshare: float  # each factor in [0, 1]
    priority: float
    age: float
    size: float
    total: float  # the weighted sum: the job's rank


@attrs.frozen
class JobFacts:
    """What the priority of one live job is computed from."""

    job_id: int
    user: str
    queue: str
    priority: int
    submitted_at: float
    cpus: float  # all its tasks together


def job_factors(
    jobs: Iterable[JobFacts], shares: Mapping[Key, Share], now: float, cfg: FairShareConfig, cluster_cpus: float
) -> dict[int, Factors]:
    """Every job's factors and rank. ``P`` is normalised over the jobs of its queue given here."""
    listed = list(jobs)
    lo: dict[str, int] = {}
    hi: dict[str, int] = {}
    for j in listed:
        lo[j.queue] = min(lo.get(j.queue, j.priority), j.priority)
        hi[j.queue] = max(hi.get(j.queue, j.priority), j.priority)
    out: dict[int, Factors] = {}
    for j in listed:
        share = shares.get((j.queue, j.user))
        f = share.factor if share is not None else 1.0
        spread = hi[j.queue] - lo[j.queue]
        p = (j.priority - lo[j.queue]) / spread if spread > 0 else 0.0
        a = min(1.0, max(0.0, now - j.submitted_at) / cfg.max_age)
        z = min(1.0, j.cpus / cluster_cpus) if cluster_cpus > 0 else 0.0
        total = cfg.weight_fairshare * f + cfg.weight_priority * p + cfg.weight_age * a + cfg.weight_size * z
        out[j.job_id] = Factors(j.job_id, j.user, j.queue, f, p, a, z, total)
    return out
