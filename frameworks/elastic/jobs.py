"""The elastic framework's jobs and their workers, as the core keeps them, and the errors a
request can meet (pure).

A ``Job`` holds its spec, its lifecycle (``state.JobLifecycle``), its live ``Worker`` tasks and the
last ``HISTORY`` ended ones. ``classify`` tells how a worker ended from its terminal status
(killed by us, revoked, lost, failed, finished) and ``failure_cause`` names a failure the same way
for each repeat of it, so backoff can count repeats. ``job_to_dict``/``job_from_dict`` are the
store's records; ``job_summary``/``job_detail`` the API's views.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any

import attrs

from frameworks.elastic.spec import JobSpec, SpecError, from_mapping, to_mapping
from frameworks.elastic.state import JobLifecycle, JobState, Transition
from protocol.resources import Resources
from protocol.task_states import TaskState
from protocol.transitions import Lifecycle

__pure__ = True

HISTORY = 50  # ended workers kept per job


class ServiceError(ValueError):
    """A request the service refuses: bad input (the shell answers 400)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class NoSuchJob(ServiceError):
    """The request names a job the service does not have (404)."""


class JobConflict(ServiceError):
    """The job's state does not allow the request (409): scaling an ended job, cancelling twice."""


class Phase(enum.Enum):
    STAGING = "STAGING"  # launched, not yet running
    RUNNING = "RUNNING"
    KILLING = "KILLING"  # we asked for it to go (an agent's own kill leaves the phase alone)
    UNREACHABLE = "UNREACHABLE"  # its agent is partitioned; not counted, killed if it comes back
    ENDED = "ENDED"


P = Phase
# a worker is killed (by us) or written off (UNREACHABLE) on the way; KILLING -> KILLING is a
# KILL sent again; a written-off worker that comes back is killed, never counted again
WORKER_LIFECYCLE: Lifecycle[Phase] = Lifecycle(
    "elastic worker",
    {
        P.STAGING: frozenset({P.RUNNING, P.KILLING, P.UNREACHABLE, P.ENDED}),
        P.RUNNING: frozenset({P.KILLING, P.UNREACHABLE, P.ENDED}),
        P.KILLING: frozenset({P.KILLING, P.ENDED}),
        P.UNREACHABLE: frozenset({P.KILLING, P.ENDED}),
        P.ENDED: frozenset(),
    },
)


class Ending(enum.Enum):
    KILLED = "killed"  # by us (scale down, cancel)
    REVOKED = "revoked"  # revocable resources reclaimed
    LOST = "lost"  # agent lost / unreachable / gone / invalid offer
    FAILED = "failed"  # the worker process failed
    FINISHED = "finished"  # exited 0


@attrs.define
class Worker:
    task_id: str
    job_id: int
    index: int
    agent_id: str
    hostname: str
    resources: str
    revocable: bool
    phase: Phase
    launched_at: float
    running_at: float | None = None
    ended_at: float | None = None
    ending: Ending | None = None
    state: str | None = None  # the last TaskState name
    message: str | None = None
    killed_at: float | None = None  # when the last KILL for it was sent
    kill_asked: bool = False  # we decided to kill it (its end is then ours, not a failure)
    reason: str | None = None  # the last TaskStatus reason

    @property
    def live(self) -> bool:
        return self.phase is not Phase.ENDED

    def to(self, phase: Phase) -> None:
        """Move to ``phase`` through ``WORKER_LIFECYCLE`` (an illegal move raises)."""
        self.phase = WORKER_LIFECYCLE.move(self.phase, phase)

    @property
    def counted(self) -> bool:
        """Part of the job's current size (the policy's view)."""
        return self.phase in (Phase.STAGING, Phase.RUNNING)


