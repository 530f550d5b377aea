"""The service executor: one warm service instance (a CUSTOM executor; ``python -m
frameworks.service.executor``).

The agent starts it with the executor environment (``MESOS_AGENT_ENDPOINT``,
``MESOS_FRAMEWORK_ID``, ``MESOS_EXECUTOR_ID``) plus what the framework put in the executor's
command: ``AGORA_SERVICE_COMMAND`` (the user's command, run by ``/bin/sh -c``),
``AGORA_SERVICE_CHANNEL`` (the framework's ``ws://`` or ``wss://`` channel URL) and
``AGORA_SERVICE_TOKEN`` (and on a TLS cluster ``AGORA_SERVICE_CA``: the agent's API is then
https and the channel wss, both verified with that CA). It:

1. subscribes to the agent's executor API (``POST /api/v1/executor``, RecordIO JSON events);
2. on LAUNCH reports TASK_RUNNING, starts the command with pipes on its stdin and stdout (its
   stderr is the executor's, the sandbox's ``stderr`` file), opens the channel and says hello
   with the task id as the instance id;
3. writes each task frame's inputs to the command's stdin, one line each, and sends each output
   line back as that task's result, in order (``frameworks.service.wire``);
4. on ``stop`` closes the command's stdin and reports TASK_FINISHED once it exits 0 with every
   task answered; a command that exits otherwise or writes a line for no task, or a channel the
   framework refuses, fails the instance (TASK_FAILED with why); a channel that closes otherwise
   (the framework restarts) is opened again for up to ``RECONNECT_WITHIN`` seconds, and the
   answers to what was sent on the old one are dropped (the framework sends those tasks again);
   KILL or SHUTDOWN kill the command (SIGTERM, SIGKILL after the grace) and report TASK_KILLED;
5. exits once its terminal update is acknowledged (or after ``ACK_WAIT`` seconds).
"""

from __future__ import annotations

import asyncio
import base64
import collections
import contextlib
import logging
import os
import signal
import ssl
import sys
import time
import uuid
from typing import Any

import aiohttp

from frameworks.service import wire
from protocol import recordio
from protocol.codec import JSON, encode_json, loads_json
from protocol.mesos import ExecutorCall, TaskStatus
from protocol.mesos_common import ExecutorID, FrameworkID, TaskID
from protocol.task_states import TaskState, is_terminal

log = logging.getLogger("agora.service.executor")

ACK_WAIT = 10.0
CONNECT_WITHIN = 10.0  # seconds to open the channel at the start
RECONNECT_WITHIN = 120.0  # ... and after it closed without a stop (the framework restarts)
KILL_GRACE = 3.0
READ_CHUNK = 1 << 16


