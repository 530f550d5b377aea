"""The batch core's book of jobs (pure): every job and task record, and the only code that moves
their states.

``set_phase`` is the one way a task changes phase: it checks the transition table
(``model.check_task_transition``), keeps the job's indexes (per phase, pending, backoff, active)
and the fair-share usage in step, and marks the task's row for the store. ``settle`` moves a job
to the state its tasks imply, ``finish`` ends it and cancels, transitively, the jobs that depend
on it and now never can run.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from frameworks.batch.effects import Effect, JobEvent, Persist
from frameworks.batch.fairshare import UsageBook
from frameworks.batch.model import (
    JOB_TERMINAL,
    TASK_TERMINAL,
    JobState,
    TaskPhase,
    check_job_transition,
    check_task_transition,
    dependency_status,
)
from frameworks.batch.records import (
    ACTIVE,
    RETRY_BASE,
    RETRY_MAX,
    BatchError,
    JobRecord,
    JobStates,
    TaskRecord,
    mark_unsaved,
    owner_key,
    parse_task_id,
    rate_of,
)

__pure__ = True

MAX_CHANGES = 200  # entries of a job's change history kept (the oldest go first)


class JobBook:
    """The jobs (``jobs``: all; ``live``: those not yet in a terminal state) and the next id."""

    def __init__(self, usage: UsageBook) -> None:
        # every (queue, user)'s decayed usage and what its tasks run now: the fair-share input
        self.usage = usage
        self.jobs: dict[int, JobRecord] = {}
        self.live: dict[int, JobRecord] = {}  # the jobs not yet in a terminal state
        self.next_id = 1

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

    def active_task(self, task_id: str) -> TaskRecord | None:
        t = self.find_task(task_id)
        return t if t is not None and t.phase in ACTIVE else None

    def states(self) -> Mapping[int, JobState]:
        return JobStates(self.jobs)

    def set_phase(self, task: TaskRecord, phase: TaskPhase, *, requeue: bool = False) -> None:
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
            self.usage.stop(owner_key(job), rate_of(job.spec))
        elif phase is TaskPhase.RUNNING and old is not TaskPhase.RUNNING:
            self.usage.start(owner_key(job), rate_of(job.spec))
        if phase is TaskPhase.PENDING:
            job.pending.add(i)
            if task.not_before > 0:
                job.backoff.add(i)  # perhaps still in the future: schedule() looks
            if task.failures:
                job.pending_failed += 1
        elif phase in ACTIVE:
            job.active.add(i)
        task.phase = phase
        mark_unsaved(job, i)

    def set_job(self, job: JobRecord, state: JobState, now: float) -> None:
        check_job_transition(job.state, state)
        job.state = state
        if state in JOB_TERMINAL:
            self.live.pop(job.job_id, None)

    def retry(self, task: TaskRecord, now: float, *, count: bool) -> None:
        if count:
            task.failures += 1
        delay = 0.0 if not count else min(RETRY_MAX, RETRY_BASE * 2 ** (task.failures - 1))
        task.attempt += 1
        task.not_before = now + delay
        self.set_phase(task, TaskPhase.PENDING)

    def settle(self, job: JobRecord, now: float) -> list[Effect]:
        """Move the job to the state its tasks imply (a periodic template has none: it ends
        only when cancelled)."""
        if job.state in JOB_TERMINAL or job.periodic:
            return []
        n = len(job.tasks)
        count = job.phases.get
        if job.service_outcome is not None:
            # a service job whose service tasks have all ended: its instances decide nothing
            for i in sorted(job.pending):
                self.set_phase(job.tasks[i], TaskPhase.CANCELLED)  # not needed any more
            if job.active:
                return []
            failure = job.service_outcome or None
            return self.finish(job, JobState.FAILED if failure else JobState.SUCCEEDED, now, failure)
        if count(TaskPhase.SUCCEEDED, 0) == n:
            return self.finish(job, JobState.SUCCEEDED, now, None)
        if sum(count(p, 0) for p in TASK_TERMINAL) == n:
            failed = count(TaskPhase.FAILED, 0)
            return self.finish(job, JobState.FAILED, now, f"{failed} of {n} tasks failed")
        idle = count(TaskPhase.LAUNCHING, 0) + count(TaskPhase.RUNNING, 0) == 0
        if idle and job.state is JobState.RUNNING:
            self.set_job(job, JobState.PENDING, now)
        return []

    def finish(self, job: JobRecord, state: JobState, now: float, reason: str | None) -> list[Effect]:
        self.set_job(job, state, now)
        job.ended_at = now
        job.reason = reason
        effects: list[Effect] = [Persist((job.job_id,)), event("finished", job, now, reason)]
        # Dependents that can now never run are cancelled, transitively.
        states = self.states()
        for other in list(self.live.values()):
            if other.state in JOB_TERMINAL or not other.spec.after:
                continue
            if any(d.job_id == job.job_id for d in other.spec.after):
                ready, why = dependency_status(other.spec, states)
                if not ready and why is not None and why.startswith("never:"):
                    for i in sorted(other.pending):
                        self.set_phase(other.tasks[i], TaskPhase.CANCELLED)
                    effects += self.finish(other, JobState.CANCELLED, now, why.removeprefix("never: "))
        return effects

    def singletons(self) -> dict[tuple[str, str | None], int]:
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

    def agents_running_ours(self) -> set[str]:
        agents: set[str] = set()
        for job in self.live.values():
            for i in job.active:
                cur = job.tasks[i].current
                if cur is not None and cur.agent_id is not None:
                    agents.add(cur.agent_id)
        return agents


def note(job: JobRecord, now: float, who: str, what: str) -> None:
    job.changes.append({"at": now, "who": who, "what": what})
    if len(job.changes) > MAX_CHANGES:
        del job.changes[: len(job.changes) - MAX_CHANGES]


def event(kind: str, job: JobRecord, now: float, detail: str | None = None) -> JobEvent:
    return JobEvent(kind, job.job_id, now, job.state.value, detail)
