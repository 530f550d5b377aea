"""Hold, release, update and requeue of a batch job (pure), each noted in the job's change
history with who did it (Slurm's ``scontrol hold/release/update/requeue``). The core adds a
``Revive`` when the change leaves work waiting while offers are suppressed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from frameworks.batch.book import JobBook, event, note
from frameworks.batch.effects import Effect, Kill, Persist
from frameworks.batch.model import JOB_TERMINAL, JobState, SpecError, TaskPhase, spec_from_dict, spec_to_dict
from frameworks.batch.periodic import next_after
from frameworks.batch.records import ACTIVE, BatchError, JobRecord, TaskRecord, mark_unsaved

__pure__ = True

# fields ``update`` may change, and those it changes only while no task of the job is running
UPDATABLE = frozenset(
    {"priority", "time_limit", "count", "cpus", "mem", "gpus", "disk", "gang", "max_retries", "queue",
     "preemptible", "preempt", "grace", "name", "notify", "schedule", "concurrency", "ports"}
)  # fmt: skip
PENDING_ONLY = frozenset({"cpus", "mem", "gpus", "disk", "gang", "queue", "ports"})


def hold(book: JobBook, job_id: int, now: float, who: str) -> list[Effect]:
    """Keep the job's pending tasks from being placed (running ones go on), or a periodic
    job from starting runs, until ``release``."""
    job = book.job(job_id)
    if job.state in JOB_TERMINAL:
        raise BatchError(f"job {job_id} already {job.state.value.lower()}; nothing to hold")
    if job.held is not None:
        raise BatchError(f"job {job_id} is already held (by {job.held})")
    job.held = who
    job.hold_since = None
    note(job, now, who, "hold")
    return [Persist((job_id,)), event("held", job, now, f"by {who}")]


def release(book: JobBook, job_id: int, now: float, who: str) -> list[Effect]:
    job = book.job(job_id)
    if job.held is None:
        raise BatchError(f"job {job_id} is not held")
    job.held = None
    if job.periodic and job.next_run is not None and job.spec.schedule is not None and job.next_run <= now:
        job.next_run = next_after(job.spec.schedule, now)  # runs due while held are not made up
    note(job, now, who, "release")
    effects: list[Effect] = [Persist((job_id,)), event("released", job, now, f"by {who}")]
    return effects


def update(book: JobBook, job_id: int, changes: Mapping[str, Any], now: float, who: str) -> list[Effect]:
    """Change fields of a job (Slurm's ``scontrol update``): priority, time limit, retries,
    name, preemption and notification at any time before it ends; per-task resources, the
    gang size and the queue only while none of its tasks is launching or running; the count
    only by adding tasks or dropping pending ones at the end, and never under a gang that has
    started. A refused update changes nothing (``SpecError``/``BatchError`` naming the field)."""
    job = book.job(job_id)
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
                    + f"; the count can only drop pending tasks that never ran (down to {min_count(job)})"
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
            mark_unsaved(job, i)
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
    note(job, now, who, f"update {diff or '(no change)'}")
    effects: list[Effect] = [Persist((job_id,)), event("updated", job, now, diff or None)]
    effects += book.settle(job, now)
    return effects


def min_count(job: JobRecord) -> int:
    keep = 0
    for t in job.tasks:
        if t.phase is not TaskPhase.PENDING or t.history:
            keep = t.index + 1
    return max(keep, 1)


def requeue(book: JobBook, job_id: int, now: float, who: str) -> list[Effect]:
    """Run a finished or running job again from the start (Slurm's ``scontrol requeue``):
    running tasks are killed and, with every other task, go back to PENDING under a new
    attempt; retries start afresh; no failure is counted."""
    job = book.job(job_id)
    if job.periodic:
        raise BatchError(f"job {job_id} is periodic; its runs can be requeued, not the schedule")
    if job.spec.service:
        raise BatchError(f"job {job_id} is a service job; submit it again to run its service tasks again")
    if job.state is JobState.PENDING and not any(t.history for t in job.tasks):
        raise BatchError(f"job {job_id} is pending and has never run; nothing to requeue")
    effects: list[Effect] = []
    if job.state in JOB_TERMINAL:
        job.state = JobState.PENDING
        book.live[job_id] = job
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
            mark_unsaved(job, t.index)
        elif t.phase is TaskPhase.PENDING:
            t.not_before = 0.0
            job.backoff.discard(t.index)
            mark_unsaved(job, t.index)
        else:
            if t.history:
                t.attempt += 1
            t.not_before = 0.0
            t.killing = None
            t.preempted_by = None
            book.set_phase(t, TaskPhase.PENDING, requeue=True)
    job.recount()
    note(job, now, who, "requeue")
    effects[:0] = [Persist((job_id,)), event("requeued", job, now, f"by {who}")]
    return effects


def _show(value: Any) -> str:
    return "none" if value is None else f"{value:g}" if isinstance(value, float) else str(value)
