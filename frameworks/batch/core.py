"""The batch framework's pure core: jobs and tasks, turned into launches, kills and declines.

``BatchCore`` owns every job and task record. The shell (``service.py``) feeds it facts —
a job submitted or cancelled, task status updates, the offers it currently holds, time — and
executes the effects it returns: ``Launch`` on an offer, ``Kill`` a task, ``Decline`` offers,
``Persist`` changed records, ``Suppress``/``Revive`` offers, ``DeclareDemand`` (REQUEST).

Task ids on the wire are ``<job>-<index>-<attempt>`` (``j12-3-0``), so an update names its
attempt and a late update from an old attempt cannot touch the new one.

A task id is launched at most once. Launches are *write-first*: the shell makes the LAUNCHING
attempt (with its task id) durable before the ACCEPT leaves, so a restart finds it LAUNCHING,
never PENDING under the same id. After every (re)subscription the shell reconciles the active
attempts (``active_attempts``) explicitly with the master: RUNNING and FINISHED answers are
adopted, and a LAUNCHING attempt the master answers LOST, UNKNOWN, GONE or DROPPED for never ran:
it is retried under a *new* attempt id (no retry spent).

A gang whose policy is ``abort`` or ``restart`` (``JobSpec.whole_gang``) fails, retries and keeps
time as one: when a rank fails for good the others are killed, and the job either fails with that
rank's exit code and message (``abort``: ``JobRecord.aborting`` until the last rank is gone) or
runs again whole as one of its retries (``restart``: ``JobRecord.regrouping`` until the last
rank is gone, then every task is placed again together). A rank that never ran, was preempted or
was drained re-places the whole gang without spending a retry (its peers could never rendezvous
with a replacement elsewhere). Each launch of a gang carries the environment its ranks need to
find each other (``gang_environment``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import attrs

from frameworks.batch.backfill import Release, Reservation, Waiting
from frameworks.batch.backfill import expected_starts as backfill_starts
from frameworks.batch.config import BatchConfig
from frameworks.batch.fairshare import Factors, JobFacts, Rate, Share, UsageBook, job_factors, shares_of
from frameworks.batch.limits import LimitBook, OnLimit, never_fits, pending_problem
from frameworks.batch.model import (
    JOB_TERMINAL,
    TASK_TERMINAL,
    Concurrency,
    GangPolicy,
    JobSpec,
    JobState,
    SpecError,
    TaskPhase,
    check_job_transition,
    check_task_transition,
    dependency_status,
    spec_from_dict,
    spec_to_dict,
)
from frameworks.batch.periodic import decide, next_after, stamp
from frameworks.batch.planner import (
    DEFAULT_GANG_TIMEOUT,
    AgentCapacity,
    JobView,
    OfferView,
    Placement,
    Plan,
    job_order_key,
    matches,
    need_of,
    plan,
)
from frameworks.batch.preempt import Candidate, Need, choose
from frameworks.client.demand import Demand
from frameworks.kit.effects import DeclareDemand, Decline, Kill, Launch, Persist, Revive, Suppress
from protocol.resources import Resources
from protocol.task_states import TaskState

__pure__ = True

RETRY_BASE = 1.0
RETRY_MAX = 60.0
PREEMPTED_REASON = "REASON_CONTAINER_PREEMPTED"
DRAINING_REASON = "REASON_AGENT_DRAINING"  # killed because the operator drains its agent
# Killed for reasons of the cluster, not the task's: run again elsewhere without counting a failure
NOT_A_FAILURE = frozenset({PREEMPTED_REASON, DRAINING_REASON})
MAX_FREE_RELAUNCHES = 10
# after the tasks evicted for a job have ended: how long their resources may take to come back
# into the offers before the job, still not placed, may preempt again
PREEMPT_SETTLE = 5.0
# A launch that ends in one of these before the task ever ran did not run the user's command
# (a stale offer, an agent gone meanwhile): relaunch it without spending a retry.
# TASK_UNKNOWN is the master's reconciliation answer for a task it never heard of on an agent it
# does not know (the ACCEPT was lost with a framework crash).
NEVER_RAN = frozenset({TaskState.TASK_DROPPED, TaskState.TASK_LOST, TaskState.TASK_GONE, TaskState.TASK_UNKNOWN})
ACTIVE = frozenset({TaskPhase.LAUNCHING, TaskPhase.RUNNING})


# --- records ------------------------------------------------------------------------------------


@attrs.define
class Attempt:
    attempt: int
    task_id: str
    agent_id: str | None = None
    hostname: str | None = None
    started_at: float | None = None
    ended_at: float | None = None
    state: str | None = None  # the Mesos terminal state name
    exit_code: int | None = None
    message: str | None = None
    address: str | None = None  # where the task is reached (its agent's address)
    ports: tuple[int, ...] = ()  # the ports it was given from its offer, in order
    # what it used, as its agent measured it (the usage labels of its terminal status)
    cpu_seconds: float | None = None
    mem_peak_bytes: int | None = None


@attrs.define
class TaskRecord:
    job_id: int
    index: int
    phase: TaskPhase = TaskPhase.PENDING
    attempt: int = 0  # number of the current (or next) attempt
    failures: int = 0  # attempts that count against max_retries
    not_before: float = 0.0
    history: list[Attempt] = attrs.field(factory=list)
    # why we asked for a kill: "cancel", "time limit", "gang restart", "gang abort", "requeue", "preempt"
    killing: str | None = None
    revocable: bool = False
    relaunches: int = 0  # launches the master dropped before the task ever ran
    preempted_by: int | None = None  # the job whose start evicts (or evicted) this task

    @property
    def current(self) -> Attempt | None:
        return self.history[-1] if self.history else None

    @property
    def task_id(self) -> str:
        return task_id_for(self.job_id, self.index, self.attempt)


@attrs.define
class JobRecord:
    job_id: int
    spec: JobSpec
    submitted_at: float
    state: JobState = JobState.PENDING
    started_at: float | None = None
    ended_at: float | None = None
    reason: str | None = None
    gang_started: bool = False
    hold_since: float | None = None
    hold_cooldown_until: float = 0.0
    # a whole gang (policy abort/restart): restarts spent, what it is doing while its ranks are
    # being killed, when its current run started (its time limit), the job's exit code
    gang_restarts: int = 0
    regrouping: str | None = None  # killing the rest to place the whole gang again: why
    aborting: str | None = None  # killing the rest, then FAILED: why
    gang_started_at: float | None = None
    gang_not_before: float = 0.0  # the next run of a restarted gang waits for its backoff
    exit_code: int | None = None  # the failing rank's, when an aborted gang failed the job
    tasks: list[TaskRecord] = attrs.field(factory=list)
    user: str | None = None  # who submitted it (the principal, else the name the client gave)
    # the OS account its tasks run as (decided at submit from the service's configuration, for
    # an authenticated owner; None: the service's own)
    run_as: str | None = None
    held: str | None = None  # who holds it: its pending tasks are not placed until released
    # what was done to the job and by whom: {"at", "who", "what"} (hold, update, requeue...)
    changes: list[dict[str, Any]] = attrs.field(factory=list)
    parent_id: int | None = None  # a periodic job's run: the template it was started from
    due_at: float | None = None  # ... and the scheduled time it stands for
    next_run: float | None = None  # a periodic template: when its next run falls due
    runs: list[int] = attrs.field(factory=list)  # a periodic template: the runs it started
    notified: bool = False  # its final state was delivered to ``spec.notify``
    preempted_by: int | None = None  # its tasks were evicted for this job and wait to run again
    # a service job whose service tasks have all ended (``BatchCore.service_finished``): why it
    # fails once its instances are gone ("": it succeeds; None: its service tasks go on)
    service_outcome: str | None = attrs.field(default=None, eq=False)
    # Indexes kept up to date by BatchCore._set_phase, so that no status update or scheduling
    # round scans the job's tasks: tasks per phase (settling a job is O(1)), the PENDING tasks,
    # those of them that may wait for a retry backoff, those with a failure behind them, and the
    # LAUNCHING or RUNNING ones.
    phases: dict[TaskPhase, int] = attrs.field(factory=dict)
    pending: set[int] = attrs.field(factory=set, eq=False)
    backoff: set[int] = attrs.field(factory=set, eq=False)
    pending_failed: int = attrs.field(default=0, eq=False)
    active: set[int] = attrs.field(factory=set, eq=False)
    # indexes of the tasks changed since the store last took them (None: all, never written);
    # the store writes only these rows (``store.snapshot``)
    unsaved_tasks: set[int] | None = attrs.field(default=None, eq=False)

    def recount(self) -> None:
        """Rebuild the indexes from the tasks (after a restore)."""
        self.phases = {}
        self.pending, self.backoff, self.active = set(), set(), set()
        self.pending_failed = 0
        for t in self.tasks:
            self.phases[t.phase] = self.phases.get(t.phase, 0) + 1
            if t.phase is TaskPhase.PENDING:
                self.pending.add(t.index)
                if t.not_before > 0:
                    self.backoff.add(t.index)
                if t.failures:
                    self.pending_failed += 1
            elif t.phase in ACTIVE:
                self.active.add(t.index)

    def counts(self) -> dict[str, int]:
        return {p.value: n for p, n in self.phases.items() if n}

    @property
    def periodic(self) -> bool:
        """A periodic template: it runs no task itself; its schedule starts runs."""
        return self.spec.schedule is not None and self.parent_id is None


def _unsaved(job: JobRecord, index: int) -> None:
    """Task ``index`` changed: the next write of ``job`` includes its row."""
    if job.unsaved_tasks is not None:
        job.unsaved_tasks.add(index)


def task_id_for(job_id: int, index: int, attempt: int) -> str:
    return f"j{job_id}-{index}-{attempt}"


def parse_task_id(task_id: str) -> tuple[int, int, int] | None:
    parts = task_id.split("-")
    if len(parts) != 3 or not parts[0].startswith("j"):
        return None
    try:
        return int(parts[0][1:]), int(parts[1]), int(parts[2])
    except ValueError:
        return None


# --- effects ------------------------------------------------------------------------------------


@attrs.frozen
class TaskLaunch:
    task_id: str
    job_id: int
    index: int
    name: str
    spec: JobSpec
    resources: Resources
    env: tuple[tuple[str, str], ...] = ()  # this task's own variables: ports, its gang's rendezvous
    run_as: str | None = None  # the OS account (CommandInfo.user; None: the framework's user)


@attrs.frozen
class JobEvent:
    """Something that happened to a job, for the event stream and notifications: ``kind`` is
    submitted, started, finished, preempted, requeued, held, released or updated."""

    kind: str
    job_id: int
    at: float
    state: str
    detail: str | None = None


Effect = Launch[TaskLaunch] | Kill | Decline | Persist | Suppress | Revive | DeclareDemand | JobEvent

MAX_CHANGES = 200  # entries of a job's change history kept (the oldest go first)
# fields ``update`` may change, and those it changes only while no task of the job is running
UPDATABLE = frozenset(
    {"priority", "time_limit", "count", "cpus", "mem", "gpus", "disk", "gang", "max_retries", "queue",
     "preemptible", "preempt", "grace", "name", "notify", "schedule", "concurrency", "ports"}
)  # fmt: skip
PENDING_ONLY = frozenset({"cpus", "mem", "gpus", "disk", "gang", "queue", "ports"})


@attrs.define
class Preemption:
    """A preemption under way: the tasks being killed for the preemptor, their agents, and when
    the last of them ended."""

    victims: frozenset[str] = frozenset()
    agents: frozenset[str] = frozenset()
    ended_at: float | None = None
    jobs: frozenset[int] = frozenset()  # the victims' jobs


# a reservation of everything on an offer (a preemption's)
ALL: Mapping[str, float] = {"cpus": 1e12, "mem": 1e12, "gpus": 1e12, "disk": 1e12}


class BatchError(ValueError):
    """A request the core refuses (unknown job, cancelling a finished job...)."""


# --- the core -----------------------------------------------------------------------------------


def owner_key(job: JobRecord) -> tuple[str, str]:
    """The (queue, user) a job's usage and fair share count under ("" for a job without owner)."""
    return (job.spec.queue, job.user or "")