@attrs.define
class Job:
    job_id: int
    spec: JobSpec
    submitted_at: float
    life: JobLifecycle = attrs.field(factory=JobLifecycle)
    workers: dict[str, Worker] = attrs.field(factory=dict)
    ended: list[Worker] = attrs.field(factory=list)
    next_index: int = 0
    failures: int = 0  # consecutive worker failures without progress
    backoff_until: float = 0.0
    last_failure: str | None = None  # the cause of the last worker failure
    last_failure_at: float | None = None
    same_failures: int = 0  # failures in a row with that cause (training progress does not reset it)
    finished: bool = False  # the coordinator has no shards left
    reason: str = ""
    progress: dict[str, Any] = attrs.field(factory=dict)
    coordinator_port: int | None = None
    coordinator_url: str | None = None
    started_at: float | None = None
    ended_at: float | None = None
    counts: dict[str, int] = attrs.field(factory=dict)  # launched / killed / revoked / ...
    user: str | None = None  # the owner: the principal that submitted it (None: not known)

    @property
    def state(self) -> JobState:
        return self.life.state

    @property
    def terminal(self) -> bool:
        return self.life.terminal

    def live_workers(self) -> list[Worker]:
        return [w for w in self.workers.values() if w.live]

    def counted(self, revocable: bool | None = None) -> int:
        return sum(
            1 for w in self.workers.values() if w.counted and (revocable is None or w.revocable is revocable)
        )

    def running(self) -> int:
        return sum(1 for w in self.workers.values() if w.phase is Phase.RUNNING)

    def shape(self) -> Resources:
        return worker_shape(self.spec)

    def bump(self, key: str) -> None:
        self.counts[key] = self.counts.get(key, 0) + 1


def worker_shape(spec: JobSpec) -> Resources:
    w = spec.worker
    return (
        Resources.of(cpus=w.cpus, mem=w.mem, gpus=w.gpus)
        if w.gpus > 0
        else Resources.of(cpus=w.cpus, mem=w.mem)
    )


# a kill we did not ask for with one of these reasons means the agent or the framework went away,
# not that the worker did something wrong
_GONE_REASONS = frozenset(
    {
        "REASON_AGENT_REMOVED",
        "REASON_AGENT_REMOVED_BY_OPERATOR",
        "REASON_AGENT_RESTARTED",
        "REASON_AGENT_DISCONNECTED",
        "REASON_AGENT_UNKNOWN",
        "REASON_FRAMEWORK_REMOVED",
    }
)


def classify(state: TaskState, reason: str | None, asked: bool) -> Ending:
    """How a worker ended; ``asked``: we had decided to kill it."""
    if reason in ("REASON_CONTAINER_PREEMPTED", "REASON_AGENT_DRAINING"):
        return Ending.REVOKED  # a shrink forced on us (revocation, agent drain): no backoff
    if asked and state in (TaskState.TASK_KILLED, TaskState.TASK_FAILED, TaskState.TASK_FINISHED):
        return Ending.KILLED
    if state is TaskState.TASK_FINISHED:
        return Ending.FINISHED
    if state is TaskState.TASK_FAILED:
        return Ending.FAILED  # includes the agent's kills for a limit (REASON_CONTAINER_LIMITATION_*)
    if state is TaskState.TASK_ERROR:
        return Ending.LOST if reason == "REASON_INVALID_OFFERS" else Ending.FAILED
    if state is TaskState.TASK_KILLED:
        # killed by someone else: the worker's failure unless its agent/framework went away
        return Ending.LOST if reason in _GONE_REASONS else Ending.FAILED
    return Ending.LOST  # LOST, DROPPED, GONE, UNKNOWN


def failure_cause(w: Worker) -> str:
    """A short cause for a failed worker, the same for repeats of the same failure."""
    if w.reason == "REASON_CONTAINER_LIMITATION_MEMORY":
        return f"killed by its agent for exceeding its memory limit ({w.resources})"
    if w.reason and w.reason.startswith("REASON_CONTAINER_LIMITATION"):
        return f"killed by its agent for exceeding a limit ({w.reason})"
    if w.state == TaskState.TASK_KILLED.value:
        return f"killed by its agent ({w.reason or 'no reason given'})"
    return f"{w.state or 'failed'}: {w.message or w.reason or 'no message'}"


# --- records and views ------------------------------------------------------------------------------


def _worker_to_dict(w: Worker) -> dict[str, Any]:
    d = attrs.asdict(w, recurse=False)
    d["phase"] = w.phase.value
    d["ending"] = w.ending.value if w.ending else None
    return d


def _worker_from_dict(d: Mapping[str, Any]) -> Worker:
    d = dict(d)
    d["phase"] = Phase(d["phase"])
    d["ending"] = Ending(d["ending"]) if d.get("ending") else None
    d.setdefault("kill_asked", d["phase"] is Phase.KILLING)  # records from before the field: ours
    return Worker(**d)


