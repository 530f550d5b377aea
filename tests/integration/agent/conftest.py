"""A small fake master (aiohttp WebSocket on 127.0.0.1:0 speaking ``protocol/agent_channel.py``)
and helpers to run agents in-process or as subprocesses."""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import os
import signal
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import psutil
import pytest
from aiohttp import WSMsgType, web

from agent.config import AgentConfig
from agent.isolation import remove_agent_cgroups
from agent.service import AgentService
from protocol import codec
from protocol.agent_channel import (
    PATH,
    AcknowledgeMsg,
    Frame,
    KillTask,
    Ping,
    Pong,
    Register,
    Registered,
    Revoke,
    RunTasks,
    ShutdownFramework,
    StatusUpdateMsg,
    frame,
)
from protocol.mesos import CommandInfo, FrameworkInfo, KillPolicy, TaskInfo, TaskStatus
from protocol.mesos_common import AgentID, DurationInfo, FrameworkID, TaskID
from protocol.resources import Resources
from protocol.task_states import TaskState, is_terminal

ROOT = Path(__file__).resolve().parents[3]


class FakeMaster:
    def __init__(self, *, auto_ack: bool = True, ping_interval: float = 0.2, ping_timeout: float = 2.0) -> None:
        self.auto_ack = auto_ack
        self.ping_interval = ping_interval
        self.ping_timeout = ping_timeout
        self.epoch = 1
        self.registrations: list[Register] = []
        self.updates: list[StatusUpdateMsg] = []
        self.other: list[object] = []
        self.ws: web.WebSocketResponse | None = None
        self.redirect_to: str | None = None
        self.drop_acks = False
        self.seq = 0
        self._cond = asyncio.Condition()
        self._runner: web.AppRunner | None = None
        self.port = 0
        self._tasks: set[asyncio.Task[Any]] = set()
        self.framework = FrameworkInfo(user="test", name="fw", id=FrameworkID("fw1"))

    async def start(self) -> FakeMaster:
        app = web.Application()
        app.router.add_get(PATH, self._handle)
        self._runner = web.AppRunner(app, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", self.port)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return self

    async def stop(self) -> None:
        for t in list(self._tasks):
            t.cancel()
        if self.ws is not None:
            await self.ws.close()
        if self._runner is not None:
            await self._runner.cleanup()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        if self.redirect_to:
            raise web.HTTPTemporaryRedirect(f"http://{self.redirect_to}{PATH}")
        ws = web.WebSocketResponse(max_msg_size=4 * 1024 * 1024)
        await ws.prepare(request)
        self.ws = ws
        pinger = asyncio.ensure_future(self._pinger(ws))
        self._tasks.add(pinger)
        try:
            async for msg in ws:
                if msg.type != WSMsgType.BINARY:
                    continue
                fr = codec.decode_msgpack(Frame, msg.data)
                for m in fr.messages:
                    await self._on(ws, m.body())
        finally:
            pinger.cancel()
            self._tasks.discard(pinger)
            if self.ws is ws:
                self.ws = None
        return ws

    async def _pinger(self, ws: web.WebSocketResponse) -> None:
        while not ws.closed:
            await asyncio.sleep(self.ping_interval)
            self.seq += 1
            with contextlib.suppress(Exception):
                await ws.send_bytes(codec.encode_msgpack(frame(Ping(self.seq), epoch=self.epoch)))

    async def _on(self, ws: web.WebSocketResponse, body: object) -> None:
        async with self._cond:
            if isinstance(body, Register):
                self.registrations.append(body)
                aid = body.agent_id.value if body.agent_id else f"agent-{len(self.registrations)}"
                reg = Registered(agent_id=AgentID(aid), master_id="fake", epoch=self.epoch,
                                 ping_interval=self.ping_interval, ping_timeout=self.ping_timeout)
                await ws.send_bytes(codec.encode_msgpack(frame(reg, epoch=self.epoch)))
            elif isinstance(body, StatusUpdateMsg):
                self.updates.append(body)
                if self.auto_ack and not self.drop_acks and body.status.uuid:
                    await self.send(AcknowledgeMsg(body.framework_id, body.status.task_id, body.status.uuid))
            elif isinstance(body, Pong):
                pass
            else:
                self.other.append(body)
            self._cond.notify_all()

    async def send(self, *bodies: Any, epoch: int | None = None) -> None:
        assert self.ws is not None, "no agent connected"
        await self.ws.send_bytes(codec.encode_msgpack(frame(*bodies, epoch=self.epoch if epoch is None else epoch)))

    async def wait_for(self, pred: Callable[[], Any], within: float = 20.0) -> Any:
        """Wait until ``pred()`` is truthy: re-checked on every message from the agent, and every
        0.1 s for conditions on the agent's side that send nothing (polling with a deadline)."""
        async with asyncio.timeout(within), self._cond:
            while True:
                v = pred()
                if v:
                    return v
                try:
                    async with asyncio.timeout(0.1):
                        await self._cond.wait()
                except TimeoutError:
                    pass

    async def wait_connected(self, n: int = 1, within: float = 20.0) -> Register:
        await self.wait_for(lambda: len(self.registrations) >= n and self.ws is not None, within)
        return self.registrations[-1]

    # --- orders ------------------------------------------------------------------------------

    async def run(self, tid: str, cmd: str, *, shell: bool = True, args: tuple[str, ...] = (), mem: float = 32,
                  grace: float | None = None, revocable: bool = False, env: Any = None, cpus: float = 0.1,
                  disk: float | None = None) -> None:
        res = Resources.of(cpus=cpus, mem=mem) if disk is None else Resources.of(cpus=cpus, mem=mem, disk=disk)
        if revocable:
            res = res.as_revocable()
        task = TaskInfo(
            name=tid, task_id=TaskID(tid), resources=res.to_mesos(),
            command=CommandInfo(value=cmd, shell=shell, arguments=args, environment=env),
            kill_policy=KillPolicy(DurationInfo(int(grace * 1e9))) if grace is not None else None,
        )
        await self.send(RunTasks(FrameworkID("fw1"), self.framework, (task,)))

    async def run_many(self, tasks: list[TaskInfo]) -> None:
        await self.send(RunTasks(FrameworkID("fw1"), self.framework, tuple(tasks)))

    async def kill(self, tid: str, grace: float | None = None) -> None:
        await self.send(KillTask(FrameworkID("fw1"), TaskID(tid), grace))

    async def revoke(self, tids: list[str], grace: float) -> None:
        await self.send(Revoke(FrameworkID("fw1"), tuple(TaskID(t) for t in tids), grace))

    async def shutdown_framework(self) -> None:
        await self.send(ShutdownFramework(FrameworkID("fw1")))

    async def ack(self, st: TaskStatus) -> None:
        assert st.uuid is not None
        await self.send(AcknowledgeMsg(FrameworkID("fw1"), st.task_id, st.uuid))

    # --- queries -----------------------------------------------------------------------------

    def statuses(self, tid: str) -> list[TaskStatus]:
        return [u.status for u in self.updates if u.status.task_id.value == tid]

    def states(self, tid: str) -> list[TaskState]:
        out: list[TaskState] = []
        for s in self.statuses(tid):
            if not out or out[-1] is not s.state:
                out.append(s.state)
        return out

    def terminal(self, tid: str) -> TaskStatus | None:
        return next((s for s in self.statuses(tid) if is_terminal(s.state)), None)

    async def wait_state(self, tid: str, state: TaskState, within: float = 20.0) -> TaskStatus:
        return await self.wait_for(lambda: next((s for s in self.statuses(tid) if s.state is state), None), within)  # type: ignore[no-any-return]

    async def wait_terminal(self, tid: str, within: float = 20.0) -> TaskStatus:
        return await self.wait_for(lambda: self.terminal(tid), within)  # type: ignore[no-any-return]


@pytest.fixture
async def master() -> AsyncIterator[FakeMaster]:
    fm = await FakeMaster().start()
    yield fm
    await fm.stop()


def agent_config(fm: FakeMaster, work_dir: Path, **kw: Any) -> AgentConfig:
    base: dict[str, Any] = {
        "master": fm.address,
        "work_dir": work_dir,
        "resources": "cpus:4;mem:4096;disk:1000;ports:[31000-32000]",
        "resend_initial": 0.3,
        "resend_max": 1.0,
        "reconnect_initial": 0.05,
        "reconnect_max": 0.3,
        "monitor_interval": 0.1,
        "default_grace": 1.0,
    }
    base.update(kw)
    return AgentConfig(**base)


@pytest.fixture
async def make_agent(master: FakeMaster, tmp_path: Path) -> AsyncIterator[Callable[..., Any]]:
    agents: list[AgentService] = []

    async def make(work_dir: Path | None = None, **kw: Any) -> AgentService:
        svc = AgentService(agent_config(master, work_dir or tmp_path / "agent", **kw))
        await svc.start()
        agents.append(svc)
        return svc

    yield make
    for a in agents:
        await a.stop()
    await kill_leftovers(tmp_path)
    for a in agents:
        await asyncio.to_thread(remove_agent_cgroups, a.config.work_dir)


class AgentProcess:
    """``python -m agent.main`` as a subprocess (for ``kill -9``)."""

    def __init__(self, master: FakeMaster, work_dir: Path, *extra: str) -> None:
        self.master = master
        self.work_dir = work_dir
        self.extra = extra
        self.proc: asyncio.subprocess.Process | None = None
        self.url = ""

    async def start(self, within: float = 30.0) -> AgentProcess:
        args = [
            sys.executable, "-m", "agent.main", "--master", self.master.address, "--work-dir", str(self.work_dir),
            "--resources", "cpus:4;mem:4096;disk:1000;ports:[31000-32000]", "--resend-initial", "0.3",
            "--resend-max", "1.0", "--monitor-interval", "0.2", "--default-grace", "1.0", "--log-level", "WARNING",
            *self.extra,
        ]
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        self.proc = await asyncio.create_subprocess_exec(
            *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env, cwd=str(ROOT)
        )
        assert self.proc.stdout is not None
        async with asyncio.timeout(within):
            line = (await self.proc.stdout.readline()).decode()
        if not line.startswith("agora-agent listening on "):
            err = b""
            if self.proc.stderr is not None:
                with contextlib.suppress(Exception):
                    async with asyncio.timeout(5):
                        err = await self.proc.stderr.read()
            raise AssertionError(f"agent did not start: {line!r} {err.decode()[-2000:]}")
        self.url = line.split()[-1]
        return self

    async def kill9(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            self.proc.send_signal(signal.SIGKILL)
            await self.proc.wait()

    async def stop(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                async with asyncio.timeout(10):
                    await self.proc.wait()
            except TimeoutError:
                await self.kill9()

    async def exit_code(self, within: float = 30.0) -> tuple[int, str]:
        assert self.proc is not None
        async with asyncio.timeout(within):
            _, err = await self.proc.communicate()
        return self.proc.returncode or 0, err.decode()


_FORKSERVER = multiprocessing.get_context("forkserver")
_FORKSERVER.set_forkserver_preload(["agent.main"])


class AgentFork(AgentProcess):
    """Like ``AgentProcess`` but forked from a forkserver that has already imported the agent:
    a restart costs milliseconds instead of an interpreter start (for the many-restart test).
    The agent's URL comes from its registration with the fake master."""

    def __init__(self, master: FakeMaster, work_dir: Path, *extra: str) -> None:
        super().__init__(master, work_dir, *extra)
        self.child: Any = None

    async def start(self, within: float = 30.0) -> AgentFork:
        argv = [
            "--master", self.master.address, "--work-dir", str(self.work_dir),
            "--resources", "cpus:4;mem:4096;disk:1000;ports:[31000-32000]", "--resend-initial", "0.3",
            "--resend-max", "1.0", "--monitor-interval", "0.2", "--default-grace", "1.0", "--log-level", "ERROR",
            *self.extra,
        ]
        import agent.main

        n = len(self.master.registrations)
        self.child = _FORKSERVER.Process(target=agent.main.run, args=(argv,))
        await asyncio.to_thread(self.child.start)
        reg = await self.master.wait_connected(n + 1, within)
        self.url = f"http://127.0.0.1:{reg.port}"
        return self

    async def kill9(self) -> None:
        if self.child is not None and self.child.exitcode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.child.pid, signal.SIGKILL)
            await asyncio.to_thread(self.child.join, 10)


async def kill_leftovers(root: Path) -> None:
    """Kill every task wrapper started under ``root`` (and its group); none may outlive a test."""
    marker = str(root)
    for p in psutil.process_iter(["cmdline"]):
        try:
            cmd = p.info["cmdline"] or []
        except psutil.Error:
            continue
        if len(cmd) > 3 and cmd[0] == "/bin/sh" and cmd[1] == "-c" and cmd[3].startswith(marker):
            with contextlib.suppress(OSError):
                os.killpg(p.pid, signal.SIGKILL)


@pytest.fixture
async def agent_procs(master: FakeMaster, tmp_path: Path) -> AsyncIterator[Callable[..., Any]]:
    procs: list[AgentProcess] = []

    def make(work_dir: Path | None = None, *extra: str, fork: bool = False) -> AgentProcess:
        cls = AgentFork if fork else AgentProcess
        p = cls(master, work_dir or tmp_path / "agent", *extra)
        procs.append(p)
        return p

    yield make
    for p in procs:
        await p.kill9()
    await kill_leftovers(tmp_path)
    for p in procs:
        await asyncio.to_thread(remove_agent_cgroups, p.work_dir)