def _rate(spec: JobSpec) -> Rate:
    return Rate(cpus=spec.cpus, mem=spec.mem, gpus=spec.gpus)


class BatchCore:
    def __init__(
        self,
        gang_timeout: float = DEFAULT_GANG_TIMEOUT,
        decline_seconds: float = 5.0,
        config: BatchConfig | None = None,
        preempt_queues: Iterable[str] = (),
    ) -> None:
        self.config = config or BatchConfig()
        # every (queue, user)'s decayed usage and what its tasks run now: the fair-share input
        self.usage = UsageBook(self.config.fairshare)
        self.jobs: dict[int, JobRecord] = {}
        # jobs of these queues preempt as if submitted with ``preempt`` (a per-queue setting)
        self.preempt_queues = frozenset(preempt_queues)
        # preemptions under way: preemptor job -> (its victims' task ids, when they had all ended)
        self._preemptions: dict[int, Preemption] = {}
        self.live: dict[int, JobRecord] = {}  # the jobs not yet in a terminal state
        self.next_id = 1
        self.gang_timeout = gang_timeout
        self.decline_seconds = decline_seconds
        self._suppressed = False
        self._last_demand: tuple[tuple[str, Demand], ...] = ()
        self._round_at: float | None = None  # the ``now`` of the latest tick/schedule
        # the cluster's agents as the master last showed them (the shell refreshes it from the
        # master's /state): a job that cannot fit in them says so in its reason
        self.cluster: tuple[AgentCapacity, ...] = ()

    # --- queries -------------------------------------------------------------------------------

    def job(self, job_id: int) -> JobRecord:
        try:
            return self.jobs[job_id]
        except KeyError:
            raise BatchError(f"no job {job_id}") from None

    def find_task(self, task_id: str) -> TaskRecord | None:
        parsed = parse_task_id(task_id)
        if parsed is None:
            return None
        job = self.jobs.get(parsed[0])
        if job is None or not 0 <= parsed[1] < len(job.tasks):
            return None
        task = job.tasks[parsed[1]]
        return task if task.attempt == parsed[2] else None

    def active_tasks(self) -> Iterable[TaskRecord]:
        for job in self.live.values():
            for i in sorted(job.active):
                yield job.tasks[i]

    def active_attempts(self) -> list[tuple[str, str | None]]:
        """``(task_id, agent_id)`` of every LAUNCHING or RUNNING attempt: what to reconcile
        explicitly with the master after a (re)subscription (a launch lost with a crash of this
        framework is then answered for, and retried under a new id)."""
        out = []
        for task in self.active_tasks():
            cur = task.current
            out.append((task.task_id, cur.agent_id if cur is not None else None))
        return out

    def has_pending_work(self) -> bool:
        return any(j.pending for j in self.live.values())

    # --- commands ------------------------------------------------------------------------------

    def restore(self, job: JobRecord) -> None:
        """Load a job from the store (after a framework restart)."""
        job.recount()
        self.jobs[job.job_id] = job
        if job.state not in JOB_TERMINAL:
            self.live[job.job_id] = job
            for i in job.active:
                t = job.tasks[i]
                if t.phase is TaskPhase.RUNNING:
                    self.usage.start(owner_key(job), _rate(job.spec))
                if t.killing == "preempt" and t.preempted_by is not None:
                    # a preemption under way when the service stopped goes on
                    cur = t.current
                    pre = self._preemptions.setdefault(t.preempted_by, Preemption())
                    pre.victims |= {t.task_id}
                    pre.jobs |= {job.job_id}
                    if cur is not None and cur.agent_id is not None:
                        pre.agents |= {cur.agent_id}
        self.next_id = max(self.next_id, job.job_id + 1)

    def purge(self, before: float) -> list[int]:
        """Forget the finished jobs that ended before ``before`` (the accounting retention): not
        one a live job depends on or a live periodic job started. Their ids, for the store."""
        needed: set[int] = set()
        for job in self.live.values():
            needed.update(d.job_id for d in job.spec.after)
            needed.update(job.runs)
        gone = [
            j.job_id for j in self.jobs.values()
            if j.state in JOB_TERMINAL and j.ended_at is not None and j.ended_at < before and j.job_id not in needed
        ]
        for job_id in gone:
            del self.jobs[job_id]
        return gone

    def admission(self, spec: JobSpec, user: str | None) -> str | None:
        """Why a job of ``user`` is refused at submit by the limits (``limits.py``), or None: one
        pending job too many, a job that could never start within a limit, or (``on_limit =
        "refuse"``) one over a limit now."""
        limits = self.config.limits
        if not limits.enabled:
            return None
        who = user or ""
        need = need_of(spec)
        never = never_fits(limits, who, spec.queue, need, spec.gang_size)
        if never is not None:
            return never
        book = self.limit_book()
        too_many = pending_problem(limits, book, who, spec.queue)
        if too_many is not None:
            return too_many
        if limits.on_limit is OnLimit.REFUSE:
            _, why = book.room(who, spec.queue, need, spec.gang_size, starts_job=True, whole=spec.gang > 0)
            if why is not None:
                return why
        return None

    def limit_book(self) -> LimitBook:
        """What every user, queue and user-in-queue has in use now (for the limits)."""
        book = LimitBook(self.config.limits)
        if not self.config.limits.enabled:
            return book
        for job in self.live.values():
            if job.periodic:
                continue  # a template: its runs are jobs of their own
            book.add(job.user or "", job.spec.queue, need_of(job.spec), len(job.active),
                     running=bool(job.active), pending=not job.active)
        return book

    def shares(self, now: float) -> dict[tuple[str, str], Share]:
        """Every (queue, user) with live jobs: usage, shares, fair-share factor (``agora share``)."""
        self.usage.advance(now)
        active = {owner_key(j) for j in self.live.values() if not j.periodic}  # (a template runs nothing)
        return shares_of(self.usage.usage, active, self.config.users.shares)

    def priorities(self, now: float) -> dict[int, Factors]:
        """Every live job's multifactor priority and factors (``agora job priority``)."""
        shares = self.shares(now)
        cluster_cpus = sum(a.scalars.get("cpus", 0.0) for a in self.cluster)
        facts = [
            JobFacts(j.job_id, j.user or "", j.spec.queue, j.spec.priority, j.submitted_at, j.spec.cpus * j.spec.count)
            for j in self.live.values()
            if not j.periodic  # a template is never placed: its runs are ranked
        ]
        return job_factors(facts, shares, now, self.config.fairshare, cluster_cpus)

    def submit(
        self, spec: JobSpec, now: float, user: str | None = None, run_as: str | None = None
    ) -> tuple[int, list[Effect]]:
        """A new job of ``user`` (its owner; its tasks run as the OS account ``run_as``): its id and
        effects. A dependency on a job that does not exist is a ``BatchError`` (the job is refused,
        no id is spent); one on a job that has already ended the wrong way makes a job that is
        cancelled at once, every task with it."""
        ids, effects = self.submit_many([spec], now, user, run_as)
        return ids[0], effects

    def submit_many(
        self, specs: Sequence[JobSpec], now: float, user: str | None = None, run_as: str | None = None
    ) -> tuple[list[int], list[Effect]]:
        """Several jobs at once (a job file): ``after`` entries with a negative ``job_id`` -k name
        the k-th job of ``specs`` (1-based), given its id here. All or nothing: a dependency on a
        job that does not exist is refused before any job is made."""
        ids = [self.next_id + i for i in range(len(specs))]
        resolved = []
        for n, spec in enumerate(specs):
            after = []
            for dep in spec.after:
                if dep.job_id < 0:
                    k = -dep.job_id - 1
                    if not 0 <= k < n:
                        raise BatchError(f"job {n + 1} of the file depends on a job that does not come before it")
                    dep = attrs.evolve(dep, job_id=ids[k])
                elif dep.job_id not in self.jobs:
                    raise BatchError(f"after: no job {dep.job_id}")
                after.append(dep)
            resolved.append(attrs.evolve(spec, after=tuple(after)))
        effects: list[Effect] = []
        for spec in resolved:
            _, more = self._new_job(spec, now, user, run_as=run_as)
            effects += more
        return ids, effects

    def _new_job(
        self, spec: JobSpec, now: float, user: str | None, parent: JobRecord | None = None, due_at: float | None = None,
        run_as: str | None = None,
    ) -> tuple[int, list[Effect]]:
        job_id = self.next_id
        self.next_id += 1
        job = JobRecord(job_id=job_id, spec=spec, submitted_at=now, user=user, run_as=run_as)
        periodic = spec.schedule is not None and parent is None
        job.tasks = [] if periodic else [TaskRecord(job_id, i) for i in range(spec.count)]
        job.recount()
        if periodic:
            assert spec.schedule is not None
            job.next_run = next_after(spec.schedule, now)
        if parent is not None:
            job.parent_id, job.due_at = parent.job_id, due_at
        self.jobs[job_id] = job
        self.live[job_id] = job
        effects: list[Effect] = [Persist((job_id,)), self._event("submitted", job, now)]
        ready, why = dependency_status(spec, self._states())
        if not ready and why is not None and why.startswith("never:"):
            for i in sorted(job.pending):
                self._set_phase(job.tasks[i], TaskPhase.CANCELLED)
            effects += self._finish(job, JobState.CANCELLED, now, why.removeprefix("never: "))
        if self._suppressed and not periodic:
            self._suppressed = False
            effects.append(Revive())
        return job_id, effects

    def cancel(self, job_id: int, now: float, who: str | None = None, why: str = "cancelled by user") -> list[Effect]:
        job = self.job(job_id)
        if job.state in JOB_TERMINAL:
            raise BatchError(f"job {job_id} already {job.state.value.lower()}")
        if who is not None:
            self._note(job, now, who, "cancel")
        effects: list[Effect] = []
        for i in sorted(job.pending):
            self._set_phase(job.tasks[i], TaskPhase.CANCELLED)
        job.regrouping = job.aborting = None
        for i in sorted(job.active):
            t = job.tasks[i]
            t.killing = "cancel"
            _unsaved(job, i)
            cur = t.current
            effects.append(Kill(t.task_id, cur.agent_id if cur else None, "job cancelled"))
        effects += self._finish(job, JobState.CANCELLED, now, why)
        return effects

    def service_finished(self, job_id: int, failure: str | None, now: float) -> list[Effect]:
        """Every service task of a service job has ended (its instances are told to stop): the
        instances not yet placed are not needed (CANCELLED without running), and the job ends
        once the running ones are gone: FAILED with ``failure`` when given, else SUCCEEDED,
        however its instances ended."""
        job = self.job(job_id)
        if job.state in JOB_TERMINAL or not job.spec.service:
            return []
        job.service_outcome = failure or ""
        return [Persist((job_id,)), *self._settle(job, now)]

    # --- hold, release, update, requeue (each noted in the job's change history) ---------------

    def hold(self, job_id: int, now: float, who: str) -> list[Effect]:
        """Keep the job's pending tasks from being placed (running ones go on), or a periodic
        job from starting runs, until ``release``."""
        job = self.job(job_id)
        if job.state in JOB_TERMINAL:
            raise BatchError(f"job {job_id} already {job.state.value.lower()}; nothing to hold")
        if job.held is not None:
            raise BatchError(f"job {job_id} is already held (by {job.held})")
        job.held = who
        job.hold_since = None
        self._note(job, now, who, "hold")
        return [Persist((job_id,)), self._event("held", job, now, f"by {who}")]

    def release(self, job_id: int, now: float, who: str) -> list[Effect]:
        job = self.job(job_id)
        if job.held is None:
            raise BatchError(f"job {job_id} is not held")
        job.held = None
        if job.periodic and job.next_run is not None and job.spec.schedule is not None and job.next_run <= now:
            job.next_run = next_after(job.spec.schedule, now)  # runs due while held are not made up
        self._note(job, now, who, "release")
        effects: list[Effect] = [Persist((job_id,)), self._event("released", job, now, f"by {who}")]
        if self._suppressed and job.pending:
            self._suppressed = False
            effects.append(Revive())
        return effects

    def update(self, job_id: int, changes: Mapping[str, Any], now: float, who: str) -> list[Effect]:
        """Change fields of a job (Slurm's ``scontrol update``): priority, time limit, retries,
        name, preemption and notification at any time before it ends; per-task resources, the
        gang size and the queue only while none of its tasks is launching or running; the count
        only by adding tasks or dropping pending ones at the end, and never under a gang that has
        started. A refused update changes nothing (``SpecError``/``BatchError`` naming the field)."""
        job = self.job(job_id)
        if job.state in JOB_TERMINAL:
            raise BatchError(f"job {job_id} already {job.state.value.lower()}; requeue it to run it again")
        unknown = sorted(set(changes) - UPDATABLE)
        if unknown:
            raise SpecError(f"{unknown[0]}: cannot be updated (updatable: {', '.join(sorted(UPDATABLE))})")
        if not changes:
            raise SpecError("nothing to update")
        old = job.spec
        if "schedule" in changes and (
            (changes["schedule"] is None) != (old.schedule is None) or job.parent_id is not None
        ):
            raise SpecError("schedule: a job cannot become periodic or stop being periodic; submit a new one")
        merged = {**spec_to_dict(old), **changes}
        new = spec_from_dict(merged)
        running = bool(job.active)
        for name in sorted(PENDING_ONLY & set(changes)):
            if running and getattr(new, name) != getattr(old, name):
                raise BatchError(
                    f"{name}: job {job_id} has tasks launching or running; resources, gang and queue "
                    "change only while none runs"
                )
        gang_live = old.gang > 0 and (job.gang_started or running)
        if new.count != old.count:
            if gang_live:
                raise BatchError(f"count: job {job_id}'s gang has started; changing its count would break it")
            for t in job.tasks[new.count :]:
                if t.phase is not TaskPhase.PENDING or t.history:
                    raise BatchError(
                        f"count: task {t.index} of job {job_id} is {t.phase.value.lower()}"
                        + (" and has run" if t.phase is TaskPhase.PENDING else "")
                        + f"; the count can only drop pending tasks that never ran (down to {self._min_count(job)})"
                    )
        if new.gang != old.gang and gang_live:
            raise BatchError(f"gang: job {job_id}'s gang has started")
        # all checked: apply
        job.spec = new
        if job.periodic and new.schedule is not None and new.schedule != old.schedule:
            job.next_run = next_after(new.schedule, now)  # the new schedule counts from now
        if job.periodic:
            pass  # a template has no tasks: its later runs get the new count
        elif new.count > old.count:
            for i in range(old.count, new.count):
                task = TaskRecord(job_id, i)
                job.tasks.append(task)
                job.phases[TaskPhase.PENDING] = job.phases.get(TaskPhase.PENDING, 0) + 1
                job.pending.add(i)
                _unsaved(job, i)
        elif new.count < old.count:
            for t in job.tasks[new.count :]:
                job.phases[TaskPhase.PENDING] -= 1
                job.pending.discard(t.index)
                job.backoff.discard(t.index)
            del job.tasks[new.count :]
            job.unsaved_tasks = None  # rewrite the job's rows (the dropped ones go)
        diff = ", ".join(
            f"{k} {_show(merged_old)} -> {_show(merged_new)}"
            for k in sorted(changes)
            if (merged_old := spec_to_dict(old).get(k)) != (merged_new := spec_to_dict(new).get(k))
        )
        self._note(job, now, who, f"update {diff or '(no change)'}")
        effects: list[Effect] = [Persist((job_id,)), self._event("updated", job, now, diff or None)]
        effects += self._settle(job, now)
        if self._suppressed and job.pending:
            self._suppressed = False
            effects.append(Revive())
        return effects

    @staticmethod
    def _min_count(job: JobRecord) -> int:
        keep = 0
        for t in job.tasks:
            if t.phase is not TaskPhase.PENDING or t.history:
                keep = t.index + 1
        return max(keep, 1)

    def requeue(self, job_id: int, now: float, who: str) -> list[Effect]:
        """Run a finished or running job again from the start (Slurm's ``scontrol requeue``):
        running tasks are killed and, with every other task, go back to PENDING under a new
        attempt; retries start afresh; no failure is counted."""
        job = self.job(job_id)
        if job.periodic:
            raise BatchError(f"job {job_id} is periodic; its runs can be requeued, not the schedule")
        if job.spec.service:
            raise BatchError(f"job {job_id} is a service job; submit it again to run its service tasks again")
        if job.state is JobState.PENDING and not any(t.history for t in job.tasks):
            raise BatchError(f"job {job_id} is pending and has never run; nothing to requeue")
        effects: list[Effect] = []
        if job.state in JOB_TERMINAL:
            job.state = JobState.PENDING
            self.live[job_id] = job
            job.ended_at = None
        job.reason = None
        job.gang_started = False
        job.hold_since = None
        job.hold_cooldown_until = 0.0
        # a whole gang starts afresh too: no abort or restart in progress, its restarts unspent
        job.aborting = job.regrouping = None
        job.exit_code = job.gang_started_at = None
        job.gang_restarts = 0
        job.gang_not_before = 0.0
        for t in job.tasks:
            t.failures = 0
            if t.phase in ACTIVE:
                if t.killing != "requeue":
                    t.killing = "requeue"
                    cur = t.current
                    effects.append(Kill(t.task_id, cur.agent_id if cur else None, "job requeued"))
                _unsaved(job, t.index)
            elif t.phase is TaskPhase.PENDING:
                t.not_before = 0.0
                job.backoff.discard(t.index)
                _unsaved(job, t.index)
            else:
                if t.history:
                    t.attempt += 1
                t.not_before = 0.0
                t.killing = None
                t.preempted_by = None
                self._set_phase(t, TaskPhase.PENDING, requeue=True)
        job.recount()
        self._note(job, now, who, "requeue")
        effects[:0] = [Persist((job_id,)), self._event("requeued", job, now, f"by {who}")]
        if self._suppressed:
            self._suppressed = False
            effects.append(Revive())
        return effects

    def _note(self, job: JobRecord, now: float, who: str, what: str) -> None:
        job.changes.append({"at": now, "who": who, "what": what})
        if len(job.changes) > MAX_CHANGES:
            del job.changes[: len(job.changes) - MAX_CHANGES]

    def _event(self, kind: str, job: JobRecord, now: float, detail: str | None = None) -> JobEvent:
        return JobEvent(kind, job.job_id, now, job.state.value, detail)

    def on_update(
        self,
        task_id: str,
        state: TaskState,
        now: float,
        *,
        agent_id: str | None = None,
        message: str | None = None,
        reason: str | None = None,
        exit_code: int | None = None,
        cpu_seconds: float | None = None,
        mem_peak_bytes: int | None = None,
    ) -> list[Effect]:
        """A status update; a terminal one may carry what the attempt used (``cpu_seconds``,
        ``mem_peak_bytes``: its agent's measurement), kept in the attempt for accounting."""
        task = self.find_task(task_id)
        if task is None or task.phase in TASK_TERMINAL or task.phase is TaskPhase.PENDING:
            return []  # an old attempt, or a repeat after we moved on
        self.usage.advance(now)  # charge what ran until now before anything stops or starts
        job = self.jobs[task.job_id]
        cur = task.current
        assert cur is not None
        if agent_id and cur.agent_id != agent_id:
            cur.agent_id = agent_id
            _unsaved(job, task.index)
        if state in (TaskState.TASK_STARTING, TaskState.TASK_STAGING, TaskState.TASK_KILLING):
            return []
        if state is TaskState.TASK_RUNNING:
            if task.phase is TaskPhase.LAUNCHING:
                self._set_phase(task, TaskPhase.RUNNING)
                cur.started_at = now
                if job.spec.whole_gang and job.gang_started_at is None:
                    job.gang_started_at = now  # the gang's time limit counts from here
                effects: list[Effect] = [Persist((job.job_id,))]
                if job.state is JobState.PENDING:
                    self._set_job(job, JobState.RUNNING, now)
                    job.started_at = job.started_at or now
                    effects.append(self._event("started", job, now))
                job.reason = None
                return effects
            return []
        if state is TaskState.TASK_UNREACHABLE:
            return []  # may come back; a partition-aware framework waits for the verdict
        # terminal
        cur.ended_at = now
        cur.state = state.value
        cur.exit_code = exit_code
        cur.message = message
        cur.cpu_seconds = cpu_seconds
        cur.mem_peak_bytes = mem_peak_bytes
        return self._attempt_ended(job, task, state, reason, now)

    def launch_not_sent(self, task_ids: Iterable[str], now: float) -> list[Effect]:
        """The shell could not send these launches (the offer changed under it): the tasks go
        back to PENDING as if never placed; no attempt, retry or relaunch is spent."""
        touched: set[int] = set()
        for task_id in task_ids:
            task = self.find_task(task_id)
            if task is None or task.phase is not TaskPhase.LAUNCHING:
                continue
            if task.history and task.history[-1].task_id == task_id:
                task.history.pop()
            job = self.jobs[task.job_id]
            if job.aborting is not None and job.state not in JOB_TERMINAL:
                self._set_phase(task, TaskPhase.CANCELLED)  # its gang aborts: it never ran
            else:
                self._set_phase(task, TaskPhase.PENDING)
            touched.add(task.job_id)
        effects: list[Effect] = [Persist(tuple(sorted(touched)))] if touched else []
        for job_id in touched:
            job = self.jobs[job_id]
            if job.spec.whole_gang and job.active and job.regrouping is None and job.aborting is None:
                # Part of the gang went out: it cannot run without the rest; place it again whole.
                effects += self._regroup(job, None, now, count=False, why="part of its launch was not sent")
            if job.spec.whole_gang:
                effects += self._gang_settle(job, now)
            effects += self._settle(job, now)
        return effects

    def _attempt_ended(
        self, job: JobRecord, task: TaskRecord, state: TaskState, reason: str | None, now: float
    ) -> list[Effect]:
        if job.spec.whole_gang:
            return self._rank_ended(job, task, state, reason, now)
        spec = job.spec
        was_launching = task.phase is TaskPhase.LAUNCHING
        events: list[Effect] = []
        if state is TaskState.TASK_FINISHED and task.killing != "requeue":
            if job.state is JobState.PENDING:
                # It finished before its RUNNING update came (or that update was lost): it ran.
                self._set_job(job, JobState.RUNNING, now)
                job.started_at = job.started_at or now
                events.append(self._event("started", job, now))
            self._set_phase(task, TaskPhase.SUCCEEDED)
        elif task.killing == "cancel":
            self._set_phase(task, TaskPhase.CANCELLED)
        elif task.killing in ("requeue", "preempt"):
            # Requeued, or evicted for a higher-priority job: run again, not a failure.
            self._retry(task, now, count=False)
        elif reason in NOT_A_FAILURE and task.killing is None:
            # Revoked (or evicted), or its agent drained: run it again (the drained agent gets
            # no offers, so elsewhere); this does not count as a failure.
            self._retry(task, now, count=False)
        elif (
            state in NEVER_RAN
            and was_launching
            and task.killing is None
            and task.relaunches < MAX_FREE_RELAUNCHES
        ):
            task.relaunches += 1
            self._retry(task, now, count=False)
        else:
            if task.killing == "time limit":
                cur = task.current
                if cur is not None:
                    cur.message = f"time limit of {spec.time_limit:g}s exceeded"
            if task.failures < spec.max_retries:
                self._retry(task, now, count=True)
            else:
                self._set_phase(task, TaskPhase.FAILED)
        task.killing = None
        return [Persist((job.job_id,)), *events, *self._settle(job, now)]

    # --- whole gangs (gang_policy abort or restart) ----------------------------------------------

    def _rank_ended(
        self, job: JobRecord, task: TaskRecord, state: TaskState, reason: str | None, now: float
    ) -> list[Effect]:
        """An attempt of a whole gang's task ended: the gang's policy decides for all its ranks."""
        spec = job.spec
        was_launching = task.phase is TaskPhase.LAUNCHING
        killing, task.killing = task.killing, None
        effects: list[Effect] = [Persist((job.job_id,))]
        cur = task.current
        assert cur is not None
        if killing == "cancel":
            self._set_phase(task, TaskPhase.CANCELLED)
        elif job.aborting is not None:  # one of the ranks the abort kills (or one that ended meanwhile)
            self._set_phase(task, TaskPhase.SUCCEEDED if state is TaskState.TASK_FINISHED else TaskPhase.CANCELLED)
        elif job.regrouping is not None:  # it runs again with the whole gang
            self._again(job, task)
        elif state is TaskState.TASK_FINISHED and killing != "requeue":
            if job.state is JobState.PENDING:
                self._set_job(job, JobState.RUNNING, now)
                job.started_at = job.started_at or now
                effects.append(self._event("started", job, now))
            self._set_phase(task, TaskPhase.SUCCEEDED)
        elif killing in ("requeue", "preempt") or (
            killing is None
            and (
                reason in NOT_A_FAILURE
                or (state in NEVER_RAN and was_launching and task.relaunches < MAX_FREE_RELAUNCHES)
            )
        ):
            # Requeued, evicted, preempted, drained, or it never ran: not the rank's failure, but
            # its peers cannot rendezvous with a replacement placed alone. The whole gang is
            # placed again, free.
            if state in NEVER_RAN and was_launching and killing is None:
                task.relaunches += 1
            if killing == "requeue":
                what = "was requeued"
            elif killing == "preempt" and task.preempted_by is not None:
                what = f"was preempted by job {task.preempted_by}"
            elif killing == "preempt" or reason == PREEMPTED_REASON:
                what = "was preempted"
            elif reason == DRAINING_REASON:
                what = "was stopped: its agent drains"
            else:
                what = f"never ran ({state.value})"
            effects += self._regroup(job, task, now, count=False, why=f"task {task.index} {what}")
        else:
            if killing == "time limit":
                cur.message = f"time limit of {spec.time_limit:g}s exceeded"
            why = _failure_text(task.index, cur, state)
            if spec.policy is GangPolicy.RESTART and job.gang_restarts < spec.max_retries:
                effects += self._regroup(job, task, now, count=True, why=why)
            else:
                effects += self._abort(job, task, why)
        return effects + self._gang_settle(job, now) + self._settle(job, now)

    def _gang_settle(self, job: JobRecord, now: float) -> list[Effect]:
        """Once the last rank of a restarting gang is gone it is placed again whole; once the last
        rank of an aborting gang is gone the job fails."""
        if job.state in JOB_TERMINAL or job.active:
            return []
        job.regrouping = None
        if job.aborting is not None:
            return self._finish(job, JobState.FAILED, now, job.aborting)
        return []

    def _again(self, job: JobRecord, task: TaskRecord) -> None:
        """Task back to PENDING under a new attempt, for the gang's next run (no retry of its own)."""
        task.attempt += 1
        task.not_before = job.gang_not_before
        self._set_phase(task, TaskPhase.PENDING)

    def _regroup(
        self, job: JobRecord, trigger: TaskRecord | None, now: float, *, count: bool, why: str
    ) -> list[Effect]:
        """Kill the gang's running ranks and place the whole gang again once they are gone;
        ``count``: as one of the job's retries (policy restart), after its backoff."""
        spec = job.spec
        if count:
            job.gang_restarts += 1
            delay = min(RETRY_MAX, RETRY_BASE * 2 ** (job.gang_restarts - 1))
            job.regrouping = f"gang restart {job.gang_restarts} of {spec.max_retries}: {why}"
        else:
            delay = 0.0
            job.regrouping = f"placing the whole gang again: {why}"
        job.gang_not_before = now + delay
        job.gang_started = False
        job.gang_started_at = None
        job.hold_since = None
        effects: list[Effect] = []
        for t in job.tasks:
            if t is trigger or t.phase is TaskPhase.SUCCEEDED:
                self._again(job, t)
            elif t.phase in ACTIVE:
                if t.killing is None:
                    cur = t.current
                    effects.append(Kill(t.task_id, cur.agent_id if cur else None, job.regrouping))
                t.killing = "gang restart"
                _unsaved(job, t.index)
            elif t.phase is TaskPhase.PENDING and t.not_before < job.gang_not_before:
                t.not_before = job.gang_not_before
                job.backoff.add(t.index)
                _unsaved(job, t.index)
        return effects

    def _abort(self, job: JobRecord, trigger: TaskRecord, why: str) -> list[Effect]:
        """The gang fails with ``trigger``: its rank's exit code and message are the job's; the
        other ranks are killed and the job is FAILED once the last one is gone."""
        cur = trigger.current
        self._set_phase(trigger, TaskPhase.FAILED)
        job.exit_code = cur.exit_code if cur is not None else None
        job.aborting = f"gang aborted: {why}"
        effects: list[Effect] = []
        for t in job.tasks:
            if t is trigger:
                continue
            if t.phase in ACTIVE:
                if t.killing is None:
                    c = t.current
                    effects.append(Kill(t.task_id, c.agent_id if c else None, job.aborting))
                t.killing = "gang abort"
                _unsaved(job, t.index)
            elif t.phase is TaskPhase.PENDING:
                self._set_phase(t, TaskPhase.CANCELLED)
        return effects

    def resume_kills(self) -> list[Effect]:
        """After a restart of the service: the kills of gangs that were aborting or restarting,
        and every other kill decided before it (cancel, requeue, preemption, time limit: the
        reason is stored with the task) whose task has not ended, go out again (a kill is
        idempotent)."""
        out: list[Effect] = []
        for job in self.live.values():
            why = job.aborting or job.regrouping
            if why is None:
                for i in sorted(job.active):
                    t = job.tasks[i]
                    if t.killing is not None:
                        cur = t.current
                        out.append(Kill(t.task_id, cur.agent_id if cur else None, f"{t.killing} (resent)"))
                continue
            for i in sorted(job.active):
                t = job.tasks[i]
                t.killing = "gang abort" if job.aborting is not None else "gang restart"
                _unsaved(job, t.index)
                cur = t.current
                out.append(Kill(t.task_id, cur.agent_id if cur else None, why))
        return out

    def _retry(self, task: TaskRecord, now: float, *, count: bool) -> None:
        if count:
            task.failures += 1
        delay = 0.0 if not count else min(RETRY_MAX, RETRY_BASE * 2 ** (task.failures - 1))
        task.attempt += 1
        task.not_before = now + delay
        self._set_phase(task, TaskPhase.PENDING)

    def _settle(self, job: JobRecord, now: float) -> list[Effect]:
        """Move the job to the state its tasks imply (a periodic template has none: it ends
        only when cancelled)."""
        if job.state in JOB_TERMINAL or job.periodic:
            return []
        n = len(job.tasks)
        count = job.phases.get
        if job.service_outcome is not None:
            # a service job whose service tasks have all ended: its instances decide nothing
            for i in sorted(job.pending):
                self._set_phase(job.tasks[i], TaskPhase.CANCELLED)  # not needed any more
            if job.active:
                return []
            failure = job.service_outcome or None
            return self._finish(job, JobState.FAILED if failure else JobState.SUCCEEDED, now, failure)
        if count(TaskPhase.SUCCEEDED, 0) == n:
            return self._finish(job, JobState.SUCCEEDED, now, None)
        if sum(count(p, 0) for p in TASK_TERMINAL) == n:
            failed = count(TaskPhase.FAILED, 0)
            return self._finish(job, JobState.FAILED, now, f"{failed} of {n} tasks failed")
        idle = count(TaskPhase.LAUNCHING, 0) + count(TaskPhase.RUNNING, 0) == 0
        if idle and job.state is JobState.RUNNING:
            self._set_job(job, JobState.PENDING, now)
        return []

    def _finish(self, job: JobRecord, state: JobState, now: float, reason: str | None) -> list[Effect]:
        self._set_job(job, state, now)
        job.ended_at = now
        job.reason = reason
        effects: list[Effect] = [Persist((job.job_id,)), self._event("finished", job, now, reason)]
        # Dependents that can now never run are cancelled, transitively.
        states = self._states()
        for other in list(self.live.values()):
            if other.state in JOB_TERMINAL or not other.spec.after:
                continue
            if any(d.job_id == job.job_id for d in other.spec.after):
                ready, why = dependency_status(other.spec, states)
                if not ready and why is not None and why.startswith("never:"):
                    for i in sorted(other.pending):
                        self._set_phase(other.tasks[i], TaskPhase.CANCELLED)
                    effects += self._finish(other, JobState.CANCELLED, now, why.removeprefix("never: "))
        return effects

    def tick(self, now: float) -> list[Effect]:
        """Start the periodic runs that fell due; enforce time limits. (Retries become placeable
        by themselves once due.)"""
        self._round_at = now
        self.usage.advance(now)
        effects: list[Effect] = []
        for job in [j for j in self.live.values() if j.periodic]:
            effects += self._periodic(job, now)
        for job in self.live.values():
            if job.periodic:
                continue
            limit = job.spec.time_limit
            if limit is None:
                continue
            if job.spec.whole_gang:
                # the gang's time: from its first rank running; all its ranks are stopped together
                if job.gang_started_at is not None and now - job.gang_started_at >= limit:
                    for i in sorted(job.active):
                        t = job.tasks[i]
                        if t.killing is None:
                            t.killing = "time limit"
                            _unsaved(job, t.index)
                            cur = t.current
                            agent = cur.agent_id if cur is not None else None
                            effects.append(Kill(t.task_id, agent, f"time limit of {limit:g}s exceeded (the gang's)"))
                continue
            for i in sorted(job.active):
                t = job.tasks[i]
                cur = t.current
                if (
                    t.phase is TaskPhase.RUNNING
                    and t.killing is None
                    and cur is not None
                    and cur.started_at is not None
                    and now - cur.started_at >= limit
                ):
                    t.killing = "time limit"
                    _unsaved(job, i)
                    effects.append(Kill(t.task_id, cur.agent_id, f"time limit of {limit:g}s exceeded"))
        return effects

    def _periodic(self, job: JobRecord, now: float) -> list[Effect]:
        """A periodic template whose ``next_run`` has come: start (or skip) the run due, and move
        ``next_run`` on in the same write as the new run, so that a restart neither loses nor
        doubles it."""
        spec = job.spec
        if job.held is not None or job.next_run is None or spec.schedule is None:
            return []
        live = [r for r in job.runs if r in self.live]
        d = decide(spec.schedule, spec.concurrency.value, job.next_run, now, live)
        if d is None:
            return []
        job.next_run = d.next_run
        effects: list[Effect] = [Persist((job.job_id,))]
        if d.missed:
            self._note(job, now, "schedule", f"{d.missed} run(s) missed before {stamp(d.due_at)}; one run stands for them")
        if not d.start:
            self._note(job, now, "schedule", d.skipped or "run skipped")
            return effects
        for old in d.replace:
            if old in self.live:
                effects += self.cancel(old, now, None, f"replaced by the run due {stamp(d.due_at)} (concurrency replace)")
        run_spec = attrs.evolve(spec, schedule=None, concurrency=Concurrency.ALLOW)
        run_id, more = self._new_job(run_spec, now, job.user, parent=job, due_at=d.due_at, run_as=job.run_as)
        job.runs.append(run_id)
        self._note(job, now, "schedule", f"run job {run_id} for {stamp(d.due_at)}")
        return effects + more

    def next_wakeup(self, now: float) -> float | None:
        """The earliest time something becomes due (a retry, a time limit, a gang hold timeout).

        A time that passed after the latest round (``tick``/``schedule``) is still due, not
        over: that round saw it a moment early ("retry in 0.0s"), and nothing else would wake
        the loop for it while the offers it needs are already held."""
        seen = now if self._round_at is None else min(now, self._round_at)
        times: list[float] = []
        for job in self.live.values():
            if job.periodic:
                if job.next_run is not None and job.held is None:
                    times.append(max(job.next_run, seen))
                continue
            # (A hold that ran out before the latest round is released by the next schedule; a
            # round without one - disconnected - must not make the loop spin until it comes.)
            if job.hold_since is not None and job.hold_since + self.gang_timeout > seen:
                times.append(job.hold_since + self.gang_timeout)
            if job.hold_cooldown_until > seen:
                times.append(job.hold_cooldown_until)  # the gang may hold again then
            for i in job.backoff:
                if job.tasks[i].not_before > seen:
                    times.append(job.tasks[i].not_before)
            if job.spec.time_limit and job.spec.whole_gang:
                if job.gang_started_at is not None and any(job.tasks[i].killing is None for i in job.active):
                    times.append(job.gang_started_at + job.spec.time_limit)
            elif job.spec.time_limit:
                for i in job.active:
                    t = job.tasks[i]
                    cur = t.current
                    if t.phase is TaskPhase.RUNNING and t.killing is None and cur and cur.started_at:
                        times.append(cur.started_at + job.spec.time_limit)
        return min(times) if times else None

    def schedule(self, offers: Sequence[OfferView], now: float) -> list[Effect]:
        """Plan pending tasks onto ``offers``; launch, hold or decline; refresh every reason."""
        self._round_at = now
        states = self._states()
        views: list[JobView] = []
        singles = self._singletons()
        ranks = {i: f.total for i, f in self.priorities(now).items()}
        for job in self.live.values():
            if job.periodic:
                job.reason = (
                    f"held by {job.held}" if job.held is not None
                    else f"periodic: next run {stamp(job.next_run)}" if job.next_run is not None else None
                )
                continue
            if not job.pending:
                job.reason = job.aborting  # (an aborting gang says why until its last rank is gone)
                continue
            later: list[float] = []
            if job.backoff:
                for i in list(job.backoff):
                    not_before = job.tasks[i].not_before
                    if not_before > now:
                        later.append(not_before)
                    else:
                        job.backoff.discard(i)  # due: an ordinary pending task from now on
            pending = tuple(sorted(job.pending - job.backoff if job.backoff else job.pending))
            ready, why = dependency_status(job.spec, states)
            blocked = None if ready else why
            if blocked is None and job.regrouping is not None:
                blocked = f"{job.regrouping}; waiting for {len(job.active)} task(s) to end"
            if job.held is not None and job.regrouping is None:
                blocked = f"held by {job.held}"
            if blocked is None and job.spec.singleton:
                first = singles.get((job.spec.name, job.user))
                if first is not None and first != job.job_id:
                    blocked = f"singleton: job {first} of the same name and user has not ended"
            if blocked is None and not pending:
                blocked = f"retry in {min(later) - now:.1f}s"
            if blocked is None and job.hold_cooldown_until > now:
                blocked = "gang hold released; waiting before holding again"
            active = len(job.active)
            views.append(
                JobView(
                    job_id=job.job_id,
                    spec=job.spec,
                    submitted_at=job.submitted_at,
                    pending=pending,
                    active=active,
                    gang_started=job.gang_started,
                    blocked=blocked,
                    hold_since=job.hold_since,
                    rank=ranks.get(job.job_id, 0.0),
                    user=job.user or "",
                )
            )
        capacity = self.cluster
        book = self.limit_book()
        releases = self._releases(offers, now)
        reserved = self._reservations(offers)
        p = plan(views, offers, now, self.gang_timeout, capacity, book, releases, reserved)
        effects: list[Effect] = self._preempt(views, offers, p, now)
        by_offer: dict[str, list[Placement]] = {}
        for pl in p.placements:
            by_offer.setdefault(pl.offer_id, []).append(pl)
        touched: set[int] = set()
        agent_of = {o.offer_id: o for o in offers}
        # First every attempt of the round (a gang's ranks learn each other's places from them),
        # then the launches with each task's environment.
        for pl in p.placements:
            job = self.jobs[pl.job_id]
            task = job.tasks[pl.index]
            self._set_phase(task, TaskPhase.LAUNCHING)
            task.revocable = bool(pl.resources.revocable())
            offer = agent_of[pl.offer_id]
            ports = tuple(port for b, e in pl.resources.ranges("ports") for port in range(b, e + 1))
            task.history.append(
                Attempt(task.attempt, task.task_id, pl.agent_id, offer.hostname, address=offer.reach, ports=ports)
            )
            task.preempted_by = None
            job.preempted_by = None
            if job.spec.gang > 0:
                job.gang_started = True
            job.hold_since = None
            touched.add(job.job_id)
        for offer_id, pls in by_offer.items():
            launches = []
            for pl in pls:
                job = self.jobs[pl.job_id]
                task = job.tasks[pl.index]
                env = gang_environment(job, pl.index) if job.spec.gang > 0 or job.spec.ports else ()
                launches.append(
                    TaskLaunch(
                        task.task_id, job.job_id, pl.index, f"{job.spec.name}[{pl.index}]", job.spec, pl.resources, env,
                        job.run_as,
                    )
                )
            effects.append(Launch(offer_id, pls[0].agent_id, tuple(launches)))
        # Gang holds: start the clock for a new holder; a timed-out holder lets go and cools down.
        if p.holding_job is not None:
            holder = self.jobs[p.holding_job]
            if holder.hold_since is None:
                holder.hold_since = now
        for view in views:
            # A hold lasts only while the job is the holding head gang: one that stopped holding
            # (a gang found unable to fit the cluster, one behind a new head) starts afresh.
            other = self.jobs[view.job_id]
            if other.hold_since is not None and view.job_id != p.holding_job and view.job_id != p.released_job:
                other.hold_since = None
        if p.released_job is not None:
            rel = self.jobs[p.released_job]
            rel.hold_since = None
            rel.hold_cooldown_until = now + self.gang_timeout
        used = set(by_offer)
        keep = set(p.held_offers) if p.released_job is None else set()
        if p.holding_job is not None and p.released_job is None:
            # A head gang waits: an offer on an agent where our own tasks run grows back as they
            # end (reusable offers), perhaps enough to start the gang. Declining it would hand
            # those resources to the master, which offers a gang's demand only whole.
            busy = self._agents_running_ours()
            keep.update(o.offer_id for o in offers if o.agent_id in busy)
        if self._preemptions:
            # the resources of the tasks being preempted come back into these offers, for the
            # preemptor: declining them would hand them to the master instead
            victim_agents = self._victim_agents()
            keep.update(o.offer_id for o in offers if o.agent_id in victim_agents)
        # (An offer with nothing left, every resource in use by our tasks, is not idle.)
        idle = [o.offer_id for o in offers if o.resources and o.offer_id not in used and o.offer_id not in keep]
        reasons = p.reasons
        if idle and not self._retry_pending():
            effects.append(Decline(tuple(idle), self.decline_seconds))
            # Reasons describe the offers we go on holding, not the ones just declined ("largest
            # free offer has 0.5" while that offer is gone). The declined offers were neither used
            # nor held, so planning without them places the same; only the reasons may differ.
            gone = set(idle)
            reasons = plan(
                views, [o for o in offers if o.offer_id not in gone], now, self.gang_timeout, capacity, book,
                releases, reserved,
            ).reasons
        for job_id, why in reasons.items():
            job = self.jobs[job_id]
            if job.preempted_by is not None and job_id not in touched:
                why = f"preempted by job {job.preempted_by}; {why}"
            job.reason = why
        for pre, pr in self._preemptions.items():
            if pre in self.live and pre not in touched:
                left = sum(1 for tid in pr.victims if self._active_task(tid))
                of = ", ".join(str(j) for j in sorted(pr.jobs))
                self.live[pre].reason = (
                    f"preempting {left} task(s) of job(s) {of}" if left
                    else "preempted tasks ended; waiting for their resources"
                )
        for view in views:
            if view.job_id not in reasons and view.job_id not in touched:
                self.jobs[view.job_id].reason = None
        if touched:
            effects.append(Persist(tuple(sorted(touched))))
        # Ask for offers exactly while there is work waiting (a retry puts a task back to PENDING).
        waiting = self.has_pending_work()
        if not waiting and not self._suppressed:
            self._suppressed = True
            effects.append(Suppress())
        elif waiting and self._suppressed:
            self._suppressed = False
            effects.append(Revive())
        demand = self._demands(views)
        if worth_declaring(self._last_demand, demand):
            self._last_demand = demand
            effects.append(DeclareDemand(demand))
        return effects

    # --- helpers -------------------------------------------------------------------------------

    def expected_starts(self, offers: Sequence[OfferView], now: float) -> dict[int, float | None]:
        """Each pending job's expected start (``squeue --start``): in the planner's order (the
        multifactor rank, then priority, age, id), from what is free in ``offers`` now and when
        our running tasks' time limits bring more back (``backfill.expected_starts``); None when
        unknown (it waits on a dependency or a hold, or on tasks without a time limit)."""
        waiting: list[Waiting] = []
        out: dict[int, float | None] = {}
        states = self._states()
        ranks = {i: f.total for i, f in self.priorities(now).items()}
        offers = [*offers, *self._offerless(offers)]
        order = sorted(
            self.live.values(), key=lambda j: (-ranks.get(j.job_id, 0.0), -j.spec.priority, j.submitted_at, j.job_id)
        )
        for job in order:
            if job.periodic or not job.pending:
                continue
            spec = job.spec
            ready, _ = dependency_status(spec, states)
            if not ready or job.held is not None:
                out[job.job_id] = None
                continue
            gang = spec.gang > 0 and not job.gang_started and not job.active
            waiting.append(
                Waiting(job.job_id, spec.resources().scalars(), spec.gang_size if gang else 1,
                        frozenset(o.offer_id for o in offers if matches(spec, o)), spec.time_limit)
            )
        free = {o.offer_id: o.resources.non_revocable().scalars() for o in offers}
        for job_id, res in backfill_starts(waiting, now, free, self._releases(offers, now)).items():
            out[job_id] = None if res is None else res.start_at
        return out

    def _offerless(self, offers: Sequence[OfferView]) -> list[OfferView]:
        """An empty stand-in offer for each (agent, queue) where our tasks run but no offer is
        held now (a full agent's leftover offer was declined, and the master offers nothing
        without cpus): what those tasks hold comes back there all the same, so neither an
        expected start nor a preemption depends on which offers happen to be held. Its
        attributes are the agent's from the master's state."""
        have = {(o.agent_id, o.role) for o in offers}
        attributes = {a.agent_id: a.attributes for a in self.cluster}
        out: dict[tuple[str, str], OfferView] = {}
        for job in self.live.values():
            if not job.active:
                continue
            for i in job.active:
                cur = job.tasks[i].current
                key = (cur.agent_id if cur is not None else None, job.spec.queue)
                if cur is None or cur.agent_id is None or key in have or key in out:
                    continue
                out[(cur.agent_id, job.spec.queue)] = OfferView(
                    f"{cur.agent_id}/{job.spec.queue}", cur.agent_id, cur.hostname or "", job.spec.queue,
                    Resources.empty(), dict(attributes.get(cur.agent_id, {})),
                )
        return list(out.values())

    # --- priority preemption (the decision is frameworks.batch.preempt's) ----------------------

    def preempts(self, spec: JobSpec) -> bool:
        return spec.preempt or spec.queue in self.preempt_queues

    def _active_task(self, task_id: str) -> TaskRecord | None:
        t = self.find_task(task_id)
        return t if t is not None and t.phase in ACTIVE else None

    def _victim_agents(self) -> set[str]:
        return {a for pr in self._preemptions.values() for a in pr.agents}

    def _reservations(self, offers: Sequence[OfferView]) -> list[Reservation]:
        """A preemption under way keeps what comes back on its victims' agents for its
        preemptor: the jobs after it in the order may not take it meanwhile."""
        out = []
        for pre, pr in self._preemptions.items():
            job = self.live.get(pre)
            if job is None:
                continue
            hold = {o.offer_id: ALL for o in offers if o.agent_id in pr.agents and o.role == job.spec.queue}
            if hold:
                out.append(Reservation(pre, self._round_at or 0.0, hold))
        return out

    def _releases(self, offers: Sequence[OfferView], now: float) -> list[Release]:
        """When our running tasks with a time limit end at the latest, and where their resources
        come back (the offer of their queue on their agent): planned backfill's timeline."""
        limited = [j for j in self.live.values() if j.active and j.spec.time_limit]
        if not limited:
            return []
        offer_of = {(o.agent_id, o.role): o.offer_id for o in offers}
        out = []
        for job in limited:
            limit = job.spec.time_limit
            assert limit is not None
            shape = job.spec.resources().scalars()
            for i in job.active:
                cur = job.tasks[i].current
                if cur is None or cur.agent_id is None:
                    continue
                oid = offer_of.get((cur.agent_id, job.spec.queue))
                if oid is not None:
                    start = cur.started_at if cur.started_at is not None else now
                    out.append(Release(oid, max(now, start + limit), shape))
        return out

    def _preempt(self, views: Sequence[JobView], offers: Sequence[OfferView], p: Plan, now: float) -> list[Effect]:
        """One preemption at a time: while one is under way (its victims being killed, then
        ``PREEMPT_SETTLE`` seconds for their resources to come back into the offers) no other is
        decided. Otherwise the highest-priority preempting job that could not place what it
        needs gets the fewest lower-priority preemptible tasks evicted for it (the next one
        tries when nothing may be evicted for it)."""
        placed = {pl.job_id for pl in p.placements}
        for pre, pr in list(self._preemptions.items()):
            if pre not in self.live or pre in placed:
                del self._preemptions[pre]
                continue
            if any(self._active_task(tid) for tid in pr.victims):
                continue
            if pr.ended_at is None:
                pr.ended_at = now
            elif now - pr.ended_at >= PREEMPT_SETTLE:
                del self._preemptions[pre]  # it still does not fit: it may preempt again
        if self._preemptions:
            return []
        # (a job over a limit of its owner or queue waits for it, not for others' tasks)
        preempting = [
            v for v in views
            if v.blocked is None and v.pending and self.preempts(v.spec) and v.job_id not in p.limited
        ]
        for view in sorted(preempting, key=job_order_key):
            spec = view.spec
            got = len(p.placements_for(view.job_id))
            gang = spec.gang > 0 and not view.gang_started and view.active == 0
            count = spec.gang_size if gang else len(view.pending) - got
            if count <= 0 or (gang and got):
                continue
            effects = self._evict_for(view, count, offers, p, now)
            if effects:
                return effects  # (one for which nothing may be evicted lets the next one try)
        return []

    def _evict_for(self, view: JobView, count: int, offers: Sequence[OfferView], p: Plan, now: float) -> list[Effect]:
        spec = view.spec
        free: dict[str, dict[str, float]] = {}
        own_hold: dict[str, Resources] = {}
        for pl in p.held_placements:
            if pl.job_id == view.job_id:
                own_hold[pl.offer_id] = own_hold.get(pl.offer_id, Resources.empty()) + pl.resources
        for o in [*offers, *self._offerless(offers)]:  # (an agent full of victims may have no offer)
            if not matches(spec, o):
                continue
            left = p.free_after.get(o.offer_id, o.resources) + own_hold.get(o.offer_id, Resources.empty())
            usable = left.allocatable_to(spec.queue)
            if not spec.preemptible:
                usable = usable.non_revocable()
            agent = free.setdefault(o.agent_id, {})
            for k, v in usable.scalars().items():
                agent[k] = agent.get(k, 0.0) + v
        if not free:
            return []
        candidates: list[Candidate] = []
        # A preempting queue is the operator's setting: its jobs evict any user's tasks. A job's
        # own ``preempt`` (which its owner sets) evicts only tasks of the same owner.
        owner = None if spec.queue in self.preempt_queues else (self.jobs[view.job_id].user or "")
        for job in self.live.values():
            other = job.spec
            if (
                job.job_id == view.job_id
                or not other.preemptible
                or other.priority >= spec.priority
                or other.queue != spec.queue
                or (owner is not None and (job.user or "") != owner)
                or not job.active
                or job.aborting is not None
                or job.regrouping is not None
            ):
                continue
            shape = other.resources().scalars()
            for i in sorted(job.active):
                t = job.tasks[i]
                cur = t.current
                if t.killing is not None or cur is None or cur.agent_id is None:
                    continue
                if t.revocable and not spec.preemptible:
                    continue  # revocable resources would not help a job that may not use them
                candidates.append(
                    Candidate(job.job_id, i, t.task_id, cur.agent_id, other.priority, shape,
                              cur.started_at if cur.started_at is not None else now, other.gang > 0)
                )
        need = Need(view.job_id, spec.priority, spec.resources().scalars(), count)
        victims = choose(need, free, candidates)
        if not victims:
            return []
        effects: list[Effect] = []
        by_job: dict[int, list[int]] = {}
        for victim in victims:
            job = self.jobs[victim.job_id]
            t = job.tasks[victim.index]
            t.killing = "preempt"
            t.preempted_by = view.job_id
            job.preempted_by = view.job_id
            _unsaved(job, victim.index)
            by_job.setdefault(victim.job_id, []).append(victim.index)
            cur = t.current
            effects.append(Kill(t.task_id, cur.agent_id if cur else None, f"preempted by job {view.job_id}"))
        for job_id, indexes in sorted(by_job.items()):
            job = self.jobs[job_id]
            what = f"task(s) {', '.join(map(str, indexes))} preempted by job {view.job_id}"
            self._note(job, now, f"job {view.job_id}", what)
            effects += [Persist((job_id,)), self._event("preempted", job, now, what)]
        self._preemptions[view.job_id] = Preemption(
            frozenset(c.task_id for c in victims), frozenset(c.agent_id for c in victims),
            jobs=frozenset(c.job_id for c in victims),
        )
        pre = self.jobs[view.job_id]
        self._note(pre, now, "scheduler", f"preempting {len(victims)} task(s) of job(s) {', '.join(map(str, sorted(by_job)))}")
        effects.append(Persist((view.job_id,)))
        return effects

    def _singletons(self) -> dict[tuple[str, str | None], int]:
        """For each (name, user) of a live singleton job: the oldest live job of that name and
        user (Slurm's ``--dependency=singleton``: a singleton waits for every earlier one)."""
        wanted = {(j.spec.name, j.user) for j in self.live.values() if j.spec.singleton}
        if not wanted:
            return {}
        first: dict[tuple[str, str | None], int] = {}
        for j in self.live.values():
            key = (j.spec.name, j.user)
            if key in wanted and not j.periodic and (key not in first or j.job_id < first[key]):
                first[key] = j.job_id
        return first

    def _agents_running_ours(self) -> set[str]:
        agents: set[str] = set()
        for job in self.live.values():
            for i in job.active:
                cur = job.tasks[i].current
                if cur is not None and cur.agent_id is not None:
                    agents.add(cur.agent_id)
        return agents

    def _retry_pending(self) -> bool:
        """Keep idle offers while pending tasks are only waiting on a retry backoff (they will fit
        again shortly); otherwise decline them so other frameworks can use them."""
        return any(j.pending_failed for j in self.live.values())

    def _demands(self, views: Sequence[JobView]) -> tuple[tuple[str, Demand], ...]:
        out = []
        for v in views:
            if v.blocked is not None or not v.pending:
                continue
            gang = v.spec.gang > 0 and not v.gang_started
            demand = Demand(
                shape=v.spec.resources(),
                count=len(v.pending),
                gang_id=f"job-{v.job_id}" if gang else None,
                gang_min=min(v.spec.gang_size, len(v.pending)) if gang else None,
                revocable_ok=v.spec.preemptible,
                priority=v.spec.priority,
                role=v.spec.queue,
                # each unit with room for the most any of its tasks takes (a gang's rank 0: one more)
                ports=v.spec.ports_for(v.pending[0]),
            )
            out.append((f"job-{v.job_id}", demand))
        return tuple(out)

    def _states(self) -> Mapping[int, JobState]:
        return _JobStates(self.jobs)

    def _set_phase(self, task: TaskRecord, phase: TaskPhase, *, requeue: bool = False) -> None:
        old = task.phase
        if not (requeue and phase is TaskPhase.PENDING):  # requeue: a finished task runs again
            check_task_transition(old, phase)
        job = self.jobs[task.job_id]
        i = task.index
        job.phases[old] = job.phases.get(old, 0) - 1
        job.phases[phase] = job.phases.get(phase, 0) + 1
        if old is TaskPhase.PENDING:
            job.pending.discard(i)
            job.backoff.discard(i)
            if task.failures:
                job.pending_failed -= 1
        elif old in ACTIVE:
            job.active.discard(i)
        if old is TaskPhase.RUNNING and phase is not TaskPhase.RUNNING:
            self.usage.stop(owner_key(job), _rate(job.spec))
        elif phase is TaskPhase.RUNNING and old is not TaskPhase.RUNNING:
            self.usage.start(owner_key(job), _rate(job.spec))
        if phase is TaskPhase.PENDING:
            job.pending.add(i)
            if task.not_before > 0:
                job.backoff.add(i)  # perhaps still in the future: schedule() looks
            if task.failures:
                job.pending_failed += 1
        elif phase in ACTIVE:
            job.active.add(i)
        task.phase = phase
        _unsaved(job, i)

    def _set_job(self, job: JobRecord, state: JobState, now: float) -> None:
        check_job_transition(job.state, state)
        job.state = state
        if state in JOB_TERMINAL:
            self.live.pop(job.job_id, None)


