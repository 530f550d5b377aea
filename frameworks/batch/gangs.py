"""Whole gangs (pure): a gang whose policy is ``abort`` or ``restart`` (``JobSpec.whole_gang``)
fails, retries and keeps time as one.

When a rank fails for good the others are killed, and the job either fails with that rank's exit
code and message (``abort``: ``JobRecord.aborting`` until the last rank is gone) or runs again
whole as one of its retries (``restart``: ``JobRecord.regrouping`` until the last rank is gone,
then every task is placed again together). A rank that never ran, was preempted or was drained
re-places the whole gang without spending a retry (its peers could never rendezvous with a
replacement elsewhere). Each launch of a gang carries the environment its ranks need to find
each other (``gang_environment``).
"""

from __future__ import annotations

from frameworks.batch.book import JobBook, event
from frameworks.batch.effects import Effect, Kill, Persist
from frameworks.batch.model import JOB_TERMINAL, GangPolicy, JobState, TaskPhase
from frameworks.batch.records import (
    ACTIVE,
    DRAINING_REASON,
    MAX_FREE_RELAUNCHES,
    NEVER_RAN,
    NOT_A_FAILURE,
    PREEMPTED_REASON,
    RETRY_BASE,
    RETRY_MAX,
    Attempt,
    JobRecord,
    TaskRecord,
    failure_text,
    mark_unsaved,
)
from protocol.task_states import TaskState

__pure__ = True


def rank_ended(
    book: JobBook, job: JobRecord, task: TaskRecord, state: TaskState, reason: str | None, now: float
) -> list[Effect]:
    """An attempt of a whole gang's task ended: the gang's policy decides for all its ranks."""
    spec = job.spec
    was_launching = task.phase is TaskPhase.LAUNCHING
    killing, task.killing = task.killing, None
    effects: list[Effect] = [Persist((job.job_id,))]
    cur = task.current
    assert cur is not None
    if killing == "cancel":
        book.set_phase(task, TaskPhase.CANCELLED)
    elif job.aborting is not None:  # one of the ranks the abort kills (or one that ended meanwhile)
        book.set_phase(task, TaskPhase.SUCCEEDED if state is TaskState.TASK_FINISHED else TaskPhase.CANCELLED)
    elif job.regrouping is not None:  # it runs again with the whole gang
        again(book, job, task)
    elif state is TaskState.TASK_FINISHED and killing != "requeue":
        if job.state is JobState.PENDING:
            book.set_job(job, JobState.RUNNING, now)
            job.started_at = job.started_at or now
            effects.append(event("started", job, now))
        book.set_phase(task, TaskPhase.SUCCEEDED)
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
        effects += regroup(book, job, task, now, count=False, why=f"task {task.index} {what}")
    else:
        if killing == "time limit":
            cur.message = f"time limit of {spec.time_limit:g}s exceeded"
        why = failure_text(task.index, cur, state)
        if spec.policy is GangPolicy.RESTART and job.gang_restarts < spec.max_retries:
            effects += regroup(book, job, task, now, count=True, why=why)
        else:
            effects += abort(book, job, task, why)
    return effects + gang_settle(book, job, now) + book.settle(job, now)


def gang_settle(book: JobBook, job: JobRecord, now: float) -> list[Effect]:
    """Once the last rank of a restarting gang is gone it is placed again whole; once the last
    rank of an aborting gang is gone the job fails."""
    if job.state in JOB_TERMINAL or job.active:
        return []
    job.regrouping = None
    if job.aborting is not None:
        return book.finish(job, JobState.FAILED, now, job.aborting)
    return []


def again(book: JobBook, job: JobRecord, task: TaskRecord) -> None:
    """Task back to PENDING under a new attempt, for the gang's next run (no retry of its own)."""
    task.attempt += 1
    task.not_before = job.gang_not_before
    book.set_phase(task, TaskPhase.PENDING)


def regroup(
    book: JobBook, job: JobRecord, trigger: TaskRecord | None, now: float, *, count: bool, why: str
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
            again(book, job, t)
        elif t.phase in ACTIVE:
            if t.killing is None:
                cur = t.current
                effects.append(Kill(t.task_id, cur.agent_id if cur else None, job.regrouping))
            t.killing = "gang restart"
            mark_unsaved(job, t.index)
        elif t.phase is TaskPhase.PENDING and t.not_before < job.gang_not_before:
            t.not_before = job.gang_not_before
            job.backoff.add(t.index)
            mark_unsaved(job, t.index)
    return effects


def abort(book: JobBook, job: JobRecord, trigger: TaskRecord, why: str) -> list[Effect]:
    """The gang fails with ``trigger``: its rank's exit code and message are the job's; the
    other ranks are killed and the job is FAILED once the last one is gone."""
    cur = trigger.current
    book.set_phase(trigger, TaskPhase.FAILED)
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
            mark_unsaved(job, t.index)
        elif t.phase is TaskPhase.PENDING:
            book.set_phase(t, TaskPhase.CANCELLED)
    return effects


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
