"""The batch framework's pure core: jobs and tasks, turned into launches, kills and declines.

``BatchCore`` is the command surface. The shell (``service.py``) feeds it facts - a job
submitted or cancelled, task status updates, the offers it currently holds, time - and executes
the effects it returns (``effects.py``: ``Launch`` on an offer, ``Kill`` a task, ``Decline``
offers, ``Persist`` changed records, ``Suppress``/``Revive`` offers, ``DeclareDemand``, and
``JobEvent`` for the event stream). Each decision lives in its own pure module:

| module | decides |
| --- | --- |
| ``records.py`` | the job, task and attempt records; task ids |
| ``book.py`` | every state move of a task or job (transition tables, indexes, usage); dependents cancelled |
| ``queue.py`` | the queue as the planner sees it: what each job may place now, or why not |
| ``planner.py`` | where pending tasks go on held offers: queue order, gang holds, backfill, limits |
| ``fairshare.py`` | multifactor priorities (``priorities``) |
| ``gangs.py`` | whole gangs (policy abort or restart) and their rendezvous environment |
| ``changes.py`` | hold, release, update and requeue |
| ``evictions.py`` / ``preempt.py`` | priority preemption under way / which victims |
| ``timeline.py`` / ``backfill.py`` | expected starts and where running tasks' resources come back |
| ``periodic.py`` | when a periodic job's runs fall due |
| ``timers.py`` | time limits, and when the core must be woken next |
| ``demands.py`` | the standing demand declared to the master |

Task ids on the wire are ``<job>-<index>-<attempt>`` (``j12-3-0``), so an update names its
attempt and a late update from an old attempt cannot touch the new one.

A task id is launched at most once. Launches are *write-first*: the shell makes the LAUNCHING
attempt (with its task id) durable before the ACCEPT leaves, so a restart finds it LAUNCHING,
never PENDING under the same id. After every (re)subscription the shell reconciles the active
attempts (``active_attempts``) explicitly with the master: RUNNING and FINISHED answers are
adopted, and a LAUNCHING attempt the master answers LOST, UNKNOWN, GONE or DROPPED for never ran:
it is retried under a *new* attempt id (no retry spent).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

from frameworks.batch import changes
from frameworks.batch.book import JobBook, event, note
from frameworks.batch.config import BatchConfig
from frameworks.batch.demands import demands, worth_declaring
from frameworks.batch.effects import (
    DeclareDemand,
    Decline,
    Effect,
    JobEvent,
    Kill,
    Launch,
    Persist,
    Revive,
    Suppress,
    TaskLaunch,
)
from frameworks.batch.evictions import Evictions
from frameworks.batch.fairshare import Factors, JobFacts, Share, UsageBook, job_factors, shares_of
from frameworks.batch.gangs import gang_environment, gang_settle, rank_ended, regroup
from frameworks.batch.limits import LimitBook, OnLimit, never_fits, pending_problem
from frameworks.batch.model import (
    JOB_TERMINAL,
    TASK_TERMINAL,
    Concurrency,
    JobSpec,
    JobState,
    TaskPhase,
    dependency_status,
)
from frameworks.batch.periodic import decide, next_after, stamp
from frameworks.batch.planner import (
    DEFAULT_GANG_TIMEOUT,
    AgentCapacity,
    OfferView,
    Placement,
    need_of,
    plan,
)
from frameworks.batch.preempt import VictimPolicy, choose
from frameworks.batch.queue import job_views
from frameworks.batch.records import (
    ACTIVE,
    MAX_FREE_RELAUNCHES,
    NEVER_RAN,
    NOT_A_FAILURE,
    Attempt,
    BatchError,
    JobRecord,
    TaskRecord,
    mark_unsaved,
    owner_key,
    rate_of,
)
from frameworks.batch.timeline import expected_starts, releases_of
from frameworks.batch.timers import next_wakeup, time_limits
from frameworks.client.demand import Demand
from protocol.task_states import TaskState

__pure__ = True

__all__ = [
    "ACTIVE", "Attempt", "BatchCore", "BatchError", "DeclareDemand", "Decline", "Effect", "JobEvent", "JobRecord",
    "Kill", "Launch", "Persist", "Revive", "Suppress", "TaskLaunch", "TaskPhase", "TaskRecord", "gang_environment",
    "worth_declaring",
]  # fmt: skip


class BatchCore:
    def __init__(
        self,
        gang_timeout: float = DEFAULT_GANG_TIMEOUT,
        decline_seconds: float = 5.0,
        config: BatchConfig | None = None,
        preempt_queues: Iterable[str] = (),
        victims: VictimPolicy = choose,
    ) -> None:
        """``victims``: which running tasks a preemption evicts (``preempt.VictimPolicy``;
        ``preempt.choose`` by default)."""
        self.config = config or BatchConfig()
        # every (queue, user)'s decayed usage and what its tasks run now: the fair-share input
        self.usage = UsageBook(self.config.fairshare)
        self.book = JobBook(self.usage)
        self.jobs = self.book.jobs
        self.live = self.book.live  # the jobs not yet in a terminal state
        # jobs of these queues preempt as if submitted with ``preempt`` (a per-queue setting)
        self.preempt_queues = frozenset(preempt_queues)
        self.evictions = Evictions(self.book, self.preempt_queues, victims)
        self.gang_timeout = gang_timeout
        self.decline_seconds = decline_seconds
        self._suppressed = False
        self._last_demand: tuple[tuple[str, Demand], ...] = ()
        self._round_at: float | None = None  # the ``now`` of the latest tick/schedule
        # the cluster's agents as the master last showed them (the shell refreshes it from the
        # master's /state): a job that cannot fit in them says so in its reason
        self.cluster: tuple[AgentCapacity, ...] = ()

    @property
    def suppressed(self) -> bool:
        """Whether offers are suppressed: none will come until a REVIVE."""
        return self._suppressed

    @property
    def next_id(self) -> int:
        return self.book.next_id

    # --- queries -------------------------------------------------------------------------------

    def job(self, job_id: int) -> JobRecord:
        return self.book.job(job_id)

    def find_task(self, task_id: str) -> TaskRecord | None:
        return self.book.find_task(task_id)

    def active_tasks(self) -> Iterable[TaskRecord]:
        return self.book.active_tasks()

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
                    self.usage.start(owner_key(job), rate_of(job.spec))
                self.evictions.resume(job, t)  # a preemption under way when the service stopped goes on
        self.book.next_id = max(self.book.next_id, job.job_id + 1)

    def purge(self, before: float) -> list[int]:
        """Forget the finished jobs that ended before ``before`` (the accounting retention): not
        one a live job depends on or a live periodic job started. Their ids, for the store."""
        needed: set[int] = set()
        for job in self.live.values():
            needed.update(d.job_id for d in job.spec.after)
            needed.update(job.runs)
        gone = [
            j.job_id
            for j in self.jobs.values()
            if j.state in JOB_TERMINAL
            and j.ended_at is not None
            and j.ended_at < before
            and j.job_id not in needed
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
            book.add(
                job.user or "",
                job.spec.queue,
                need_of(job.spec),
                len(job.active),
                running=bool(job.active),
                pending=not job.active,
            )
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
            JobFacts(
                j.job_id,
                j.user or "",
                j.spec.queue,
                j.spec.priority,
                j.submitted_at,
                j.spec.cpus * j.spec.count,
            )
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
                        raise BatchError(
                            f"job {n + 1} of the file depends on a job that does not come before it"
                        )
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
        self,
        spec: JobSpec,
        now: float,
        user: str | None,
        parent: JobRecord | None = None,
        due_at: float | None = None,
        run_as: str | None = None,
    ) -> tuple[int, list[Effect]]:
        job_id = self.next_id
        self.book.next_id += 1
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
        effects: list[Effect] = [Persist((job_id,)), event("submitted", job, now)]
        ready, why = dependency_status(spec, self.book.states())
        if not ready and why is not None and why.startswith("never:"):
            for i in sorted(job.pending):
                self.book.set_phase(job.tasks[i], TaskPhase.CANCELLED)
            effects += self.book.finish(job, JobState.CANCELLED, now, why.removeprefix("never: "))
        if self._suppressed and not periodic:
            self._suppressed = False
            effects.append(Revive())
        return job_id, effects

    def cancel(
        self, job_id: int, now: float, who: str | None = None, why: str = "cancelled by user"
    ) -> list[Effect]:
        job = self.job(job_id)
        if job.state in JOB_TERMINAL:
            raise BatchError(f"job {job_id} already {job.state.value.lower()}")
        if who is not None:
            note(job, now, who, "cancel")
        effects: list[Effect] = []
        for i in sorted(job.pending):
            self.book.set_phase(job.tasks[i], TaskPhase.CANCELLED)
        job.regrouping = job.aborting = None
        for i in sorted(job.active):
            t = job.tasks[i]
            t.killing = "cancel"
            mark_unsaved(job, i)
            cur = t.current
            effects.append(Kill(t.task_id, cur.agent_id if cur else None, "job cancelled"))
        effects += self.book.finish(job, JobState.CANCELLED, now, why)
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
        return [Persist((job_id,)), *self.book.settle(job, now)]

    # --- hold, release, update, requeue (``changes.py``) -----------------------------------------

    def hold(self, job_id: int, now: float, who: str) -> list[Effect]:
        """Keep the job's pending tasks from being placed (running ones go on), or a periodic
        job from starting runs, until ``release``."""
        return changes.hold(self.book, job_id, now, who)

    def release(self, job_id: int, now: float, who: str) -> list[Effect]:
        effects = changes.release(self.book, job_id, now, who)
        return effects + self._wake(bool(self.book.jobs[job_id].pending))

    def update(self, job_id: int, fields: Mapping[str, Any], now: float, who: str) -> list[Effect]:
        """Change fields of a job (``changes.update``); a refused update changes nothing."""
        effects = changes.update(self.book, job_id, fields, now, who)
        return effects + self._wake(bool(self.book.jobs[job_id].pending))

    def requeue(self, job_id: int, now: float, who: str) -> list[Effect]:
        """Run a finished or running job again from the start (``changes.requeue``)."""
        return changes.requeue(self.book, job_id, now, who) + self._wake(True)

    def _wake(self, wanted: bool) -> list[Effect]:
        """Offers are suppressed and work is waiting again: revive them."""
        if self._suppressed and wanted:
            self._suppressed = False
            return [Revive()]
        return []

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
            mark_unsaved(job, task.index)
        if state in (TaskState.TASK_STARTING, TaskState.TASK_STAGING, TaskState.TASK_KILLING):
            return []
        if state is TaskState.TASK_RUNNING:
            if task.phase is TaskPhase.LAUNCHING:
                self.book.set_phase(task, TaskPhase.RUNNING)
                cur.started_at = now
                if job.spec.whole_gang and job.gang_started_at is None:
                    job.gang_started_at = now  # the gang's time limit counts from here
                effects: list[Effect] = [Persist((job.job_id,))]
                if job.state is JobState.PENDING:
                    self.book.set_job(job, JobState.RUNNING, now)
                    job.started_at = job.started_at or now
                    effects.append(event("started", job, now))
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
                self.book.set_phase(task, TaskPhase.CANCELLED)  # its gang aborts: it never ran
            else:
                self.book.set_phase(task, TaskPhase.PENDING)
            touched.add(task.job_id)
        effects: list[Effect] = [Persist(tuple(sorted(touched)))] if touched else []
        for job_id in touched:
            job = self.jobs[job_id]
            if job.spec.whole_gang and job.active and job.regrouping is None and job.aborting is None:
                # Part of the gang went out: it cannot run without the rest; place it again whole.
                effects += regroup(
                    self.book, job, None, now, count=False, why="part of its launch was not sent"
                )
            if job.spec.whole_gang:
                effects += gang_settle(self.book, job, now)
            effects += self.book.settle(job, now)
        return effects

    def _attempt_ended(
        self, job: JobRecord, task: TaskRecord, state: TaskState, reason: str | None, now: float
    ) -> list[Effect]:
        if job.spec.whole_gang:
            return rank_ended(self.book, job, task, state, reason, now)
        spec = job.spec
        was_launching = task.phase is TaskPhase.LAUNCHING
        events: list[Effect] = []
        if state is TaskState.TASK_FINISHED and task.killing != "requeue":
            if job.state is JobState.PENDING:
                # It finished before its RUNNING update came (or that update was lost): it ran.
                self.book.set_job(job, JobState.RUNNING, now)
                job.started_at = job.started_at or now
                events.append(event("started", job, now))
            self.book.set_phase(task, TaskPhase.SUCCEEDED)
        elif task.killing == "cancel":
            self.book.set_phase(task, TaskPhase.CANCELLED)
        elif task.killing in ("requeue", "preempt"):
            # Requeued, or evicted for a higher-priority job: run again, not a failure.
            self.book.retry(task, now, count=False)
        elif reason in NOT_A_FAILURE and task.killing is None:
            # Revoked (or evicted), or its agent drained: run it again (the drained agent gets
            # no offers, so elsewhere); this does not count as a failure.
            self.book.retry(task, now, count=False)
        elif (
            state in NEVER_RAN
            and was_launching
            and task.killing is None
            and task.relaunches < MAX_FREE_RELAUNCHES
        ):
            task.relaunches += 1
            self.book.retry(task, now, count=False)
        else:
            if task.killing == "time limit":
                cur = task.current
                if cur is not None:
                    cur.message = f"time limit of {spec.time_limit:g}s exceeded"
            if task.failures < spec.max_retries:
                self.book.retry(task, now, count=True)
            else:
                self.book.set_phase(task, TaskPhase.FAILED)
        task.killing = None
        return [Persist((job.job_id,)), *events, *self.book.settle(job, now)]

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
                mark_unsaved(job, t.index)
                cur = t.current
                out.append(Kill(t.task_id, cur.agent_id if cur else None, why))
        return out

    def tick(self, now: float) -> list[Effect]:
        """Start the periodic runs that fell due; enforce time limits. (Retries become placeable
        by themselves once due.)"""
        self._round_at = now
        self.usage.advance(now)
        effects: list[Effect] = []
        for job in [j for j in self.live.values() if j.periodic]:
            effects += self._periodic(job, now)
        effects += time_limits(self.book, now)
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
            note(
                job,
                now,
                "schedule",
                f"{d.missed} run(s) missed before {stamp(d.due_at)}; one run stands for them",
            )
        if not d.start:
            note(job, now, "schedule", d.skipped or "run skipped")
            return effects
        for old in d.replace:
            if old in self.live:
                effects += self.cancel(
                    old, now, None, f"replaced by the run due {stamp(d.due_at)} (concurrency replace)"
                )
        run_spec = attrs.evolve(spec, schedule=None, concurrency=Concurrency.ALLOW)
        run_id, more = self._new_job(run_spec, now, job.user, parent=job, due_at=d.due_at, run_as=job.run_as)
        job.runs.append(run_id)
        note(job, now, "schedule", f"run job {run_id} for {stamp(d.due_at)}")
        return effects + more

    def next_wakeup(self, now: float) -> float | None:
        """The earliest time something becomes due (a retry, a time limit, a gang hold timeout).

        A time that passed after the latest round (``tick``/``schedule``) is still due, not
        over: that round saw it a moment early ("retry in 0.0s"), and nothing else would wake
        the loop for it while the offers it needs are already held."""
        return next_wakeup(self.book, now, self._round_at, self.gang_timeout)

    def schedule(self, offers: Sequence[OfferView], now: float) -> list[Effect]:
        """Plan pending tasks onto ``offers``; launch, hold or decline; refresh every reason."""
        self._round_at = now
        ranks = {i: f.total for i, f in self.priorities(now).items()}
        views = job_views(self.book, now, ranks)
        capacity = self.cluster
        book = self.limit_book()
        releases = releases_of(self.book, offers, now)
        reserved = self.evictions.reservations(offers, self._round_at)
        p = plan(views, offers, now, self.gang_timeout, capacity, book, releases, reserved)
        effects: list[Effect] = self.evictions.decide(views, offers, p, now, self.cluster)
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
            self.book.set_phase(task, TaskPhase.LAUNCHING)
            task.revocable = bool(pl.resources.revocable())
            offer = agent_of[pl.offer_id]
            ports = tuple(port for b, e in pl.resources.ranges("ports") for port in range(b, e + 1))
            task.history.append(
                Attempt(
                    task.attempt, task.task_id, pl.agent_id, offer.hostname, address=offer.reach, ports=ports
                )
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
                        task.task_id,
                        job.job_id,
                        pl.index,
                        f"{job.spec.name}[{pl.index}]",
                        job.spec,
                        pl.resources,
                        env,
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
            if (
                other.hold_since is not None
                and view.job_id != p.holding_job
                and view.job_id != p.released_job
            ):
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
            busy = self.book.agents_running_ours()
            keep.update(o.offer_id for o in offers if o.agent_id in busy)
        if self.evictions.under_way:
            # the resources of the tasks being preempted come back into these offers, for the
            # preemptor: declining them would hand them to the master instead
            victim_agents = self.evictions.victim_agents()
            keep.update(o.offer_id for o in offers if o.agent_id in victim_agents)
        # (An offer with nothing left, every resource in use by our tasks, is not idle.)
        idle = [
            o.offer_id for o in offers if o.resources and o.offer_id not in used and o.offer_id not in keep
        ]
        reasons = p.reasons
        if idle and not self._retry_pending():
            effects.append(Decline(tuple(idle), self.decline_seconds))
            # Reasons describe the offers we go on holding, not the ones just declined ("largest
            # free offer has 0.5" while that offer is gone). The declined offers were neither used
            # nor held, so planning without them places the same; only the reasons may differ.
            gone = set(idle)
            reasons = plan(
                views,
                [o for o in offers if o.offer_id not in gone],
                now,
                self.gang_timeout,
                capacity,
                book,
                releases,
                reserved,
            ).reasons
        for job_id, why in reasons.items():
            job = self.jobs[job_id]
            if job.preempted_by is not None and job_id not in touched:
                why = f"preempted by job {job.preempted_by}; {why}"
            job.reason = why
        self.evictions.explain(touched)
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
        demand = demands(views)
        if worth_declaring(self._last_demand, demand):
            self._last_demand = demand
            effects.append(DeclareDemand(demand))
        return effects

    # --- helpers -------------------------------------------------------------------------------

    def expected_starts(self, offers: Sequence[OfferView], now: float) -> dict[int, float | None]:
        """Each pending job's expected start (``squeue --start``; ``timeline.expected_starts``)."""
        ranks = {i: f.total for i, f in self.priorities(now).items()}
        return expected_starts(self.book, self.cluster, offers, now, ranks)

    def _retry_pending(self) -> bool:
        """Keep idle offers while pending tasks are only waiting on a retry backoff (they will fit
        again shortly); otherwise decline them so other frameworks can use them."""
        return any(j.pending_failed for j in self.live.values())
