"""From a Mesos ``TaskInfo`` to what the agent runs: validated, flattened ``TaskSpec`` (pure).

Validation: framework, task and executor ids must be path-safe
(``protocol.ids.valid_path_id``); exactly one of ``command``/``executor``; a command needs a
``value``; environment names match ``^[A-Za-z_][A-Za-z0-9_]*$``, values carry no NUL, and
``LD_*`` names are denied. A bad task becomes ``SpecError`` (the tracker answers TASK_ERROR).
A task or executor whose ``ContainerInfo`` names an image (Docker or Mesos type) becomes
``ImageUnsupported`` (TASK_FAILED, ``REASON_CONTAINER_LAUNCH_FAILED``): tasks run on the host.
"""

from __future__ import annotations

import re

import attrs

from agent.fetch_plan import UriError, check_uri
from agent.health import CheckError, Policy, check_policy, health_policy
from protocol.ids import valid_path_id
from protocol.mesos import (
    URI,
    CommandInfo,
    ContainerInfo,
    ContainerType,
    ExecutorInfo,
    ExecutorType,
    TaskInfo,
)
from protocol.resources import ResourceError, Resources

__pure__ = True

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
DENIED_ENV_PREFIXES = ("LD_",)


class SpecError(ValueError):
    """A task the agent refuses to run (the message goes into TASK_ERROR)."""

    state = "TASK_ERROR"
    reason = "REASON_TASK_INVALID"


class ImageUnsupported(SpecError):
    """A task (or its executor) asks for a container image: this agent runs tasks on the host and
    has no OCI runtime, so it refuses instead of running it as if no image had been asked for."""

    state = "TASK_FAILED"
    reason = "REASON_CONTAINER_LAUNCH_FAILED"


def container_image(container: ContainerInfo | None) -> str | None:
    """The image a ``ContainerInfo`` names (Docker or Mesos type), or None."""
    if container is None:
        return None
    if container.docker is not None:
        return container.docker.image or "(unnamed docker image)"
    image = container.mesos.image if container.mesos is not None else None
    if image is not None:
        if image.docker is not None:
            return image.docker.name
        return f"({image.type.value} image)"
    if container.type is ContainerType.DOCKER:
        return "(docker container without an image)"
    return None


def check_container(what: str, container: ContainerInfo | None) -> None:
    """What of a ``ContainerInfo`` this agent cannot give is refused, never ignored: an image
    (``ImageUnsupported``), volumes, container networks and a hostname of its own (``SpecError``:
    tasks run on the host, in their sandbox, on the host's network)."""
    image = container_image(container)
    if image is not None:
        raise ImageUnsupported(
            f"{what} asks for container image {image}: container images are not supported by this "
            "agent (it runs tasks on the host and has no OCI runtime configured)"
        )
    if container is None:
        return
    if container.volumes:
        paths = ", ".join(repr(v.container_path) for v in container.volumes)
        raise SpecError(f"{what} asks for container volumes ({paths}): volumes are not supported by this agent "
                        "(tasks run on the host, in their sandbox)")
    if container.network_infos:
        names = ", ".join(repr(n.name) for n in container.network_infos if n.name) or "an IP or port mappings"
        raise SpecError(f"{what} asks for a container network ({names}): container networks are not supported by "
                        "this agent (tasks use the host's network)")
    if container.hostname:
        raise SpecError(f"{what} asks for hostname {container.hostname!r}: a task has no network namespace of its "
                        "own on this agent")


@attrs.frozen
class CommandSpec:
    """What to exec: ``argv`` directly (``shell`` false) or ``/bin/sh -c value``."""

    argv: tuple[str, ...]
    environment: tuple[tuple[str, str], ...] = ()
    user: str | None = None
    uris: tuple[URI, ...] = ()  # fetched into the sandbox before it runs (agent/fetcher.py)