def job_to_dict(job: Job) -> dict[str, Any]:
    return {
        "job_id": job.job_id,
        "spec": to_mapping(job.spec),
        "submitted_at": job.submitted_at,
        "state": job.state.value,
        "story": [
            {"old": t.old.value, "new": t.new.value, "reason": t.reason, "at": t.at} for t in job.life.story
        ],
        "workers": [_worker_to_dict(w) for w in job.workers.values()],
        "ended": [_worker_to_dict(w) for w in job.ended],
        "next_index": job.next_index,
        "failures": job.failures,
        "backoff_until": job.backoff_until,
        "last_failure": job.last_failure,
        "last_failure_at": job.last_failure_at,
        "same_failures": job.same_failures,
        "finished": job.finished,
        "reason": job.reason,
        "progress": job.progress,
        "coordinator_port": job.coordinator_port,
        "started_at": job.started_at,
        "ended_at": job.ended_at,
        "counts": job.counts,
        "user": job.user,
    }


def job_from_dict(d: Mapping[str, Any]) -> Job:
    try:
        spec = from_mapping(d["spec"])
        life = JobLifecycle(
            JobState(d["state"]),
            [
                Transition(JobState(t["old"]), JobState(t["new"]), t["reason"], t["at"])
                for t in d.get("story", [])
            ],
        )
        workers = [_worker_from_dict(w) for w in d.get("workers", [])]
        return Job(
            job_id=int(d["job_id"]),
            spec=spec,
            submitted_at=float(d["submitted_at"]),
            life=life,
            workers={w.task_id: w for w in workers},
            ended=[_worker_from_dict(w) for w in d.get("ended", [])],
            next_index=int(d.get("next_index", 0)),
            failures=int(d.get("failures", 0)),
            backoff_until=float(d.get("backoff_until", 0.0)),
            last_failure=d.get("last_failure"),
            last_failure_at=d.get("last_failure_at"),
            same_failures=int(d.get("same_failures", 0)),
            finished=bool(d.get("finished", False)),
            reason=str(d.get("reason", "")),
            progress=dict(d.get("progress", {})),
            coordinator_port=d.get("coordinator_port"),
            started_at=d.get("started_at"),
            ended_at=d.get("ended_at"),
            counts=dict(d.get("counts", {})),
            user=d.get("user"),
        )
    except (KeyError, TypeError, ValueError, SpecError) as e:
        raise ServiceError(f"bad job record: {e}") from e


def job_summary(job: Job) -> dict[str, Any]:
    s = job.spec.scaling
    return {
        "id": job.job_id,
        "name": job.spec.name,
        "user": job.user,
        "state": job.state.value,
        "role": job.spec.role,
        "priority": job.spec.priority,
        "min_workers": s.min_workers,
        "max_workers": s.max_workers,
        "workers": job.counted(),
        "running": job.running(),
        "revocable_workers": job.counted(True),
        "generation": job.progress.get("generation"),
        "progress": job.progress.get("progress"),
        "samples_per_second": job.progress.get("samples_per_second"),
        "loss": job.progress.get("loss"),
        "accuracy": job.progress.get("accuracy"),
        "test_accuracy": job.progress.get("reports", {}).get("test_accuracy"),
        "reason": job.reason,
        "submitted_at": job.submitted_at,
        "started_at": job.started_at,
        "ended_at": job.ended_at,
    }


def job_detail(job: Job) -> dict[str, Any]:
    out = job_summary(job)
    out["spec"] = to_mapping(job.spec)
    out["coordinator"] = job.coordinator_url
    out["metrics"] = job.progress
    out["counts"] = dict(job.counts)
    out["failures_in_a_row"] = job.failures
    out["last_failure"] = (
        {"cause": job.last_failure, "at": job.last_failure_at, "in_a_row": job.same_failures}
        if job.last_failure
        else None
    )
    out["worker_list"] = [_worker_to_dict(w) for w in sorted(job.workers.values(), key=lambda w: w.index)]
    out["ended_workers"] = [_worker_to_dict(w) for w in job.ended[-20:]]
    out["story"] = [
        {"from": t.old.value, "to": t.new.value, "reason": t.reason, "at": t.at} for t in job.life.story
    ]
    return out
