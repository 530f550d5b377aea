"""Per-user and per-queue limits of the batch framework, pure (Slurm's QOS ``MaxJobsPerUser``,
``MaxTRESPerUser``, ``MaxSubmitJobsPerUser``, ``GrpTRES``).

Three scopes, each a ``LimitSet`` (``max_running_jobs``, ``max_pending_jobs``, ``max_cpus``,
``max_gpus``, ``max_mem`` in MB): ``user`` (each user across every queue; ``"*"`` is everyone's
default and a user's own entry replaces it key by key), ``queue`` (all the users of a queue
together) and ``queue_user`` (each user within a queue; ``"*"`` as the default queue). A running
job is one with a task launching or running; resources in use are those tasks'.

What happens over a limit:

* ``max_pending_jobs``: the submission is refused ("user alice: 100 of 100 pending jobs").
* a job that could never start within a limit (a task, or a whole gang, needs more than the limit
  allows at all) is refused at submit ("user alice: a task needs 16 gpus, the limit is 8").
* the others (running jobs, cpus, gpus, mem in use): the job waits, its reason naming the limit
  and the numbers ("user alice: 8 of 8 gpus in use"), holding nothing and blocking nobody; with
  ``on_limit = "refuse"`` a submission that is over one of them at the time is refused instead.

``LimitBook`` is what is in use at the start of a planning round; the planner asks ``room`` how
many tasks of a job may start and ``take``s what it places, so one round never overshoots.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator, Mapping

import attrs

__pure__ = True

LIMIT_KEYS = ("max_running_jobs", "max_pending_jobs", "max_cpus", "max_gpus", "max_mem")
ANY = "*"


class OnLimit(enum.Enum):
    WAIT = "wait"
    REFUSE = "refuse"


@attrs.frozen
class LimitSet:
    max_running_jobs: float | None = None
    max_pending_jobs: float | None = None
    max_cpus: float | None = None
    max_gpus: float | None = None
    max_mem: float | None = None  # MB

    def over(self, base: LimitSet | None) -> LimitSet:
        """These values, and ``base``'s where these give none."""
        if base is None:
            return self
        return LimitSet(*(getattr(self, k) if getattr(self, k) is not None else getattr(base, k) for k in LIMIT_KEYS))

    @property
    def empty(self) -> bool:
        return all(getattr(self, k) is None for k in LIMIT_KEYS)


@attrs.frozen
class Limits:
    on_limit: OnLimit = OnLimit.WAIT
    user: Mapping[str, LimitSet] = attrs.field(factory=dict)
    queue: Mapping[str, LimitSet] = attrs.field(factory=dict)
    queue_user: Mapping[str, LimitSet] = attrs.field(factory=dict)

    @property
    def enabled(self) -> bool:
        return any(not s.empty for scope in (self.user, self.queue, self.queue_user) for s in scope.values())

    def for_user(self, user: str) -> LimitSet:
        return _pick(self.user, user)

    def for_queue(self, queue: str) -> LimitSet:
        return _pick(self.queue, queue)

    def for_queue_user(self, queue: str) -> LimitSet:
        return _pick(self.queue_user, queue)

    def as_dict(self) -> dict[str, object]:
        def sets(scope: Mapping[str, LimitSet]) -> dict[str, dict[str, float]]:
            return {name: {k: v for k in LIMIT_KEYS if (v := getattr(s, k)) is not None} for name, s in scope.items()}

        return {"on_limit": self.on_limit.value, "user": sets(self.user), "queue": sets(self.queue),
                "queue_user": sets(self.queue_user)}


def _pick(scope: Mapping[str, LimitSet], name: str) -> LimitSet:
    own = scope.get(name)
    base = scope.get(ANY)
    if own is None:
        return base or LimitSet()
    return own.over(base)


@attrs.define
class InUse:
    running_jobs: int = 0
    pending_jobs: int = 0
    cpus: float = 0.0
    gpus: float = 0.0
    mem: float = 0.0


@attrs.frozen
class Need:
    """One task's resources."""

    cpus: float = 0.0
    gpus: float = 0.0
    mem: float = 0.0


def _fmt(x: float) -> str:
    return f"{x:g}"


_UNITS = (("max_cpus", "cpus", "cpus"), ("max_gpus", "gpus", "gpus"), ("max_mem", "mem", "MB of mem"))