@attrs.frozen
class RunAs:
    """The user a task (or executor) runs as, when not the agent's own (``agent/users.py``
    resolves it; ``users.enter`` hands the sandbox over)."""

    name: str
    uid: int
    gid: int

    def wrap(self, argv: tuple[str, ...], setpriv: str) -> tuple[str, ...]:
        return (setpriv, f"--reuid={self.uid}", f"--regid={self.gid}", "--init-groups", "--", *argv)


@attrs.frozen
class TaskSpec:
    framework_id: str
    task_id: str
    name: str
    command: CommandSpec | None  # None: run by a custom executor
    executor_id: str | None = None  # the custom executor's id (None for command tasks)
    mem_limit: int | None = None  # bytes
    cpus: float | None = None
    disk_limit: int | None = None  # bytes of sandbox (the task's disk resource)
    grace: float | None = None  # kill policy grace period (seconds)
    revocable: bool = False
    killing_state: bool = False  # the framework wants TASK_KILLING
    gpus: float = 0.0  # GPUs asked for
    gpu_devices: tuple[int, ...] = ()  # NVML indices of the devices assigned (agent/gpus.py)
    health: Policy | None = None  # TaskInfo.health_check, run by the agent (agent/health.py)
    check: Policy | None = None  # TaskInfo.check, run by the agent
    # a task of a task group launched on the DEFAULT executor (LAUNCH_GROUP, no executor command):
    # the agent runs its command itself under ``executor_id``; ``group``: the group's task ids
    group: tuple[str, ...] = ()
    max_completion: float | None = None  # TaskInfo.max_completion_time (seconds), command tasks

    @property
    def pod(self) -> bool:
        """Run by the agent's DEFAULT executor: a command task reported under ``executor_id``."""
        return self.command is not None and self.executor_id is not None

    @property
    def pod_executor(self) -> str | None:
        """The DEFAULT executor that runs this task of a task group (its sandbox is nested under
        the executor's: ``Checkpoint.task_sandbox``), or None."""
        return self.executor_id if self.command is not None else None
    info: TaskInfo | None = attrs.field(default=None, eq=False)
    # the task group's executor (LAUNCH_GROUP): the TaskInfo names none of its own
    group_executor: ExecutorInfo | None = attrs.field(default=None, eq=False)
    run_as: RunAs | None = None  # set by the shell when the task runs as another user (agent/users.py)


def check_environment(pairs: tuple[tuple[str, str], ...]) -> None:
    for name, value in pairs:
        if not _ENV_NAME.fullmatch(name):
            raise SpecError(f"invalid environment variable name {name!r}")
        if name.startswith(DENIED_ENV_PREFIXES):
            raise SpecError(f"environment variable {name} is denied")
        if "\x00" in value:
            raise SpecError(f"environment variable {name} contains NUL")


def command_spec(cmd: CommandInfo) -> CommandSpec:
    if cmd.value is None or cmd.value == "":
        raise SpecError("command has no value")
    if "\x00" in cmd.value or any("\x00" in a for a in cmd.arguments):
        raise SpecError("command contains NUL")
    shell = True if cmd.shell is None else cmd.shell
    if shell:
        argv: tuple[str, ...] = ("/bin/sh", "-c", cmd.value)
    else:
        # Mesos: with shell=false, ``value`` is the executable and ``arguments`` the full argv
        # (arguments[0] is argv[0]); an empty ``arguments`` means just the executable.
        argv = (cmd.value, *cmd.arguments[1:]) if cmd.arguments else (cmd.value,)
    env: tuple[tuple[str, str], ...] = ()
    if cmd.environment is not None:
        env = tuple((v.name, v.value or "") for v in cmd.environment.variables)
    check_environment(env)
    for uri in cmd.uris:
        try:
            check_uri(uri)
        except UriError as e:
            raise SpecError(str(e)) from e
    return CommandSpec(argv=argv, environment=env, user=cmd.user, uris=tuple(cmd.uris))


