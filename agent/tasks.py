"""The task and executor tracker: what runs on this agent and what each fact means (pure core).

A task's life follows ``protocol.task_states`` (an illegal transition raises). The tracker turns
facts (a launch order, a spawned process, an exit code, a kill order, a memory-limit breach, a
revocation, a framework shutdown, an executor's update) into commands: checkpoint the task,
spawn it, signal it, escalate a kill, and *emit* a status update (``EmitStatus``; the shell gives
it a uuid and hands it to the status-update manager).

Vocabulary:
- *command task*: run by the agent's built-in command executor (our launcher + wrapper);
- *executor task*: handed to a CUSTOM executor process through the executor API;
- *kill intent*: why a task is being killed, which decides its terminal state and reason:
  framework kill -> TASK_KILLED; revocation / QoS -> TASK_KILLED + REASON_CONTAINER_PREEMPTED;
  memory limit -> TASK_FAILED + REASON_CONTAINER_LIMITATION_MEMORY (disk: _DISK); framework shutdown ->
  TASK_KILLED + REASON_FRAMEWORK_REMOVED; the master draining the agent -> TASK_KILLED +
  REASON_AGENT_DRAINING.
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs

from agent.completed import CompletedBook
from agent.fetch_plan import starting
from agent.health import CHECK_REASON, HEALTH_REASON, CheckState, HealthState, Outcome, Policy
from agent.task_events import (  # the vocabulary (events, effects), re-exported: tk.LaunchTask
    DEFAULT_GRACE,
    MASTER_KILL_REASONS,
    CancelFetch,
    CheckChanged,
    CheckOutcome,
    CheckpointTask,
    DropTask,
    Effect,
    EmitStatus,
    Event,
    ExecutorGone,
    ExecutorKey,
    ExecutorReregistered,
    ExecutorReregisterTimeout,
    ExecutorStarted,
    ExecutorStatus,
    ExecutorTerminated,
    Exited,
    Fetched,
    FetchFailed,
    FetchProgress,
    FetchTask,
    Forget,
    HandToExecutor,
    HealthChecked,
    KillReason,
    KillTask,
    KillViaExecutor,
    LaunchRejected,
    LaunchTask,
    LimitExceeded,
    RecoveredTask,
    ReleaseTask,
    ShutdownExecutorProcess,
    ShutdownFramework,
    SignalTask,
    Spawned,
    SpawnFailed,
    SpawnTask,
    StartChecks,
    StartExecutor,
    TaskKey,
    Tick,
    master_kill,
)
from agent.taskspec import TaskSpec
from protocol.mesos import (
    CheckStatusCommand,
    CheckStatusHttp,
    CheckStatusInfo,
    CheckStatusTcp,
    CheckType,
    ExecutorInfo,
    FrameworkInfo,
)
from protocol.task_states import TaskState, check_transition, is_terminal

__pure__ = True

S = TaskState

__all__ = [
    "DEFAULT_GRACE",
    "MASTER_KILL_REASONS",
    "CancelFetch",
    "CheckChanged",
    "CheckOutcome",
    "CheckpointTask",
    "DropTask",
    "Effect",
    "EmitStatus",
    "Event",
    "ExecutorGone",
    "ExecutorKey",
    "ExecutorRecord",
    "ExecutorReregisterTimeout",
    "ExecutorReregistered",
    "ExecutorStarted",
    "ExecutorStatus",
    "ExecutorTerminated",
    "Exited",
    "FetchFailed",
    "FetchProgress",
    "FetchTask",
    "Fetched",
    "Forget",
    "HandToExecutor",
    "HealthChecked",
    "KillReason",
    "KillTask",
    "KillViaExecutor",
    "LaunchRejected",
    "LaunchTask",
    "LimitExceeded",
    "RecoveredTask",
    "ReleaseTask",
    "ShutdownExecutorProcess",
    "ShutdownFramework",
    "SignalTask",
    "SpawnFailed",
    "SpawnTask",
    "Spawned",
    "StartChecks",
    "StartExecutor",
    "TaskKey",
    "TaskRecord",
    "TaskTracker",
    "Tick",
    "UnknownTask",
    "exit_outcome",
    "keys",
    "master_kill",
]


_KILL_OUTCOME: dict[KillReason, tuple[TaskState, str | None]] = {
    KillReason.FRAMEWORK: (S.TASK_KILLED, None),
    KillReason.PREEMPTED: (S.TASK_KILLED, "REASON_CONTAINER_PREEMPTED"),
    KillReason.MEMORY: (S.TASK_FAILED, "REASON_CONTAINER_LIMITATION_MEMORY"),
    KillReason.DISK: (S.TASK_FAILED, "REASON_CONTAINER_LIMITATION_DISK"),
    KillReason.SHUTDOWN: (S.TASK_KILLED, "REASON_FRAMEWORK_REMOVED"),
    KillReason.AGENT_SHUTDOWN: (S.TASK_KILLED, "REASON_AGENT_REMOVED_BY_OPERATOR"),
    KillReason.DRAINING: (S.TASK_KILLED, "REASON_AGENT_DRAINING"),
    KillReason.HEALTH: (S.TASK_KILLED, None),
    KillReason.MAX_COMPLETION: (S.TASK_FAILED, "REASON_MAX_COMPLETION_TIME_REACHED"),
}

_LIMITATIONS = frozenset({KillReason.MEMORY, KillReason.DISK})



# --- state ----------------------------------------------------------------------------------


@attrs.define
class TaskRecord:
    spec: TaskSpec
    state: TaskState = S.TASK_STAGING
    pid: int | None = None
    kill_reason: KillReason | None = None
    kill_deadline: float | None = None  # when SIGKILL follows SIGTERM
    kill_message: str | None = None
    hard_killed: bool = False
    exit_code: int | None = None
    fetching: bool = False  # its URIs are being fetched (no process yet)
    launch_note: str | None = None  # what the fetch did, for the TASK_RUNNING message
    healthy: bool | None = None  # the last health check verdict reported
    completion_deadline: float | None = None  # max_completion_time: failed if still running then
    started_at: float | None = None  # when its process started (or the agent re-attached it); None once terminal
    launch_group: tuple[str, ...] = ()  # launched with its task group (LAUNCH_GROUP): handed over together
    health_state: HealthState | None = None  # its health checking, while it runs (agent/health.py)
    check_state: CheckState | None = None  # its general check, while it runs

    @property
    def key(self) -> TaskKey:
        return (self.spec.framework_id, self.spec.task_id)

    @property
    def terminal(self) -> bool:
        return is_terminal(self.state)


@attrs.define
class ExecutorRecord:
    framework_id: str
    executor_id: str
    pid: int | None = None
    tasks: set[str] = attrs.field(factory=set)
    terminated: bool = False
    reregistering: bool = False  # re-attached after an agent restart, its SUBSCRIBE awaited


def exit_outcome(code: int | None) -> tuple[TaskState, str | None, str]:
    """The terminal state, reason and message of a command task that ended on its own."""
    if code is None:
        return (S.TASK_FAILED, "REASON_EXECUTOR_TERMINATED", "Task wrapper terminated without an exit status")
    if code == 0:
        return (S.TASK_FINISHED, None, "Command exited with status 0")
    if code > 128:
        return (S.TASK_FAILED, "REASON_COMMAND_EXECUTOR_FAILED", f"Command terminated with signal {code - 128} (exit status {code})")
    return (S.TASK_FAILED, "REASON_COMMAND_EXECUTOR_FAILED", f"Command exited with status {code}")


class TaskTracker:
    """Pure core: ``handle(event, now) -> list[Effect]``; ``next_deadline()`` for kill escalation."""

    def __init__(self, default_grace: float = DEFAULT_GRACE) -> None:
        self.default_grace = default_grace
        self.tasks: dict[TaskKey, TaskRecord] = {}
        self.executors: dict[ExecutorKey, ExecutorRecord] = {}
        # DEFAULT executors the agent plays for task groups (LAUNCH_GROUP without an executor
        # command) with a task not yet terminal; and pod tasks that just ended (group fate)
        self.pod_executors: set[ExecutorKey] = set()
        self._ended_pods: list[TaskRecord] = []
        # the frameworks of the tasks launched here (written to the checkpoint with them)
        self.frameworks: dict[str, FrameworkInfo] = {}
        # tasks whose updates are not checkpointed (refused launches, corrupt checkpoints)
        self.ephemeral: set[TaskKey] = set()
        # a custom executor's update (uuid) -> the executor, which gets the acknowledgement back
        self.executor_uuids: dict[bytes, str] = {}
        # the tasks it forgot (terminal and acknowledged), for /state's completed executors
        self.completed: CompletedBook[TaskRecord, ExecutorInfo | None] = CompletedBook()

    # --- queries ---------------------------------------------------------------------------

    def get(self, framework_id: str, task_id: str) -> TaskRecord | None:
        return self.tasks.get((framework_id, task_id))

    def active(self) -> list[TaskRecord]:
        return [t for t in self.tasks.values() if not t.terminal]

    def of_framework(self, framework_id: str) -> list[TaskRecord]:
        return [t for t in self.tasks.values() if t.spec.framework_id == framework_id]

    def next_deadline(self) -> float | None:
        ds = [t.kill_deadline for t in self.tasks.values() if t.kill_deadline is not None and not t.terminal]
        ds += [t.completion_deadline for t in self.tasks.values()
               if t.completion_deadline is not None and not t.terminal and t.kill_reason is None]
        return min(ds) if ds else None

    # --- events ----------------------------------------------------------------------------

    def handle(self, event: Event, now: float) -> list[Effect]:
        out = self._handle(event, now)
        while self._ended_pods:
            out.extend(self._pod_task_ended(self._ended_pods.pop(0), now))
        return out

    def _pod_task_ended(self, t: TaskRecord, now: float) -> list[Effect]:
        """A task of a task group on the DEFAULT executor ended. As Mesos' default executor: one
        that did not finish (failed, killed, lost) takes the rest of its group down; when the
        executor has no task left, it is gone (``EXECUTOR_EXITED`` to the master, which frees
        its resources)."""
        fid, tid = t.key
        eid = t.spec.executor_id
        assert eid is not None
        out: list[Effect] = []
        if t.state is not S.TASK_FINISHED:
            for other in t.spec.group:
                sib = self.tasks.get((fid, other))
                if sib is None or sib.terminal or sib.kill_reason is not None:
                    continue
                out.extend(self._kill(sib, None, KillReason.FRAMEWORK, now,
                                      f"Killed: task '{tid}' of its task group ended {t.state.name}"))
        ekey = (fid, eid)
        if ekey in self.pod_executors and not any(
            k[0] == fid and v.spec.pod and v.spec.executor_id == eid and not v.terminal for k, v in self.tasks.items()
        ):
            self.pod_executors.discard(ekey)
            out.append(ExecutorGone(fid, eid, 0))
        return out

    def _handle(self, event: Event, now: float) -> list[Effect]:
        match event:
            case LaunchTask(spec, group):
                return self._launch(spec, group)
            case LaunchRejected(fid, tid, message, eid, reason, state):
                if (fid, tid) in self.tasks:
                    return []
                self.ephemeral.add((fid, tid))
                return [EmitStatus(fid, tid, state, "SOURCE_AGENT", reason, message, eid)]
            case Spawned(fid, tid, pid):
                return self._spawned(fid, tid, pid, now)
            case Fetched(fid, tid, message):
                t = self.tasks.get((fid, tid))
                if t is None or t.terminal or not t.fetching:
                    return []
                t.fetching, t.launch_note = False, message
                return [SpawnTask(t.spec)]
            case FetchFailed(fid, tid, message):
                t = self.tasks.get((fid, tid))
                if t is None or t.terminal or not t.fetching:
                    return []
                t.fetching = False
                return self._finish(t, S.TASK_FAILED, "REASON_CONTAINER_LAUNCH_FAILED", message, "SOURCE_AGENT")
            case CheckOutcome(fid, tid, health, outcome):
                t = self.tasks.get((fid, tid))
                if t is None:
                    return []
                if health:
                    verdict = t.health_state.result(outcome, now) if t.health_state is not None else None
                    return self._handle(HealthChecked(fid, tid, verdict), now) if verdict is not None else []
                cs = t.check_state
                if cs is None or not cs.result(outcome):
                    return []
                return self._handle(CheckChanged(fid, tid, _check_status(cs.policy, outcome)), now)
            case HealthChecked(fid, tid, verdict):
                t = self.tasks.get((fid, tid))
                if t is None or t.terminal or t.state is not S.TASK_RUNNING or t.kill_reason is not None:
                    return []
                t.healthy = verdict.healthy
                out: list[Effect] = [EmitStatus(fid, tid, S.TASK_RUNNING, "SOURCE_EXECUTOR", HEALTH_REASON,
                                                verdict.message, healthy=verdict.healthy)]
                if verdict.kill:
                    out.extend(self._kill(t, None, KillReason.HEALTH, now, verdict.message))
                return out
            case CheckChanged(fid, tid, status):
                t = self.tasks.get((fid, tid))
                if t is None or t.terminal or t.state is not S.TASK_RUNNING:
                    return []
                return [EmitStatus(fid, tid, S.TASK_RUNNING, "SOURCE_EXECUTOR", CHECK_REASON, healthy=t.healthy,
                                   check_status=status)]
            case FetchProgress(fid, tid, message):
                t = self.tasks.get((fid, tid))
                if t is None or not t.fetching or t.state is not S.TASK_STARTING:
                    return []
                return [EmitStatus(fid, tid, S.TASK_STARTING, message=message)]
            case SpawnFailed(fid, tid, message):
                t = self.tasks.get((fid, tid))
                if t is None or t.terminal:
                    return []
                return self._finish(t, S.TASK_FAILED, "REASON_CONTAINER_LAUNCH_FAILED", message, "SOURCE_AGENT")
            case Exited(fid, tid, code, message):
                return self._exited(fid, tid, code, message)
            case KillTask(fid, tid, grace, reason, message):
                t = self.tasks.get((fid, tid))
                if t is None or t.terminal:
                    return []
                if t.spec.pod:  # Mesos' default executor kills the whole task group
                    kills: list[Effect] = []
                    for other in (tid, *(o for o in t.spec.group if o != tid)):
                        sib = self.tasks.get((fid, other))
                        if sib is not None and not sib.terminal:
                            why = message if other == tid else f"Killed with task '{tid}' of its task group"
                            kills.extend(self._kill(sib, grace, reason, now, why))
                    return kills
                return self._kill(t, grace, reason, now, message)
            case LimitExceeded(fid, tid, message, kind):
                t = self.tasks.get((fid, tid))
                if t is None or t.terminal:
                    return []
                return self._kill(t, 0.0, kind, now, message)
            case ShutdownFramework(fid, grace, reason):
                return self._shutdown_framework(fid, grace, now, reason)
            case ExecutorStarted(fid, eid, pid):
                ex = self.executors.get((fid, eid))
                if ex is None:
                    return []
                ex.pid = pid
                return [HandToExecutor(fid, eid, tuple(sorted(ex.tasks)))] if ex.tasks else []
            case ExecutorStatus(fid, eid, tid, state):
                return self._executor_status(fid, eid, tid, state)
            case ExecutorTerminated(fid, eid, code, message):
                return self._executor_terminated(fid, eid, code, message)
            case ExecutorReregistered(fid, eid, known):
                return self._executor_reregistered(fid, eid, known)
            case ExecutorReregisterTimeout(fid, eid, message):
                return self._executor_reregister_timeout(fid, eid, message)
            case Tick():
                return self._tick(now)
            case Forget(fid, tid):
                t = self.tasks.get((fid, tid))
                if t is None:
                    self.ephemeral.discard((fid, tid))
                    return []
                if not t.terminal:
                    return []
                del self.tasks[(fid, tid)]
                info = t.spec.info.executor if t.spec.info is not None else None
                self.completed.task_done(fid, t.spec.executor_id or tid, info or t.spec.group_executor, t)
                if t.spec.executor_id is not None:
                    ex = self.executors.get((fid, t.spec.executor_id))
                    if ex is not None and ex.terminated and not any(
                        k[0] == fid and v.spec.executor_id == ex.executor_id for k, v in self.tasks.items()
                    ):
                        del self.executors[(fid, ex.executor_id)]
                if (fid, tid) in self.ephemeral:  # no checkpoint to drop
                    self.ephemeral.discard((fid, tid))
                    return []
                return [DropTask(fid, tid)]
            case RecoveredTask():
                return self._recovered(event, now)
        raise TypeError(f"unknown event {event!r}")

    # --- launch ----------------------------------------------------------------------------

    def _launch(self, spec: TaskSpec, group: tuple[str, ...] = ()) -> list[Effect]:
        key = (spec.framework_id, spec.task_id)
        if key in self.tasks:
            return []  # a duplicate order (the master resent it): the first one stands
        t = TaskRecord(spec, launch_group=group)
        self.tasks[key] = t
        if spec.pod:
            assert spec.executor_id is not None
            self.pod_executors.add((spec.framework_id, spec.executor_id))
        if spec.command is not None:
            if spec.command.uris:  # fetched first; TASK_STARTING says so
                t.fetching = True
                self._move(t, S.TASK_STARTING)
                return [
                    CheckpointTask(spec),
                    EmitStatus(spec.framework_id, spec.task_id, S.TASK_STARTING, message=starting(len(spec.command.uris))),
                    FetchTask(spec),
                ]
            return [CheckpointTask(spec), SpawnTask(spec)]
        assert spec.executor_id is not None
        ekey = (spec.framework_id, spec.executor_id)
        ex = self.executors.get(ekey)
        out: list[Effect] = [CheckpointTask(spec)]
        if ex is None or ex.terminated:
            ex = self.executors[ekey] = ExecutorRecord(spec.framework_id, spec.executor_id)
            ex.tasks.add(spec.task_id)
            out.append(StartExecutor(spec.framework_id, spec.executor_id, spec))
        else:
            ex.tasks.add(spec.task_id)
            # A re-attached executor not back yet gets it when it re-registers (every STAGING task
            # it does not list is handed then); handed now as well, it would get it twice.
            if ex.pid is not None and not ex.reregistering:
                out.append(HandToExecutor(spec.framework_id, spec.executor_id, (spec.task_id,)))
        return out

    def _spawned(self, fid: str, tid: str, pid: int, now: float) -> list[Effect]:
        t = self.tasks.get((fid, tid))
        if t is None or t.terminal:
            return [SignalTask(fid, tid, "KILL")] if t is not None else []
        t.pid = pid
        t.started_at = now
        out: list[Effect] = []
        if t.spec.max_completion is not None and t.completion_deadline is None:
            t.completion_deadline = now + t.spec.max_completion
        if t.state in (S.TASK_STAGING, S.TASK_STARTING):
            self._move(t, S.TASK_RUNNING)
            note = f" ({t.launch_note})" if t.launch_note else ""
            out.append(EmitStatus(fid, tid, S.TASK_RUNNING, message=f"pid {pid}{note}", check_status=_no_check_yet(t.spec)))
            if t.spec.health is not None or t.spec.check is not None:
                out.append(self._start_checks(t, now))
        if t.kill_reason is not None:  # killed while launching: signal now
            out.extend(self._signal_kill(t, now))
        return out

    def _exited(self, fid: str, tid: str, code: int | None, message: str | None) -> list[Effect]:
        t = self.tasks.get((fid, tid))
        if t is None or t.terminal:
            return []
        t.exit_code = code
        if t.kill_reason is not None:
            state, reason = _KILL_OUTCOME[t.kill_reason]
            msg = t.kill_message or message or (
                f"Command terminated by the agent (exit status {code})" if code is not None else "Command killed"
            )
            return self._finish(t, state, reason, msg, "SOURCE_EXECUTOR")
        state, reason, msg = exit_outcome(code)
        return self._finish(t, state, reason, message or msg, "SOURCE_EXECUTOR")

    @staticmethod
    def _start_checks(t: TaskRecord, now: float) -> StartChecks:
        for policy in (t.spec.health, t.spec.check):
            if policy is None:
                continue
            if policy.health:
                t.health_state = HealthState(policy, now)
            else:
                t.check_state = CheckState(policy)
        return StartChecks(t.spec)

    def _finish(
        self, t: TaskRecord, state: TaskState, reason: str | None, message: str | None, source: str
    ) -> list[Effect]:
        self._move(t, state)
        t.kill_deadline = None
        t.started_at = t.health_state = t.check_state = None
        fid, tid = t.key
        if t.spec.pod:
            self._ended_pods.append(t)
        healthy = False if t.kill_reason is KillReason.HEALTH else None
        out: list[Effect] = [
            EmitStatus(fid, tid, state, source, reason, message, t.spec.executor_id, t.exit_code, healthy=healthy),
            ReleaseTask(fid, tid),
        ]
        return out

    def _move(self, t: TaskRecord, state: TaskState) -> None:
        check_transition(t.state, state)
        t.state = state

    # --- kill ------------------------------------------------------------------------------

    def _kill(
        self, t: TaskRecord, grace: float | None, reason: KillReason, now: float, message: str | None
    ) -> list[Effect]:
        fid, tid = t.key
        if t.kill_reason is not None:
            # Already being killed: a harder reason (a limitation) or a shorter grace may speed it
            # up; the first limitation found is the one reported.
            if reason in _LIMITATIONS and t.kill_reason not in _LIMITATIONS:
                t.kill_reason, t.kill_message = reason, message
            g = self._grace(t, grace)
            if t.pid is not None and t.kill_deadline is not None and now + g < t.kill_deadline:
                t.kill_deadline = now + g
            return self._tick(now)
        t.kill_reason = reason
        t.kill_message = message
        g = self._grace(t, grace)
        if t.spec.command is None:  # an executor task: the executor kills it
            assert t.spec.executor_id is not None
            ex = self.executors.get((fid, t.spec.executor_id))
            if ex is None or ex.pid is None:
                state, why = _KILL_OUTCOME[reason]
                return self._finish(t, state, why or "REASON_TASK_KILLED_DURING_LAUNCH", message or "Killed before the executor started", "SOURCE_AGENT")
            out: list[Effect] = []
            if t.spec.killing_state and t.state is not S.TASK_KILLING:
                self._move(t, S.TASK_KILLING)
                out.append(EmitStatus(fid, tid, S.TASK_KILLING, "SOURCE_AGENT", executor_id=t.spec.executor_id))
            out.append(KillViaExecutor(fid, t.spec.executor_id, tid, g))
            return out
        if t.fetching:  # nothing runs yet: stop the fetch, the task ends here
            t.fetching = False
            state, why = _KILL_OUTCOME[reason]
            return [
                CancelFetch(fid, tid),
                *self._finish(t, state, why or "REASON_TASK_KILLED_DURING_LAUNCH", message or "Killed while fetching its URIs", "SOURCE_AGENT"),
            ]
        if t.state in (S.TASK_STAGING, S.TASK_STARTING) and t.pid is None:
            # Not spawned yet: the spawn is in flight; kill it as soon as it is reported.
            t.kill_deadline = now + g
            return []
        out = []
        if t.spec.killing_state and t.state is not S.TASK_KILLING:
            self._move(t, S.TASK_KILLING)
            out.append(EmitStatus(fid, tid, S.TASK_KILLING, "SOURCE_EXECUTOR"))
        t.kill_deadline = now + g
        out.extend(self._signal_kill(t, now))
        return out

    def _grace(self, t: TaskRecord, grace: float | None) -> float:
        if grace is not None:
            return max(0.0, grace)
        if t.spec.grace is not None:
            return t.spec.grace
        return self.default_grace

    def _signal_kill(self, t: TaskRecord, now: float) -> list[Effect]:
        fid, tid = t.key
        if t.kill_deadline is None or t.kill_deadline <= now:
            t.hard_killed = True
            t.kill_deadline = None
            return [SignalTask(fid, tid, "KILL")]
        return [SignalTask(fid, tid, "TERM")]

    def _tick(self, now: float) -> list[Effect]:
        out: list[Effect] = []
        for t in list(self.tasks.values()):
            if (t.completion_deadline is not None and t.completion_deadline <= now and not t.terminal
                    and t.kill_reason is None):
                limit = t.spec.max_completion
                t.completion_deadline = None
                out.extend(self._kill(t, None, KillReason.MAX_COMPLETION, now,
                                      f"Task exceeded its max_completion_time of {limit:g} s"))
        for t in self.tasks.values():
            if t.terminal or t.kill_deadline is None or t.kill_deadline > now or t.pid is None:
                continue
            t.kill_deadline = None
            t.hard_killed = True
            out.append(SignalTask(t.spec.framework_id, t.spec.task_id, "KILL"))
        return out

    def _shutdown_framework(
        self, fid: str, grace: float | None, now: float, reason: KillReason = KillReason.SHUTDOWN
    ) -> list[Effect]:
        why = "Agent shut down by its operator" if reason is KillReason.AGENT_SHUTDOWN else "Framework shut down"
        out: list[Effect] = []
        for t in list(self.tasks.values()):
            if t.spec.framework_id == fid and not t.terminal and t.spec.command is not None:
                out.extend(self._kill(t, grace, reason, now, why))
        for ex in self.executors.values():
            if ex.framework_id == fid and not ex.terminated:
                for tid in ex.tasks:
                    et = self.tasks.get((fid, tid))
                    if et is not None and not et.terminal and et.kill_reason is None:
                        et.kill_reason, et.kill_message = reason, why
                out.append(ShutdownExecutorProcess(fid, ex.executor_id, self.default_grace if grace is None else grace))
        return out

    # --- executors -------------------------------------------------------------------------

    def _executor_status(self, fid: str, eid: str, tid: str, state: TaskState) -> list[Effect]:
        t = self.tasks.get((fid, tid))
        if t is None or t.spec.executor_id != eid:
            raise UnknownTask(f"executor {eid} reported task {tid} it does not run")
        if t.state is state and not is_terminal(state):
            return []
        self._move(t, state)  # raises IllegalTransition for a lying executor
        if is_terminal(state):
            t.kill_deadline = None
            t.started_at = None
            return [ReleaseTask(fid, tid)]
        return []

    def _executor_terminated(self, fid: str, eid: str, code: int | None, message: str | None) -> list[Effect]:
        ex = self.executors.get((fid, eid))
        if ex is None or ex.terminated:
            return []
        ex.terminated = True
        out: list[Effect] = []
        for tid in sorted(ex.tasks):
            t = self.tasks.get((fid, tid))
            if t is None or t.terminal:
                continue
            if t.kill_reason is not None:
                state, reason = _KILL_OUTCOME[t.kill_reason]
                out.extend(self._finish(t, state, reason, t.kill_message or "Executor terminated", "SOURCE_AGENT"))
            else:
                what = f"exit status {code}" if code is not None else "unknown exit status"
                out.extend(
                    self._finish(
                        t, S.TASK_FAILED, "REASON_EXECUTOR_TERMINATED", message or f"Executor terminated ({what})", "SOURCE_AGENT"
                    )
                )
        out.append(ExecutorGone(fid, eid, code if code is not None else -1))
        if not any(k[0] == fid and v.spec.executor_id == eid for k, v in self.tasks.items()):
            del self.executors[(fid, eid)]
        return out

    def _executor_reregistered(self, fid: str, eid: str, known: frozenset[str]) -> list[Effect]:
        """Back after an agent restart: its tasks are re-attached. A task still STAGING that the
        executor does not list never reached it (its LAUNCH was queued in the agent that died):
        it is handed over again."""
        ex = self.executors.get((fid, eid))
        if ex is None or ex.terminated or not ex.reregistering:
            return []
        ex.reregistering = False
        again = []
        for tid in sorted(ex.tasks):
            t = self.tasks.get((fid, tid))
            if t is not None and t.state is S.TASK_STAGING and tid not in known:
                again.append(tid)
        return [HandToExecutor(fid, eid, tuple(again))] if again else []

    def _executor_reregister_timeout(self, fid: str, eid: str, message: str) -> list[Effect]:
        """Not back in time: its tasks are LOST and its process is killed."""
        ex = self.executors.get((fid, eid))
        if ex is None or ex.terminated or not ex.reregistering:
            return []
        ex.reregistering = False
        ex.terminated = True
        out: list[Effect] = []
        for tid in sorted(ex.tasks):
            t = self.tasks.get((fid, tid))
            if t is not None and not t.terminal:
                out.extend(self._finish(t, S.TASK_LOST, "REASON_EXECUTOR_REREGISTRATION_TIMEOUT", message, "SOURCE_AGENT"))
        out.append(ShutdownExecutorProcess(fid, eid, 0.0))
        out.append(ExecutorGone(fid, eid, -1))
        return out

    # --- recovery --------------------------------------------------------------------------

    def _recovered(self, r: RecoveredTask, now: float) -> list[Effect]:
        spec = r.spec
        key = (spec.framework_id, spec.task_id)
        t = TaskRecord(spec, pid=r.pid, started_at=now)
        self.tasks[key] = t
        fid, tid = key
        if r.last_state is not None:
            t.state = r.last_state
        if t.terminal:
            return []  # its terminal update is in the log; the status-update manager resends it
        if spec.pod:
            assert spec.executor_id is not None
            self.pod_executors.add((fid, spec.executor_id))
        if spec.command is None:
            if r.alive and spec.executor_id is not None:
                # Its executor lives on: re-attached, awaiting its SUBSCRIBE (ExecutorReregistered,
                # or ExecutorReregisterTimeout: then LOST).
                ekey = (fid, spec.executor_id)
                ex = self.executors.get(ekey)
                if ex is None:
                    ex = self.executors[ekey] = ExecutorRecord(fid, spec.executor_id, pid=r.pid, reregistering=True)
                ex.tasks.add(tid)
                return []
            # Its executor is gone (or will not reconnect: the framework does not checkpoint).
            return self._finish(t, S.TASK_LOST, "REASON_AGENT_RESTARTED", "Agent restarted; executor task not recovered", "SOURCE_AGENT")
        if r.alive:
            out: list[Effect] = []
            if t.state in (S.TASK_STAGING, S.TASK_STARTING):
                self._move(t, S.TASK_RUNNING)
                out.append(EmitStatus(fid, tid, S.TASK_RUNNING, message=f"pid {r.pid} (recovered)"))
            if r.kill_reason is None and spec.max_completion is not None:
                t.completion_deadline = now + spec.max_completion  # the clock starts over
            if r.kill_reason is None and (spec.health is not None or spec.check is not None):
                out.append(self._start_checks(t, now))  # checking starts over (grace period included)
            if r.kill_reason is not None:
                # the kill's escalation timer died with the agent: resume it (SIGTERM again,
                # SIGKILL when the original deadline comes)
                grace = None if r.kill_deadline is None else max(0.0, r.kill_deadline - now)
                out.extend(self._kill(t, grace, r.kill_reason, now, None))
            return out
        t.kill_reason = r.kill_reason
        if not r.spawned:
            return self._finish(
                t, S.TASK_LOST, "REASON_AGENT_RESTARTED", "Agent restarted before the task was launched", "SOURCE_AGENT"
            )
        if r.exit_code is not None:
            return self._exited(fid, tid, r.exit_code, None)
        return self._finish(
            t, S.TASK_LOST, "REASON_AGENT_RESTARTED", "Task ended while the agent was down; exit status unknown", "SOURCE_AGENT"
        )

    def recovered_broken(self, spec: TaskSpec, message: str) -> list[Effect]:
        """A task whose checkpoint is corrupt: report it LOST (non-strict recovery)."""
        t = TaskRecord(spec)
        self.tasks[(spec.framework_id, spec.task_id)] = t
        self.ephemeral.add((spec.framework_id, spec.task_id))
        return self._finish(t, S.TASK_LOST, "REASON_AGENT_RESTARTED", message, "SOURCE_AGENT")


class UnknownTask(LookupError):
    pass


def keys(records: Iterable[TaskRecord]) -> list[TaskKey]:
    return [r.key for r in records]


def _no_check_yet(spec: TaskSpec) -> CheckStatusInfo | None:
    """The first TASK_RUNNING of a task with a general check carries the check's type and no
    result yet, as in Mesos."""
    if spec.check is None:
        return None
    return CheckStatusInfo(type=CheckType(spec.check.probe.kind))


def _check_status(policy: Policy, outcome: Outcome) -> CheckStatusInfo:
    """A general check's result as Mesos reports it (``TaskStatus.check_status``)."""
    kind = policy.probe.kind
    return CheckStatusInfo(
        type=CheckType(kind),
        command=CheckStatusCommand(outcome.value) if kind == "COMMAND" else None,
        http=CheckStatusHttp(outcome.value) if kind == "HTTP" else None,
        tcp=CheckStatusTcp(None if outcome.value is None else bool(outcome.value)) if kind == "TCP" else None,
    )