class LimitBook:
    """What each user, queue and user-in-queue has in use; ``room``/``take`` during a round."""

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.user: dict[str, InUse] = {}
        self.queue: dict[str, InUse] = {}
        self.queue_user: dict[tuple[str, str], InUse] = {}

    def copy(self) -> LimitBook:
        out = LimitBook(self.limits)
        out.user = {k: attrs.evolve(v) for k, v in self.user.items()}
        out.queue = {k: attrs.evolve(v) for k, v in self.queue.items()}
        out.queue_user = {k: attrs.evolve(v) for k, v in self.queue_user.items()}
        return out

    def _scopes(self, user: str, queue: str) -> Iterator[tuple[str, LimitSet, InUse]]:
        """(who, limits, in use) for each scope that applies, in the order reasons name them."""
        yield f"user {user or '(none)'}", self.limits.for_user(user), self.user.setdefault(user, InUse())
        yield (f"user {user or '(none)'} in queue {queue}", self.limits.for_queue_user(queue),
               self.queue_user.setdefault((queue, user), InUse()))
        yield f"queue {queue}", self.limits.for_queue(queue), self.queue.setdefault(queue, InUse())

    def add(self, user: str, queue: str, need: Need, tasks: int, *, running: bool, pending: bool) -> None:
        """Count a live job: ``tasks`` of its tasks active, holding ``need`` each."""
        for _, _, use in self._scopes(user, queue):
            use.cpus += need.cpus * tasks
            use.gpus += need.gpus * tasks
            use.mem += need.mem * tasks
            use.running_jobs += 1 if running else 0
            use.pending_jobs += 1 if pending else 0

    def room(
        self, user: str, queue: str, need: Need, want: int, *, starts_job: bool, whole: bool = False
    ) -> tuple[int, str | None]:
        """How many of ``want`` tasks (``need`` each) may start now, and if not all, why (the
        limit that allows the fewest). ``starts_job``: the job has no task running yet;
        ``whole``: the ``want`` tasks are a gang that starts together."""
        if not self.limits.enabled:
            return want, None
        allowed, why = want, None
        for who, lim, use in self._scopes(user, queue):
            if starts_job and lim.max_running_jobs is not None and use.running_jobs + 1 > lim.max_running_jobs:
                return 0, f"{who}: {use.running_jobs} of {_fmt(lim.max_running_jobs)} running jobs"
            for key, attr, unit in _UNITS:
                cap = getattr(lim, key)
                per = getattr(need, attr)
                if cap is None or per <= 0:
                    continue
                used = getattr(use, attr)
                fits = int((cap - used) / per + 1e-9) if cap > used else 0
                if fits < allowed:
                    allowed = max(0, fits)
                    why = f"{who}: {_fmt(used)} of {_fmt(cap)} {unit} in use"
                    if used + 1e-9 < cap:
                        why += f", the gang needs {_fmt(per * want)}" if whole else f", a task needs {_fmt(per)}"
        return allowed, why

    def take(self, user: str, queue: str, need: Need, tasks: int, *, starts_job: bool) -> None:
        for _, _, use in self._scopes(user, queue):
            use.cpus += need.cpus * tasks
            use.gpus += need.gpus * tasks
            use.mem += need.mem * tasks
            if starts_job:
                use.running_jobs += 1


def never_fits(limits: Limits, user: str, queue: str, need: Need, at_once: int) -> str | None:
    """Why a job whose ``at_once`` tasks must run together (its gang, else 1) can never start
    within the limits, or None."""
    book = LimitBook(limits)
    for who, lim, _ in book._scopes(user, queue):
        for key, attr, unit in _UNITS:
            cap = getattr(lim, key)
            per = getattr(need, attr)
            if cap is None or per <= 0 or per * at_once <= cap + 1e-9:
                continue
            if at_once == 1:
                return f"{who}: a task needs {_fmt(per)} {unit}, the limit is {_fmt(cap)}"
            return f"{who}: the gang needs {_fmt(per * at_once)} {unit} at once, the limit is {_fmt(cap)}"
    return None


def pending_problem(limits: Limits, book: LimitBook, user: str, queue: str) -> str | None:
    """Why one more pending job of ``user`` in ``queue`` is refused (``max_pending_jobs``), or None."""
    for who, lim, use in book._scopes(user, queue):
        cap = lim.max_pending_jobs
        if cap is not None and use.pending_jobs + 1 > cap:
            return f"{who}: {use.pending_jobs} of {_fmt(cap)} pending jobs"
    return None
