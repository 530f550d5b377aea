"""Service jobs in the batch service (shell): warm service instances fed service tasks.

A job submitted with ``service: true`` and ``inputs`` runs its command once per task of the job
(``count`` instances, each a CUSTOM executor, ``frameworks.service.executor``, that starts the
command); each input is a *service task* sent to an instance over the channel
``GET /api/v1/service/channel`` (a WebSocket the executor opens; ``frameworks.service.wire``).
What goes where, and what each result or instance end means, is decided by
``frameworks.service.dispatch`` (pure); this module carries it out: the channel, the store rows of
the service tasks (written in batches off the event loop), the executor's ``TaskInfo``, and the
end of the job (``BatchCore.service_finished`` once every service task has ended).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import shlex
import sys
from collections.abc import Callable, Coroutine, Iterable, Sequence
from pathlib import Path
from typing import Any

import aiohttp
import attrs
from aiohttp import web

from frameworks.batch.effects import TaskLaunch
from frameworks.batch.model import JOB_TERMINAL, SpecError, TaskPhase
from frameworks.batch.records import ACTIVE, JobRecord
from frameworks.batch.store import JobStore
from frameworks.service import wire
from frameworks.service.dispatch import Dispatcher, ServiceTask, TaskState
from protocol.mesos import CommandInfo, Environment, ExecutorInfo, ExecutorType, TaskInfo
from protocol.mesos_common import ExecutorID, TaskID
from protocol.task_states import TaskState as MesosState
from protocol.task_states import is_terminal

log = logging.getLogger(__name__)

CHANNEL_PATH = "/api/v1/service/channel"
DEFAULT_WINDOW = 256  # service tasks in flight per instance: enough to keep a worker busy
MAX_INPUTS = 1_000_000
HELLO_TIMEOUT = 10.0
FLUSH_INTERVAL = 0.05
RESULTS_PAGE = 1000


def inputs_of(body: Any) -> list[str]:
    """The ``inputs`` of a service job's submission, checked (``SpecError`` names the problem)."""
    raw = body.get("inputs")
    if not isinstance(raw, list) or not raw:
        raise SpecError("inputs: a service job needs a non-empty list of inputs (one per service task)")
    if len(raw) > MAX_INPUTS:
        raise SpecError(f"inputs: {len(raw)} is more than {MAX_INPUTS}")
    for i, text in enumerate(raw):
        if not isinstance(text, str):
            raise SpecError(f"inputs[{i}]: expected a string, got {type(text).__name__}")
        problem = wire.line_problem(text)
        if problem is not None:
            raise SpecError(f"inputs[{i}]: {problem}; an input is one line of text")
    return raw


def _row(job_id: int, t: ServiceTask) -> tuple[Any, ...]:
    return (t.state.value, t.failures, t.sends, t.result, t.sent_at, t.ended_at, job_id, t.index)


def task_dict(idx: int, text: str, state: str, failures: int, sends: int, result: str | None,
              sent_at: float | None, ended_at: float | None) -> dict[str, Any]:
    return {
        "index": idx, "input": text, "state": state, "result": result, "failures": failures, "sends": sends,
        "sent_at": sent_at, "ended_at": ended_at,
    }


@attrs.frozen
class WarmPorts:
    """What the warm instances need of the batch service (never the service itself)."""

    store: Callable[[], JobStore]  # the job store, opened
    live: Callable[[], Iterable[JobRecord]]  # the jobs not yet ended
    finished: Callable[[int, str | None], None]  # every service task of the job ended (the failure, if any)
    now: Callable[[], float]
    url: Callable[[], str]  # the service's API, once serving: the instances' channel is there
    ca: str | Path | None  # the cluster CA (a TLS cluster), handed to the instances
    spawn: Callable[[Coroutine[Any, Any, Any], str], object]  # a task owned by the service


