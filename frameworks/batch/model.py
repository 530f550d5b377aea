"""Batch jobs: the spec a user submits, its validation, and the job and task state tables.

A job is one command run ``count`` times (a job array; each task gets its index), with per-task
resources, a queue (the Agora role its offers come from), a priority, retries, a time limit,
placement constraints on agent attributes, dependencies on other jobs, and ``gang``: how many
of its tasks must start together (all-or-nothing). ``preemptible`` jobs may run on revocable
resources and are rescheduled when those are revoked. ``ports``: how many ports each task gets
from its offer (``PORT0``..). A gang's ``gang_policy`` says what a rank's failure does to the
others: ``abort`` (the default; ``restart`` when the job has retries), ``restart`` or ``continue``.
"""

from __future__ import annotations

import enum
import math
import re
from collections.abc import Mapping
from typing import Any

import attrs

from frameworks.batch.periodic import schedule_error
from protocol.ids import role_error
from protocol.resources import Resources

__pure__ = True

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
MAX_COUNT = 100_000
MAX_PORTS = 1000
MAX_WINDOW = 100_000  # a service instance's tasks in flight


class GangPolicy(enum.Enum):
    """What a gang does when one of its tasks (ranks) fails for good (Volcano's job policies)."""

    ABORT = "abort"  # kill the other ranks, fail the job with the failing rank's exit code
    RESTART = "restart"  # kill the other ranks and place the whole gang again, as one retry
    CONTINUE = "continue"  # the others run on; each task is retried alone (a job array's way)


class SpecError(ValueError):
    """A job spec that cannot be accepted; the message names the field."""


class JobState(enum.Enum):
    PENDING = "PENDING"
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"


JOB_TERMINAL = frozenset({JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED})

JOB_TRANSITIONS: dict[JobState, frozenset[JobState]] = {
    JobState.PENDING: frozenset({JobState.RUNNING, JobState.FAILED, JobState.CANCELLED}),
    # A running job whose tasks all wait for a retry goes back to PENDING.
    JobState.RUNNING: frozenset({JobState.PENDING, JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED}),
    JobState.SUCCEEDED: frozenset(),
    JobState.FAILED: frozenset(),
    JobState.CANCELLED: frozenset(),
}


class TaskPhase(enum.Enum):
    PENDING = "PENDING"  # waiting to be placed (first try or a retry)
    LAUNCHING = "LAUNCHING"  # ACCEPT sent, no RUNNING yet
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"  # retries exhausted
    CANCELLED = "CANCELLED"


TASK_TERMINAL = frozenset({TaskPhase.SUCCEEDED, TaskPhase.FAILED, TaskPhase.CANCELLED})

TASK_TRANSITIONS: dict[TaskPhase, frozenset[TaskPhase]] = {
    TaskPhase.PENDING: frozenset({TaskPhase.LAUNCHING, TaskPhase.CANCELLED, TaskPhase.FAILED}),
    # Back to PENDING: a launch that was dropped, or an attempt that failed with retries left.
    TaskPhase.LAUNCHING: frozenset(
        {TaskPhase.RUNNING, TaskPhase.PENDING, TaskPhase.SUCCEEDED, TaskPhase.FAILED, TaskPhase.CANCELLED}
    ),
    TaskPhase.RUNNING: frozenset({TaskPhase.PENDING, TaskPhase.SUCCEEDED, TaskPhase.FAILED, TaskPhase.CANCELLED}),
    # A gang restarted as a whole (gang_policy restart) runs its finished tasks again.
    TaskPhase.SUCCEEDED: frozenset({TaskPhase.PENDING}),
    TaskPhase.FAILED: frozenset(),
    TaskPhase.CANCELLED: frozenset(),
}


class IllegalJobTransition(ValueError):
    pass


def check_job_transition(old: JobState, new: JobState) -> None:
    if new is not old and new not in JOB_TRANSITIONS[old]:
        raise IllegalJobTransition(f"job {old.name} -> {new.name}")


def check_task_transition(old: TaskPhase, new: TaskPhase) -> None:
    if new is not old and new not in TASK_TRANSITIONS[old]:
        raise IllegalJobTransition(f"task {old.name} -> {new.name}")


class DependencyKind(enum.Enum):
    SUCCESS = "success"  # run after the job succeeded (Slurm afterok)
    ANY = "any"  # run after the job ended, whatever the outcome (Slurm afterany)
    FAILURE = "notok"  # run after the job ended in failure or was cancelled (Slurm afternotok)


