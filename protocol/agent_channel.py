"""The internal master <-> agent channel (not Mesos-compatible).

Transport: the agent opens one WebSocket to the master at ``GET /api/v1/agent``. Every WebSocket
message is a *binary* frame holding one msgpack-encoded ``Frame`` (``protocol.codec``), which
carries a batch of ``AgentMessage`` envelopes, so many launches, kills, acknowledgements or
status updates travel in one frame. Frames are capped at ``MAX_FRAME_BYTES``.

Conversation:
1. agent -> ``REGISTER`` (first message; ``agent_id`` unset on a first registration, set on a
   re-registration after an agent or master restart, together with the tasks it runs).
2. master -> ``REGISTERED`` (the agent id, the master's fencing ``epoch`` and ping timing) or
   ``REFUSED`` (with a reason; the master then closes the socket).
3. Either side sends batches afterwards. The master sends ``PING`` every ``ping_interval``;
   the agent answers ``PONG`` with the same ``seq``. Missing ``ping_timeout`` worth of pongs
   makes the master mark the agent unreachable; an agent that hears no ping for that long
   reconnects (with jittered backoff) and re-registers.
4. Status updates are reliable: the agent checkpoints an update, sends ``STATUS_UPDATE`` and
   resends it until the master forwards the framework's ``ACKNOWLEDGE`` (matched by ``uuid``).

Every master -> agent ``Frame`` carries the master's ``epoch``; an agent drops frames whose
epoch is lower than the highest it has registered with (a deposed master).
"""

from __future__ import annotations

import enum
import typing
from collections.abc import Sequence
from typing import Any

import attrs

from protocol import codec
from protocol.mesos import ExecutorInfo, FrameworkInfo, TaskInfo, TaskStatus
from protocol.mesos_common import (
    AgentID,
    Attribute,
    ExecutorID,
    FrameworkID,
    Resource,
    TaskID,
)
from protocol.task_states import TaskState

MAX_FRAME_BYTES = 4 * 1024 * 1024
PATH = "/api/v1/agent"


class MessageType(enum.Enum):
    # agent -> master
    REGISTER = "REGISTER"
    STATUS_UPDATE = "STATUS_UPDATE"
    SLACK_ESTIMATE = "SLACK_ESTIMATE"
    USAGE_REPORT = "USAGE_REPORT"
    EXECUTOR_MESSAGE = "EXECUTOR_MESSAGE"
    EXECUTOR_EXITED = "EXECUTOR_EXITED"
    PONG = "PONG"
    UNREGISTER = "UNREGISTER"
    # master -> agent
    REGISTERED = "REGISTERED"
    REFUSED = "REFUSED"
    RUN_TASKS = "RUN_TASKS"
    KILL_TASK = "KILL_TASK"
    ACKNOWLEDGE = "ACKNOWLEDGE"
    REVOKE = "REVOKE"
    SHUTDOWN_FRAMEWORK = "SHUTDOWN_FRAMEWORK"
    SHUTDOWN_EXECUTOR = "SHUTDOWN_EXECUTOR"
    FRAMEWORK_MESSAGE = "FRAMEWORK_MESSAGE"
    PING = "PING"


# --- agent -> master ------------------------------------------------------------------------


@attrs.frozen
class RunningTask:
    """A task the agent knows about, reported on re-registration."""

    framework_id: FrameworkID
    task_id: TaskID
    state: TaskState
    resources: tuple[Resource, ...] = ()
    executor_id: ExecutorID | None = None
    name: str | None = None
    # The latest status the agent holds for the task (acknowledged or not).
    status: TaskStatus | None = None


@attrs.frozen
class Register:
    hostname: str
    port: int  # the agent's HTTP port (sandbox files, /state, executor API)
    resources: tuple[Resource, ...] = ()  # optional on the wire: an empty tuple is omitted
    agent_id: AgentID | None = None  # set when re-registering
    attributes: tuple[Attribute, ...] = ()
    version: str = "0.1.0"
    isolation: str = "psutil"  # "cgroups-v2" | "psutil"
    boot_id: str | None = None
    tasks: tuple[RunningTask, ...] = ()
    frameworks: tuple[FrameworkInfo, ...] = ()  # infos of frameworks with tasks here
    capabilities: tuple[str, ...] = ()


# An agent capability (``Register.capabilities``): its HTTP API (sandbox files, executor API) is
# served over TLS, so the master advertises ``https`` agent URLs (offers, web UI).
AGENT_HTTPS = "HTTPS"


@attrs.frozen
class StatusUpdateMsg:
    framework_id: FrameworkID
    status: TaskStatus  # carries uuid (16 bytes), agent_id, executor_id
    latest_state: TaskState | None = None  # the newest state the agent knows, if later than status


@attrs.frozen
class SlackEstimate:
    """The agent's current revocable (oversubscribable) resources; sent only when it changes."""

    resources: tuple[Resource, ...] = ()


