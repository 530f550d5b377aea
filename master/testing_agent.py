"""Test support: a small in-process agent that speaks the agent channel (no processes).

It registers, answers pings, "runs" tasks by sending status updates reliably (one unacknowledged
update per task at a time, the next released by the master's ACKNOWLEDGE), kills on request and
re-registers with its tasks. A task whose command contains ``sleep`` keeps RUNNING until killed;
any other finishes at once. ``fail_pings`` makes it ignore pings (a partitioned agent).
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections import deque

import aiohttp
import attrs

from protocol import agent_channel as ac
from protocol import codec, mesos
from protocol.resources import Resources
from protocol.task_states import TaskState, is_terminal

TS = TaskState


@attrs.define
class FakeTask:
    framework_id: str
    info: mesos.TaskInfo
    state: TaskState
    pending: deque[mesos.TaskStatus] = attrs.field(factory=deque)
    sent: bool = False


class FakeAgent:
    def __init__(
        self, master_url: str, resources: str = "cpus:4;mem:4096;disk:1000", hostname: str = "fake-host",
        authorization: str | None = None,
    ) -> None:
        self.master_url = master_url
        self.authorization = authorization  # the Authorization header of the channel's upgrade request
        self.resources = Resources.parse(resources)
        self.hostname = hostname
        self.agent_id: str | None = None
        self.tasks: dict[tuple[str, str], FakeTask] = {}
        self.received: list[ac.AgentMessage] = []
        self.registered = asyncio.Event()
        self.closed = asyncio.Event()
        self.fail_pings = False
        self.launches = 0
        self.epoch = 0
        self._session: aiohttp.ClientSession | None = None
        self._ws: aiohttp.ClientWebSocketResponse | None = None
        self._reader: asyncio.Task[None] | None = None
        self._changed = asyncio.Event()

    # --- lifecycle ------------------------------------------------------------------------------

    async def connect(self) -> str:
        self.registered.clear()
        self.closed.clear()
        if self._session is None:
            self._session = aiohttp.ClientSession()
        headers = {"Authorization": self.authorization} if self.authorization else None
        self._ws = await self._session.ws_connect(self.master_url + ac.PATH, max_msg_size=ac.MAX_FRAME_BYTES, headers=headers)
        running = tuple(
            ac.RunningTask(
                framework_id=mesos.FrameworkID(t.framework_id),
                task_id=t.info.task_id,
                state=t.state,
                resources=t.info.resources,
                name=t.info.name,
            )
            for t in self.tasks.values()
            if not is_terminal(t.state)
        )
        reg = ac.Register(
            hostname=self.hostname,
            port=5051,
            resources=self.resources.to_mesos(),
            agent_id=mesos.AgentID(self.agent_id) if self.agent_id else None,
            tasks=running,
        )
        await self._send(reg)
        self._reader = asyncio.get_running_loop().create_task(self._read())
        waits = {asyncio.ensure_future(self.registered.wait()), asyncio.ensure_future(self.closed.wait())}
        _, pending = await asyncio.wait(waits, timeout=10, return_when=asyncio.FIRST_COMPLETED)
        for w in pending:
            w.cancel()
        if not self.registered.is_set():
            raise ConnectionError("the master closed the channel (or timed out) before REGISTERED")
        assert self.agent_id is not None
        # unacknowledged updates are resent after (re-)registration
        for t in self.tasks.values():
            t.sent = False
        await self._pump()
        return self.agent_id

    async def disconnect(self) -> None:
        if self._ws is not None:
            await self._ws.close()
        if self._reader is not None:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._reader
            self._reader = None

    async def close(self) -> None:
        await self.disconnect()
        if self._session is not None:
            await self._session.close()
            self._session = None

    # --- io -------------------------------------------------------------------------------------

    async def _send(self, *bodies: ac.Body) -> None:
        assert self._ws is not None
        await self._ws.send_bytes(codec.encode_msgpack(ac.frame(*bodies)))

    async def send_raw(self, data: bytes) -> None:
        assert self._ws is not None
        await self._ws.send_bytes(data)

    async def _read(self) -> None:
        assert self._ws is not None
        try:
            async for msg in self._ws:
                if msg.type is not aiohttp.WSMsgType.BINARY:
                    break
                frame = codec.decode_msgpack(ac.Frame, msg.data)
                self.epoch = max(self.epoch, frame.epoch)
                for m in frame.messages:
                    self.received.append(m)
                    await self._on(m.body())
                await self._pump()
                self._changed.set()
        finally:
            self.closed.set()

    async def _on(self, body: object) -> None:
        match body:
            case ac.Registered():
                self.agent_id = body.agent_id.value
                self.registered.set()
            case ac.Ping():
                if not self.fail_pings:
                    await self._send(ac.Pong(seq=body.seq))
            case ac.RunTasks():
                for info in body.tasks:
                    self.launches += 1
                    t = FakeTask(body.framework_id.value, info, TS.TASK_STAGING)
                    self.tasks[(t.framework_id, info.task_id.value)] = t
                    self._update(t, TS.TASK_STARTING)
                    self._update(t, TS.TASK_RUNNING)
                    cmd = info.command.value if info.command and info.command.value else ""
                    if "sleep" not in cmd:
                        self._update(t, TS.TASK_FINISHED)
            case ac.KillTask():
                kt = self.tasks.get((body.framework_id.value, body.task_id.value))
                if kt is not None and not is_terminal(kt.state):
                    self._update(kt, TS.TASK_KILLED)
            case ac.ShutdownFramework():
                for t in self.tasks.values():
                    if t.framework_id == body.framework_id.value and not is_terminal(t.state):
                        self._update(t, TS.TASK_KILLED)
            case ac.AcknowledgeMsg():
                at = self.tasks.get((body.framework_id.value, body.task_id.value))
                if at is not None and at.pending and at.pending[0].uuid == body.uuid:
                    at.pending.popleft()
                    at.sent = False
            case _:
                pass

    def _update(self, t: FakeTask, state: TaskState) -> None:
        t.state = state
        t.pending.append(
            mesos.TaskStatus(
                task_id=t.info.task_id,
                state=state,
                source=mesos.Source.SOURCE_EXECUTOR,
                uuid=uuid.uuid4().bytes,
                executor_id=mesos.ExecutorID(t.info.task_id.value),
                message=f"fake agent: {state.value}",
            )
        )

    async def _pump(self) -> None:
        """Send the head update of every task that has none in flight."""
        out: list[ac.Body] = []
        for t in self.tasks.values():
            if t.pending and not t.sent:
                t.sent = True
                out.append(ac.StatusUpdateMsg(framework_id=mesos.FrameworkID(t.framework_id), status=t.pending[0]))
        if out and self._ws is not None and not self._ws.closed:
            await self._send(*out)

    async def wait_for(self, pred: object, within: float = 10.0) -> None:
        """Wait until ``pred()`` holds, re-checking after every frame."""
        assert callable(pred)
        async with asyncio.timeout(within):
            while not pred():
                self._changed.clear()
                await self._changed.wait()

    def state_of(self, framework_id: str, task_id: str) -> TaskState | None:
        t = self.tasks.get((framework_id, task_id))
        return t.state if t else None