class Concurrency(enum.Enum):
    """What a periodic job does when a run falls due while an earlier run is still live
    (Kubernetes CronJob's concurrencyPolicy; Nomad's ``prohibit_overlap`` is ``forbid``)."""

    ALLOW = "allow"  # start the new run anyway
    FORBID = "forbid"  # skip the new run
    REPLACE = "replace"  # cancel the live run(s), then start the new one


@attrs.frozen
class Dependency:
    job_id: int
    kind: DependencyKind = DependencyKind.SUCCESS


@attrs.frozen
class JobSpec:
    name: str
    argv: tuple[str, ...] = ()  # run without a shell
    shell: str | None = None  # or run through /bin/sh -c
    cpus: float = 1.0
    mem: float = 128.0
    gpus: float = 0.0
    disk: float = 0.0
    count: int = 1
    gang: int = 0  # tasks that must start together; 0 = no gang
    queue: str = "*"
    priority: int = 0
    max_retries: int = 0
    time_limit: float | None = None  # seconds per task attempt
    env: tuple[tuple[str, str], ...] = ()
    constraints: tuple[tuple[str, str], ...] = ()  # agent attribute name == value
    after: tuple[Dependency, ...] = ()
    ports: int = 0  # ports per task from its offer's port ranges: PORT0..PORT<n-1>
    gang_policy: str | None = None  # a GangPolicy value; None: the default (see ``policy``)
    preemptible: bool = False  # may use revocable resources, and be preempted by a preempting job
    preempt: bool = False  # may evict lower-priority preemptible tasks when it cannot fit
    singleton: bool = False  # waits while another live job of the same name and user exists
    grace: float | None = None  # seconds between SIGTERM and SIGKILL when a task is killed
    schedule: str | None = None  # cron expression: a periodic job, each run a job of its own
    concurrency: Concurrency = Concurrency.ALLOW  # a periodic job's overlap policy
    notify: str | None = None  # http(s) URL: the job's final state is POSTed there
    service: bool = False  # the command is a service: one warm instance per task, fed inputs (frameworks/service)
    window: int = 0  # a service instance's service tasks in flight at most (0: the default)

    def resources(self) -> Resources:
        return Resources.of(cpus=self.cpus, mem=self.mem, gpus=self.gpus, disk=self.disk)

    @property
    def gang_size(self) -> int:
        """How many tasks must start together (1 when the job is not a gang)."""
        return min(self.gang, self.count) if self.gang > 0 else 1

    @property
    def policy(self) -> GangPolicy:
        """The gang policy in force: ``continue`` for a job that is not a gang; for a gang the one
        given, else ``restart`` when the job has retries (they count per gang) and ``abort``
        without (Volcano's ``PodFailed -> AbortJob``)."""
        if self.gang <= 0:
            return GangPolicy.CONTINUE
        if self.gang_policy is not None:
            return GangPolicy(self.gang_policy)
        return GangPolicy.RESTART if self.max_retries > 0 else GangPolicy.ABORT

    @property
    def whole_gang(self) -> bool:
        """The gang fails, retries and keeps time as one (policy ``abort`` or ``restart``)."""
        return self.policy is not GangPolicy.CONTINUE

    def ports_for(self, index: int) -> int:
        """Ports task ``index`` takes from its offer: ``ports``, and one more on a gang's rank 0
        for the rendezvous (``MASTER_PORT``), so that two gangs on one host never collide."""
        return self.ports + (1 if self.gang > 0 and index == 0 else 0)


def _number(data: Mapping[str, Any], key: str, default: float, *, minimum: float = 0.0) -> float:
    value = data.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise SpecError(f"{key}: expected a number, got {value!r}")
    if not math.isfinite(value) or value < minimum or value > 1e9:
        raise SpecError(f"{key}: {value!r} is out of range")
    return float(value)


def _integer(data: Mapping[str, Any], key: str, default: int, *, minimum: int, maximum: int) -> int:
    value = data.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise SpecError(f"{key}: expected an integer, got {value!r}")
    if not minimum <= value <= maximum:
        raise SpecError(f"{key}: {value} is not within {minimum}..{maximum}")
    return value


def _pairs(data: Mapping[str, Any], key: str) -> tuple[tuple[str, str], ...]:
    value = data.get(key) or {}
    if not isinstance(value, Mapping):
        raise SpecError(f"{key}: expected a mapping of names to strings")
    out = []
    for k, v in value.items():
        if not isinstance(k, str) or not isinstance(v, str | int | float) or isinstance(v, bool):
            raise SpecError(f"{key}: {k!r} must map to a string")
        out.append((k, str(v)))
    return tuple(sorted(out))


def _flag(data: Mapping[str, Any], key: str) -> bool:
    value = data.get(key, False)
    if not isinstance(value, bool):
        raise SpecError(f"{key}: expected true or false")
    return value


