"""The Mesos v1 executor HTTP API (``POST /api/v1/executor``) for CUSTOM executors.

Compatible with pymesos 0.3.15's ``MesosExecutorDriver``:

- The agent calls :meth:`ExecutorAPI.register_executor` before it starts an executor process,
  with the environment from :func:`executor_environment` (no ``MESOS_CHECKPOINT=0``: pymesos
  reads any non-empty value as true). The process should run in its own session/process group
  (pymesos ends with ``killpg(0, SIGKILL)`` after SHUTDOWN).
- The executor's SUBSCRIBE gets ``200``, ``Content-Type: application/json``, a chunked RecordIO
  stream of compact ASCII JSON events that starts with SUBSCRIBED ``{executor_info,
  framework_info, agent_info, container_id}``, then whatever was queued for it (LAUNCH,
  LAUNCH_GROUP, KILL, ACKNOWLEDGED, MESSAGE, SHUTDOWN — in order), then HEARTBEATs every
  ``heartbeat_interval`` seconds. No ``Mesos-Stream-Id`` header (as Mesos' agent).
  A new SUBSCRIBE from the same executor replaces the old stream. Queued LAUNCHes of tasks the
  executor lists in ``unacknowledged_tasks`` are not re-sent (pymesos asserts on a duplicate);
  its ``unacknowledged_updates`` are handed to the host again (the host dedups by uuid).
- UPDATE, MESSAGE, HEARTBEAT answer ``202``. UPDATE's status gets ``executor_id`` and
  ``agent_id`` filled in (pymesos sends neither; every UPDATE with a uuid must carry
  ``agent_id``), ``source`` SOURCE_EXECUTOR, and a timestamp if missing, before
  :meth:`ExecutorHost.on_executor_update` sees it.
- Bad calls answer 400 with a one-line reason (undecodable JSON, a structural error, a missing
  uuid, TASK_STAGING from an executor, an executor the agent did not register); a media type
  other than JSON 415; a SUBSCRIBE that cannot accept JSON 406; after :meth:`close` 503, and
  from an executor not registered (yet) while ``recovering`` is set, 503 (pymesos then
  subscribes again: the agent may be about to re-attach it).

Task ownership, status-update reliability and process management belong to the host (the
agent's service); this module only speaks the protocol. One exception keeps Mesos semantics
simple for the host: killing a task whose LAUNCH (or LAUNCH_GROUP) has not been delivered yet
drops it from the queue and reports TASK_KILLED (SOURCE_AGENT, REASON_TASK_KILLED_DURING_LAUNCH,
a fresh uuid) for it — for every task of the group — through ``on_executor_update``.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import uuid
from collections.abc import Callable, Sequence
from typing import Protocol

import attrs
from aiohttp import web

from protocol import httputil, recordio
from protocol.clock import Clock, SystemClock
from protocol.codec import JSON, encode_json
from protocol.httputil import decode_body
from protocol.mesos import (
    AgentInfo,
    ContainerID,
    DurationInfo,
    ExecutorCall,
    ExecutorCallType,
    ExecutorEvent,
    ExecutorEventType,
    ExecutorID,
    ExecutorInfo,
    FrameworkInfo,
    KillPolicy,
    Reason,
    Source,
    TaskID,
    TaskInfo,
    TaskStatus,
    validate_executor_call,
)
from protocol.task_states import TaskState

log = logging.getLogger(__name__)

__all__ = [
    "ExecutorAPI",
    "ExecutorAPIError",
    "ExecutorHost",
    "UnknownExecutor",
    "executor_environment",
    "format_duration",
]

PATH = "/api/v1/executor"


class ExecutorAPIError(Exception):
    """Misuse of the ExecutorAPI by the agent (not by an executor: those get HTTP errors)."""


class UnknownExecutor(ExecutorAPIError, LookupError):
    """No executor registered under this (framework id, executor id)."""


class ExecutorHost(Protocol):
    """What the agent's service implements to hear from its executors."""

    def on_executor_update(self, framework_id: str, executor_id: str, status: TaskStatus) -> None: ...

    def on_executor_message(self, framework_id: str, executor_id: str, data: bytes) -> None: ...

    def on_executor_subscribed(self, framework_id: str, executor_id: str) -> None: ...

    def on_executor_disconnected(self, framework_id: str, executor_id: str) -> None: ...


# --- environment ------------------------------------------------------------------------------