@attrs.frozen
class TaskUsageEntry:
    """One task's figures (``protocol.usage.TaskUsage``; disk -1: not measured)."""

    framework_id: FrameworkID
    task_id: TaskID
    cpu_seconds: float
    mem_rss_bytes: int
    mem_peak_bytes: int
    disk_used_bytes: int = -1
    timestamp: float = 0.0


@attrs.frozen
class UsageReport:
    """What the agent's running tasks use, sent every ``--usage-report-interval`` with only the
    tasks whose figures changed since the last report (the final figures ride on each terminal
    status update as labels, see ``protocol.usage``)."""

    tasks: tuple[TaskUsageEntry, ...] = ()


@attrs.frozen
class ExecutorMessageMsg:
    framework_id: FrameworkID
    executor_id: ExecutorID
    data: bytes


@attrs.frozen
class ExecutorExited:
    framework_id: FrameworkID
    executor_id: ExecutorID
    status: int


@attrs.frozen
class Pong:
    seq: int


@attrs.frozen
class Unregister:
    """The agent is retiring (``SIGUSR1``): it kills its tasks, refuses new launches and exits;
    the master stops offering its resources at once (the agent stays registered until it goes)."""

    reason: str = "agent is retiring"


# --- master -> agent ------------------------------------------------------------------------


@attrs.frozen
class Registered:
    agent_id: AgentID
    master_id: str
    epoch: int
    ping_interval: float
    ping_timeout: float


@attrs.frozen
class Refused:
    message: str


@attrs.frozen
class RunTasks:
    """Launch ``tasks`` for a framework. ``group`` means LAUNCH_GROUP: start them together under
    ``executor`` (a task group; all or none). A task with its own ``TaskInfo.executor`` of type
    CUSTOM runs under that executor; otherwise the agent's command executor runs it."""

    framework_id: FrameworkID
    framework_info: FrameworkInfo
    tasks: tuple[TaskInfo, ...]
    executor: ExecutorInfo | None = None
    group: bool = False


@attrs.frozen
class KillTask:
    framework_id: FrameworkID
    task_id: TaskID
    grace_seconds: float | None = None  # from the KillPolicy; None = the agent's default
    # a TaskStatus reason for the terminal update (Mesos name, e.g. REASON_AGENT_DRAINING);
    # None = the framework asked (TASK_KILLED without a reason)
    reason: str | None = None


@attrs.frozen
class AcknowledgeMsg:
    framework_id: FrameworkID
    task_id: TaskID
    uuid: bytes


@attrs.frozen
class Revoke:
    """Evict revocable tasks after ``grace_seconds``; reported with REASON_CONTAINER_PREEMPTED."""

    framework_id: FrameworkID
    task_ids: tuple[TaskID, ...]
    grace_seconds: float
    reason: str = ""


@attrs.frozen
class ShutdownFramework:
    framework_id: FrameworkID


@attrs.frozen
class ShutdownExecutor:
    framework_id: FrameworkID
    executor_id: ExecutorID


@attrs.frozen
class FrameworkMessageMsg:
    framework_id: FrameworkID
    executor_id: ExecutorID
    data: bytes


@attrs.frozen
class Ping:
    seq: int


# --- envelope and frame ---------------------------------------------------------------------


@attrs.frozen
class AgentMessage:
    type: MessageType
    register: Register | None = None
    status_update: StatusUpdateMsg | None = None
    slack_estimate: SlackEstimate | None = None
    usage_report: UsageReport | None = None
    executor_message: ExecutorMessageMsg | None = None
    executor_exited: ExecutorExited | None = None
    pong: Pong | None = None
    unregister: Unregister | None = None
    registered: Registered | None = None
    refused: Refused | None = None
    run_tasks: RunTasks | None = None
    kill_task: KillTask | None = None
    acknowledge: AcknowledgeMsg | None = None
    revoke: Revoke | None = None
    shutdown_framework: ShutdownFramework | None = None
    shutdown_executor: ShutdownExecutor | None = None
    framework_message: FrameworkMessageMsg | None = None
    ping: Ping | None = None

    def body(self) -> object:
        """The body object named by ``type`` (``None`` only for a malformed envelope)."""
        return getattr(self, self.type.value.lower())


Body = (
    Register
    | StatusUpdateMsg
    | SlackEstimate
    | UsageReport
    | ExecutorMessageMsg
    | ExecutorExited
    | Pong
    | Unregister
    | Registered
    | Refused
    | RunTasks
    | KillTask
    | AcknowledgeMsg
    | Revoke
    | ShutdownFramework
    | ShutdownExecutor
    | FrameworkMessageMsg
    | Ping
)