def spec_from_dict(data: Mapping[str, Any]) -> JobSpec:
    """Build and validate a JobSpec from the JSON/msgpack body of a submission."""
    if not isinstance(data, Mapping):
        raise SpecError("job: expected an object")
    known = {f.name for f in attrs.fields(JobSpec)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise SpecError(f"unknown field(s): {', '.join(unknown)}")
    argv = data.get("argv") or ()
    if not isinstance(argv, list | tuple) or not all(isinstance(a, str) for a in argv):
        raise SpecError("argv: expected a list of strings")
    shell = data.get("shell")
    if shell is not None and not isinstance(shell, str):
        raise SpecError("shell: expected a string")
    after_raw = data.get("after") or ()
    if not isinstance(after_raw, list | tuple):
        raise SpecError("after: expected a list")
    after = []
    for i, dep in enumerate(after_raw):
        if isinstance(dep, int) and not isinstance(dep, bool):
            after.append(Dependency(dep))
        elif isinstance(dep, Mapping) and isinstance(dep.get("job_id"), int):
            try:
                kind = DependencyKind(dep.get("kind", "success"))
            except ValueError as exc:
                raise SpecError(f"after[{i}].kind: expected 'success', 'any' or 'notok'") from exc
            after.append(Dependency(dep["job_id"], kind))
        else:
            raise SpecError(f"after[{i}]: expected a job id or {{job_id, kind}}")
    time_limit = data.get("time_limit")
    if time_limit is not None:
        time_limit = _number(data, "time_limit", 0.0, minimum=0.001)
    name = data.get("name") or (argv[0] if argv else (shell or "job"))
    if not isinstance(name, str):
        raise SpecError("name: expected a string")
    preemptible = data.get("preemptible", False)
    if not isinstance(preemptible, bool):
        raise SpecError("preemptible: expected true or false")
    queue = data.get("queue", "*")
    if not isinstance(queue, str):
        raise SpecError("queue: expected a string")
    gang_policy = data.get("gang_policy")
    if gang_policy is not None and gang_policy not in {p.value for p in GangPolicy}:
        raise SpecError(f"gang_policy: expected abort, restart or continue, got {gang_policy!r}")
    flags = {}
    for key in ("preempt", "singleton"):
        flags[key] = data.get(key, False)
        if not isinstance(flags[key], bool):
            raise SpecError(f"{key}: expected true or false")
    grace = data.get("grace")
    if grace is not None:
        grace = _number(data, "grace", 0.0, minimum=0.0)
    schedule = data.get("schedule")
    if schedule is not None:
        if not isinstance(schedule, str):
            raise SpecError("schedule: expected a cron expression")
        err = schedule_error(schedule)
        if err:
            raise SpecError(f"schedule: {err}")
    try:
        concurrency = Concurrency(data.get("concurrency", "allow"))
    except ValueError as exc:
        raise SpecError("concurrency: expected 'allow', 'forbid' or 'replace'") from exc
    if data.get("concurrency") is not None and schedule is None:
        raise SpecError("concurrency: only a periodic job (one with a schedule) has a concurrency policy")
    notify = data.get("notify")
    if notify is not None and (
        not isinstance(notify, str) or not re.fullmatch(r"https?://[^\s/]+(/\S*)?", notify)
    ):
        raise SpecError(f"notify: expected an http:// or https:// URL, got {notify!r}")
    spec = JobSpec(
        name=name[:200],
        argv=tuple(argv),
        shell=shell,
        cpus=_number(data, "cpus", 1.0),
        mem=_number(data, "mem", 128.0),
        gpus=_number(data, "gpus", 0.0),
        disk=_number(data, "disk", 0.0),
        count=_integer(data, "count", 1, minimum=1, maximum=MAX_COUNT),
        gang=_integer(data, "gang", 0, minimum=0, maximum=MAX_COUNT),
        queue=queue,
        priority=_integer(data, "priority", 0, minimum=-1_000_000, maximum=1_000_000),
        max_retries=_integer(data, "max_retries", 0, minimum=0, maximum=1000),
        time_limit=time_limit,
        env=_pairs(data, "env"),
        constraints=_pairs(data, "constraints"),
        after=tuple(after),
        preemptible=preemptible,
        ports=_integer(data, "ports", 0, minimum=0, maximum=MAX_PORTS),
        gang_policy=gang_policy,
        preempt=flags["preempt"],
        singleton=flags["singleton"],
        grace=grace,
        schedule=schedule,
        concurrency=concurrency,
        notify=notify,
        service=_flag(data, "service"),
        window=_integer(data, "window", 0, minimum=0, maximum=MAX_WINDOW),
    )
    validate(spec)
    return spec


def validate(spec: JobSpec) -> None:
    if bool(spec.argv) == (spec.shell is not None):
        raise SpecError("give exactly one of argv (no shell) or shell (run by /bin/sh -c)")
    if spec.shell is not None and not spec.shell.strip():
        raise SpecError("shell: the command is empty")
    if any("\x00" in a for a in spec.argv) or (spec.shell and "\x00" in spec.shell):
        raise SpecError("command contains a NUL byte")
    if spec.cpus <= 0 and spec.mem <= 0 and spec.gpus <= 0:
        raise SpecError("a task must ask for some cpus, mem or gpus")
    if spec.gang > spec.count:
        raise SpecError(f"gang: {spec.gang} is larger than count {spec.count}")
    if not 0 <= spec.ports <= MAX_PORTS:
        raise SpecError(f"ports: {spec.ports} is not within 0..{MAX_PORTS}")
    if spec.gang_policy is not None:
        if spec.gang <= 0:
            raise SpecError("gang_policy: only a gang has one (give gang, the tasks that start together)")
        if GangPolicy(spec.gang_policy) is GangPolicy.ABORT and spec.max_retries > 0:
            raise SpecError(
                "max_retries: a gang with gang_policy abort fails at its first failure and is not retried; "
                "use gang_policy restart to run the whole gang again, or continue to retry each task alone"
            )
        if GangPolicy(spec.gang_policy) is GangPolicy.RESTART and spec.max_retries == 0:
            raise SpecError(
                "gang_policy restart: each restart of the gang is one of its retries; give max_retries "
                "(how many times the whole gang may run again)"
            )
    if spec.service:
        if spec.gang > 0:
            raise SpecError("service: a service job's instances are independent; it cannot be a gang")
        if spec.schedule is not None:
            raise SpecError("service: a service job cannot be periodic (schedule)")
    elif spec.window:
        raise SpecError("window: only a service job has one (give service)")
    err = role_error(spec.queue)
    if err:
        raise SpecError(f"queue: {err}")
    for name, value in spec.env:
        if not _ENV_NAME.fullmatch(name) or name.startswith("LD_"):
            raise SpecError(f"env: {name!r} is not an allowed variable name")
        if "\x00" in value:
            raise SpecError(f"env: {name} contains a NUL byte")


def spec_to_dict(spec: JobSpec) -> dict[str, Any]:
    """The JSON/msgpack form of a spec (inverse of ``spec_from_dict``)."""
    out: dict[str, Any] = {
        "name": spec.name,
        "cpus": spec.cpus,
        "mem": spec.mem,
        "gpus": spec.gpus,
        "disk": spec.disk,
        "count": spec.count,
        "gang": spec.gang,
        "queue": spec.queue,
        "priority": spec.priority,
        "max_retries": spec.max_retries,
        "preemptible": spec.preemptible,
        "env": dict(spec.env),
        "constraints": dict(spec.constraints),
        "after": [{"job_id": d.job_id, "kind": d.kind.value} for d in spec.after],
    }
    if spec.ports:
        out["ports"] = spec.ports
    if spec.gang_policy is not None:
        out["gang_policy"] = spec.gang_policy
    if spec.argv:
        out["argv"] = list(spec.argv)
    if spec.shell is not None:
        out["shell"] = spec.shell
    if spec.time_limit is not None:
        out["time_limit"] = spec.time_limit
    if spec.preempt:
        out["preempt"] = True
    if spec.singleton:
        out["singleton"] = True
    if spec.grace is not None:
        out["grace"] = spec.grace
    if spec.schedule is not None:
        out["schedule"] = spec.schedule
        out["concurrency"] = spec.concurrency.value
    if spec.notify is not None:
        out["notify"] = spec.notify
    if spec.service:
        out["service"] = True
        if spec.window:
            out["window"] = spec.window
    return out


def dependency_status(spec: JobSpec, states: Mapping[int, JobState]) -> tuple[bool, str | None]:
    """(ready, why-not). ``why-not`` starting with "never:" means it can never run."""
    waiting = []
    for dep in spec.after:
        state = states.get(dep.job_id)
        if state is None:
            return False, f"never: dependency job {dep.job_id} does not exist"
        if state in JOB_TERMINAL:
            if dep.kind is DependencyKind.SUCCESS and state is not JobState.SUCCEEDED:
                return False, f"never: dependency job {dep.job_id} {state.value.lower()}"
            if dep.kind is DependencyKind.FAILURE and state is JobState.SUCCEEDED:
                return False, f"never: dependency job {dep.job_id} succeeded (after-notok)"
            continue
        waiting.append(dep.job_id)
    if waiting:
        return False, "after job " + ", ".join(str(j) for j in waiting)
    return True, None