_UNITS: tuple[tuple[str, float], ...] = (
    ("weeks", 7 * 86400.0),
    ("days", 86400.0),
    ("hrs", 3600.0),
    ("mins", 60.0),
    ("secs", 1.0),
    ("ms", 1e-3),
    ("us", 1e-6),
    ("ns", 1e-9),
)


def format_duration(seconds: float) -> str:
    """A stout duration string (``5secs``, ``1.5mins``, ``250ms``) that pymesos parses back."""
    if seconds < 0 or seconds != seconds:
        raise ValueError(f"duration must be >= 0 seconds, got {seconds!r}")
    for name, unit in _UNITS:
        if seconds >= unit:
            return f"{seconds / unit:g}{name}"
    return "0ns"


def executor_environment(
    framework_id: str,
    executor_id: str,
    agent_id: str,
    sandbox: str,
    agent_endpoint: str,
    checkpoint: bool,
    shutdown_grace_seconds: float = 5.0,
) -> dict[str, str]:
    """The environment a CUSTOM executor gets (Mesos ``executorEnvironment``).

    ``agent_endpoint`` is ``ip:port`` of the agent's HTTP server (IPv4 or a host name: pymesos
    splits on ``:``). ``MESOS_CHECKPOINT`` is set to ``"1"`` only when checkpointing and left out
    otherwise — never ``"0"``, which pymesos would read as true.
    """
    if not framework_id or not executor_id:
        raise ValueError("framework_id and executor_id must be non-empty")
    if agent_endpoint.count(":") != 1:
        raise ValueError(f"agent_endpoint must be 'host:port', got {agent_endpoint!r}")
    env = {
        "MESOS_FRAMEWORK_ID": framework_id,
        "MESOS_EXECUTOR_ID": executor_id,
        "MESOS_DIRECTORY": sandbox,
        "MESOS_SANDBOX": sandbox,
        "MESOS_SLAVE_ID": agent_id,
        "MESOS_AGENT_ENDPOINT": agent_endpoint,
        "MESOS_SLAVE_PID": f"slave(1)@{agent_endpoint}",
        "MESOS_HTTP_COMMAND_EXECUTOR": "0",
        "MESOS_EXECUTOR_SHUTDOWN_GRACE_PERIOD": format_duration(shutdown_grace_seconds),
    }
    if checkpoint:
        env["MESOS_CHECKPOINT"] = "1"
        env["MESOS_RECOVERY_TIMEOUT"] = "15mins"
        env["MESOS_SUBSCRIPTION_BACKOFF_MAX"] = "2secs"
    return env


# --- per-executor state -----------------------------------------------------------------------


@attrs.define
class _Executor:
    framework_info: FrameworkInfo
    executor_info: ExecutorInfo
    container_id: str
    pending: collections.deque[ExecutorEvent] = attrs.field(factory=collections.deque)
    wakeup: asyncio.Event = attrs.field(factory=asyncio.Event)
    generation: int = 0  # of the current SUBSCRIBE stream; bumped by every new one
    subscribed: bool = False
    shutting_down: bool = False
    reported_tasks: frozenset[str] = frozenset()  # unacknowledged_tasks of its last SUBSCRIBE


def _task_id(task_id: str | TaskID) -> TaskID:
    return task_id if isinstance(task_id, TaskID) else TaskID(task_id)


def _text(status: int, message: str) -> web.Response:
    return web.Response(status=status, text=message + "\n")