_TYPE_OF: dict[type, MessageType] = {
    Register: MessageType.REGISTER,
    StatusUpdateMsg: MessageType.STATUS_UPDATE,
    SlackEstimate: MessageType.SLACK_ESTIMATE,
    UsageReport: MessageType.USAGE_REPORT,
    ExecutorMessageMsg: MessageType.EXECUTOR_MESSAGE,
    ExecutorExited: MessageType.EXECUTOR_EXITED,
    Pong: MessageType.PONG,
    Unregister: MessageType.UNREGISTER,
    Registered: MessageType.REGISTERED,
    Refused: MessageType.REFUSED,
    RunTasks: MessageType.RUN_TASKS,
    KillTask: MessageType.KILL_TASK,
    AcknowledgeMsg: MessageType.ACKNOWLEDGE,
    Revoke: MessageType.REVOKE,
    ShutdownFramework: MessageType.SHUTDOWN_FRAMEWORK,
    ShutdownExecutor: MessageType.SHUTDOWN_EXECUTOR,
    FrameworkMessageMsg: MessageType.FRAMEWORK_MESSAGE,
    Ping: MessageType.PING,
}


def envelope(body: Body) -> AgentMessage:
    """Wrap a body in its envelope: ``envelope(Ping(seq=1))``."""
    t = _TYPE_OF[type(body)]
    fields: dict[str, Any] = {t.value.lower(): body}
    return AgentMessage(type=t, **fields)


@attrs.frozen
class Frame:
    messages: tuple[AgentMessage, ...]
    epoch: int = 0  # the master's fencing epoch on master -> agent frames


def frame(*bodies: Body, epoch: int = 0) -> Frame:
    return Frame(messages=tuple(envelope(b) for b in bodies), epoch=epoch)


# --- the hot path: frames without envelope objects --------------------------------------------
#
# A frame of status updates or acknowledgements is most of what crosses the channel; building
# and decoding an ``AgentMessage`` envelope (17 fields) per message cost as much as its body.
# These two functions give exactly what the codec gives for ``Frame`` -- the same bytes, the
# same bodies, the same errors -- without the envelopes.

_KEY_OF: dict[type, tuple[str, str]] = {cls: (t.value, t.value.lower()) for cls, t in _TYPE_OF.items()}
_BODY_OF: dict[str, tuple[str, type]] = {t.value: (t.value.lower(), cls) for cls, t in _TYPE_OF.items()}
_BODY_DEPTH = 3  # Frame -> messages -> AgentMessage -> body


def encode_frame(bodies: Sequence[Body], epoch: int = 0) -> bytes:
    """``codec.encode_msgpack(frame(*bodies, epoch=epoch))``, byte for byte."""
    to = codec.to_builtins
    messages = []
    for b in bodies:
        name, key = _KEY_OF[type(b)]
        messages.append({"type": name, key: to(b, True)})
    out: dict[str, Any] = {"messages": messages} if messages else {}
    out["epoch"] = epoch
    try:
        return codec.packb(out)
    except (TypeError, ValueError, OverflowError) as e:
        raise codec.EncodeError(f"cannot encode Frame as msgpack: {e}") from e


def decode_frame(
    data: bytes | bytearray | memoryview, limits: codec.Limits = codec.DEFAULT_LIMITS
) -> tuple[int, list[Body | None]]:
    """``(epoch, bodies)`` of a msgpack ``Frame``: what ``codec.decode_msgpack(Frame, data)``
    gives as ``(frame.epoch, [m.body() for m in frame.messages])``, and the same DecodeError.
    Well-formed envelopes (``type`` and its body) take a short path; anything else is decoded
    the generic way."""
    raw = codec.unpack_fast(data, limits)
    if raw is not codec.UNPACK_FAILED:
        try:
            return _decode_raw(raw, limits)
        except codec.DecodeError:
            pass  # decided again from the strict unpacker's value (``codec.unpack_fast``)
    return _decode_raw(codec.unpack_msgpack(data, limits), limits)


def _decode_raw(raw: Any, limits: codec.Limits) -> tuple[int, list[Body | None]]:
    fast = _decode_fast(raw, limits)
    if fast is not None:
        return fast
    f = codec.from_builtins(Frame, raw, True, limits)
    return f.epoch, [typing.cast("Body | None", m.body()) for m in f.messages]


def _decode_fast(raw: Any, limits: codec.Limits) -> tuple[int, list[Body | None]] | None:
    if raw.__class__ is not dict or not raw.keys() <= {"messages", "epoch"}:
        return None
    epoch = raw.get("epoch")
    if epoch is None:
        epoch = 0
    elif epoch.__class__ is not int or not 0 <= epoch <= 0xFFFFFFFFFFFFFFFF:
        return None
    msgs = raw.get("messages")
    if msgs is None:  # an empty frame: the encoder omits the (repeated) field
        return epoch, []
    if msgs.__class__ is not list or len(msgs) > limits.max_list_len or limits.max_depth < 4:
        return None
    out: list[Body | None] = []
    decode = codec.from_builtins
    for m in msgs:
        if m.__class__ is not dict or len(m) != 2:
            return None
        t = m.get("type")
        spec = _BODY_OF.get(t) if isinstance(t, str) else None
        if spec is None:
            return None
        value = m.get(spec[0])
        if value is None:
            return None
        try:
            out.append(decode(spec[1], value, True, limits, depth=_BODY_DEPTH))
        except codec.DecodeError:
            return None  # the generic path raises it with the full field path
    return epoch, out