def checks(task: TaskInfo) -> tuple[Policy | None, Policy | None]:
    """The task's health check and check, as the agent runs them for a command task."""
    try:
        health = health_policy(task.health_check) if task.health_check is not None else None
        check = check_policy(task.check) if task.check is not None else None
    except CheckError as e:
        raise SpecError(str(e)) from e
    for p in (health, check):
        if p is not None and p.probe.command is not None:
            command_spec(p.probe.command)
    return health, check


def _seconds(ns: int | None) -> float | None:
    return None if ns is None else max(0.0, ns / 1e9)


def task_spec(
    framework_id: str,
    task: TaskInfo,
    executor: ExecutorInfo | None = None,
    killing_state: bool = False,
    group: tuple[str, ...] = (),
) -> TaskSpec:
    """Validate ``task`` and flatten it. ``executor`` is the group's executor (LAUNCH_GROUP),
    ``group`` the ids of the group's tasks."""
    tid = task.task_id.value
    if not valid_path_id(framework_id):
        raise SpecError(f"invalid framework id {framework_id!r}")
    if not valid_path_id(tid):
        raise SpecError(f"invalid task id {tid!r}")
    ex = task.executor or executor
    if task.command is not None and task.executor is not None:
        raise SpecError("task has both command and executor")
    if task.command is None and ex is None:
        raise SpecError("task has neither command nor executor")
    check_container("the task", task.container)
    if ex is not None:
        check_container(f"executor {ex.executor_id.value}", ex.container)
    try:
        res = Resources.from_mesos(task.resources)
    except ResourceError as e:
        raise SpecError(f"invalid resources: {e}") from e
    mem = res.scalar("mem")
    cpus = res.scalar("cpus")
    disk = res.scalar("disk")
    grace = None
    if task.kill_policy is not None and task.kill_policy.grace_period is not None:
        grace = _seconds(task.kill_policy.grace_period.nanoseconds)
    revocable = bool(res.revocable())
    max_completion = None
    if task.max_completion_time is not None:
        max_completion = _seconds(task.max_completion_time.nanoseconds)
        if task.command is None or (ex is not None and not (ex.type is ExecutorType.DEFAULT and ex.command is None)):
            max_completion = None  # a CUSTOM executor gets it in the TaskInfo and enforces it
    common = {
        "framework_id": framework_id,
        "task_id": tid,
        "name": task.name,
        "mem_limit": int(mem * 1024 * 1024) if mem > 0 else None,
        "cpus": cpus if cpus > 0 else None,
        "disk_limit": int(disk * 1024 * 1024) if disk > 0 else None,
        "grace": grace,
        "revocable": revocable,
        "killing_state": killing_state,
        "gpus": max(0.0, res.scalar("gpus")),
        "info": task,
        "group_executor": executor,
        "max_completion": max_completion,
    }
    if task.command is not None and ex is None:
        health, check = checks(task)
        return TaskSpec(command=command_spec(task.command), health=health, check=check, **common)  # type: ignore[arg-type]
    assert ex is not None
    eid = ex.executor_id.value
    if not valid_path_id(eid):
        raise SpecError(f"invalid executor id {eid!r}")
    if ex.type is ExecutorType.DEFAULT and ex.command is None:
        # Mesos' default executor: the agent runs each task of the group as a command task
        if task.executor is not None:
            raise SpecError("a DEFAULT executor without a command runs task groups (LAUNCH_GROUP) only")
        if task.command is None:
            raise SpecError(f"task {tid} of a task group on the DEFAULT executor has no command")
        health, check = checks(task)
        return TaskSpec(command=command_spec(task.command), executor_id=eid, health=health, check=check,
                        group=group or (tid,), **common)  # type: ignore[arg-type]
    if ex.command is None:
        raise SpecError("executor has no command")
    command_spec(ex.command)  # validate now; the executor itself is started from its ExecutorInfo
    return TaskSpec(command=None, executor_id=eid, **common)  # type: ignore[arg-type]