class ExecutorAPI:
    """Serves ``POST /api/v1/executor`` and queues events for the executors the agent runs."""

    def __init__(
        self,
        host: ExecutorHost,
        agent_info_provider: Callable[[], AgentInfo],
        *,
        clock: Clock | None = None,
        heartbeat_interval: float = 30.0,
        liveness_check: float = 1.0,
    ) -> None:
        self._host = host
        self._agent_info = agent_info_provider
        self._clock: Clock = clock or SystemClock()
        self.heartbeat_interval = heartbeat_interval
        self.liveness_check = liveness_check
        self._executors: dict[tuple[str, str], _Executor] = {}
        # Set by the agent while it recovers: a call from an executor not (yet) registered gets
        # 503 (subscribe again) instead of 400, as it may be one the recovery re-attaches.
        self.recovering = False
        self._closed = False
        self._streams: set[asyncio.Task[object]] = set()

    # --- the agent's side -----------------------------------------------------------------------

    def routes(self) -> list[web.RouteDef]:
        return [web.post(PATH, self._handle)]

    def register_executor(
        self, framework_info: FrameworkInfo, executor_info: ExecutorInfo, *, container_id: str | None = None
    ) -> None:
        """Make an executor known before its process starts (again after recovery: infos replaced,
        queue kept)."""
        if framework_info.id is None or not framework_info.id.value:
            raise ExecutorAPIError("framework_info.id must be set before registering an executor")
        fid = framework_info.id.value
        eid = executor_info.executor_id.value
        if executor_info.framework_id is None:
            executor_info = attrs.evolve(executor_info, framework_id=framework_info.id)
        ex = self._executors.get((fid, eid))
        if ex is None:
            self._executors[(fid, eid)] = _Executor(
                framework_info, executor_info, container_id or str(uuid.uuid4())
            )
        else:
            ex.framework_info = framework_info
            ex.executor_info = executor_info
            if container_id:
                ex.container_id = container_id

    def unregister_executor(self, framework_id: str, executor_id: str) -> None:
        """Forget an executor (its process is gone); ends its stream if one is open."""
        ex = self._executors.pop((framework_id, executor_id), None)
        if ex is not None:
            ex.generation += 1
            ex.wakeup.set()

    def registered(self, framework_id: str, executor_id: str) -> bool:
        return (framework_id, executor_id) in self._executors

    def subscribed(self, framework_id: str, executor_id: str) -> bool:
        ex = self._executors.get((framework_id, executor_id))
        return ex is not None and ex.subscribed

    def reported_tasks(self, framework_id: str, executor_id: str) -> frozenset[str]:
        """The task ids the executor listed as launched but unacknowledged in its last SUBSCRIBE
        (after an agent restart: the tasks it has, whose LAUNCH must not be sent again)."""
        ex = self._executors.get((framework_id, executor_id))
        return ex.reported_tasks if ex is not None else frozenset()

    async def launch(self, framework_id: str, executor_id: str, task: TaskInfo) -> None:
        ex = self._live(framework_id, executor_id)
        self._enqueue(ex, ExecutorEvent.make_launch(task))

    async def launch_group(self, framework_id: str, executor_id: str, tasks: Sequence[TaskInfo]) -> None:
        ex = self._live(framework_id, executor_id)
        if not tasks:
            raise ExecutorAPIError("a task group needs at least one task")
        self._enqueue(ex, ExecutorEvent.make_launch_group(tuple(tasks)))

    async def kill(
        self, framework_id: str, executor_id: str, task_id: str | TaskID, grace_seconds: float | None
    ) -> None:
        ex = self._get(framework_id, executor_id)
        tid = _task_id(task_id)
        if self._drop_undelivered_launch(framework_id, executor_id, ex, tid):
            return
        policy = None
        if grace_seconds is not None:
            policy = KillPolicy(grace_period=DurationInfo(nanoseconds=int(max(0.0, grace_seconds) * 1e9)))
        self._enqueue(ex, ExecutorEvent.make_kill(tid, policy))

    async def acknowledged(
        self, framework_id: str, executor_id: str, task_id: str | TaskID, uuid: bytes
    ) -> None:
        ex = self._get(framework_id, executor_id)
        self._enqueue(ex, ExecutorEvent.make_acknowledged(_task_id(task_id), bytes(uuid)))

    async def message(self, framework_id: str, executor_id: str, data: bytes) -> None:
        ex = self._get(framework_id, executor_id)
        self._enqueue(ex, ExecutorEvent.make_message(bytes(data)))

    async def shutdown(self, framework_id: str, executor_id: str) -> None:
        """Ask the executor to shut down: undelivered LAUNCH/LAUNCH_GROUP/KILL are dropped and
        SHUTDOWN is sent (now, or right after SUBSCRIBED if it has not subscribed yet). Further
        launches are refused. The host kills the process after the grace period if need be."""
        ex = self._executors.get((framework_id, executor_id))
        if ex is None or ex.shutting_down:
            return
        ex.shutting_down = True
        keep = (ExecutorEventType.ACKNOWLEDGED, ExecutorEventType.MESSAGE)
        ex.pending = collections.deque(e for e in ex.pending if e.type in keep)
        self._enqueue(ex, ExecutorEvent.make_shutdown())

    async def close(self) -> None:
        """End every stream and refuse new calls (503). Idempotent."""
        self._closed = True
        for ex in self._executors.values():
            ex.generation += 1
            ex.wakeup.set()
        streams = list(self._streams)
        if streams:
            await asyncio.wait(streams, timeout=5.0)

    # --- internals --------------------------------------------------------------------------------

    def _get(self, framework_id: str, executor_id: str) -> _Executor:
        ex = self._executors.get((framework_id, executor_id))
        if ex is None:
            raise UnknownExecutor(f"no executor {executor_id!r} of framework {framework_id!r} is registered")
        return ex

    def _live(self, framework_id: str, executor_id: str) -> _Executor:
        ex = self._get(framework_id, executor_id)
        if ex.shutting_down:
            raise ExecutorAPIError(f"executor {executor_id!r} of framework {framework_id!r} is shutting down")
        return ex

    def _enqueue(self, ex: _Executor, event: ExecutorEvent) -> None:
        ex.pending.append(event)
        ex.wakeup.set()

    def _drop_undelivered_launch(self, fid: str, eid: str, ex: _Executor, tid: TaskID) -> bool:
        for event in list(ex.pending):
            tasks: tuple[TaskInfo, ...] = ()
            if event.launch is not None:
                tasks = (event.launch.task,)
            elif event.launch_group is not None:
                tasks = event.launch_group.task_group.tasks
            if any(t.task_id == tid for t in tasks):
                ex.pending.remove(event)
                for t in tasks:
                    self._report_killed_during_launch(fid, eid, t.task_id)
                return True
        return False

    def _report_killed_during_launch(self, fid: str, eid: str, tid: TaskID) -> None:
        status = TaskStatus(
            task_id=tid,
            state=TaskState.TASK_KILLED,
            message="killed before the executor received the task",
            source=Source.SOURCE_AGENT,
            reason=Reason.REASON_TASK_KILLED_DURING_LAUNCH,
            agent_id=self._agent_info().id,
            executor_id=ExecutorID(eid),
            timestamp=self._clock.now(),
            uuid=uuid.uuid4().bytes,
        )
        self._host.on_executor_update(fid, eid, status)

    # --- HTTP -------------------------------------------------------------------------------------

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        if self._closed:
            return _text(503, "agent is shutting down")
        ctype = request.headers.get("Content-Type", "").split(";")[0].strip().lower()
        if ctype != JSON:
            return _text(415, f"expecting 'Content-Type: {JSON}' (got {ctype or 'none'!r})")
        body = await request.read()
        decoded, err = decode_body(ExecutorCall, body, JSON, "executor::Call")
        if decoded is None:
            return _text(400, err)
        call = decoded
        problem = validate_executor_call(call)
        if problem is not None:
            return _text(400, f"invalid executor call: {problem}")
        fid, eid = call.framework_id.value, call.executor_id.value
        ex = self._executors.get((fid, eid))
        if ex is None:
            if self.recovering:
                return _text(503, "the agent is recovering; subscribe again")
            return _text(400, f"executor {eid!r} of framework {fid!r} is not known to this agent")
        if call.type is ExecutorCallType.SUBSCRIBE:
            accept = request.headers.get("Accept", "*/*")
            if not any(a.split(";")[0].strip() in (JSON, "*/*", "application/*") for a in accept.split(",")):
                return _text(406, f"expecting 'Accept' to allow {JSON}")
            return await self._subscribe(request, fid, eid, ex, call)
        if call.type is ExecutorCallType.UPDATE:
            assert call.update is not None
            status = call.update.status
            if status.uuid is None:
                return _text(400, "invalid executor call: Expecting 'uuid' to be present")
            if status.state is TaskState.TASK_STAGING:
                return _text(400, "invalid executor call: TASK_STAGING is not a state an executor reports")
            if not self._notify("update", self._forward_update, fid, eid, status):
                return _text(500, "the agent failed to record the update; send it again")
            return web.Response(status=202)
        if call.type is ExecutorCallType.MESSAGE:
            assert call.message is not None
            if not self._notify("message", self._host.on_executor_message, fid, eid, call.message.data):
                return _text(500, "the agent failed to handle the message")
            return web.Response(status=202)
        return web.Response(status=202)  # HEARTBEAT

    def _notify(self, what: str, fn: Callable[..., None], *args: object) -> bool:
        """Call into the host; a host exception is a bug: logged with its stimulus, never fatal here."""
        try:
            fn(*args)
        except Exception:
            log.exception("executor API: host failed on %s %r", what, args)
            return False
        return True

    def _forward_update(self, fid: str, eid: str, status: TaskStatus) -> None:
        status = attrs.evolve(
            status,
            executor_id=ExecutorID(eid),
            agent_id=self._agent_info().id or status.agent_id,
            source=Source.SOURCE_EXECUTOR,
            timestamp=status.timestamp if status.timestamp is not None else self._clock.now(),
        )
        self._host.on_executor_update(fid, eid, status)

    async def _subscribe(
        self, request: web.Request, fid: str, eid: str, ex: _Executor, call: ExecutorCall
    ) -> web.StreamResponse:
        task = asyncio.current_task()
        if task is not None:
            self._streams.add(task)
        try:
            return await self._stream(request, fid, eid, ex, call)
        finally:
            if task is not None:
                self._streams.discard(task)

    async def _stream(
        self, request: web.Request, fid: str, eid: str, ex: _Executor, call: ExecutorCall
    ) -> web.StreamResponse:
        ex.generation += 1
        gen = ex.generation
        ex.wakeup.set()  # an older stream of this executor notices it has been replaced
        sub = call.subscribe
        if sub is not None:
            ex.reported_tasks = frozenset(t.task_id.value for t in sub.unacknowledged_tasks)
            self._drop_known_launches(ex, {t.task_id for t in sub.unacknowledged_tasks})
            for upd in sub.unacknowledged_updates:
                if upd.status.uuid is not None:
                    self._notify("update", self._forward_update, fid, eid, upd.status)

        resp = web.StreamResponse(status=200, headers={"Content-Type": JSON})
        out = await httputil.RecordChunks.open(resp, request)  # one record per HTTP chunk, as Mesos
        subscribed = ExecutorEvent.make_subscribed(
            ex.executor_info, ex.framework_info, self._agent_info(), ContainerID(ex.container_id)
        )
        if not await self._write(out, subscribed):
            return resp
        ex.subscribed = True
        log.info("executor %s of framework %s subscribed", eid, fid)
        self._notify("subscribed", self._host.on_executor_subscribed, fid, eid)
        try:
            await self._pump(request, out, ex, gen)
        finally:
            if ex.generation == gen or self._closed:
                ex.subscribed = False
                log.info("executor %s of framework %s disconnected", eid, fid)
                self._notify("disconnected", self._host.on_executor_disconnected, fid, eid)
        await out.close()
        if self._closed and request.transport is not None:
            request.transport.close()  # the agent stops: the executor reconnects to the next one
        return resp

    async def _pump(self, request: web.Request, out: httputil.RecordChunks, ex: _Executor, gen: int) -> None:
        loop = asyncio.get_running_loop()
        next_heartbeat = loop.time()  # a HEARTBEAT right after SUBSCRIBED
        while ex.generation == gen and not self._closed:
            ex.wakeup.clear()
            while ex.pending and ex.generation == gen:
                # Taken off the queue before the write, so a concurrent kill() of a task whose
                # LAUNCH is being written sends KILL instead of reporting "killed during launch".
                event = ex.pending.popleft()
                if not await self._write(out, event):
                    ex.pending.appendleft(event)  # kept for the next subscription
                    return
            if ex.generation != gen or self._closed:
                return
            now = loop.time()
            if now >= next_heartbeat:
                if not await self._write(out, ExecutorEvent.make_heartbeat()):
                    return
                next_heartbeat = now + self.heartbeat_interval
            transport = request.transport
            if transport is None or transport.is_closing():
                return
            timeout = max(0.0, min(self.liveness_check, next_heartbeat - loop.time()))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(ex.wakeup.wait(), timeout)

    def _drop_known_launches(self, ex: _Executor, known: set[TaskID]) -> None:
        if not known:
            return

        def already_known(e: ExecutorEvent) -> bool:
            if e.launch is not None:
                return e.launch.task.task_id in known
            if e.launch_group is not None:
                return all(t.task_id in known for t in e.launch_group.task_group.tasks)
            return False

        ex.pending = collections.deque(e for e in ex.pending if not already_known(e))

    async def _write(self, out: httputil.RecordChunks, event: ExecutorEvent) -> bool:
        try:
            await out.write((recordio.encode(encode_json(event)),))
        except (ConnectionError, RuntimeError) as e:
            log.info("executor stream write failed: %s", e)
            return False
        return True
