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
import errno
import logging
import os
import random
import ssl
import threading
import time
from typing import Any

import attrs
from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Gauge

from agent import auth as agent_auth
from agent import http_api, nvml, oversubscription, recovery, users
from agent import status_updates as su
from agent import tasks as tk
from agent.capacity import mentioned_names
from agent.channel import AgentChannel
from agent.checkpoint import (
    AgentMeta,
    Checkpoint,
    CheckpointError,
    PidRecord,
    TaskRecordFile,
)
from agent.config import AgentConfig
from agent.disk import gc_max_age, quota_message, restore_reserve
from agent.diskwatch import Reserve, fs_usage, measure
from agent.environment import container_id, task_environment
from agent.executors import ExecutorGlue
from agent.fetch_plan import failure as fetch_failure
from agent.fetcher import Fetched, Fetcher, default_cache_dir
from agent.gc import SandboxGC
from agent.gpus import (
    GpuBook,
    GpuConfigError,
    Refused,
    choose_devices,
    gpu_attributes,
    gpu_environment,
    parse_device_list,
)
from agent.gpus import identity as gpu_identity
from agent.health import CheckState, HealthState, Outcome, Policy
from agent.health_checker import Checkers
from agent.isolation import CgroupOptions, Isolator, MonitorIsolator, detect
from agent.launcher import Launcher, LaunchError, Proc, boot_id, spawn
from agent.logs import FLUSH_TIMEOUT, LogWriterClient
from agent.recovery import StartupError
from agent.taskspec import SpecError, TaskSpec, task_spec
from agent.usage import UsageBook
from protocol import requestlog
from protocol.agent_channel import (
    AGENT_HTTPS,
    AcknowledgeMsg,
    ExecutorExited,
    FrameworkMessageMsg,
    KillTask,
    Register,
    Registered,
    Revoke,
    RunningTask,
    RunTasks,
    ShutdownExecutor,
    ShutdownFramework,
    StatusUpdateMsg,
    TaskUsageEntry,
    Unregister,
    UsageReport,
)
from protocol.clock import Clock, SystemClock
from protocol.ids import new_status_uuid
from protocol.lifecycle import Service
from protocol.mesos import (
    AgentInfo,
    CapabilityType,
    CheckStatusCommand,
    CheckStatusHttp,
    CheckStatusInfo,
    CheckStatusTcp,
    CheckType,
    ContainerStatus,
    FrameworkInfo,
    Reason,
    Source,
    TaskInfo,
    TaskStatus,
)
from protocol.mesos_common import AgentID, ContainerID, ExecutorID, FrameworkID, Label, Labels, TaskID
from protocol.resources import Resources, attributes_to_mesos, parse_attributes
from protocol.task_states import TaskState, is_terminal
from protocol.tls import TlsError, client_context, server_context
from protocol.version import AGORA_VERSION

log = logging.getLogger(__name__)

VERSION = AGORA_VERSION


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
    logs: str | None = None  # the sandbox, when the log writer has the task's stdout/stderr


@attrs.frozen
class _WriteKill:
    framework_id: str
    task_id: str
    reason: str
    deadline: float | None = None


@attrs.frozen
class _WriteFramework:
    framework_id: str


@attrs.frozen
class _Signal:
    """Signal a task (after its kill record was written)."""

    framework_id: str
    task_id: str
    signal: str


_DISK = (
    _WriteFramework,
    _WriteKill,
    tk.CheckpointTask,
    tk.SpawnTask,
    su.CheckpointUpdate,
    su.CheckpointAck,
    _WritePid,
    tk.DropTask,
)


_DISK_TYPES = frozenset(_DISK)


def _task_key(fid: str, tid: str) -> str:
    return f"t/{fid}/{tid}"


def _needs_thread(effects: list[object]) -> bool:
    """Whether a disk batch has slow work (a spawn, a file creation, an fsync) that must not run
    on the event loop. A batch of plain appends (acks, pid and kill records, non-durable updates)
    costs a few tens of microseconds, less than the hop to the checkpoint thread and back."""
    for e in effects:
        if isinstance(e, su.CheckpointUpdate):
            if e.durable:
                return True
        elif isinstance(e, (tk.SpawnTask, tk.CheckpointTask, _WriteFramework)):
            return True
    return False


