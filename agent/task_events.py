"""The tracker's vocabulary (pure): the facts it is told (*events*) and the commands it answers
with (*effects*), and why a task is killed (``KillReason``). ``agent/tasks.py`` holds the tracker
that turns one into the other (and re-exports all of this: ``tk.LaunchTask``); the shell produces
the events and runs the effects."""

from __future__ import annotations

import enum

import attrs

from agent.health import Outcome, Verdict
from agent.taskspec import TaskSpec
from protocol.mesos import CheckStatusInfo
from protocol.task_states import TaskState

__pure__ = True

S = TaskState
TaskKey = tuple[str, str]  # (framework_id, task_id)
ExecutorKey = tuple[str, str]  # (framework_id, executor_id)

DEFAULT_GRACE = 3.0


class KillReason(enum.Enum):
    FRAMEWORK = "FRAMEWORK"
    PREEMPTED = "PREEMPTED"
    MEMORY = "MEMORY"
    DISK = "DISK"
    SHUTDOWN = "SHUTDOWN"
    AGENT_SHUTDOWN = "AGENT_SHUTDOWN"
    DRAINING = "DRAINING"  # the master drains this agent (DRAIN_AGENT)
    HEALTH = "HEALTH"  # its health check failed consecutive_failures times (agent/health.py)
    MAX_COMPLETION = "MAX_COMPLETION"  # TaskInfo.max_completion_time passed



# a KillTask's reason from the master (the channel's ``KillTask.reason``) -> the kill intent
MASTER_KILL_REASONS: dict[str, KillReason] = {"REASON_AGENT_DRAINING": KillReason.DRAINING}



# --- events ---------------------------------------------------------------------------------


@attrs.frozen
class LaunchTask:
    spec: TaskSpec
    group: tuple[str, ...] = ()  # LAUNCH_GROUP: the group's task ids (a custom executor gets them together)


@attrs.frozen
class LaunchRejected:
    """A launch that is not run: answered with ``state`` (TASK_ERROR: it failed validation;
    TASK_DROPPED: the agent is retiring). A no-op for a task the tracker already knows."""

    framework_id: str
    task_id: str
    message: str
    executor_id: str | None = None
    reason: str = "REASON_TASK_INVALID"
    state: TaskState = S.TASK_ERROR


@attrs.frozen
class Fetched:
    """The task's URIs are in its sandbox (``agent/fetcher.py``): spawn it. ``message``: what
    was fetched, for its TASK_RUNNING message."""

    framework_id: str
    task_id: str
    message: str


@attrs.frozen
class FetchFailed:
    """Fetching the task's URIs failed: TASK_FAILED (``REASON_CONTAINER_LAUNCH_FAILED``)."""

    framework_id: str
    task_id: str
    message: str


@attrs.frozen
class FetchProgress:
    """A long fetch is still going: a TASK_STARTING update with ``message``."""

    framework_id: str
    task_id: str
    message: str


@attrs.frozen
class CheckOutcome:
    """One probe's result for a running command task: of its health check (``health``) or of
    its general check; the tracker keeps each task's checking state (``agent/health.py``)."""

    framework_id: str
    task_id: str
    health: bool
    outcome: Outcome


@attrs.frozen
class HealthChecked:
    """The verdict of a health check of a running command task (``agent/health.py``)."""

    framework_id: str
    task_id: str
    verdict: Verdict


@attrs.frozen
class CheckChanged:
    """A general check of a running command task has a new result."""

    framework_id: str
    task_id: str
    status: CheckStatusInfo


@attrs.frozen
class Spawned:
    framework_id: str
    task_id: str
    pid: int


@attrs.frozen
class SpawnFailed:
    framework_id: str
    task_id: str
    message: str


@attrs.frozen
class Exited:
    """The task's process ended. ``exit_code`` is the shell-style status (128+N for signal N);
    ``None`` when nobody recorded it (the wrapper was killed, or the agent was down)."""

    framework_id: str
    task_id: str
    exit_code: int | None
    message: str | None = None


@attrs.frozen
class KillTask:
    framework_id: str
    task_id: str
    grace: float | None = None
    reason: KillReason = KillReason.FRAMEWORK
    message: str | None = None  # why, for the terminal update (e.g. the QoS controller's reason)


def master_kill(framework_id: str, task_id: str, grace: float | None, reason: str | None) -> KillTask:
    """The kill a master's ``KILL_TASK`` asks for: its ``reason`` (``MASTER_KILL_REASONS``; none:
    the framework's kill) decides the kill intent and the terminal update's message."""
    why = MASTER_KILL_REASONS.get(reason or "", KillReason.FRAMEWORK)
    message = "Agent draining (DRAIN_AGENT)" if why is KillReason.DRAINING else None
    return KillTask(framework_id, task_id, grace, why, message)


@attrs.frozen
class LimitExceeded:
    """The task went past a limit of its resources: killed at once (no grace) and reported
    TASK_FAILED with the limitation's reason (memory or disk) and ``message``."""

    framework_id: str
    task_id: str
    message: str
    kind: KillReason = KillReason.MEMORY  # MEMORY or DISK


@attrs.frozen
class ShutdownFramework:
    framework_id: str
    grace: float | None = None
    reason: KillReason = KillReason.SHUTDOWN


@attrs.frozen
class ExecutorStarted:
    framework_id: str
    executor_id: str
    pid: int