def _failure_text(index: int, attempt: Attempt, state: TaskState) -> str:
    """``task 2 failed with exit code 1: <its message>``."""
    out = f"task {index} failed"
    if attempt.exit_code is not None:
        out += f" with exit code {attempt.exit_code}"
    elif state is not TaskState.TASK_FAILED:
        out += f" ({state.value})"
    if attempt.message:
        out += f": {attempt.message}"
    return out


def gang_environment(job: JobRecord, index: int) -> tuple[tuple[str, str], ...]:
    """What task ``index`` of ``job`` is told at launch: ``PORT0..`` (its ports), and for a gang
    the variables torch.distributed (``env://``), Horovod, DeepSpeed and MPI read to find each
    other: ``WORLD_SIZE`` (the job's tasks), ``RANK`` (its index), ``NODE_RANK`` (its agent among
    the gang's agents, by lowest rank), ``LOCAL_RANK``/``LOCAL_WORLD_SIZE`` (among the gang's
    tasks on its agent), ``MASTER_ADDR``/``MASTER_PORT`` (task 0's agent address and the port it
    took from its offer for the rendezvous), ``AGORA_GANG_NODES`` and ``AGORA_GANG_HOSTS``
    (``addr:slots,...`` by node rank; the launch also writes it as an MPI hostfile). The roster
    is the job's tasks placed or running now: the whole gang when ``count == gang``."""
    spec = job.spec
    cur = job.tasks[index].current
    own = cur.ports if cur is not None else ()
    env = [(f"PORT{i}", str(p)) for i, p in enumerate(own[: spec.ports])]
    if spec.gang <= 0:
        return tuple(env)
    nodes: dict[str, list[int]] = {}
    addresses: dict[str, str] = {}
    for t in job.tasks:
        a = t.current
        if t.phase in ACTIVE and a is not None:
            node = _node_of(a)
            nodes.setdefault(node, []).append(t.index)
            addresses[node] = a.address or a.hostname or ""
    mine = _node_of(cur) if cur is not None else ""
    local = nodes.get(mine, [index])
    zero = job.tasks[0].current
    master_addr = (zero.address or zero.hostname or "") if zero is not None else ""
    master_port = str(zero.ports[spec.ports]) if zero is not None and len(zero.ports) > spec.ports else ""
    env += [
        ("WORLD_SIZE", str(spec.count)),
        ("RANK", str(index)),
        ("NODE_RANK", str(list(nodes).index(mine) if mine in nodes else 0)),
        ("LOCAL_RANK", str(local.index(index) if index in local else 0)),
        ("LOCAL_WORLD_SIZE", str(len(local))),
        ("MASTER_ADDR", master_addr),
        ("MASTER_PORT", master_port),
        ("AGORA_GANG_NODES", str(len(nodes))),
        ("AGORA_GANG_HOSTS", ",".join(f"{addresses[n]}:{len(ranks)}" for n, ranks in nodes.items())),
    ]
    return tuple(env)