__all__ = ["AgentService", "StartupError"]


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
            durable_all=config.sync_updates == "all",
        )
        self.launcher = Launcher(self._on_process_exit)
        self.isolator: Isolator = detect(
            config.isolation, config.work_dir,
            CgroupOptions(cpu_quota=config.cgroups_enable_cfs, pids_max=config.pids_max, cgroups_root=config.cgroups_root),
        )
        self.usage = UsageBook()  # per-task CPU, memory and disk figures
        self.gpus = GpuBook(())  # this agent's GPU devices and which task holds which (_build_plugins)
        # the log writer (agent/logger.py) rotating tasks' stdout/stderr; None: plain files
        self.logs = (LogWriterClient(self.checkpoint.meta, config.log_max_size, config.log_max_files)
                     if config.log_max_size > 0 else None)
        self._exit_waits: dict[str, tuple[int | None, asyncio.TimerHandle]] = {}  # exits waiting for their logs
        self._oom_fds: dict[str, int] = {}  # task key -> the isolator's OOM descriptor being watched
        self.boot_id = boot_id()
        self.agent_id: str | None = None
        self.resources = Resources.empty()
        self.attributes: dict[str, str | float] = {}
        self._server_ssl: ssl.SSLContext | None = None  # set in _start with --tls-cert/--tls-key
        self.port = 0
        self.channel: AgentChannel | None = None
        self.executor_api: Any = None
        self.recovery_report: list[str] = []
        self.retiring = False  # SIGUSR1: new launches are dropped, every task is killed, then exit
        self.start_time = time.time()  # /state's start_time
        self._work: collections.deque[object] = collections.deque()
        self._work_running = False
        self._work_idle = asyncio.Event()
        self._work_idle.set()
        self.timer_wake = asyncio.Event()
        self._disk = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="agent-ckpt")
        self._spawners = concurrent.futures.ThreadPoolExecutor(max_workers=4, thread_name_prefix="agent-spawn")
        self._drops: dict[tuple[str, str], None] = {}  # finished tasks whose logs are to be removed
        self._drops_lock = threading.Lock()
        self._runner: web.AppRunner | None = None
        self.executors = ExecutorGlue(self)
        self.fetcher = Fetcher(
            config.fetcher_cache_dir or default_cache_dir(config.work_dir), config.fetcher_cache_size,
            stall_timeout=config.fetcher_stall_timeout, frameworks_home=config.frameworks_home,
            progress_interval=config.fetcher_progress_interval,
        )
        self.checkers = Checkers(self._check_outcome)
        self.health: dict[tuple[str, str], HealthState] = {}
        self.check_states: dict[tuple[str, str], CheckState] = {}
        self.sandbox_gc = SandboxGC(self.checkpoint.sandboxes, config.gc_delay)
        self.reserve = Reserve(self.checkpoint.meta / "reserve", config.work_dir_reserve)
        self.disk_used = 0.0  # the work dir's file system, fraction in use at the last disk check
        self.setpriv = users.setpriv_path()
        self.version = VERSION
        self.last_slack: Resources | None = None
        self.estimator: Any = None
        self.qos: Any = None
        self.registry = CollectorRegistry()
        self.m_launched = Counter("agora_agent_tasks_launched_total", "Tasks launched", registry=self.registry)
        self.m_terminal = Counter(
            "agora_agent_tasks_terminal_total", "Tasks ended, by state", ["state"], registry=self.registry
        )
        self.m_updates = Counter(
            "agora_agent_status_updates_sent_total", "Status update sends (including resends)", registry=self.registry
        )
        self.m_running = Gauge("agora_agent_tasks_active", "Non-terminal tasks", registry=self.registry)
        self.m_registered = Gauge("agora_agent_registered", "1 while registered with a master", registry=self.registry)
        self.m_limit = Counter(
            "agora_agent_limit_kills_total", "Tasks killed past their memory limit", registry=self.registry
        )

    # --- lifecycle ---------------------------------------------------------------------------

    async def _start(self) -> None:
        cfg = self.config
        self._build_plugins()  # capacity and GPUs first: a bad device selection stops the start
        try:  # TLS files are checked before anything starts (protocol/tls.py)
            master_ssl = (
                client_context(cfg.master_ca, cfg.tls_cert, cfg.tls_key, ca_flag="--master-ca")
                if cfg.tls_to_master else None
            )
            self._server_ssl = server_context(cfg.tls_cert, cfg.tls_key) if cfg.tls_cert and cfg.tls_key else None
        except TlsError as e:
            raise StartupError(str(e)) from e
        self.checkpoint.init()
        await asyncio.to_thread(self.fetcher.init)
        await asyncio.to_thread(self._init_disk)
        if self.logs is not None:
            self.logs.attach(asyncio.get_running_loop(), self._logs_complete)
        await self._start_http()
        await recovery.recover(self)
        if self.logs is not None and self.logs.live:  # re-attached tasks: make sure a writer has their pipes
            await asyncio.to_thread(self.logs.revive)
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
            ssl=master_ssl,
            authorization=agent_auth.channel_authorization(cfg),
        )
        self.spawn(self.channel.run(), name="agent-channel")
        self.spawn(self._timer_loop(), name="agent-timers")
        self.spawn(self._monitor_loop(), name="agent-monitor")

    def _init_disk(self) -> None:
        """Blocking: the work dir's reserve, and how full its file system is (for the GC sweep)."""
        self.reserve.ensure()
        with contextlib.suppress(OSError):
            self.disk_used = fs_usage(self.config.work_dir)[0]

    def retire(self) -> None:
        """Stop taking work: from now on every launch is answered TASK_DROPPED (TASK_LOST for
        frameworks that are not partition aware) so its framework re-runs it elsewhere, and the
        master is told (``UNREGISTER``) to offer nothing more on this agent."""
        if self.retiring:
            return
        self.retiring = True
        log.info("retiring: refusing new launches, asking the master to stop offering this agent")
        if self.channel is not None and self.channel.registered:
            self.channel.send(Unregister())

    async def kill_all_tasks(self, within: float = 30.0) -> bool:
        """Retire (:meth:`retire`), kill every task (each with its grace period) and wait until
        all have ended: what ``SIGUSR1`` does before the agent exits (Mesos semantics), so a
        deliberately retired agent leaves no process behind and runs nothing launched after it.
        Returns False if some task outlived ``within``."""
        self.retire()
        now = self.clock.now()
        for fid in sorted({t.spec.framework_id for t in self.tracker.active()}):
            self.submit(self.tracker.handle(tk.ShutdownFramework(fid, None, tk.KillReason.AGENT_SHUTDOWN), now))
        self.timer_wake.set()
        deadline = now + within
        while self.tracker.active() and self.clock.now() < deadline:
            await self.clock.sleep(0.05)
        # give the terminal updates a moment to be acknowledged (they stay checkpointed anyway)
        ack_deadline = min(deadline, self.clock.now() + 5.0)
        while len(self.updates) and self.channel is not None and self.channel.registered:
            if self.clock.now() >= ack_deadline:
                break
            await self.clock.sleep(0.05)
        await self.drain()
        return not self.tracker.active()

    async def stop(self) -> None:
        if self.channel is not None:
            self.channel.close()
        await super().stop()

    async def _stop(self) -> None:
        # Tasks keep running (they survive the agent by design); we only stop watching them.
        self.launcher.detach_all()
        if self._runner is not None:  # stop listening first: executors reconnect to the next agent
            for site in list(self._runner.sites):
                await site.stop()
        if self.executor_api is not None:
            with contextlib.suppress(Exception):
                await self.executor_api.close()
        if self._runner is not None:
            await self._runner.cleanup()
        await asyncio.get_running_loop().run_in_executor(self._disk, self.checkpoint.close)
        self._disk.shutdown(wait=True)
        self._spawners.shutdown(wait=True)
        self.fetcher.close()
        await self.checkers.close()
        for key in list(self._oom_fds):
            self.unwatch_oom(key)
        for _code, timer in self._exit_waits.values():
            timer.cancel()  # recovery reads these exits from their exit files
        self._exit_waits.clear()
        if self.logs is not None:
            self.logs.close()
        await asyncio.to_thread(self.isolator.close)

    def _build_plugins(self) -> None:
        cfg = self.config
        from agent.capacity import capacity

        self.resources = capacity(cfg.work_dir, cfg.resources)
        self.attributes = parse_attributes(cfg.attributes) if cfg.attributes else {}
        self._build_gpus()
        try:
            from agent.estimator import make_estimator
            from agent.qos import make_qos

            opts: dict[str, Any] = {}
            if cfg.resource_estimator == "fixed":
                opts["oversubscribed"] = cfg.oversubscribed or ""
            self.estimator = make_estimator(cfg.resource_estimator, **opts)
            qopts: dict[str, Any] = {}
            if cfg.qos_controller == "load":
                qopts = {"threshold": cfg.qos_threshold, "window": cfg.qos_window}
            self.qos = make_qos(cfg.qos_controller, **qopts)
        except ImportError:  # pragma: no cover - plug-ins ship with the agent
            self.estimator = self.qos = None

    def _build_gpus(self) -> None:
        """The GPU devices this agent uses (NVML, ``--nvidia-gpu-devices``, ``gpus`` in
        ``--resources``): the ``gpus`` resource, the ``gpu_*`` attributes and the book."""
        cfg = self.config
        given = self.resources.scalar("gpus") if cfg.resources and "gpus" in mentioned_names(cfg.resources) else None
        requested = parse_device_list(cfg.nvidia_gpu_devices) if cfg.nvidia_gpu_devices is not None else None
        try:
            known = nvml.machine_devices()
        except nvml.NvmlError as e:
            if requested is not None or given:
                raise StartupError(str(e)) from e
            log.warning("%s: this agent uses no GPUs", e)
            known = None
        try:
            devices = choose_devices(known, requested, given)
        except GpuConfigError as e:
            raise StartupError(str(e)) from e
        if given is None and devices:
            self.resources = self.resources.without("gpus") + Resources.of(gpus=len(devices))
        for name, value in gpu_attributes(devices).items():
            self.attributes.setdefault(name, value)  # the operator's --attributes win
        self.gpus = GpuBook(devices, sharing=cfg.gpu_sharing)
        if devices:
            log.info("GPUs: %s", ", ".join(f"{d.index} ({d.model or 'declared'}, {d.uuid})" for d in devices))

    async def _start_http(self) -> None:
        app = web.Application(client_max_size=1024 * 1024)
        if (http_creds := agent_auth.http_credentials(self.config)) is not None:
            app.middlewares.append(agent_auth.middleware(http_creds))
        http_api.add_routes(app, self)
        sandbox_files = None
        try:
            from agent import files

            sandbox_files = files.add_routes(app, self.checkpoint.sandboxes)
        except ImportError:  # pragma: no cover
            log.warning("agent.files missing: no sandbox browsing")
        from agent import operator_api

        operator_api.add_routes(app, self, sandbox_files)
        try:
            from agent.executor_api import ExecutorAPI

            self.executor_api = ExecutorAPI(self.executors, self.agent_info)
            app.router.add_routes(self.executor_api.routes())
        except ImportError:  # pragma: no cover
            log.warning("agent.executor_api missing: no custom executors")
        requestlog.install()  # a malformed request: one line, rate limited per client
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.config.host, self.config.port, ssl_context=self._server_ssl)
        await site.start()
        self.port = int(self._runner.addresses[0][1])

    @property
    def executor_registry(self) -> Any:
        return self.executor_api

    def sweep_sandboxes(self, keep: Any) -> int:
        """Blocking: remove the sandboxes ``keep(framework, task or executor)`` does not keep."""
        return self.sandbox_gc.sweep(keep, None, self.gc_max_age())

    @property
    def frameworks(self) -> dict[str, FrameworkInfo]:
        return self.tracker.frameworks

    @property
    def url(self) -> str:
        return f"{'https' if self._server_ssl is not None else 'http'}://{self.config.host}:{self.port}"

    @staticmethod
    def task_key(fid: str, tid: str) -> str:
        return _task_key(fid, tid)

    @staticmethod
    def write_pid_effect(fid: str, tid: str, rec: PidRecord) -> object:
        return _WritePid(fid, tid, rec)

    def state(self) -> dict[str, Any]:
        return http_api.state(self)

    def resources_identity(self) -> str:
        """What recovery compares: the operator's ``--resources`` (canonical), or ``probed``
        (probed figures such as free disk drift between restarts and must not block recovery),
        and the GPU devices by index and UUID when there are any (a task's checkpoint names
        its devices by index: they must be the same devices)."""
        base = str(Resources.parse(self.config.resources)) if self.config.resources else "probed"
        devices = gpu_identity(tuple(self.gpus.devices.values()))
        return f"{base} gpus[{devices}]" if devices else base

    def to_update(self, fid: str, status: TaskStatus) -> su.Update:
        return su.Update(fid, status.task_id.value, status.uuid or b"", status.state, status)

    # --- the work queue ------------------------------------------------------------------------

    def submit(self, effects: list[Any]) -> None:
        if not effects:
            return
        self._work.extend(effects)
        if not self._work_running:
            self._work_running = True
            self._work_idle.clear()
            self.spawn(self._run_work(), name="agent-work")

    async def drain(self) -> None:
        await self._work_idle.wait()

    async def _run_work(self) -> None:
        try:
            while self._work:
                if type(self._work[0]) in _DISK_TYPES:
                    # Pull every queued disk effect forward (in order) into one batch: writing
                    # a checkpoint earlier than planned is always safe, and each non-disk
                    # effect still finds everything queued before it on disk.
                    batch: list[object] = []
                    rest: list[object] = []
                    for e in self._work:
                        (batch if type(e) in _DISK_TYPES else rest).append(e)
                    self._work.clear()
                    self._work.extend(rest)
                    if _needs_thread(batch):
                        results = await asyncio.get_running_loop().run_in_executor(self._disk, self._do_disk, batch)
                        for r in results:
                            self._spawned(r)
                    else:
                        # No batch is in the thread now (this loop awaits each one), so the
                        # checkpoint's batch state is ours; appends go to the page cache.
                        self._do_disk(batch)
                    continue
                eff = self._work.popleft()
                try:
                    self._do(eff)
                except Exception:
                    log.exception("effect %r failed", eff)
        finally:
            self._work_running = False
            self._work_idle.set()
            self.timer_wake.set()

    def _do_disk(self, batch: list[object]) -> list[_SpawnResult]:
        """Runs in the checkpoint thread (or inline on the loop for a batch of plain appends,
        see ``_needs_thread``). Group commit: every write and drop of the batch in queue order,
        the spawns (their task records are written by then), then one ``commit`` (each file
        with a new durable update fdatasync'd once) — a terminal update is durable before it is
        sent, any update is written before it is sent."""
        cp = self.checkpoint
        spawned: list[_SpawnResult] = []
        spawns = [e for e in batch if isinstance(e, tk.SpawnTask)]
        for w in batch:  # writes and drops in queue order (an ack may precede its task's drop)
            if isinstance(w, tk.SpawnTask):
                continue
            if isinstance(w, tk.DropTask):
                with contextlib.suppress(CheckpointError, OSError):
                    cp.release(w.framework_id, w.task_id)
                # unlinking is slow on this kind of file system: it happens later, off this
                # thread (``_reap_dropped``); a finished log left behind is harmless on recovery
                with self._drops_lock:
                    self._drops[(w.framework_id, w.task_id)] = None
                continue
            for attempt in (0, 1):
                try:
                    self._write_effect(w)
                except OSError as e:
                    if e.errno == errno.ENOSPC and attempt == 0 and self.reserve.release():
                        continue  # the work dir is full: the reserve makes room for this
                    log.exception("checkpoint write failed: %r", w)
                except CheckpointError:
                    log.exception("checkpoint write failed: %r", w)
                break
        # Task records need only be *written* before their spawn (they become durable with the
        # task's first update), so spawning does not wait for this batch's fdatasyncs.
        specs = [sp.spec for sp in spawns]
        if len(specs) > 1:  # spawns are independent: a few at a time (file creation is slow here)
            spawned = list(self._spawners.map(self._spawn_blocking, specs))
        else:
            spawned = [self._spawn_blocking(sp) for sp in specs]
        for r in spawned:
            if r.proc is not None:
                try:
                    cp.write_pid(r.spec.framework_id, r.spec.task_id, PidRecord(r.proc.pid, r.proc.create_time, self.boot_id))
                except (OSError, CheckpointError):
                    log.exception("pid checkpoint failed for %s", r.proc.key)
        try:
            cp.commit()
        except OSError as e:
            if e.errno == errno.ENOSPC and self.reserve.release():
                with contextlib.suppress(OSError):
                    cp.commit()
            else:
                log.exception("checkpoint commit failed")
        return spawned

    def _write_effect(self, eff: object) -> None:
        cp = self.checkpoint
        if isinstance(eff, tk.CheckpointTask):
            s = eff.spec
            with self._drops_lock:  # a task id reused before its old log was removed
                if self._drops.pop((s.framework_id, s.task_id), 0) is None:
                    cp.remove_task(s.framework_id, s.task_id)
            fi = self.tracker.frameworks.get(s.framework_id)
            if fi is not None and not cp.has_framework(s.framework_id):
                cp.write_framework(s.framework_id, fi)
            assert s.info is not None
            cp.write_task(TaskRecordFile(s.framework_id, s.info, s.group_executor, s.killing_state, s.gpu_devices,
                                         s.group if len(s.group) > 1 else ()))
        elif isinstance(eff, su.CheckpointUpdate):
            u = eff.update
            if (u.framework_id, u.task_id) not in self.tracker.ephemeral:
                cp.append_update(u.framework_id, u.task_id, u.status, sync=eff.durable)
        elif isinstance(eff, su.CheckpointAck):
            if (eff.framework_id, eff.task_id) not in self.tracker.ephemeral:
                cp.append_ack(eff.framework_id, eff.task_id, eff.uuid)
        elif isinstance(eff, _WritePid):
            cp.write_pid(eff.framework_id, eff.task_id, eff.record)
        elif isinstance(eff, _WriteKill):
            cp.write_kill(eff.framework_id, eff.task_id, eff.reason, eff.deadline)
        elif isinstance(eff, _WriteFramework):
            info = self.tracker.frameworks.get(eff.framework_id)
            if info is not None:
                cp.write_framework(eff.framework_id, info)

    def _reap_dropped(self) -> None:
        """Worker thread: remove the logs of finished tasks, then empty framework directories."""
        frameworks: set[str] = set()
        while True:
            with self._drops_lock:
                if not self._drops:
                    break
                key = next(iter(self._drops))
                del self._drops[key]
                try:
                    self.checkpoint.unlink_task(*key)
                    frameworks.add(key[0])
                except (OSError, CheckpointError):
                    log.exception("checkpoint removal failed for %s/%s", *key)
        for fid in frameworks:
            with contextlib.suppress(OSError, CheckpointError):
                if not any(t.spec.framework_id == fid for t in list(self.tracker.tasks.values())):
                    self.checkpoint.remove_framework_if_empty(fid)

    def _signal_task(self, key: str, name: str) -> None:
        if name == "KILL":
            self.kill_task_processes(key)
        else:
            self.launcher.signal(key, name)

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
                self._work.appendleft(_WriteKill(eff.framework_id, eff.task_id, t.kill_reason.value, t.kill_deadline))
            else:
                self._signal_task(_task_key(eff.framework_id, eff.task_id), eff.signal)
        elif isinstance(eff, _Signal):
            self._signal_task(_task_key(eff.framework_id, eff.task_id), eff.signal)
        elif isinstance(eff, tk.ReleaseTask):
            key = _task_key(eff.framework_id, eff.task_id)
            if self.gpus.release((eff.framework_id, eff.task_id)):  # free for the next task
                log.debug("task %s/%s released its GPUs", eff.framework_id, eff.task_id)
            self.checkers.stop(eff.framework_id, eff.task_id)
            self.health.pop((eff.framework_id, eff.task_id), None)
            self.check_states.pop((eff.framework_id, eff.task_id), None)
            t = self.tracker.get(eff.framework_id, eff.task_id)
            if t is not None:
                self.m_terminal.labels(state=t.state.name).inc()
                if t.spec.command is not None and key in self.launcher:
                    self.launcher.signal(key, "KILL")  # nothing of a finished task survives it
            # its cgroup is released when its process ends (``_task_ended``)
        elif isinstance(eff, su.StreamDone):
            key2 = (eff.framework_id, eff.task_id)
            t = self.tracker.get(eff.framework_id, eff.task_id)
            self.usage.forget(key2)
            if t is not None and t.spec.command is not None and key2 not in self.tracker.ephemeral:
                with contextlib.suppress(CheckpointError):
                    self.sandbox_gc.schedule(
                        self.checkpoint.task_sandbox(eff.framework_id, eff.task_id, t.spec.pod_executor), self.clock.now())
            self.submit(self.tracker.handle(tk.Forget(eff.framework_id, eff.task_id), self.clock.now()))
        elif isinstance(eff, tk.DropTask):
            pass
        elif isinstance(eff, su.AckForwarded):
            eid = self.tracker.executor_uuids.pop(eff.uuid, None)
            if eid is not None and self.executor_api is not None:
                self.executors.call("acknowledged", eff.framework_id, eid, eff.task_id, eff.uuid)
        elif isinstance(eff, su.Ignored):
            log.debug("status update: %s/%s %s", eff.framework_id, eff.task_id, eff.why)
        elif isinstance(eff, tk.FetchTask):
            self.spawn(self._fetch(eff.spec), name=f"fetch-{eff.spec.task_id}")
        elif isinstance(eff, tk.StartChecks):
            self._start_checks(eff.spec)
        elif isinstance(eff, tk.CancelFetch):
            self.fetcher.cancel(_task_key(eff.framework_id, eff.task_id))
        elif isinstance(eff, tk.StartExecutor):
            self.executors.start(eff)
        elif isinstance(eff, tk.HandToExecutor):
            self.executors.hand(eff)
        elif isinstance(eff, tk.KillViaExecutor):
            self.executors.call("kill", eff.framework_id, eff.executor_id, eff.task_id, eff.grace)
        elif isinstance(eff, tk.ShutdownExecutorProcess):
            self.executors.shutdown(eff.framework_id, eff.executor_id, eff.grace)
        elif isinstance(eff, tk.ExecutorGone):
            if self.channel is not None:
                self.channel.send(ExecutorExited(FrameworkID(eff.framework_id), ExecutorID(eff.executor_id), eff.status))
            if self.executor_api is not None:
                self.executor_api.unregister_executor(eff.framework_id, eff.executor_id)
        else:
            log.warning("unhandled effect %r", eff)

    # --- tasks -------------------------------------------------------------------------------

    def _start_checks(self, spec: TaskSpec) -> None:
        """Health check and check of a running command task (``agent/health_checker.py``): run in
        its sandbox, with its environment, as its user."""
        fid, tid = spec.framework_id, spec.task_id
        if self.checkers.running(fid, tid):
            return
        sandbox = self.checkpoint.task_sandbox(fid, tid, spec.pod_executor)
        env = task_environment(
            agent_id=self.agent_id or "", framework_id=fid, task_id=tid, executor_id=spec.executor_id or tid,
            sandbox=str(sandbox),
            path=os.environ.get("PATH"), extra=spec.command.environment if spec.command else (),
        )
        env.update(self.gpu_environment(spec))
        run_as = spec.run_as
        setpriv = self.setpriv

        def wrap(argv: tuple[str, ...]) -> tuple[str, ...]:
            assert run_as is not None and setpriv is not None
            return run_as.wrap(argv, setpriv)

        now = self.clock.now()
        for policy in (spec.health, spec.check):
            if policy is None:
                continue
            if policy.health:
                self.health[(fid, tid)] = HealthState(policy, now)
            else:
                self.check_states[(fid, tid)] = CheckState(policy)
            self.checkers.start(fid, tid, policy, env, sandbox, wrap if run_as is not None and setpriv else None)

    def _check_outcome(self, fid: str, tid: str, policy: Policy, outcome: Outcome) -> None:
        """Event loop: one check's outcome -> the tracker (a health verdict, or a changed check)."""
        now = self.clock.now()
        if policy.health:
            hs = self.health.get((fid, tid))
            verdict = hs.result(outcome, now) if hs is not None else None
            if verdict is not None:
                log.info("task %s/%s: %s", fid, tid, verdict.message or "healthy")
                self.submit(self.tracker.handle(tk.HealthChecked(fid, tid, verdict), now))
            return
        cs = self.check_states.get((fid, tid))
        if cs is None or not cs.result(outcome):
            return
        kind = policy.probe.kind
        status = CheckStatusInfo(
            type=CheckType(kind),
            command=CheckStatusCommand(outcome.value) if kind == "COMMAND" else None,
            http=CheckStatusHttp(outcome.value) if kind == "HTTP" else None,
            tcp=CheckStatusTcp(None if outcome.value is None else bool(outcome.value)) if kind == "TCP" else None,
        )
        self.submit(self.tracker.handle(tk.CheckChanged(fid, tid, status), now))

    def _spawn_blocking(self, spec: TaskSpec) -> _SpawnResult:
        """Checkpoint thread (or a spawner thread): sandbox, environment, isolation, spawn. The
        caller writes the pid record (the checkpoint's batch state is single-threaded)."""
        fid, tid = spec.framework_id, spec.task_id
        key = _task_key(fid, tid)
        assert spec.command is not None
        try:
            sandbox = self.checkpoint.task_sandbox(fid, tid, spec.pod_executor)
            env = task_environment(
                agent_id=self.agent_id or "",
                framework_id=fid,
                task_id=tid,
                executor_id=spec.executor_id or tid,
                sandbox=str(sandbox),
                path=os.environ.get("PATH"),
                extra=spec.command.environment,
            )
            env.update(self.gpu_environment(spec))  # exactly its devices: the agent's values win
            argv = spec.command.argv
            if spec.run_as is not None:  # hand the sandbox to the task's user, then drop privileges
                argv = users.enter(spec.run_as, sandbox, argv, self.setpriv)
            join = self.isolator.prepare(key, spec.mem_limit, spec.cpus)
            pipes = None
            if self.logs is not None:
                sandbox.mkdir(parents=True, exist_ok=True)
                pipes = self.logs.open_streams(key, sandbox)
            try:
                proc = spawn(key, argv, env, sandbox, self.checkpoint.exit_status_path(fid, tid), join,
                             stdio=pipes[0] if pipes else None, keep=pipes[1] if pipes else None)
            finally:
                for fd in (*pipes[0], *pipes[1]) if pipes else ():
                    os.close(fd)
        except (LaunchError, CheckpointError, OSError) as e:
            self.isolator.release(key)
            return _SpawnResult(spec, None, f"Failed to launch: {e}")
        return _SpawnResult(spec, proc, logs=str(sandbox) if pipes else None)

    async def _fetch(self, spec: TaskSpec) -> None:
        """The task's URIs into its sandbox (``agent/fetcher.py``, worker threads), then the
        tracker spawns it (``Fetched``) or fails it (``FetchFailed``)."""
        fid, tid = spec.framework_id, spec.task_id
        assert spec.command is not None
        run_as = spec.run_as

        def progress(message: str) -> None:
            self.submit(self.tracker.handle(tk.FetchProgress(fid, tid, message), self.clock.now()))

        try:
            sandbox = self.checkpoint.task_sandbox(fid, tid, spec.pod_executor)
        except CheckpointError as e:
            result: object = e
        else:
            owner = (run_as.uid, run_as.gid) if run_as is not None else None
            result = await self.fetcher.fetch(_task_key(fid, tid), tid, spec.command.uris, sandbox, owner, progress)
        if result is None:
            return  # cancelled: the task was killed
        now = self.clock.now()
        if isinstance(result, Fetched):
            log.info("task %s/%s: %s", fid, tid, result.message)
            self.submit(self.tracker.handle(tk.Fetched(fid, tid, result.message), now))
        else:
            why = getattr(result, "message", None) or str(result)
            log.warning("task %s/%s: %s", fid, tid, why)
            self.submit(self.tracker.handle(tk.FetchFailed(fid, tid, fetch_failure(tid, why)), now))

    def _spawned(self, r: _SpawnResult) -> None:
        """Event loop: watch the new process and tell the tracker."""
        fid, tid = r.spec.framework_id, r.spec.task_id
        now = self.clock.now()
        if r.proc is None:
            self.submit(self.tracker.handle(tk.SpawnFailed(fid, tid, r.error or "Failed to launch"), now))
            return
        self.launcher.watch(r.proc)
        self.isolator.attach(r.proc.key, r.proc.pid)
        self.watch_oom(r.proc.key)
        if r.logs is not None and self.logs is not None:
            self.logs.track(r.proc.key, r.logs, r.proc.pid)
        self.m_launched.inc()
        self.submit(self.tracker.handle(tk.Spawned(fid, tid, r.proc.pid), now))

    def _emit(self, eff: tk.EmitStatus, now: float) -> None:
        if eff.executor_id is None:  # a task of a task group: reported under its DEFAULT executor
            t = self.tracker.get(eff.framework_id, eff.task_id)
            if t is not None and t.spec.executor_id is not None:
                eff = attrs.evolve(eff, executor_id=t.spec.executor_id)
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
            healthy=eff.healthy,
            check_status=eff.check_status,
            container_status=ContainerStatus(ContainerID(
                container_id(self.agent_id or "", eff.framework_id, eff.executor_id or eff.task_id)
            )),
        )
        used = self.usage.get((eff.framework_id, eff.task_id)) if is_terminal(eff.state) else None
        if used is not None:  # the final figures ride on the terminal update (protocol.usage)
            status = attrs.evolve(status, labels=Labels((*(labels.labels if labels else ()), *used.labels())))
        self.submit(self.updates.handle(su.UpdateGenerated(self.to_update(eff.framework_id, status)), now))

    def _send_update(self, eff: su.SendUpdate) -> None:
        if self.channel is None:
            return
        status = eff.update.status
        assert isinstance(status, TaskStatus)
        if status.agent_id is None and self.agent_id:
            status = attrs.evolve(status, agent_id=AgentID(self.agent_id))
        msg = StatusUpdateMsg(FrameworkID(eff.update.framework_id), status, eff.latest_state)
        if self.channel.send(msg):
            self.m_updates.inc()

    def _on_process_exit(self, key: str, code: int | None) -> None:
        kind, fid, xid = key.split("/", 2)
        now = self.clock.now()
        if kind == "t":
            self._task_ended(key, fid, xid, now)
            if self.logs is not None and self.logs.waits_for(key):
                # report the end once its logs are complete (the writer drains the pipes): a
                # framework that reads them on hearing of it finds everything the task wrote
                timer = asyncio.get_running_loop().call_later(FLUSH_TIMEOUT, self._logs_complete, key)
                self._exit_waits[key] = (code, timer)
                return
            if self.logs is not None:
                self.logs.untrack(key)
            self.submit(self.tracker.handle(tk.Exited(fid, xid, code), now))
        else:
            self.submit(self.tracker.handle(tk.ExecutorTerminated(fid, xid, code), now))

    def _logs_complete(self, key: str) -> None:
        """The log writer says the task's logs are complete (or the wait for it timed out: a
        process that left the task holds its stdout): report the exit that waited for it."""
        waiting = self._exit_waits.pop(key, None)
        if waiting is None:
            return
        code, timer = waiting
        timer.cancel()
        if self.logs is not None:
            if key not in self.logs.closed:
                log.info("task %s: its logs were not complete %.0f s after it ended (a process that "
                         "left it still holds its stdout?)", key, FLUSH_TIMEOUT)
            self.logs.untrack(key)
        _, fid, tid = key.split("/", 2)
        self.submit(self.tracker.handle(tk.Exited(fid, tid, code), self.clock.now()))

    def _task_ended(self, key: str, fid: str, tid: str, now: float) -> None:
        """The task's wrapper ended: did the kernel OOM-kill in it (reported before the exit, so
        the task ends as a memory limitation), its final figures, then free its cgroup."""
        self.unwatch_oom(key)
        msg = self.isolator.oom_killed(key)
        if msg is not None:
            self._limit(fid, tid, msg, tk.KillReason.MEMORY, now)
        ru = self.launcher.pop_rusage(key)
        cg = self.isolator.usage(key)
        cpu = max(ru[0] if ru else 0.0, cg.cpu_seconds if cg else 0.0)
        self.usage.ended((fid, tid), cpu, ru[1] if ru else None, now)
        if isinstance(self.isolator, MonitorIsolator):
            self.isolator.release(key)  # bookkeeping only
        else:
            self.background(self.isolator.release, key)

    def _limit(self, fid: str, tid: str, message: str, kind: tk.KillReason, now: float) -> None:
        t = self.tracker.get(fid, tid)
        if t is None or t.terminal or t.kill_reason in (tk.KillReason.MEMORY, tk.KillReason.DISK):
            return
        self.m_limit.inc()
        log.warning("task %s/%s: %s", fid, tid, message)
        self.submit(self.tracker.handle(tk.LimitExceeded(fid, tid, message, kind), now))

    def watch_oom(self, key: str) -> None:
        """Listen on the isolator's OOM descriptor for the task (cgroup v1's eventfd)."""
        fd = self.isolator.oom_fd(key)
        if fd is None or key in self._oom_fds:
            return
        self._oom_fds[key] = fd
        asyncio.get_running_loop().add_reader(fd, self._on_oom, key)

    def unwatch_oom(self, key: str) -> None:
        fd = self._oom_fds.pop(key, None)
        if fd is not None:
            with contextlib.suppress(Exception):
                asyncio.get_running_loop().remove_reader(fd)

    def _on_oom(self, key: str) -> None:
        msg = self.isolator.oom_event(key)
        if msg is None:
            if key not in self.launcher:
                self.unwatch_oom(key)
            return
        _, fid, tid = key.split("/", 2)
        self._limit(fid, tid, msg, tk.KillReason.MEMORY, self.clock.now())

    def kill_task_processes(self, key: str) -> None:
        """SIGKILL the task's process group now and, off the loop, every process in its cgroup
        (whatever left the group: ``setsid``, a daemon)."""
        self.launcher.signal(key, "KILL")
        self.background(self.isolator.kill, key)

    def background(self, fn: Any, *args: Any) -> None:
        """Run blocking isolator work (a kill, a cgroup removal) off the event loop."""
        def done(f: concurrent.futures.Future[Any]) -> None:
            if not f.cancelled() and f.exception() is not None:
                log.error("%s failed: %r", getattr(fn, "__name__", fn), f.exception())

        try:
            self._spawners.submit(fn, *args).add_done_callback(done)
        except RuntimeError:  # shutting down: do it here
            with contextlib.suppress(Exception):
                fn(*args)

    def agent_info(self) -> AgentInfo:
        return AgentInfo(
            hostname=self.config.advertised_host,
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
            if (fid, tid) in self.tracker.ephemeral and t.terminal and not self.updates.pending(fid, tid):
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
            hostname=self.config.advertised_host,
            port=self.port,
            resources=self.resources.to_mesos(),
            agent_id=AgentID(self.agent_id) if self.agent_id else None,
            attributes=attributes_to_mesos(self.attributes),
            version=VERSION,
            isolation=self.isolator.name,
            boot_id=self.boot_id,
            tasks=tuple(running),
            frameworks=tuple(self.tracker.frameworks[f] for f in sorted(fids) if f in self.tracker.frameworks),
            capabilities=(AGENT_HTTPS,) if self._server_ssl is not None else (),
        )

    def _on_registered(self, reg: Registered) -> None:
        new_id = reg.agent_id.value
        if new_id != self.agent_id:
            if self.agent_id is not None:
                log.warning("master assigned a new agent id %s (was %s)", new_id, self.agent_id)
            self.agent_id = new_id
            meta = AgentMeta(
                new_id, self.boot_id, self.resources_identity(), self.config.attributes or "", self.config.hostname
            )
            self.checkpoint.write_agent(meta)
        log.info("registered with master %s as %s (epoch %d)", reg.master_id, new_id, reg.epoch)
        self.m_registered.set(1)
        self.last_slack = None
        if self.estimator is not None:
            self.estimator.reset()
        self.submit(self.updates.handle(su.Resumed(), self.clock.now()))
        if self.retiring and self.channel is not None:  # a new master must not offer it either
            self.channel.send(Unregister())
        self.timer_wake.set()

    def _on_disconnected(self) -> None:
        self.m_registered.set(0)
        self.updates.handle(su.Paused(), self.clock.now())
        log.info("disconnected from the master")

    def _on_master_message(self, body: object) -> None:
        now = self.clock.now()
        if isinstance(body, RunTasks):
            self._run_tasks(body, now)
        elif isinstance(body, KillTask):
            kill = tk.master_kill(body.framework_id.value, body.task_id.value, body.grace_seconds, body.reason)
            self.submit(self.tracker.handle(kill, now))
        elif isinstance(body, AcknowledgeMsg):
            self.submit(
                self.updates.handle(su.Acknowledged(body.framework_id.value, body.task_id.value, body.uuid), now)
            )
        elif isinstance(body, Revoke):
            for tid in body.task_ids:
                self.submit(
                    self.tracker.handle(
                        tk.KillTask(
                            body.framework_id.value, tid.value, body.grace_seconds, tk.KillReason.PREEMPTED,
                            f"Revoked by the master: {body.reason}" if body.reason else "Revoked by the master",
                        ),
                        now,
                    )
                )
        elif isinstance(body, ShutdownFramework):
            self.submit(self.tracker.handle(tk.ShutdownFramework(body.framework_id.value), now))
        elif isinstance(body, ShutdownExecutor):
            self.executors.shutdown(body.framework_id.value, body.executor_id.value, self.config.executor_shutdown_grace)
        elif isinstance(body, FrameworkMessageMsg):
            self.executors.call("message", body.framework_id.value, body.executor_id.value, body.data)
        else:
            log.debug("ignoring %r", type(body).__name__)
        self.timer_wake.set()

    def _run_tasks(self, rt: RunTasks, now: float) -> None:
        fid = rt.framework_id.value
        if self.retiring:
            self._drop_launch(rt, now)
            return
        fi = rt.framework_info
        if fi.id is None:
            fi = attrs.evolve(fi, id=rt.framework_id)
        if self.tracker.frameworks.get(fid) != fi:
            self.tracker.frameworks[fid] = fi
            self.submit([_WriteFramework(fid)])  # (re)written in the checkpoint thread, in order
        killing = any(c.type is CapabilityType.TASK_KILLING_STATE for c in fi.capabilities)
        group_ids = tuple(t.task_id.value for t in rt.tasks) if rt.group else ()
        specs: list[TaskSpec] = []
        errors: list[tuple[TaskInfo, str, str, TaskState]] = []
        for info in rt.tasks:
            try:
                spec = task_spec(fid, info, rt.executor if rt.group else None, killing_state=killing, group=group_ids)
                if spec.command is not None:
                    run_as = users.resolve_task(
                        spec.command.user, fi.user, allow_root=self.config.allow_root_tasks,
                        switch_user=self.config.switch_user,
                    )
                    if run_as is not None:
                        spec = attrs.evolve(spec, run_as=run_as)
                specs.append(spec)
            except SpecError as e:
                errors.append((info, str(e), e.reason, TaskState(e.state)))
            except users.UserError as e:
                errors.append((info, str(e), e.reason, TaskState.TASK_ERROR))
        if specs and not (rt.group and errors):
            specs, refused = self._assign_gpus(specs)
            errors.extend(refused)
        if rt.group and errors:
            # all or nothing: one bad task fails the whole group
            msg = "; ".join(m for _, m, _, _ in errors)
            errors = [(i, f"task group invalid: {msg}", "REASON_TASK_GROUP_INVALID", TaskState.TASK_ERROR) for i in rt.tasks]
            for spec in specs:
                self.gpus.release((fid, spec.task_id))
            specs = []
        for info, msg, reason, state in errors:
            tid = info.task_id.value
            self.submit(self.tracker.handle(tk.LaunchRejected(fid, tid, msg, None, reason, state), now))
        effects: list[Any] = []
        launch_group = group_ids if rt.group and rt.executor is not None else ()
        for spec in specs:
            effects.extend(self.tracker.handle(tk.LaunchTask(spec, launch_group), now))
        self.submit(effects)

    def _assign_gpus(self, specs: list[TaskSpec]) -> tuple[list[TaskSpec], list[tuple[TaskInfo, str, str, TaskState]]]:
        """Give each new task asking for ``gpus`` its devices (``agent/gpus.py``); a task the book
        refuses (fractional without sharing, no free device) is answered instead of run."""
        out: list[TaskSpec] = []
        refused: list[tuple[TaskInfo, str, str, TaskState]] = []
        for spec in specs:
            key = (spec.framework_id, spec.task_id)
            known = self.tracker.get(*key)
            if known is not None:  # a duplicate launch: the tracker ignores it, devices stay
                out.append(spec)
                continue
            got = self.gpus.assign(key, spec.gpus)
            if isinstance(got, Refused):
                assert spec.info is not None
                log.warning("task %s/%s refused: %s", spec.framework_id, spec.task_id, got.message)
                refused.append((spec.info, got.message, got.reason, TaskState.TASK_ERROR if got.error else TaskState.TASK_FAILED))
                continue
            out.append(attrs.evolve(spec, gpu_devices=tuple(d.index for d in got)) if got else spec)
        return out, refused

    def gpu_environment(self, spec: TaskSpec) -> dict[str, str]:
        """The task's GPU variables (``agent/gpus.py``): its devices, or none on a GPU agent."""
        devices = tuple(self.gpus.devices[i] for i in spec.gpu_devices if i in self.gpus.devices)
        return gpu_environment(devices, bool(self.gpus.devices))

    def _drop_launch(self, rt: RunTasks, now: float) -> None:
        """A launch that reached a retiring agent: answered TASK_DROPPED (the master shows
        TASK_LOST to frameworks that are not partition aware), nothing is started or checkpointed."""
        fid = rt.framework_id.value
        eid = rt.executor.executor_id.value if rt.group and rt.executor is not None else None
        dropped = 0
        for info in rt.tasks:
            tid = info.task_id.value
            effects = self.tracker.handle(tk.LaunchRejected(
                fid, tid, "Agent is retiring (SIGUSR1): launch refused", eid,
                "REASON_AGENT_REMOVED_BY_OPERATOR", TaskState.TASK_DROPPED,
            ), now)
            if effects:  # none for a duplicate of a task it knows: that one is being killed
                dropped += 1
            self.submit(effects)
        log.info("retiring: dropped %d task(s) launched for %s", dropped, fid)

    # --- timers and monitoring ---------------------------------------------------------------------

    async def _timer_loop(self) -> None:
        """Delivers ``Tick``s to the two cores when their earliest deadline is due. ``timer_wake``
        is set whenever something may have moved a deadline (a message, the end of a work run);
        most such wake-ups change nothing, so the sleeper is re-armed only when the earliest
        deadline changed, and a ``Tick`` is delivered only when a deadline is due."""
        sleeper: asyncio.Future[None] | None = None
        armed: float | None = None
        try:
            while True:
                self.timer_wake.clear()
                deadlines = [d for d in (self.tracker.next_deadline(), self.updates.next_deadline()) if d is not None]
                deadline = min(deadlines) if deadlines else None
                now = self.clock.now()
                if deadline is not None and deadline <= now:
                    self.submit(self.tracker.handle(tk.Tick(), now))
                    self.submit(self.updates.handle(su.Tick(), now))
                    await asyncio.sleep(0)  # let the tick's effects run before looking again
                    continue
                if deadline != armed or (sleeper is not None and sleeper.done()):
                    if sleeper is not None:
                        sleeper.cancel()
                    sleeper, armed = None, deadline
                    if deadline is not None:
                        sleeper = asyncio.ensure_future(self._wake_after(deadline - now))
                await self.timer_wake.wait()
        finally:
            if sleeper is not None:
                sleeper.cancel()

    async def _wake_after(self, delay: float) -> None:
        await self.clock.sleep(delay)
        self.timer_wake.set()

    def gc_max_age(self) -> float:
        """How long a finished sandbox stays now (``agent.disk.gc_max_age``)."""
        return gc_max_age(self.config.gc_delay, self.config.gc_disk_headroom, self.disk_used)

    async def _watch_disk(self, now: float) -> None:
        """Every ``--disk-watch-interval``: how full the work dir is (sandbox GC), what each running
        task's sandbox holds (usage; a task past its disk is killed), the reserve taken back."""
        sandboxes = {}
        limits: dict[str, int | None] = {}
        for t in self.tracker.active():
            if t.spec.command is None or t.pid is None:
                continue
            key = _task_key(*t.key)
            with contextlib.suppress(CheckpointError):
                sandboxes[key] = self.checkpoint.task_sandbox(*t.key, t.spec.pod_executor)
                limits[key] = t.spec.disk_limit
        try:
            report = await asyncio.to_thread(measure, self.config.work_dir, sandboxes)
        except OSError as e:
            log.warning("disk check of %s failed: %s", self.config.work_dir, e)
            return
        was, self.disk_used = self.disk_used, report.used_fraction
        if report.used_fraction > 1 - self.config.gc_disk_headroom >= was:
            log.warning("work dir %s is %.0f%% full: finished sandboxes are removed at once",
                        self.config.work_dir, 100 * report.used_fraction)
        for key, used in report.sandboxes.items():
            _, fid, tid = key.split("/", 2)
            self.usage.disk((fid, tid), used, now)
            msg = quota_message(used, limits.get(key)) if self.config.enforce_disk_limit else None
            if msg is not None:
                self._limit(fid, tid, msg, tk.KillReason.DISK, now)
        if self.reserve.released and restore_reserve(report.free, self.reserve.size):
            await asyncio.to_thread(self.reserve.ensure)

    def _report_usage(self) -> None:
        """The running tasks' figures that changed since the last report, to the master."""
        if self.channel is None or not self.channel.registered:
            return
        live = [t.key for t in self.tracker.active() if t.spec.command is not None]
        changed = self.usage.report(live)
        if changed:
            self.channel.send(UsageReport(tuple(
                TaskUsageEntry(FrameworkID(fid), TaskID(tid), u.cpu_seconds, u.mem_rss_bytes, u.mem_peak_bytes,
                               -1 if u.disk_used_bytes is None else u.disk_used_bytes, u.timestamp)
                for (fid, tid), u in changed
            )))

    async def _monitor_loop(self) -> None:
        cfg = self.config
        last_estimate = last_report = last_disk = 0.0
        cpu_prev: dict[str, tuple[float, float]] = {}
        while True:
            await self.clock.sleep(cfg.monitor_interval)
            try:
                usage, breaches = await asyncio.to_thread(self.isolator.sample)
            except Exception:
                log.exception("usage sampling failed")
                continue
            now = self.clock.now()
            self.m_running.set(len(self.tracker.active()))
            if self._drops:
                await asyncio.to_thread(self._reap_dropped)
            if now - last_disk >= cfg.disk_watch_interval:
                last_disk = now
                await self._watch_disk(now)
            expired = self.sandbox_gc.due(now, self.gc_max_age())
            if expired:
                await asyncio.to_thread(self.sandbox_gc.remove, expired)
            for key, u in usage.items():
                kind, fid, tid = key.split("/", 2)
                if kind == "t" and key in self.launcher:
                    self.usage.sampled((fid, tid), u.cpu_seconds, u.rss, now)
            for b in breaches:
                _, fid, tid = b.key.split("/", 2)
                self._limit(fid, tid, b.message, tk.KillReason.MEMORY, now)
            if now - last_estimate >= cfg.estimate_interval:
                last_estimate = now
                oversubscription.step(self, usage, cpu_prev, now)
            if cfg.usage_report_interval > 0 and now - last_report >= cfg.usage_report_interval:
                last_report = now
                self._report_usage()