@attrs.frozen
class ExecutorStatus:
    """A status the custom executor sent for one of its tasks (already validated by the API)."""

    framework_id: str
    executor_id: str
    task_id: str
    state: TaskState


@attrs.frozen
class ExecutorTerminated:
    framework_id: str
    executor_id: str
    exit_code: int | None
    message: str | None = None


@attrs.frozen
class ExecutorReregistered:
    """A custom executor re-attached after an agent restart SUBSCRIBEd again; ``known``: the
    tasks it listed as launched but unacknowledged (it has them)."""

    framework_id: str
    executor_id: str
    known: frozenset[str] = frozenset()


@attrs.frozen
class ExecutorReregisterTimeout:
    """A custom executor re-attached after an agent restart did not SUBSCRIBE in time."""

    framework_id: str
    executor_id: str
    message: str = "Executor did not re-register after the agent restarted"


@attrs.frozen
class Tick:
    """Time passed: escalate kills whose grace period is over."""


@attrs.frozen
class Forget:
    """The task's terminal update was acknowledged: drop it."""

    framework_id: str
    task_id: str


@attrs.frozen
class RecoveredTask:
    """A task read back from the checkpoint after an agent restart.

    ``last_state``: the newest state in its update log (None: none written yet);
    ``spawned``: a pid record exists; ``alive``: that pid is our wrapper (pid, create time and
    boot id match) - for an executor task: its executor process is alive and awaited to
    re-subscribe (``pid``: the executor's wrapper); ``exit_code``: what the wrapper recorded, if anything; ``broken``: the
    checkpoint of this task is corrupt (the file named), the task is reported LOST.
    """

    spec: TaskSpec
    last_state: TaskState | None
    spawned: bool
    alive: bool
    exit_code: int | None = None
    pid: int | None = None
    kill_reason: KillReason | None = None  # a kill was under way when the agent died
    kill_deadline: float | None = None  # ... and its SIGKILL was due then


Event = (
    LaunchTask
    | CheckOutcome
    | LaunchRejected
    | Fetched
    | FetchFailed
    | FetchProgress
    | HealthChecked
    | CheckChanged
    | Spawned
    | SpawnFailed
    | Exited
    | KillTask
    | LimitExceeded
    | ShutdownFramework
    | ExecutorStarted
    | ExecutorStatus
    | ExecutorTerminated
    | ExecutorReregistered
    | ExecutorReregisterTimeout
    | Tick
    | Forget
    | RecoveredTask
)


# --- effects --------------------------------------------------------------------------------


@attrs.frozen
class CheckpointTask:
    spec: TaskSpec


@attrs.frozen
class SpawnTask:
    spec: TaskSpec


@attrs.frozen
class FetchTask:
    """Fetch the task's ``CommandInfo.uris`` into its sandbox (then ``Fetched``/``FetchFailed``)."""

    spec: TaskSpec


@attrs.frozen
class StartChecks:
    """The command task runs: start its health check and/or check (``spec.health``/``spec.check``)."""

    spec: TaskSpec


@attrs.frozen
class CancelFetch:
    """The task was killed while its URIs were being fetched: stop the fetch."""

    framework_id: str
    task_id: str


@attrs.frozen
class StartExecutor:
    """Start the custom executor process (once per framework/executor)."""

    framework_id: str
    executor_id: str
    spec: TaskSpec  # the first task; its ``info.executor`` (or the group's) describes the executor


@attrs.frozen
class HandToExecutor:
    """Give tasks to a custom executor (LAUNCH / LAUNCH_GROUP through the executor API)."""

    framework_id: str
    executor_id: str
    task_ids: tuple[str, ...]
    group: bool = False


@attrs.frozen
class SignalTask:
    """Send ``signal`` (``"TERM"`` or ``"KILL"``) to the task's whole process group."""

    framework_id: str
    task_id: str
    signal: str


@attrs.frozen
class KillViaExecutor:
    framework_id: str
    executor_id: str
    task_id: str
    grace: float


@attrs.frozen
class ShutdownExecutorProcess:
    framework_id: str
    executor_id: str
    grace: float


@attrs.frozen
class EmitStatus:
    """A new status update to make reliable (the shell adds uuid, timestamp and agent id)."""

    framework_id: str
    task_id: str
    state: TaskState
    source: str = "SOURCE_EXECUTOR"
    reason: str | None = None
    message: str | None = None
    executor_id: str | None = None
    exit_code: int | None = None
    healthy: bool | None = None  # a health check's verdict (TaskStatus.healthy)
    check_status: CheckStatusInfo | None = None


@attrs.frozen
class ReleaseTask:
    """The task is terminal: free its isolation (cgroup, monitoring) and resources."""

    framework_id: str
    task_id: str


@attrs.frozen
class ExecutorGone:
    """Tell the master the executor exited (``EXECUTOR_EXITED``)."""

    framework_id: str
    executor_id: str
    status: int


@attrs.frozen
class DropTask:
    """Forget the task's checkpoint and record (after its terminal acknowledgement)."""

    framework_id: str
    task_id: str


Effect = (
    CheckpointTask
    | SpawnTask
    | FetchTask
    | StartChecks
    | CancelFetch
    | StartExecutor
    | HandToExecutor
    | SignalTask
    | KillViaExecutor
    | ShutdownExecutorProcess
    | EmitStatus
    | ReleaseTask
    | ExecutorGone
    | DropTask
)
