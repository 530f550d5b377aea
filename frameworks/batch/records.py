"""The batch framework's records: jobs, their tasks and the attempts of each (pure).

``JobRecord`` and ``TaskRecord`` are what the store writes and the core changes; the indexes a
job keeps of its tasks (per phase, pending, backoff, active) are kept up to date only by
``JobBook.set_phase`` (``book.py``).

Task ids on the wire are ``<job>-<index>-<attempt>`` (``j12-3-0``), so an update names its
attempt and a late update from an old attempt cannot touch the new one.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import attrs

from frameworks.batch.fairshare import Rate
from frameworks.batch.model import JobSpec, JobState, TaskPhase
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
NEVER_RAN = frozenset(
    {TaskState.TASK_DROPPED, TaskState.TASK_LOST, TaskState.TASK_GONE, TaskState.TASK_UNKNOWN}
)
ACTIVE = frozenset({TaskPhase.LAUNCHING, TaskPhase.RUNNING})


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


def mark_unsaved(job: JobRecord, index: int) -> None:
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


class BatchError(ValueError):
    """A request the core refuses (unknown job, cancelling a finished job...)."""


def owner_key(job: JobRecord) -> tuple[str, str]:
    """The (queue, user) a job's usage and fair share count under ("" for a job without owner)."""
    return (job.spec.queue, job.user or "")


def rate_of(spec: JobSpec) -> Rate:
    return Rate(cpus=spec.cpus, mem=spec.mem, gpus=spec.gpus)


def failure_text(index: int, attempt: Attempt, state: TaskState) -> str:
    """``task 2 failed with exit code 1: <its message>``."""
    out = f"task {index} failed"
    if attempt.exit_code is not None:
        out += f" with exit code {attempt.exit_code}"
    elif state is not TaskState.TASK_FAILED:
        out += f" ({state.value})"
    if attempt.message:
        out += f": {attempt.message}"
    return out


class JobStates(Mapping[int, JobState]):
    """Every job's state, read through from the records (no copy per scheduling round)."""

    def __init__(self, jobs: Mapping[int, JobRecord]) -> None:
        self._jobs = jobs

    def __getitem__(self, job_id: int) -> JobState:
        return self._jobs[job_id].state

    def __iter__(self) -> Iterator[int]:
        return iter(self._jobs)

    def __len__(self) -> int:
        return len(self._jobs)