def _node_of(attempt: Attempt) -> str:
    """A gang's node is an agent (two agents on one host are two nodes, each with its own devices)."""
    return attempt.agent_id or attempt.address or attempt.hostname or ""


def worth_declaring(
    declared: Sequence[tuple[str, Demand]], demand: Sequence[tuple[str, Demand]]
) -> bool:
    """Whether ``demand`` must replace the ``declared`` one at the master.

    Any change, except that an array's count going down is declared only once it has halved:
    the declared count never falls below what is pending and stays within twice of it, and a job
    array of N tasks makes O(log N) REQUEST calls instead of one per scheduling round. Gang
    demands are declared exactly (their ``gang_min`` follows the count).
    """
    if len(declared) != len(demand):
        return True
    for (old_key, old), (key, new) in zip(declared, demand, strict=True):
        if old_key != key:
            return True
        if old == new:
            continue
        if old.gang_id is not None or new.gang_id is not None:
            return True
        if attrs.evolve(old, count=new.count) != new:
            return True
        if new.count > old.count or 2 * new.count <= old.count:
            return True
    return False


class _JobStates(Mapping[int, JobState]):
    """Every job's state, read through from the records (no copy per scheduling round)."""

    def __init__(self, jobs: Mapping[int, JobRecord]) -> None:
        self._jobs = jobs

    def __getitem__(self, job_id: int) -> JobState:
        return self._jobs[job_id].state

    def __iter__(self) -> Iterator[int]:
        return iter(self._jobs)

    def __len__(self) -> int:
        return len(self._jobs)


def _show(value: Any) -> str:
    return "none" if value is None else f"{value:g}" if isinstance(value, float) else str(value)