class WarmServices:
    def __init__(self, ports: WarmPorts) -> None:
        self.ports = ports
        self.dispatch = Dispatcher()
        self.conns: dict[str, web.WebSocketResponse] = {}
        self.told: set[int] = set()  # jobs whose end was given to the core
        self._forget: set[int] = set()  # ended jobs dropped from memory after their next write
        self._dirty = asyncio.Event()
        self.closing = False  # the service stops: channels are turned away (the instances come back)

    # --- lifecycle -----------------------------------------------------------------------------

    async def restore(self) -> None:
        """The live service jobs' service tasks from the store; a task that was in flight is
        sent again (its instance's channel did not survive the restart)."""
        store = self.ports.store()
        for job in list(self.ports.live()):
            if not job.spec.service or job.state in JOB_TERMINAL:
                continue
            loaded = await asyncio.to_thread(store.load_service, job.job_id)
            if loaded is None:
                continue
            token, rows = loaded
            restored = {
                idx: (TaskState(state), failures, sends, result, ended_at)
                for idx, _, state, failures, sends, result, _, ended_at in rows if state != "PENDING" or sends
            }
            self.dispatch.add(job.job_id, [r[1] for r in rows], token, self.window(job), job.spec.max_retries, restored)
            for task in job.tasks:  # instances that may still run: their executors connect again
                if task.phase in ACTIVE and task.current is not None:
                    self.dispatch.launched(task.task_id, job.job_id, running=task.phase is TaskPhase.RUNNING)
            self._check(job.job_id)

    async def flusher(self) -> None:
        while True:
            await self._dirty.wait()
            await asyncio.sleep(FLUSH_INTERVAL)  # group the changes of many results into one write
            self._dirty.clear()
            await self.flush()

    async def flush(self) -> None:
        changed = self.dispatch.take_dirty()
        forget, self._forget = self._forget, set()
        if changed:
            try:
                await self.ports.store().aupdate_service_tasks([_row(j, t) for j, t in changed])
            except Exception:
                log.exception("batch: could not save service tasks; trying again")
                self.dispatch.dirty.update((j, t.index) for j, t in changed)
                self._forget |= forget
                self._dirty.set()
                return
        for job_id in forget:
            self.dispatch.forget(job_id)  # the store has them all now

    async def close(self) -> None:
        """The service stops: the instances are told it goes away (they connect again to the
        next one, which sends what they had in flight again); the changes are written."""
        self.closing = True
        for ws in list(self.conns.values()):
            await ws.close(code=aiohttp.WSCloseCode.GOING_AWAY, message=b"the batch service stops")
        await self.flush()

    # --- jobs ----------------------------------------------------------------------------------

    @staticmethod
    def window(job: JobRecord) -> int:
        return job.spec.window or DEFAULT_WINDOW

    def register(self, job: JobRecord, inputs: Sequence[str]) -> None:
        """A service job was accepted: the dispatcher knows it (and so its instances) at once,
        before anything awaits, since a scheduling round may launch its instances meanwhile and
        an instance the dispatcher does not know is refused its channel."""
        if job.job_id not in self.dispatch.runs:
            token = secrets.token_hex(16)
            self.dispatch.add(job.job_id, inputs, token, self.window(job), job.spec.max_retries)

    async def submitted(self, job: JobRecord, inputs: Sequence[str]) -> None:
        """A service job was accepted: its service tasks are written before the answer."""
        self.register(job, inputs)
        token = self.dispatch.runs[job.job_id].token
        await asyncio.to_thread(self.ports.store().add_service, job.job_id, token, inputs)

    def job_ended(self, job: JobRecord) -> None:
        """The job ended (all its service tasks done, cancelled, or its instances failed)."""
        if not job.spec.service:
            return
        run = self.dispatch.runs.get(job.job_id)
        if run is not None and not run.finished:
            self.dispatch.cancel(job.job_id, self.ports.now(), f"the job {job.state.value.lower()}: {job.reason}")
            self._stop_instances(job.job_id)
        self._forget.add(job.job_id)
        self._dirty.set()

    async def summary(self, job: JobRecord) -> dict[str, int] | None:
        """The service tasks per state (None: not a service job)."""
        if not job.spec.service:
            return None
        run = self.dispatch.runs.get(job.job_id)
        if run is not None:
            return run.summary()
        counts = await asyncio.to_thread(self.ports.store().service_counts, job.job_id)
        out = {s.value.lower(): counts.get(s.value, 0) for s in TaskState}
        out["total"] = sum(counts.values())
        return out

    async def results(self, job: JobRecord, offset: int, limit: int, state: str | None) -> dict[str, Any]:
        run = self.dispatch.runs.get(job.job_id)
        if run is not None:
            out = []
            for t in run.tasks[offset:]:
                if state is not None and t.state.value != state:
                    continue
                out.append(task_dict(t.index, t.input, t.state.value, t.failures, t.sends, t.result, t.sent_at, t.ended_at))
                if len(out) >= limit:
                    break
            summary: dict[str, int] | None = run.summary()
        else:
            rows = await asyncio.to_thread(self.ports.store().service_tasks, job.job_id, offset, limit, state)
            out = [task_dict(*r) for r in rows]
            summary = None
        body: dict[str, Any] = {"id": job.job_id, "state": job.state.value, "tasks": out}
        if summary is not None:
            body["summary"] = summary
        if len(out) >= limit:
            body["next"] = out[-1]["index"] + 1
        return body

    # --- launches and updates --------------------------------------------------------------------

    def task_info(self, t: TaskLaunch, command: CommandInfo, base: TaskInfo) -> TaskInfo:
        """An instance's task: the executor runs the job's command (``command``) as a service."""
        spec = t.spec
        run = self.dispatch.runs.get(t.job_id)
        user_command = spec.shell if spec.shell is not None else shlex.join(spec.argv)
        env = {v.name: v.value or "" for v in (command.environment.variables if command.environment else ())}
        env.update(
            AGORA_SERVICE_COMMAND=user_command,
            AGORA_SERVICE_CHANNEL=self.channel_url(),
            AGORA_SERVICE_TOKEN=run.token if run is not None else "",
        )
        if self.ports.ca is not None:  # a TLS cluster: the agents and this service are https
            env["AGORA_SERVICE_CA"] = str(Path(self.ports.ca).resolve())
        executor = ExecutorInfo(
            executor_id=ExecutorID(t.task_id),
            type=ExecutorType.CUSTOM,
            name=f"agora-service {spec.name}"[:200],
            command=CommandInfo(
                value=f"exec {shlex.quote(sys.executable)} -m frameworks.service.executor",
                shell=True,
                environment=Environment.of(env),
                user=command.user,
            ),
        )
        self.dispatch.launched(t.task_id, t.job_id)
        return TaskInfo(
            name=base.name, task_id=TaskID(t.task_id), resources=base.resources, executor=executor,
            kill_policy=base.kill_policy,
        )

    def channel_url(self) -> str:
        url = self.ports.url()
        return ("wss:" if url.startswith("https") else "ws:") + url.split(":", 1)[1] + CHANNEL_PATH

    def on_status(self, task_id: str, state: MesosState, message: str | None) -> None:
        if task_id not in self.dispatch.book:
            return
        if state is MesosState.TASK_RUNNING:
            self.dispatch.running(task_id)
        elif is_terminal(state):
            inst = self.dispatch.book.get(task_id)
            job_id = int(inst.owner) if inst is not None else None
            self.dispatch.gone(task_id, message or state.value, self.ports.now(), blame=state is MesosState.TASK_FAILED)
            ws = self.conns.pop(task_id, None)
            if ws is not None:
                self._spawn(ws.close(), "service-channel-close")
            if job_id is not None:
                self._dirty.set()
                self._pump(job_id)
                self._check(job_id)

    # --- the channel -----------------------------------------------------------------------------

    async def channel(self, request: web.Request) -> web.StreamResponse:
        ws = web.WebSocketResponse(max_msg_size=wire.MAX_FRAME, heartbeat=30.0)
        await ws.prepare(request)
        try:
            first = await ws.receive(timeout=HELLO_TIMEOUT)
            hello = wire.decode(first.data) if first.type is aiohttp.WSMsgType.BINARY else None
        except (TimeoutError, wire.WireError):
            hello = None
        if self.closing:
            await ws.close(code=aiohttp.WSCloseCode.GOING_AWAY, message=b"the batch service stops")
            return ws
        if not isinstance(hello, wire.Hello):
            await ws.close(code=aiohttp.WSCloseCode.POLICY_VIOLATION, message=b"expected hello")
            return ws
        inst, why = self.dispatch.hello(hello.instance_id, hello.version, hello.token)
        if inst is None:
            log.info("batch: service channel from %s refused: %s", hello.instance_id, why)
            await ws.close(code=aiohttp.WSCloseCode.POLICY_VIOLATION, message=(why or "refused").encode()[:120])
            return ws
        iid, job_id = inst.instance_id, int(inst.owner)
        old = self.conns.get(iid)
        if old is not None:  # it connected again: the old channel is dead to it
            self._spawn(old.close(code=aiohttp.WSCloseCode.GOING_AWAY, message=b"replaced"), "service-channel-close")
        self.conns[iid] = ws
        try:
            run = self.dispatch.runs.get(job_id)
            if run is None or run.finished:
                self.dispatch.stopping(iid, "stop")
                await ws.send_bytes(wire.STOP_FRAME)
            else:
                await self._send(iid, ws)
            async for msg in ws:
                if msg.type is not aiohttp.WSMsgType.BINARY:
                    break
                m = wire.decode(msg.data)
                if not isinstance(m, wire.Results):
                    raise wire.WireError(f"unexpected {type(m).__name__} from an instance")
                ended = self.dispatch.results(iid, m.items, self.ports.now())
                self._dirty.set()
                await self._send(iid, ws)
                if any(e.state is TaskState.PENDING for e in ended):
                    self._pump(job_id)  # a retry may go to another instance with room
                self._check(job_id)
        except wire.WireError as exc:
            log.warning("batch: service instance %s broke the channel protocol: %s", iid, exc)
        finally:
            if self.conns.get(iid) is ws:
                del self.conns[iid]
        return ws

    async def _send(self, iid: str, ws: web.WebSocketResponse) -> None:
        items = self.dispatch.take(iid, self.ports.now())
        if items:
            self._dirty.set()
            with contextlib.suppress(ConnectionResetError):
                await ws.send_bytes(wire.encode_tasks(items))

    def _pump(self, job_id: int) -> None:
        for inst in self.dispatch.wanting(job_id):
            ws = self.conns.get(inst.instance_id)
            if ws is not None:
                self._spawn(self._send(inst.instance_id, ws), "service-send")

    def _check(self, job_id: int) -> None:
        """Once every service task of the job has ended: stop its instances, end the job."""
        run = self.dispatch.runs.get(job_id)
        if run is None or not run.finished or job_id in self.told:
            return
        self.told.add(job_id)
        self._stop_instances(job_id)
        self.ports.finished(job_id, run.failure())

    def _spawn(self, coro: Coroutine[Any, Any, Any], name: str) -> None:
        try:
            self.ports.spawn(coro, name)
        except RuntimeError:  # the service is stopping
            pass

    def _stop_instances(self, job_id: int) -> None:
        for inst in self.dispatch.instances(job_id):
            self.dispatch.stopping(inst.instance_id, "stop")
            ws = self.conns.get(inst.instance_id)
            if ws is not None:
                self._spawn(_send_stop(ws), "service-stop")


async def _send_stop(ws: web.WebSocketResponse) -> None:
    with contextlib.suppress(ConnectionResetError, RuntimeError):
        await ws.send_bytes(wire.STOP_FRAME)
