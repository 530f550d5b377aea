"""Test support for frameworks against a *real* master without starting task processes.

``SimAgent`` speaks the agent channel (``protocol.agent_channel``: one WebSocket, msgpack
frames) to a real master: it registers with its resources, answers pings, reports launched tasks
TASK_RUNNING at once and finishes them when the test says so (or at once with
``auto_finish=True``). Status updates are ordered like a real agent's: per task, the next one is
sent only after the master forwards the framework's acknowledgement of the previous one. Used by the client's integration tests and by ``scripts/bench/reuse.py --sim``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections import deque

import aiohttp
import attrs

from frameworks.client.transport import base_url
from protocol import agent_channel as ac
from protocol import codec
from protocol.lifecycle import Service
from protocol.mesos import Source, TaskInfo, TaskStatus
from protocol.mesos_common import AgentID, ExecutorID, FrameworkID
from protocol.resources import Resources, attributes_to_mesos, parse_attributes
from protocol.task_states import TaskState, is_terminal

log = logging.getLogger(__name__)


@attrs.define
class SimTask:
    framework_id: str
    info: TaskInfo
    state: TaskState = TaskState.TASK_STAGING
    pending: deque[TaskStatus] = attrs.field(factory=deque)  # pending[0] is sent, awaiting its ack


class SimAgent(Service):
    name = "sim-agent"

    def __init__(
        self,
        master: str,
        resources: Resources | str = "cpus:4;mem:4096",
        hostname: str = "sim-agent",
        attributes: str | None = None,
        auto_finish: bool = False,
        port: int = 5051,
    ) -> None:
        super().__init__()
        self.url = base_url(master) + ac.PATH
        self.resources = Resources.parse(resources) if isinstance(resources, str) else resources
        self.hostname = hostname
        self.attributes = parse_attributes(attributes) if attributes else {}
        self.auto_finish = auto_finish
        self.port = port
        self.agent_id: str | None = None
        self.tasks: dict[str, SimTask] = {}
        self.registered = asyncio.Event()
        self._session: aiohttp.ClientSession | None = None
        self._ws: aiohttp.ClientWebSocketResponse | None = None
        self._changed: list[asyncio.Future[None]] = []

    async def _start(self) -> None:
        self._session = aiohttp.ClientSession()
        self._ws = await self._session.ws_connect(self.url, max_msg_size=ac.MAX_FRAME_BYTES, autoping=True)
        await self._send(
            ac.Register(
                hostname=self.hostname,
                port=self.port,
                resources=self.resources.to_mesos(),
                attributes=attributes_to_mesos(self.attributes),
            )
        )
        self.spawn(self._read(), name="sim-agent-reader")

    async def _stop(self) -> None:
        if self._ws is not None:
            await self._ws.close()
        if self._session is not None:
            await self._session.close()

    async def wait_registered(self, within: float = 30.0) -> str:
        async with asyncio.timeout(within):
            await self.registered.wait()
        assert self.agent_id is not None
        return self.agent_id

    async def wait_for(self, predicate: object, within: float = 30.0) -> object:
        """Wait until ``predicate()`` is truthy, re-checked after every message from the master."""
        assert callable(predicate)
        async with asyncio.timeout(within):
            while True:
                v = predicate()
                if v:
                    return v
                fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
                self._changed.append(fut)
                await fut

    def running_tasks(self) -> list[str]:
        return [tid for tid, t in self.tasks.items() if t.state is TaskState.TASK_RUNNING]

    # --- test controls ---------------------------------------------------------------------------

    async def slack(self, resources: Resources | str) -> None:
        """Report usage slack (the master offers it as revocable resources to frameworks that
        accept them); an empty value withdraws it."""
        r = Resources.parse(resources) if isinstance(resources, str) else resources
        await self._send(ac.SlackEstimate(resources=r.to_mesos()))

    async def finish(self, task_id: str, state: TaskState = TaskState.TASK_FINISHED, message: str | None = None) -> None:
        await self._update(self.tasks[task_id], state, message)

    # --- channel ------------------------------------------------------------------------------------

    async def _send(self, *bodies: ac.Body) -> None:
        assert self._ws is not None
        frame = ac.Frame(messages=tuple(ac.envelope(b) for b in bodies))
        await self._ws.send_bytes(codec.encode_msgpack(frame))

    async def _read(self) -> None:
        assert self._ws is not None
        async for msg in self._ws:
            if msg.type is not aiohttp.WSMsgType.BINARY:
                if msg.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED, aiohttp.WSMsgType.ERROR):
                    break
                continue
            frame = codec.decode_msgpack(ac.Frame, msg.data)
            for m in frame.messages:
                await self._handle(m.body())
            waiters, self._changed = self._changed, []
            for w in waiters:
                if not w.done():
                    w.set_result(None)

    async def _handle(self, body: object) -> None:
        if isinstance(body, ac.Registered):
            self.agent_id = body.agent_id.value
            self.registered.set()
        elif isinstance(body, ac.Ping):
            await self._send(ac.Pong(seq=body.seq))
        elif isinstance(body, ac.RunTasks):
            for info in body.tasks:
                t = SimTask(body.framework_id.value, info)
                self.tasks[info.task_id.value] = t
                await self._update(t, TaskState.TASK_RUNNING)
                if self.auto_finish:
                    await self._update(t, TaskState.TASK_FINISHED)
        elif isinstance(body, ac.KillTask):
            killed = self.tasks.get(body.task_id.value)
            if killed is not None and not is_terminal(killed.state):
                await self._update(killed, TaskState.TASK_KILLED, "killed")
        elif isinstance(body, ac.AcknowledgeMsg):
            acked = self.tasks.get(body.task_id.value)
            if acked is not None and acked.pending and acked.pending[0].uuid == body.uuid:
                acked.pending.popleft()
                if acked.pending:
                    await self._send_status(acked, acked.pending[0])
        elif isinstance(body, ac.ShutdownFramework):
            for t in self.tasks.values():
                if t.framework_id == body.framework_id.value and not is_terminal(t.state):
                    t.state = TaskState.TASK_KILLED
                    t.pending.clear()
        elif isinstance(body, ac.Revoke):
            for tid in body.task_ids:
                victim = self.tasks.get(tid.value)
                if victim is not None and not is_terminal(victim.state):
                    await self._update(victim, TaskState.TASK_KILLED, "preempted")
        elif isinstance(body, ac.Refused):
            log.error("sim agent refused: %s", body.message)

    async def _update(self, t: SimTask, state: TaskState, message: str | None = None) -> None:
        t.state = state
        status = TaskStatus(
            task_id=t.info.task_id,
            state=state,
            message=message,
            source=Source.SOURCE_EXECUTOR,
            agent_id=AgentID(self.agent_id or ""),
            executor_id=ExecutorID(t.info.task_id.value),
            timestamp=time.time(),
            uuid=uuid.uuid4().bytes,
        )
        t.pending.append(status)
        if len(t.pending) == 1:
            await self._send_status(t, status)

    async def _send_status(self, t: SimTask, status: TaskStatus) -> None:
        with contextlib.suppress(ConnectionError, RuntimeError):
            await self._send(ac.StatusUpdateMsg(framework_id=FrameworkID(t.framework_id), status=status))
