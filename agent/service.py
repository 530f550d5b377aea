"""The agent service (shell): wires the pure cores to processes, disk, HTTP and the master.

Pipeline (README "Pipeline"): every fact becomes an event for one of the two pure cores
(``TaskTracker``, ``StatusUpdateManager``); their effects go through one ordered *work queue*.
Consecutive disk effects (checkpoint writes) are run together in one worker thread, so a burst of
launches or updates shares the thread hop, and a ``CheckpointUpdate`` is always on disk before the
``SendUpdate`` that follows it in the queue. Effects that produce new facts (a spawn, an emitted
status) feed them straight back to the cores, appending their effects to the same queue.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextlib
import logging
import os
import random
from typing import Any

import attrs
import psutil
from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from agent import status_updates as su
from agent import tasks as tk
from agent.channel import AgentChannel
from agent.checkpoint import (
    AgentMeta,
    Checkpoint,
    CheckpointError,
    CorruptCheckpoint,
    PidRecord,
    Recovery,
    TaskRecordFile,
)
from agent.config import AgentConfig
from agent.environment import task_environment
from agent.isolation import Isolator, detect
from agent.launcher import Launcher, LaunchError, Proc, boot_id, find_wrappers, spawn
from agent.taskspec import SpecError, TaskSpec, command_spec, task_spec
from protocol.agent_channel import (
    AcknowledgeMsg,
    ExecutorExited,
    ExecutorMessageMsg,
    FrameworkMessageMsg,
    KillTask,
    Register,
    Registered,
    Revoke,
    RunningTask,
    RunTasks,
    ShutdownExecutor,
    ShutdownFramework,
    SlackEstimate,
    StatusUpdateMsg,
)
from protocol.clock import Clock, SystemClock
from protocol.ids import new_status_uuid
from protocol.lifecycle import Service
from protocol.mesos import (
    AgentInfo,
    CapabilityType,
    ExecutorInfo,
    FrameworkInfo,
    Reason,
    Source,
    TaskInfo,
    TaskStatus,
)
from protocol.mesos_common import AgentID, ExecutorID, FrameworkID, Label, Labels, TaskID
from protocol.resources import Resources, attributes_to_mesos, parse_attributes
from protocol.task_states import is_terminal

log = logging.getLogger(__name__)

VERSION = "0.1.0"


class StartupError(Exception):
    """The agent refuses to start (a corrupt checkpoint in strict mode, changed resources...)."""


# --- shell-side effects (disk) ----------------------------------------------------------------


@attrs.frozen
class _WritePid:
    framework_id: str
    task_id: str
    record: PidRecord


@attrs.frozen
class _SpawnResult:
    spec: TaskSpec
    proc: Proc | None
    error: str | None = None


@attrs.frozen
class _WriteKill:
    framework_id: str
    task_id: str
    reason: str


@attrs.frozen
class _Signal:
    """Signal a task (after its kill record was written)."""

    framework_id: str
    task_id: str
    signal: str


_DISK = (
    _WriteKill,
    tk.CheckpointTask,
    tk.SpawnTask,
    su.CheckpointUpdate,
    su.CheckpointAck,
    _WritePid,
    tk.DropTask,
)


def _task_key(fid: str, tid: str) -> str:
    return f"t/{fid}/{tid}"


def _exec_key(fid: str, eid: str) -> str:
    return f"e/{fid}/{eid}"


class AgentService(Service):
    name = "agora-agent"

    def __init__(self, config: AgentConfig, clock: Clock | None = None, rng: random.Random | None = None) -> None:
        super().__init__()
        self.config = config
        self.clock: Clock = clock or SystemClock()
        self._rng = rng or random.Random()
        self.checkpoint = Checkpoint(config.work_dir, fsync=config.fsync)
        self.tracker = tk.TaskTracker(default_grace=config.default_grace)
        self.updates = su.StatusUpdateManager(
            su.RetryPolicy(initial=config.resend_initial, maximum=config.resend_max, jitter=0.2),
            rng=self._rng.random,
        )
        self.launcher = Launcher(self._on_process_exit)
        self.isolator: Isolator = detect(config.isolation)
        self.boot_id = boot_id()
        self.agent_id: str | None = None
        self.resources = Resources.empty()
        self.attributes: dict[str, str | float] = {}
        self.frameworks: dict[str, FrameworkInfo] = {}
        self.port = 0
        self.channel: AgentChannel | None = None
        self.executor_api: Any = None
        self.recovery_report: list[str] = []
        self._ephemeral: set[tuple[str, str]] = set()  # streams not checkpointed (invalid launches)
        self._executor_uuids: dict[bytes, str] = {}  # update uuid -> executor id (acks go back)
        self._groups: dict[tuple[str, str], tuple[str, ...]] = {}  # (fid, tid) -> group's task ids
        self._group_executors: dict[tuple[str, str], ExecutorInfo] = {}
        self._started_at: dict[tuple[str, str], float] = {}
        self._work: collections.deque[object] = collections.deque()
        self._work_running = False
        self._work_idle = asyncio.Event()
        self._work_idle.set()
        self._timer_wake = asyncio.Event()
        self._disk = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="agent-ckpt")
        self._runner: web.AppRunner | None = None
        self._last_slack: Resources | None = None
        self._estimator: Any = None
        self._qos: Any = None
        self.registry = CollectorRegistry()
        self._m_launched = Counter("agora_agent_tasks_launched_total", "Tasks launched", registry=self.registry)
        self._m_terminal = Counter(
            "agora_agent_tasks_terminal_total", "Tasks ended, by state", ["state"], registry=self.registry
        )
        self._m_updates = Counter(
            "agora_agent_status_updates_sent_total", "Status update sends (including resends)", registry=self.registry
        )
        self._m_running = Gauge("agora_agent_tasks_active", "Non-terminal tasks", registry=self.registry)
        self._m_registered = Gauge("agora_agent_registered", "1 while registered with a master", registry=self.registry)
        self._m_limit = Counter(
            "agora_agent_limit_kills_total", "Tasks killed past their memory limit", registry=self.registry
        )

    # --- lifecycle ---------------------------------------------------------------------------

    async def _start(self) -> None:
        cfg = self.config
        self.checkpoint.init()
        self._build_plugins()
        await self._start_http()
        await self._recover()
        self.channel = AgentChannel(
            cfg.master,
            self._build_register,
            self._on_registered,
            self._on_master_message,
            self._on_disconnected,
            ping_timeout=cfg.ping_timeout,
            registration_timeout=cfg.registration_timeout,
            reconnect_initial=cfg.reconnect_initial,
            reconnect_max=cfg.reconnect_max,
            rng=self._rng,
        )
        self.spawn(self.channel.run(), name="agent-channel")
        self.spawn(self._timer_loop(), name="agent-timers")
        self.spawn(self._monitor_loop(), name="agent-monitor")

    async def stop(self) -> None:
        if self.channel is not None:
            self.channel.close()
        await super().stop()

    async def _stop(self) -> None:
        # Tasks keep running (they survive the agent by design); we only stop watching them.
        self.launcher.detach_all()
        if self.executor_api is not None:
            with contextlib.suppress(Exception):
                await self.executor_api.close()
        if self._runner is not None:
            await self._runner.cleanup()
        await asyncio.get_running_loop().run_in_executor(self._disk, self.checkpoint.close)
        self._disk.shutdown(wait=True)

    def _build_plugins(self) -> None:
        cfg = self.config
        from agent.capacity import capacity

        self.resources = capacity(cfg.work_dir, cfg.resources)
        self.attributes = parse_attributes(cfg.attributes) if cfg.attributes else {}
        try:
            from agent.estimator import make_estimator
            from agent.qos import make_qos

            opts: dict[str, Any] = {}
            if cfg.resource_estimator == "fixed":
                opts["oversubscribed"] = cfg.oversubscribed or ""
            self._estimator = make_estimator(cfg.resource_estimator, **opts)
            qopts: dict[str, Any] = {}
            if cfg.qos_controller == "load":
                qopts = {"threshold": cfg.qos_threshold, "window": cfg.qos_window}
            self._qos = make_qos(cfg.qos_controller, **qopts)
        except ImportError:  # pragma: no cover - plug-ins ship with the agent
            self._estimator = self._qos = None

    async def _start_http(self) -> None:
        app = web.Application(client_max_size=1024 * 1024)
        app.router.add_get("/health", self._http_health)
        app.router.add_get("/state", self._http_state)
        app.router.add_get("/metrics", self._http_metrics)
        try:
            from agent import files

            files.add_routes(app, self.checkpoint.sandboxes)
        except ImportError:  # pragma: no cover
            log.warning("agent.files missing: no sandbox browsing")
        try:
            from agent.executor_api import ExecutorAPI

            self.executor_api = ExecutorAPI(self, self._agent_info)
            app.router.add_routes(self.executor_api.routes())
        except ImportError:  # pragma: no cover
            log.warning("agent.executor_api missing: no custom executors")
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.config.host, self.config.port)
        await site.start()
        server = site._server
        assert server is not None
        self.port = server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]

    @property
    def url(self) -> str:
        return f"http://{self.config.host}:{self.port}"

    # --- recovery ----------------------------------------------------------------------------

    async def _recover(self) -> None:
        cfg = self.config
        try:
            rec = await asyncio.to_thread(self.checkpoint.recover)
        except CorruptCheckpoint as e:
            if cfg.strict:
                raise StartupError(f"corrupt checkpoint {e.path}: {e.reason}") from e
            log.error("corrupt agent checkpoint %s (%s): starting as a new agent", e.path, e.reason)
            self.recovery_report.append(f"corrupt {e.path}: {e.reason}")
            await asyncio.to_thread((self.checkpoint.meta / "agent.json").unlink, missing_ok=True)
            rec = await asyncio.to_thread(self.checkpoint.recover)
        if rec.broken and cfg.strict:
            names = ", ".join(f"{b.path} ({b.reason})" for b in rec.broken)
            raise StartupError(f"corrupt checkpoint: {names}")
        meta = rec.agent
        rebooted = meta is not None and meta.boot_id != self.boot_id
        if meta is not None and meta.resources != self._resources_identity():
            msg = f"resources changed from {meta.resources!r} to {self._resources_identity()!r}"
            if cfg.strict:
                raise StartupError(f"{msg}; refusing to recover in strict mode")
            log.warning("%s: registering as a new agent; old tasks are killed", msg)
            self.recovery_report.append(msg)
            await self._discard_old_tasks(rec, rebooted)
            meta = None
            rec = Recovery(None, {}, (), ())
        self.agent_id = meta.agent_id if meta is not None else None
        await asyncio.to_thread(
            self.checkpoint.write_agent,
            AgentMeta(self.agent_id, self.boot_id, self._resources_identity(), cfg.attributes or "", cfg.hostname),
        )
        self.frameworks.update(rec.frameworks)
        now = self.clock.now()
        for t in rec.tasks:
            if t.broken is not None or t.record is None:
                self._recover_broken(t.framework_id, t.task_id, t.broken, t.pid)
                continue
            rf = t.record
            fi = self.frameworks.get(t.framework_id)
            try:
                spec = task_spec(t.framework_id, rf.task, rf.executor, killing_state=rf.killing_state)
            except SpecError as e:
                self._recover_broken(t.framework_id, t.task_id, CorruptCheckpoint(str(t.task_id), str(e)), t.pid)
                continue
            updates = tuple(self._to_update(t.framework_id, s) for s in (t.log.updates if t.log else ()))
            acked = t.log.acked if t.log else frozenset()
            self._submit(self.updates.handle(su.Recovered(t.framework_id, t.task_id, updates, acked), now))
            last = updates[-1].state if updates else None
            key = _task_key(t.framework_id, t.task_id)
            exit_path = self.checkpoint.exit_status_path(t.framework_id, t.task_id)
            alive, spawned, pid = False, t.pid is not None, t.pid.pid if t.pid else None
            if last is None or not is_terminal(last):
                if t.pid is not None and not rebooted and t.pid.boot_id == self.boot_id:
                    alive = self.launcher.adopt(key, t.pid.pid, t.pid.create_time, exit_path)
                elif t.pid is None and not rebooted:
                    # crashed between spawn and the pid checkpoint: find the wrapper by its marker
                    for p in find_wrappers(str(exit_path)):
                        with contextlib.suppress(psutil.Error):
                            if self.launcher.adopt(key, p.pid, p.create_time(), exit_path):
                                alive, spawned, pid = True, True, p.pid
                                self._submit([_WritePid(t.framework_id, t.task_id, PidRecord(p.pid, p.create_time(), self.boot_id))])
                                break
                if alive and pid is not None:
                    self.isolator.attach(key, pid)
                    if spec.mem_limit is not None and hasattr(self.isolator, "set_limits"):
                        self.isolator.set_limits(key, spec.mem_limit, spec.cpus)
            exit_code = t.exit_code if not alive else None
            self._started_at[(t.framework_id, t.task_id)] = now
            if spec.executor_id is not None and fi is None:
                log.warning("executor task %s without framework info", t.task_id)
            kill_reason = None
            if t.kill_reason:
                with contextlib.suppress(ValueError):
                    kill_reason = tk.KillReason(t.kill_reason)
            effects = self.tracker.handle(
                tk.RecoveredTask(spec, last, spawned, alive, exit_code, pid, killing=kill_reason is not None), now
            )
            rec_task = self.tracker.get(t.framework_id, t.task_id)
            if rec_task is not None and kill_reason is not None and not rec_task.terminal:
                rec_task.kill_reason = kill_reason
            self._submit(effects)
            self.recovery_report.append(
                f"task {t.framework_id}/{t.task_id}: {'re-attached pid ' + str(pid) if alive else 'not running'}"
            )
        for b in rec.broken:
            if not b.path.endswith("framework.json"):
                continue
            log.error("corrupt framework checkpoint %s: %s", b.path, b.reason)
        if not rebooted:
            await asyncio.to_thread(self._kill_orphan_executors)
        await self._drain()

    def _kill_orphan_executors(self) -> None:
        """Custom executors are not re-attached after an agent restart (their tasks are reported
        LOST); their processes must not live on."""
        prefix = str(self.checkpoint.meta / "frameworks") + os.sep
        for p in find_wrappers(prefix, prefix=True):
            if os.sep + "executors" + os.sep in p.info["cmdline"][3]:
                log.warning("killing executor left over from before the restart: pid %d", p.pid)
                with contextlib.suppress(OSError):
                    os.killpg(p.pid, 9)

    def _resources_identity(self) -> str:
        """What recovery compares: the operator's ``--resources`` (canonical), or ``probed``
        (probed figures such as free disk drift between restarts and must not block recovery)."""
        return str(Resources.parse(self.config.resources)) if self.config.resources else "probed"

    def _recover_broken(self, fid: str, tid: str, err: CorruptCheckpoint | None, pid: PidRecord | None) -> None:
        why = f"corrupt checkpoint {err.path}: {err.reason}" if err else "corrupt checkpoint"
        log.error("task %s/%s: %s; reporting it LOST", fid, tid, why)
        self.recovery_report.append(f"task {fid}/{tid}: {why}")
        # The task is reported LOST, so its process must not live on: kill it if we can tell
        # for sure it is ours (pid record with matching boot and create time, or the wrapper's
        # marker on its command line).
        with contextlib.suppress(CheckpointError, OSError):
            victims: list[int] = []
            if pid is not None and pid.boot_id == self.boot_id:
                with contextlib.suppress(psutil.Error):
                    if abs(psutil.Process(pid.pid).create_time() - pid.create_time) < 0.05:
                        victims.append(pid.pid)
            victims.extend(p.pid for p in find_wrappers(str(self.checkpoint.exit_status_path(fid, tid))))
            for v in set(victims):
                with contextlib.suppress(OSError):
                    os.killpg(v, 9)
        with contextlib.suppress(CheckpointError, OSError):
            src = self.checkpoint.task_log(fid, tid)
            dst = self.checkpoint.meta / "corrupt" / f"{fid}.{tid}.{int(self.clock.now())}.log"
            dst.parent.mkdir(parents=True, exist_ok=True)
            os.replace(src, dst)
            self.checkpoint.exit_status_path(fid, tid).unlink(missing_ok=True)
        self._ephemeral.add((fid, tid))
        spec = TaskSpec(fid, tid, tid, None)
        self._submit(self.tracker.recovered_broken(spec, f"Agent restarted; {why}"))

    async def _discard_old_tasks(self, rec: Recovery, rebooted: bool) -> None:
        for t in rec.tasks:
            if t.pid is not None and not rebooted and t.pid.boot_id == self.boot_id:
                try:
                    p = psutil.Process(t.pid.pid)
                    if abs(p.create_time() - t.pid.create_time) < 0.05:
                        os.killpg(t.pid.pid, 9)
                except (psutil.Error, OSError):
                    pass
        import shutil

        await asyncio.to_thread(shutil.rmtree, self.checkpoint.meta / "frameworks", True)
        self.checkpoint.init()

    def _to_update(self, fid: str, status: TaskStatus) -> su.Update:
        return su.Update(fid, status.task_id.value, status.uuid or b"", status.state, status)

    # --- the work queue ------------------------------------------------------------------------

    def _submit(self, effects: list[Any]) -> None:
        if not effects:
            return
        self._work.extend(effects)
        if not self._work_running:
            self._work_running = True
            self._work_idle.clear()
            self.spawn(self._run_work(), name="agent-work")

    async def _drain(self) -> None:
        await self._work_idle.wait()

    async def _run_work(self) -> None:
        try:
            while self._work:
                if isinstance(self._work[0], _DISK):
                    # Pull every queued disk effect forward (in order) into one thread hop:
                    # writing a checkpoint earlier than planned is always safe, and each
                    # non-disk effect still finds everything queued before it on disk.
                    batch: list[object] = [e for e in self._work if isinstance(e, _DISK)]
                    rest = [e for e in self._work if not isinstance(e, _DISK)]
                    self._work.clear()
                    self._work.extend(rest)
                    results = await asyncio.get_running_loop().run_in_executor(self._disk, self._do_disk, batch)
                    for r in results:
                        self._spawned(r)
                    continue
                eff = self._work.popleft()
                try:
                    self._do(eff)
                except Exception:
                    log.exception("effect %r failed", eff)
        finally:
            self._work_running = False
            self._work_idle.set()
            self._timer_wake.set()

    def _do_disk(self, batch: list[object]) -> list[_SpawnResult]:
        """Runs in the checkpoint thread. Group commit: drops, then every write of the batch,
        one ``commit`` (each file fdatasync'd once), and only then the spawns — so a task's
        record is durable before its process exists, and an update before it is sent."""
        cp = self.checkpoint
        spawned: list[_SpawnResult] = []
        drops = [e for e in batch if isinstance(e, tk.DropTask)]
        spawns = [e for e in batch if isinstance(e, tk.SpawnTask)]
        writes = [e for e in batch if not isinstance(e, tk.DropTask | tk.SpawnTask)]
        frameworks: set[str] = set()
        for d in drops:
            if (d.framework_id, d.task_id) in self._ephemeral:
                self._ephemeral.discard((d.framework_id, d.task_id))
                continue
            try:
                cp.remove_task(d.framework_id, d.task_id)
                frameworks.add(d.framework_id)
            except (OSError, CheckpointError):
                log.exception("checkpoint removal failed: %r", d)
        for w in writes:
            eff = w
            try:
                if isinstance(eff, tk.CheckpointTask):
                    s = eff.spec
                    fi = self.frameworks.get(s.framework_id)
                    if fi is not None and not (cp.framework_dir(s.framework_id) / "framework.json").exists():
                        cp.write_framework(s.framework_id, fi)
                    assert s.info is not None
                    group_ex = self._group_executors.get((s.framework_id, s.task_id))
                    cp.write_task(TaskRecordFile(s.framework_id, s.info, group_ex, s.killing_state))
                    frameworks.discard(s.framework_id)
                elif isinstance(eff, su.CheckpointUpdate):
                    u = eff.update
                    if (u.framework_id, u.task_id) not in self._ephemeral:
                        cp.append_update(u.framework_id, u.task_id, u.status)
                elif isinstance(eff, su.CheckpointAck):
                    if (eff.framework_id, eff.task_id) not in self._ephemeral:
                        cp.append_ack(eff.framework_id, eff.task_id, eff.uuid)
                elif isinstance(eff, _WritePid):
                    cp.write_pid(eff.framework_id, eff.task_id, eff.record)
                elif isinstance(eff, _WriteKill):
                    cp.write_kill(eff.framework_id, eff.task_id, eff.reason)
            except (OSError, CheckpointError):
                log.exception("checkpoint write failed: %r", eff)
        try:
            cp.commit()
        except OSError:
            log.exception("checkpoint commit failed")
        for sp in spawns:
            spawned.append(self._spawn_blocking(sp.spec))
        if spawns:
            cp.commit()  # closes the pid records' files (nothing to sync)
        for fid in frameworks:
            with contextlib.suppress(OSError, CheckpointError):
                if not any(t.spec.framework_id == fid for t in list(self.tracker.tasks.values())):
                    cp.remove_framework_if_empty(fid)
        return spawned

    def _do(self, eff: object) -> None:
        now = self.clock.now()
        if isinstance(eff, tk.EmitStatus):
            self._emit(eff, now)
        elif isinstance(eff, su.SendUpdate):
            self._send_update(eff)
        elif isinstance(eff, tk.SignalTask):
            t = self.tracker.get(eff.framework_id, eff.task_id)
            sig = _Signal(eff.framework_id, eff.task_id, eff.signal)
            if eff.signal == "TERM" and t is not None and t.kill_reason is not None:
                # record why before the signal goes out (the work loop flushes the disk effect
                # at the head of the queue first)
                self._work.appendleft(sig)
                self._work.appendleft(_WriteKill(eff.framework_id, eff.task_id, t.kill_reason.value))
            else:
                self.launcher.signal(_task_key(eff.framework_id, eff.task_id), eff.signal)
        elif isinstance(eff, _Signal):
            self.launcher.signal(_task_key(eff.framework_id, eff.task_id), eff.signal)
        elif isinstance(eff, tk.ReleaseTask):
            key = _task_key(eff.framework_id, eff.task_id)
            self.isolator.release(key)
            self._started_at.pop((eff.framework_id, eff.task_id), None)
            t = self.tracker.get(eff.framework_id, eff.task_id)
            if t is not None:
                self._m_terminal.labels(state=t.state.name).inc()
                if t.spec.command is not None and key in self.launcher:
                    self.launcher.signal(key, "KILL")  # nothing of a finished task survives it
        elif isinstance(eff, su.StreamDone):
            key2 = (eff.framework_id, eff.task_id)
            self._groups.pop(key2, None)
            self._group_executors.pop(key2, None)
            self._started_at.pop(key2, None)
            self._submit(self.tracker.handle(tk.Forget(eff.framework_id, eff.task_id), self.clock.now()))
        elif isinstance(eff, tk.DropTask):
            pass
        elif isinstance(eff, su.AckForwarded):
            eid = self._executor_uuids.pop(eff.uuid, None)
            if eid is not None and self.executor_api is not None:
                self._call_executor("acknowledged", eff.framework_id, eid, eff.task_id, eff.uuid)
        elif isinstance(eff, su.Ignored):
            log.debug("status update: %s/%s %s", eff.framework_id, eff.task_id, eff.why)
        elif isinstance(eff, tk.StartExecutor):
            self._start_executor(eff)
        elif isinstance(eff, tk.HandToExecutor):
            self._hand_to_executor(eff)
        elif isinstance(eff, tk.KillViaExecutor):
            self._call_executor("kill", eff.framework_id, eff.executor_id, eff.task_id, eff.grace)
        elif isinstance(eff, tk.ShutdownExecutorProcess):
            self._shutdown_executor(eff.framework_id, eff.executor_id, eff.grace)
        elif isinstance(eff, tk.ExecutorGone):
            if self.channel is not None:
                self.channel.send(ExecutorExited(FrameworkID(eff.framework_id), ExecutorID(eff.executor_id), eff.status))
            if self.executor_api is not None:
                self.executor_api.unregister_executor(eff.framework_id, eff.executor_id)
        else:
            log.warning("unhandled effect %r", eff)

    # --- tasks -------------------------------------------------------------------------------

    def _spawn_blocking(self, spec: TaskSpec) -> _SpawnResult:
        """Checkpoint thread: sandbox, environment, isolation, spawn, pid record."""
        fid, tid = spec.framework_id, spec.task_id
        key = _task_key(fid, tid)
        assert spec.command is not None
        try:
            sandbox = self.checkpoint.sandbox(fid, tid)
            env = task_environment(
                agent_id=self.agent_id or "",
                framework_id=fid,
                task_id=tid,
                executor_id=tid,
                sandbox=str(sandbox),
                path=os.environ.get("PATH"),
                extra=spec.command.environment,
            )
            cgroup = self.isolator.prepare(key, spec.mem_limit, spec.cpus)
            proc = spawn(key, spec.command.argv, env, sandbox, self.checkpoint.exit_status_path(fid, tid), cgroup)
        except (LaunchError, CheckpointError, OSError) as e:
            self.isolator.release(key)
            return _SpawnResult(spec, None, f"Failed to launch: {e}")
        try:
            self.checkpoint.write_pid(fid, tid, PidRecord(proc.pid, proc.create_time, self.boot_id))
        except (OSError, CheckpointError):
            log.exception("pid checkpoint failed for %s", key)
        return _SpawnResult(spec, proc)

    def _spawned(self, r: _SpawnResult) -> None:
        """Event loop: watch the new process and tell the tracker."""
        fid, tid = r.spec.framework_id, r.spec.task_id
        now = self.clock.now()
        if r.proc is None:
            self._submit(self.tracker.handle(tk.SpawnFailed(fid, tid, r.error or "Failed to launch"), now))
            return
        self.launcher.watch(r.proc)
        self.isolator.attach(r.proc.key, r.proc.pid)
        self._m_launched.inc()
        self._started_at[(fid, tid)] = now
        self._submit(self.tracker.handle(tk.Spawned(fid, tid, r.proc.pid), now))

    def _emit(self, eff: tk.EmitStatus, now: float) -> None:
        labels = None
        if eff.exit_code is not None:
            labels = Labels((Label("exit_code", str(eff.exit_code)),))
        status = TaskStatus(
            task_id=TaskID(eff.task_id),
            state=eff.state,
            message=eff.message,
            source=Source(eff.source),
            reason=Reason(eff.reason) if eff.reason else None,
            agent_id=AgentID(self.agent_id) if self.agent_id else None,
            executor_id=ExecutorID(eff.executor_id or eff.task_id),
            timestamp=now,
            uuid=new_status_uuid(),
            labels=labels,
        )
        self._submit(self.updates.handle(su.UpdateGenerated(self._to_update(eff.framework_id, status)), now))

    def _send_update(self, eff: su.SendUpdate) -> None:
        if self.channel is None:
            return
        status = eff.update.status
        assert isinstance(status, TaskStatus)
        if status.agent_id is None and self.agent_id:
            status = attrs.evolve(status, agent_id=AgentID(self.agent_id))
        msg = StatusUpdateMsg(FrameworkID(eff.update.framework_id), status, eff.latest_state)
        if self.channel.send(msg):
            self._m_updates.inc()

    def _on_process_exit(self, key: str, code: int | None) -> None:
        kind, fid, xid = key.split("/", 2)
        now = self.clock.now()
        if kind == "t":
            self.isolator.release(key)
            self._submit(self.tracker.handle(tk.Exited(fid, xid, code), now))
        else:
            self._submit(self.tracker.handle(tk.ExecutorTerminated(fid, xid, code), now))

    # --- custom executors ----------------------------------------------------------------------

    def _executor_info(self, spec: TaskSpec) -> ExecutorInfo | None:
        if spec.info is not None and spec.info.executor is not None:
            return spec.info.executor
        return self._group_executors.get((spec.framework_id, spec.task_id))

    def _start_executor(self, eff: tk.StartExecutor) -> None:
        fid, eid = eff.framework_id, eff.executor_id
        now = self.clock.now()
        info = self._executor_info(eff.spec)
        fi = self.frameworks.get(fid)
        if info is None or fi is None or self.executor_api is None or info.command is None:
            self._submit(self.tracker.handle(tk.ExecutorTerminated(fid, eid, None, "Executor could not be started"), now))
            return
        key = _exec_key(fid, eid)
        try:
            from agent.executor_api import executor_environment

            if fi.id is None:
                fi = attrs.evolve(fi, id=FrameworkID(fid))
            self.executor_api.register_executor(fi, info)
            sandbox = self.checkpoint.sandbox(fid, eid)
            env = task_environment(
                agent_id=self.agent_id or "", framework_id=fid, task_id=eff.spec.task_id, executor_id=eid,
                sandbox=str(sandbox), path=os.environ.get("PATH"),
                extra=command_spec(info.command).environment,
            )
            env.update(
                executor_environment(
                    fid, eid, self.agent_id or "", str(sandbox), f"{self.config.host}:{self.port}",
                    checkpoint=bool(fi.checkpoint), shutdown_grace_seconds=self.config.executor_shutdown_grace,
                )
            )
            exit_path = self.checkpoint.executor_exit_path(fid, eid)
            exit_path.parent.mkdir(parents=True, exist_ok=True)
            proc = self.launcher.launch(key, command_spec(info.command).argv, env, sandbox, exit_path)
        except (LaunchError, CheckpointError, SpecError, OSError, ValueError) as e:
            log.warning("executor %s/%s failed to start: %s", fid, eid, e)
            self._submit(self.tracker.handle(tk.ExecutorTerminated(fid, eid, None, f"Executor failed to start: {e}"), now))
            return
        self._submit(self.tracker.handle(tk.ExecutorStarted(fid, eid, proc.pid), now))

    def _hand_to_executor(self, eff: tk.HandToExecutor) -> None:
        fid, eid = eff.framework_id, eff.executor_id
        done: set[str] = set()
        for tid in eff.task_ids:
            if tid in done:
                continue
            group = self._groups.get((fid, tid))
            if group:
                infos = []
                for g in group:
                    rec = self.tracker.get(fid, g)
                    if rec is not None and rec.spec.info is not None and not rec.terminal:
                        infos.append(rec.spec.info)
                    done.add(g)
                if infos:
                    self._call_executor("launch_group", fid, eid, infos)
            else:
                rec = self.tracker.get(fid, tid)
                done.add(tid)
                if rec is not None and rec.spec.info is not None and not rec.terminal:
                    info = rec.spec.info
                    self._call_executor("launch", fid, eid, info)

    def _call_executor(self, method: str, *args: Any) -> None:
        if self.executor_api is None:
            return

        async def call() -> None:
            try:
                await getattr(self.executor_api, method)(*args)
            except Exception as e:
                log.info("executor API %s%r failed: %s", method, args[:2], e)

        if self.running:
            self.spawn(call(), name=f"executor-{method}")

    def _shutdown_executor(self, fid: str, eid: str, grace: float) -> None:
        self._call_executor("shutdown", fid, eid)
        key = _exec_key(fid, eid)
        if key in self.launcher:
            self.launcher.signal(key, "TERM")

            async def escalate() -> None:
                await self.clock.sleep(grace)
                self.launcher.signal(key, "KILL")

            if self.running:
                self.spawn(escalate(), name="executor-shutdown")

    # ExecutorHost (called by agent.executor_api)

    def on_executor_update(self, framework_id: str, executor_id: str, status: TaskStatus) -> None:
        now = self.clock.now()
        tid = status.task_id.value
        try:
            effects = self.tracker.handle(tk.ExecutorStatus(framework_id, executor_id, tid, status.state), now)
        except (tk.UnknownTask, ValueError) as e:
            log.warning("executor %s/%s update refused: %s", framework_id, executor_id, e)
            return
        if status.uuid:
            self._executor_uuids[status.uuid] = executor_id
        if status.agent_id is None and self.agent_id:
            status = attrs.evolve(status, agent_id=AgentID(self.agent_id))
        self._submit(self.updates.handle(su.UpdateGenerated(self._to_update(framework_id, status)), now))
        self._submit(effects)

    def on_executor_message(self, framework_id: str, executor_id: str, data: bytes) -> None:
        if self.channel is not None:
            self.channel.send(ExecutorMessageMsg(FrameworkID(framework_id), ExecutorID(executor_id), data))

    def on_executor_subscribed(self, framework_id: str, executor_id: str) -> None:
        log.info("executor %s/%s subscribed", framework_id, executor_id)

    def on_executor_disconnected(self, framework_id: str, executor_id: str) -> None:
        log.info("executor %s/%s disconnected", framework_id, executor_id)

    def _agent_info(self) -> AgentInfo:
        return AgentInfo(
            hostname=self.config.host,
            port=self.port,
            resources=self.resources.to_mesos(),
            attributes=attributes_to_mesos(self.attributes),
            id=AgentID(self.agent_id) if self.agent_id else None,
        )

    # --- master messages -------------------------------------------------------------------------

    def _build_register(self) -> Register:
        running: list[RunningTask] = []
        fids: set[str] = set()
        for t in self.tracker.tasks.values():
            fid, tid = t.key
            if (fid, tid) in self._ephemeral and t.terminal and not self.updates.pending(fid, tid):
                continue
            latest = self.updates.latest(fid, tid)
            status = latest.status if latest is not None else None
            info = t.spec.info
            running.append(
                RunningTask(
                    framework_id=FrameworkID(fid),
                    task_id=TaskID(tid),
                    state=t.state,
                    resources=info.resources if info is not None else (),
                    executor_id=ExecutorID(t.spec.executor_id) if t.spec.executor_id else None,
                    name=t.spec.name,
                    status=status if isinstance(status, TaskStatus) else None,
                )
            )
            fids.add(fid)
        return Register(
            hostname=self.config.host,
            port=self.port,
            resources=self.resources.to_mesos(),
            agent_id=AgentID(self.agent_id) if self.agent_id else None,
            attributes=attributes_to_mesos(self.attributes),
            version=VERSION,
            isolation=self.isolator.name,
            boot_id=self.boot_id,
            tasks=tuple(running),
            frameworks=tuple(self.frameworks[f] for f in sorted(fids) if f in self.frameworks),
        )

    def _on_registered(self, reg: Registered) -> None:
        new_id = reg.agent_id.value
        if new_id != self.agent_id:
            if self.agent_id is not None:
                log.warning("master assigned a new agent id %s (was %s)", new_id, self.agent_id)
            self.agent_id = new_id
            meta = AgentMeta(
                new_id, self.boot_id, self._resources_identity(), self.config.attributes or "", self.config.hostname
            )
            self.checkpoint.write_agent(meta)
        log.info("registered with master %s as %s (epoch %d)", reg.master_id, new_id, reg.epoch)
        self._m_registered.set(1)
        self._last_slack = None
        if self._estimator is not None:
            self._estimator.reset()
        self._submit(self.updates.handle(su.Resumed(), self.clock.now()))
        self._timer_wake.set()

    def _on_disconnected(self) -> None:
        self._m_registered.set(0)
        self.updates.handle(su.Paused(), self.clock.now())
        log.info("disconnected from the master")

    def _on_master_message(self, body: object) -> None:
        now = self.clock.now()
        if isinstance(body, RunTasks):
            self._run_tasks(body, now)
        elif isinstance(body, KillTask):
            self._submit(self.tracker.handle(tk.KillTask(body.framework_id.value, body.task_id.value, body.grace_seconds), now))
        elif isinstance(body, AcknowledgeMsg):
            self._submit(
                self.updates.handle(su.Acknowledged(body.framework_id.value, body.task_id.value, body.uuid), now)
            )
        elif isinstance(body, Revoke):
            for tid in body.task_ids:
                self._submit(
                    self.tracker.handle(
                        tk.KillTask(
                            body.framework_id.value, tid.value, body.grace_seconds, tk.KillReason.PREEMPTED,
                            f"Revoked by the master: {body.reason}" if body.reason else "Revoked by the master",
                        ),
                        now,
                    )
                )
        elif isinstance(body, ShutdownFramework):
            self._submit(self.tracker.handle(tk.ShutdownFramework(body.framework_id.value), now))
        elif isinstance(body, ShutdownExecutor):
            self._shutdown_executor(body.framework_id.value, body.executor_id.value, self.config.executor_shutdown_grace)
        elif isinstance(body, FrameworkMessageMsg):
            self._call_executor("message", body.framework_id.value, body.executor_id.value, body.data)
        else:
            log.debug("ignoring %r", type(body).__name__)
        self._timer_wake.set()

    def _run_tasks(self, rt: RunTasks, now: float) -> None:
        fid = rt.framework_id.value
        fi = rt.framework_info
        if fi.id is None:
            fi = attrs.evolve(fi, id=rt.framework_id)
        if self.frameworks.get(fid) != fi:
            self.frameworks[fid] = fi
            with contextlib.suppress(CheckpointError, OSError):
                (self.checkpoint.framework_dir(fid) / "framework.json").unlink(missing_ok=True)
        killing = any(c.type is CapabilityType.TASK_KILLING_STATE for c in fi.capabilities)
        group_ids = tuple(t.task_id.value for t in rt.tasks) if rt.group else ()
        specs: list[TaskSpec] = []
        errors: list[tuple[TaskInfo, str]] = []
        for info in rt.tasks:
            try:
                specs.append(task_spec(fid, info, rt.executor if rt.group else None, killing_state=killing))
            except SpecError as e:
                errors.append((info, str(e)))
        if rt.group and errors:
            # all or nothing: one bad task fails the whole group
            msg = "; ".join(m for _, m in errors)
            errors = [(i, f"task group invalid: {msg}") for i in rt.tasks]
            specs = []
        for info, msg in errors:
            tid = info.task_id.value
            self._ephemeral.add((fid, tid))
            self._submit(self.tracker.handle(tk.LaunchRejected(fid, tid, msg), now))
        effects: list[Any] = []
        for spec in specs:
            if rt.group and rt.executor is not None:
                self._groups[(fid, spec.task_id)] = group_ids
                self._group_executors[(fid, spec.task_id)] = rt.executor
            effects.extend(self.tracker.handle(tk.LaunchTask(spec), now))
        self._submit(effects)

    # --- timers and monitoring ---------------------------------------------------------------------

    async def _timer_loop(self) -> None:
        while True:
            deadlines = [d for d in (self.tracker.next_deadline(), self.updates.next_deadline()) if d is not None]
            self._timer_wake.clear()
            if deadlines:
                delay = max(0.0, min(deadlines) - self.clock.now())
                sleeper = asyncio.ensure_future(self.clock.sleep(delay))
                waker = asyncio.ensure_future(self._timer_wake.wait())
                try:
                    await asyncio.wait({sleeper, waker}, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    sleeper.cancel()
                    waker.cancel()
            else:
                await self._timer_wake.wait()
                continue
            now = self.clock.now()
            self._submit(self.tracker.handle(tk.Tick(), now))
            self._submit(self.updates.handle(su.Tick(), now))

    async def _monitor_loop(self) -> None:
        cfg = self.config
        last_estimate = 0.0
        cpu_prev: dict[str, tuple[float, float]] = {}
        while True:
            await self.clock.sleep(cfg.monitor_interval)
            try:
                usage, breaches = await asyncio.to_thread(self.isolator.sample)
            except Exception:
                log.exception("usage sampling failed")
                continue
            now = self.clock.now()
            self._m_running.set(len(self.tracker.active()))
            for b in breaches:
                _, fid, tid = b.key.split("/", 2)
                t = self.tracker.get(fid, tid)
                if t is not None and not t.terminal and t.kill_reason is not tk.KillReason.MEMORY:
                    self._m_limit.inc()
                    log.warning("task %s/%s: %s", fid, tid, b.message)
                    self._submit(self.tracker.handle(tk.LimitExceeded(fid, tid, b.message), now))
            if now - last_estimate >= cfg.estimate_interval:
                last_estimate = now
                self._oversubscription(usage, cpu_prev, now)

    def _oversubscription(self, usage: dict[str, Any], cpu_prev: dict[str, tuple[float, float]], now: float) -> None:
        cpu_rate = 0.0
        for key, u in usage.items():
            prev = cpu_prev.get(key)
            cpu_prev[key] = (now, u.cpu_seconds)
            _, fid, tid = key.split("/", 2)
            t = self.tracker.get(fid, tid)
            if prev is not None and now > prev[0] and t is not None and not t.spec.revocable:
                cpu_rate += max(0.0, (u.cpu_seconds - prev[1]) / (now - prev[0]))
        for k in list(cpu_prev):
            if k not in usage:
                del cpu_prev[k]
        allocated = Resources.empty()
        revocable = []
        for t in self.tracker.active():
            info = t.spec.info
            if info is None:
                continue
            try:
                r = Resources.from_mesos(info.resources)
            except ValueError:
                continue
            allocated = allocated + r.non_revocable()
            if t.spec.revocable:
                from agent.qos import RevocableTask

                revocable.append(
                    RevocableTask(t.spec.task_id, t.spec.framework_id, self._started_at.get(t.key, now), r)
                )
        if self._estimator is not None and self.channel is not None and self.channel.registered:
            try:
                est = self._estimator.estimate(self.resources, allocated, {"cpus": cpu_rate}, now)
            except Exception:
                log.exception("resource estimator failed")
                est = None
            if est is not None and est != self._last_slack:
                self._last_slack = est
                self.channel.send(SlackEstimate(resources=est.to_mesos()))
        if self._qos is not None and revocable:
            try:
                load1 = os.getloadavg()[0] / (os.cpu_count() or 1)
                evictions = self._qos.corrections(
                    {"load1_per_core": load1, "cpu_percent": psutil.cpu_percent(None)}, revocable, now
                )
            except Exception:
                log.exception("QoS controller failed")
                evictions = []
            for ev in evictions:
                log.warning("QoS eviction of %s/%s: %s", ev.framework_id, ev.task_id, ev.reason)
                self._submit(
                    self.tracker.handle(
                        tk.KillTask(ev.framework_id, ev.task_id, None, tk.KillReason.PREEMPTED, ev.reason), now
                    )
                )

    # --- HTTP ----------------------------------------------------------------------------------

    async def _http_health(self, request: web.Request) -> web.Response:
        return web.json_response({"status": "ok", "registered": bool(self.channel and self.channel.registered)})

    def state(self) -> dict[str, Any]:
        tasks = []
        for t in self.tracker.tasks.values():
            fid, tid = t.key
            tasks.append(
                {
                    "framework_id": fid,
                    "id": tid,
                    "name": t.spec.name,
                    "state": t.state.name,
                    "pid": t.pid,
                    "executor_id": t.spec.executor_id or tid,
                    "resources": _legacy(t.spec.info),
                    "exit_code": t.exit_code,
                    "sandbox": str(self.checkpoint.sandboxes / fid / tid),
                    "pending_updates": len(self.updates.pending(fid, tid)),
                }
            )
        return {
            "id": self.agent_id,
            "hostname": self.config.hostname,
            "master": self.channel.master if self.channel else self.config.master,
            "registered": bool(self.channel and self.channel.registered),
            "version": VERSION,
            "boot_id": self.boot_id,
            "isolation": self.isolator.name,
            "resources": self.resources.to_legacy_dict(),
            "attributes": self.attributes,
            "frameworks": sorted(self.frameworks),
            "tasks": tasks,
            "recovery": self.recovery_report,
            "stale_frames": self.channel.stale_frames if self.channel else 0,
        }

    async def _http_state(self, request: web.Request) -> web.Response:
        return web.json_response(self.state())

    async def _http_metrics(self, request: web.Request) -> web.Response:
        self._m_running.set(len(self.tracker.active()))
        return web.Response(body=generate_latest(self.registry), headers={"Content-Type": CONTENT_TYPE_LATEST})


def _legacy(info: TaskInfo | None) -> dict[str, float | str]:
    if info is None:
        return {}
    try:
        return Resources.from_mesos(info.resources).to_legacy_dict()
    except ValueError:
        return {}