class Instance:
    def __init__(self, env: dict[str, str]) -> None:
        self.agent = env["MESOS_AGENT_ENDPOINT"]
        self.fid = env["MESOS_FRAMEWORK_ID"]
        self.eid = env["MESOS_EXECUTOR_ID"]
        self.command = env["AGORA_SERVICE_COMMAND"]
        self.channel_url = env["AGORA_SERVICE_CHANNEL"]
        self.token = env.get("AGORA_SERVICE_TOKEN", "")
        # a TLS cluster: the agent's API and the channel are https/wss, verified with this CA
        ca = env.get("AGORA_SERVICE_CA")
        self.ssl: ssl.SSLContext | bool = ssl.create_default_context(cafile=ca) if ca else True
        grace = env.get("MESOS_EXECUTOR_SHUTDOWN_GRACE_PERIOD", "")
        self.grace = KILL_GRACE if not grace.endswith("secs") else min(KILL_GRACE, float(grace[:-4]) * 0.5)
        self.url = f"{'https' if ca else 'http'}://{self.agent}/api/v1/executor"
        self.task_id: str | None = None
        self.proc: asyncio.subprocess.Process | None = None
        self.ws: aiohttp.ClientWebSocketResponse | None = None
        # sent to the command, not answered, in order (None: sent on a channel that closed since)
        self.seqs: collections.deque[int | None] = collections.deque()
        self.stopping = False  # told to stop: the command's end is the instance's
        self.ended: asyncio.Future[tuple[TaskState, str]] | None = None
        self.unacked: set[bytes] = set()
        self.acked = asyncio.Event()
        self.http: aiohttp.ClientSession | None = None
        self.pumps: list[asyncio.Task[Any]] = []

    # --- the agent ---------------------------------------------------------------------------

    async def post(self, call: ExecutorCall) -> None:
        assert self.http is not None
        async with self.http.post(self.url, data=encode_json(call), headers={"Content-Type": JSON}) as resp:
            if resp.status >= 300:
                log.warning("agent answered %s to %s: %s", resp.status, call.type, (await resp.text()).strip())

    async def update(self, state: TaskState, message: str | None = None) -> None:
        assert self.task_id is not None
        uid = uuid.uuid4().bytes
        if is_terminal(state):
            self.unacked.add(uid)
        status = TaskStatus(task_id=TaskID(self.task_id), state=state, message=message, uuid=uid, timestamp=time.time())
        await self.post(ExecutorCall.make_update(FrameworkID(self.fid), ExecutorID(self.eid), status))

    async def run(self) -> int:
        self.ended = asyncio.get_running_loop().create_future()
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=10)
        connector = aiohttp.TCPConnector(ssl=self.ssl)
        async with aiohttp.ClientSession(timeout=timeout, connector=connector) as self.http:
            call = ExecutorCall.make_subscribe(FrameworkID(self.fid), ExecutorID(self.eid))
            async with self.http.post(
                self.url, data=encode_json(call), headers={"Content-Type": JSON, "Accept": JSON}
            ) as resp:
                if resp.status != 200:
                    log.error("SUBSCRIBE refused: %s %s", resp.status, (await resp.text()).strip())
                    return 1
                events = asyncio.ensure_future(self.events(resp))
                try:
                    state, message = await self.ended
                finally:
                    for p in self.pumps:
                        p.cancel()
                await self.finish(state, message)
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self.acked.wait(), ACK_WAIT)
                events.cancel()
        return 0

    async def events(self, resp: aiohttp.ClientResponse) -> None:
        decoder = recordio.RecordIODecoder()
        try:
            async for chunk in resp.content.iter_any():
                for record in decoder.feed(chunk):
                    await self.event(loads_json(record))
        except (TimeoutError, aiohttp.ClientError) as exc:
            self.end(TaskState.TASK_FAILED, f"lost the agent: {exc}")
            return
        self.end(TaskState.TASK_FAILED, "the agent closed the executor's event stream")

    async def event(self, ev: dict[str, Any]) -> None:
        kind = ev.get("type")
        if kind == "LAUNCH":
            if self.task_id is None:
                self.task_id = ev["launch"]["task"]["task_id"]["value"]
                self.pumps.append(asyncio.ensure_future(self.start()))
        elif kind == "KILL":
            self.end(TaskState.TASK_KILLED, "killed")
        elif kind == "SHUTDOWN":
            self.end(TaskState.TASK_KILLED, "the executor was shut down")
        elif kind == "ACKNOWLEDGED":
            uid = base64.b64decode(ev["acknowledged"]["uuid"])
            self.unacked.discard(uid)
            if not self.unacked and self.ended is not None and self.ended.done():
                self.acked.set()
        elif kind == "ERROR":
            self.end(TaskState.TASK_FAILED, f"agent error: {ev.get('error', {}).get('message')}")

    def end(self, state: TaskState, message: str) -> None:
        if self.ended is not None and not self.ended.done():
            self.ended.set_result((state, message))

    async def finish(self, state: TaskState, message: str) -> None:
        log.info("the instance ends %s: %s", state.value, message)
        await self.kill_command(state is not TaskState.TASK_FINISHED)
        if self.ws is not None:
            await self.ws.close()
        if self.task_id is None:
            return
        with contextlib.suppress(aiohttp.ClientError):
            await self.update(state, message)

    async def kill_command(self, kill: bool) -> None:
        proc = self.proc
        if proc is None or proc.returncode is not None:
            return
        if not kill:
            await proc.wait()
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            await asyncio.wait_for(proc.wait(), self.grace)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            await proc.wait()

    # --- the command and the channel -----------------------------------------------------------

    async def start(self) -> None:
        assert self.http is not None and self.task_id is not None
        try:
            self.proc = await asyncio.create_subprocess_exec(
                "/bin/sh", "-c", self.command, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                start_new_session=True,
            )
        except OSError as exc:
            self.end(TaskState.TASK_FAILED, f"could not start the service command: {exc}")
            return
        await self.update(TaskState.TASK_RUNNING)
        self.pumps += [
            asyncio.ensure_future(self.channel()),
            asyncio.ensure_future(self.from_command()),
        ]

    async def connect(self, within: float) -> aiohttp.ClientWebSocketResponse | None:
        """Open the channel and say hello, trying again (with backoff) for ``within`` seconds."""
        assert self.http is not None and self.task_id is not None
        deadline = time.monotonic() + within
        delay = 0.05
        while True:
            try:
                ws = await self.http.ws_connect(self.channel_url, max_msg_size=wire.MAX_FRAME, heartbeat=30.0)
                await ws.send_bytes(wire.encode_hello(self.task_id, self.token))
                return ws
            except (aiohttp.ClientError, OSError) as exc:
                if time.monotonic() + delay > deadline:
                    self.end(TaskState.TASK_FAILED, f"could not open the channel {self.channel_url}: {exc}")
                    return None
            await asyncio.sleep(delay)  # backoff between attempts to reach the framework
            delay = min(delay * 2, 2.0)

    async def channel(self) -> None:
        """The channel for the instance's life: when the framework goes away (its service
        restarts) the instance connects again and goes on; what it had in flight is left to the
        framework, which sends those tasks again (their late answers are dropped here)."""
        within = CONNECT_WITHIN
        while True:
            ws = await self.connect(within)
            if ws is None:
                return
            self.ws = ws
            code, why = await self.from_channel(ws)
            self.ws = None
            if self.stopping or (self.ended is not None and self.ended.done()):
                return
            if code == aiohttp.WSCloseCode.POLICY_VIOLATION:
                self.end(TaskState.TASK_FAILED, f"the framework refused the service channel: {why}")
                return
            log.info("the service channel closed (%s %s); connecting again", code, why)
            for i in range(len(self.seqs)):
                self.seqs[i] = None  # sent on the old channel: the framework sends them again
            within = RECONNECT_WITHIN

    async def from_channel(self, ws: aiohttp.ClientWebSocketResponse) -> tuple[int | None, str]:
        """Tasks from the channel to the command's stdin until the channel closes: its close
        code and reason."""
        proc = self.proc
        assert proc is not None and proc.stdin is not None
        stdin = proc.stdin
        why = ""
        while True:
            msg = await ws.receive()
            if msg.type is aiohttp.WSMsgType.CLOSE:
                why = str(msg.extra or "")
                break
            if msg.type is not aiohttp.WSMsgType.BINARY:
                exc = ws.exception()
                why = str(exc) if exc is not None else msg.type.name
                break
            try:
                m = wire.decode(msg.data)
            except wire.WireError as exc:
                self.end(TaskState.TASK_FAILED, f"bad frame on the channel: {exc}")
                break
            if isinstance(m, wire.Tasks):
                if self.stopping:
                    continue
                self.seqs.extend(seq for seq, _ in m.items)
                stdin.write(("\n".join(text for _, text in m.items) + "\n").encode())
                try:
                    await stdin.drain()
                except (BrokenPipeError, ConnectionResetError):
                    break  # the command is gone: from_command reports it
            elif isinstance(m, wire.Stop):
                self.stopping = True
                stdin.close()
        await ws.close()
        return ws.close_code, why

    async def from_command(self) -> None:
        proc = self.proc
        assert proc is not None and proc.stdout is not None
        stdout = proc.stdout
        pending = b""
        seqs = self.seqs
        while True:
            chunk = await stdout.read(READ_CHUNK)
            if not chunk:
                break
            lines = (pending + chunk).split(b"\n")
            pending = lines.pop()
            items = []
            for raw in lines:
                if not seqs:
                    self.end(TaskState.TASK_FAILED, f"the service command wrote a line for no task: {raw[:80]!r}")
                    return
                seq = seqs.popleft()
                if seq is None:
                    continue  # sent on a channel since closed: the framework sent it again
                ok, text = wire.parse_output(raw.decode("utf-8", "replace"))
                items.append((seq, ok, text))
            ws = self.ws
            if items and ws is not None and not ws.closed:
                with contextlib.suppress(ConnectionResetError, aiohttp.ClientError):
                    await ws.send_bytes(wire.encode_results(items))
        code = await proc.wait()
        if self.stopping and code == 0 and not seqs:
            self.end(TaskState.TASK_FINISHED, "stopped")
        elif code < 0:
            self.end(TaskState.TASK_FAILED, f"the service command was killed by signal {-code}")
        else:
            self.end(TaskState.TASK_FAILED, f"the service command exited with code {code}")


def main() -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    try:
        inst = Instance(dict(os.environ))
    except KeyError as exc:
        print(f"agora service executor: {exc.args[0]} is not set (the agent and the framework set it)", file=sys.stderr)
        return 2
    return asyncio.run(inst.run())


if __name__ == "__main__":
    sys.exit(main())
