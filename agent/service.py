"""The agent service (shell): the composition root. It builds the agent's parts, hands each the
narrow dependencies it uses (``agent/ports.py``), routes every effect to the one module that runs
it, and starts and stops them. No decision is taken here.

Pipeline (README "Pipeline"): every fact becomes an event for one of the two pure cores
(``TaskTracker``, ``StatusUpdateManager``); their effects go through one ordered work queue
(``agent/effects.py``): disk effects batched into the checkpoint writer (``agent/journal.py``),
the others each to its handler, wired in ``_wire``:

- statuses and master messages: ``agent/master_link.py``;
- processes (spawn, signals, exits, limits, OOM): ``agent/processes.py``;
- fetching: ``agent/task_fetch.py``; health checks: ``agent/task_checks.py``;
- custom executors: ``agent/executors.py``; periodic work and deadlines: ``agent/monitor.py``;
- restart recovery: ``agent/recovery.py`` running the plan of ``agent/recovery_plan.py``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import random
import ssl
from collections.abc import Callable
from typing import Any

from aiohttp import web

from agent import auth as agent_auth
from agent import http_api, plugins, ports, recovery, task_fetch
from agent import status_updates as su
from agent import tasks as tk
from agent.channel import AgentChannel
from agent.checkpoint import Checkpoint, CheckpointError
from agent.config import AgentConfig
from agent.diskwatch import Reserve
from agent.effects import EffectRunner, Signal, WriteKill
from agent.executors import ExecutorGlue
from agent.fetcher import Fetcher, default_cache_dir
from agent.gc import SandboxGC
from agent.gpus import GpuBook
from agent.gpus import identity as gpu_identity
from agent.isolation import CgroupOptions, Isolator, detect
from agent.journal import Journal
from agent.launcher import boot_id
from agent.logs import LogWriterClient
from agent.master_link import MasterLink
from agent.monitor import Monitor, timer_loop
from agent.oversubscription import Oversubscription
from agent.ports import AgentView, ExecutorSpawnPort, Identity, Metrics, RecoveryProcesses, StatusPort
from agent.processes import SpawnResult, TaskProcesses, task_key
from agent.recovery import StartupError
from agent.task_checks import TaskChecks
from agent.usage import UsageBook
from protocol.agent_channel import ExecutorExited
from protocol.clock import Clock, SystemClock
from protocol.lifecycle import Service
from protocol.mesos import AgentInfo, FrameworkInfo
from protocol.mesos_common import AgentID, ExecutorID, FrameworkID
from protocol.resources import Resources, attributes_to_mesos
from protocol.tls import TlsError, client_context, server_context
from protocol.version import AGORA_VERSION

log = logging.getLogger(__name__)

VERSION = AGORA_VERSION

__all__ = ["AgentService", "StartupError"]


class AgentService(Service):
    name = "agora-agent"

    def __init__(self, config: AgentConfig, clock: Clock | None = None, rng: random.Random | None = None) -> None:
        super().__init__()
        self.config = config
        self.clock: Clock = clock or SystemClock()
        self._rng = rng or random.Random()
        self.me = Identity(boot_id())
        self.checkpoint = Checkpoint(config.work_dir, fsync=config.fsync)
        self.tracker = tk.TaskTracker(default_grace=config.default_grace)
        self.updates = su.StatusUpdateManager(
            su.RetryPolicy(initial=config.resend_initial, maximum=config.resend_max, jitter=0.2),
            rng=self._rng.random,
            durable_all=config.sync_updates == "all",
        )
        self.isolator: Isolator = detect(
            config.isolation, config.work_dir,
            CgroupOptions(cpu_quota=config.cgroups_enable_cfs, pids_max=config.pids_max, cgroups_root=config.cgroups_root),
        )
        self.usage = UsageBook()  # per-task CPU, memory and disk figures
        self.gpus = GpuBook(())  # this agent's GPU devices and which task holds which (agent/plugins.py)
        # the log writer (agent/logger.py) rotating tasks' stdout/stderr; None: plain files
        self.logs = (LogWriterClient(self.checkpoint.meta, config.log_max_size, config.log_max_files)
                     if config.log_max_size > 0 else None)
        self.metrics = Metrics()
        self.channel: AgentChannel | None = None
        self.executor_api: Any = None
        self.estimator: Any = None
        self.qos: Any = None
        self.timer_wake = asyncio.Event()
        self._server_ssl: ssl.SSLContext | None = None  # set in _start with --tls-cert/--tls-key
        self._runner: web.AppRunner | None = None
        self._disk = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="agent-ckpt")
        self._spawners = concurrent.futures.ThreadPoolExecutor(max_workers=4, thread_name_prefix="agent-spawn")
        cfg, cp, tracker, link = config, self.checkpoint, self.tracker, self._link
        # what the satellites that drive the cores see of them (agent/ports.py)
        self.status = StatusPort(tracker, self.updates, self.submit, link, self.clock, self.me)
        self.processes = TaskProcesses(self.status, ports.ProcessPort(
            cp, self.isolator, self.logs, self.usage, lambda: self.gpus, self.metrics, self._spawners))
        self.launcher = self.processes.launcher
        self.sandbox_gc = SandboxGC(cp.sandboxes, cfg.gc_delay)
        self.reserve = Reserve(cp.meta / "reserve", cfg.work_dir_reserve)
        self.journal = Journal(cp, tracker, self.reserve, self.me.boot_id, self.processes.spawn_blocking, self._spawners,
                               self.processes.open_logs)
        self.work: EffectRunner[SpawnResult] = EffectRunner(
            self.journal.run, self.processes.spawned, self._disk, self.spawn, self.timer_wake.set)
        self.fetcher = Fetcher(
            cfg.fetcher_cache_dir or default_cache_dir(cfg.work_dir), cfg.fetcher_cache_size,
            stall_timeout=cfg.fetcher_stall_timeout, frameworks_home=cfg.frameworks_home,
            progress_interval=cfg.fetcher_progress_interval,
        )
        self.checks = TaskChecks(cp, tracker, self.processes.environment, self.processes.setpriv, self.clock,
                                 self.submit)
        self.executors = ExecutorGlue(ExecutorSpawnPort(
            self.launcher, self.fetcher, cp, self.processes.environment, self.processes.setpriv, cfg.allow_root_tasks,
            cfg.switch_user, lambda: f"{cfg.host}:{self.me.port}", cfg.executor_shutdown_grace, self.spawn,
            lambda: self.running,
        ), self.status)
        self.oversubscription = Oversubscription(tracker, self.me, None, None, link, self.submit)
        self.master_link = MasterLink(
            cfg, self.status, cp, self.usage, lambda: self.gpus, self.isolator.name, self.executors,
            self.oversubscription, self.resources_identity, self.metrics, self.timer_wake,
        )
        self.monitor = Monitor(cfg, self.status, ports.MonitorPort(
            cp, self.isolator, self.launcher, self.usage, self.processes, self.journal, self.oversubscription,
            self.sandbox_gc, self.reserve, self.metrics,
        ))
        self.view = AgentView(cfg, self.me, tracker, self.updates, self.usage, lambda: self.gpus, cp.sandboxes,
                              self.isolator, self.metrics, link)
        self._wire()

    def _link(self) -> AgentChannel | None:
        return self.channel

    def _wire(self) -> None:
        """Each effect type to the one module that runs it (the disk ones go to the journal)."""
        on, p, x = self.work.on, self.processes, self.executors
        on(tk.EmitStatus, self.master_link.emit)
        on(su.SendUpdate, self.master_link.send_update)
        on(tk.SignalTask, self._signal)
        on(Signal, lambda e: p.signal(e.framework_id, e.task_id, e.signal))
        on(tk.ReleaseTask, self._release)
        on(su.StreamDone, self._stream_done)
        on(su.AckForwarded, self._ack_forwarded)
        on(su.Ignored, lambda e: log.debug("status update: %s/%s %s", e.framework_id, e.task_id, e.why))
        on(tk.FetchTask, self._fetch)
        on(tk.StartChecks, lambda e: self.checks.start(e.spec))
        on(tk.CancelFetch, lambda e: self.fetcher.cancel(task_key(e.framework_id, e.task_id)))
        on(tk.StartExecutor, x.start)
        on(tk.HandToExecutor, x.hand)
        on(tk.KillViaExecutor, lambda e: x.call("kill", e.framework_id, e.executor_id, e.task_id, e.grace))
        on(tk.ShutdownExecutorProcess, lambda e: x.shutdown(e.framework_id, e.executor_id, e.grace))
        on(tk.ExecutorGone, self._executor_gone)

    # --- lifecycle ---------------------------------------------------------------------------

    async def _start(self) -> None:
        cfg = self.config
        built = plugins.build(cfg)
        self.me.resources, self.me.attributes, self.gpus = built.resources, built.attributes, built.gpus
        self.estimator = self.oversubscription.estimator = built.estimator
        self.qos = self.oversubscription.qos = built.qos
        try:  # TLS files are checked before anything starts (protocol/tls.py)
            master_ssl = (
                client_context(cfg.master_ca, cfg.tls_cert, cfg.tls_key, ca_flag="--master-ca")
                if cfg.tls_to_master else None
            )
            self._server_ssl = server_context(cfg.tls_cert, cfg.tls_key) if cfg.tls_cert and cfg.tls_key else None
        except TlsError as e:
            raise StartupError(str(e)) from e
        self.me.https = self._server_ssl is not None
        self.checkpoint.init()
        await asyncio.to_thread(self.fetcher.init)
        await asyncio.to_thread(self.monitor.init_disk)
        if self.logs is not None:
            self.logs.attach(asyncio.get_running_loop(), self.processes.logs_complete)
        self._runner, self.executor_api = await http_api.serve(self.view, self.executors, self.agent_info,
                                                               self._server_ssl)
        self.executors.api = self.executor_api
        await recovery.recover(recovery.RecoveryParts(
            self.status, RecoveryProcesses(self.launcher, self.isolator, self.logs, self.gpus, self.executor_api,
                                           self.processes.watch_oom, self.sweep_sandboxes),
            recovery.RecoveryStart(cfg, self.checkpoint, self.resources_identity, self.spawn, self.drain),
        ))
        if self.logs is not None and self.logs.live:  # re-attached tasks: make sure a writer has their pipes
            await asyncio.to_thread(self.logs.revive)
        ml = self.master_link
        self.channel = AgentChannel(
            cfg.master, ml.build_register, ml.on_registered, ml.on_message, ml.on_disconnected,
            ping_timeout=cfg.ping_timeout, registration_timeout=cfg.registration_timeout,
            reconnect_initial=cfg.reconnect_initial, reconnect_max=cfg.reconnect_max, rng=self._rng, ssl=master_ssl,
            authorization=agent_auth.channel_authorization(cfg),
        )
        self.spawn(self.channel.run(), name="agent-channel")
        self.spawn(timer_loop(self.tracker, self.updates, self.submit, self.clock, self.timer_wake), name="agent-timers")
        self.spawn(self.monitor.run(), name="agent-monitor")

    def retire(self) -> None:
        """Refuse new launches (TASK_DROPPED) and tell the master (``agent/master_link.py``)."""
        self.master_link.retire()

    @property
    def retiring(self) -> bool:
        return self.master_link.retiring

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
        await self.checks.checkers.close()
        self.processes.close()
        if self.logs is not None:
            self.logs.close()
        await asyncio.to_thread(self.isolator.close)

    # --- loop effects the service routes (each a few lines of glue) ------------------------------

    def _signal(self, eff: tk.SignalTask) -> None:
        t = self.tracker.get(eff.framework_id, eff.task_id)
        if eff.signal == "TERM" and t is not None and t.kill_reason is not None:
            # record why before the signal goes out (disk effects at the head run first)
            self.work.next(WriteKill(eff.framework_id, eff.task_id, t.kill_reason.value, t.kill_deadline),
                           Signal(eff.framework_id, eff.task_id, eff.signal))
        else:
            self.processes.signal(eff.framework_id, eff.task_id, eff.signal)

    def _release(self, eff: tk.ReleaseTask) -> None:
        fid, tid = eff.framework_id, eff.task_id
        if self.gpus.release((fid, tid)):  # free for the next task
            log.debug("task %s/%s released its GPUs", fid, tid)
        self.checks.stop(fid, tid)
        t = self.tracker.get(fid, tid)
        self.processes.released(fid, tid, t.state.name if t is not None else None,
                                t is not None and t.spec.command is not None)

    def _stream_done(self, eff: su.StreamDone) -> None:
        key = (eff.framework_id, eff.task_id)
        t = self.tracker.get(*key)
        self.usage.forget(key)
        if t is not None and t.spec.command is not None and key not in self.tracker.ephemeral:
            with contextlib.suppress(CheckpointError):
                sandbox = self.checkpoint.task_sandbox(*key, t.spec.pod_executor)
                self.sandbox_gc.schedule(sandbox, self.clock.now())
        self.submit(self.tracker.handle(tk.Forget(*key), self.clock.now()))

    def _fetch(self, eff: tk.FetchTask) -> None:
        fetch = task_fetch.fetch(eff.spec, self.checkpoint, self.fetcher, self.tracker, self.submit, self.clock)
        self.spawn(fetch, name=f"fetch-{eff.spec.task_id}")

    def _ack_forwarded(self, eff: su.AckForwarded) -> None:
        eid = self.tracker.executor_uuids.pop(eff.uuid, None)
        if eid is not None and self.executor_api is not None:
            self.executors.call("acknowledged", eff.framework_id, eid, eff.task_id, eff.uuid)

    def _executor_gone(self, eff: tk.ExecutorGone) -> None:
        if self.channel is not None:
            self.channel.send(ExecutorExited(FrameworkID(eff.framework_id), ExecutorID(eff.executor_id), eff.status))
        if self.executor_api is not None:
            self.executor_api.unregister_executor(eff.framework_id, eff.executor_id)

    # --- the work queue and what recovery uses -----------------------------------------------------

    def submit(self, effects: list[Any]) -> None:
        self.work.submit(effects)

    async def drain(self) -> None:
        await self.work.drain()

    def sweep_sandboxes(self, keep: Callable[[str, str], bool]) -> int:
        """Blocking: remove the sandboxes ``keep(framework, task or executor)`` does not keep."""
        return self.sandbox_gc.sweep(keep, None, self.monitor.gc_max_age())

    def resources_identity(self) -> str:
        """What recovery compares: the operator's ``--resources`` (canonical), or ``probed``
        (probed figures such as free disk drift between restarts and must not block recovery),
        and the GPU devices by index and UUID when there are any (a task's checkpoint names
        its devices by index: they must be the same devices)."""
        base = str(Resources.parse(self.config.resources)) if self.config.resources else "probed"
        devices = gpu_identity(tuple(self.gpus.devices.values()))
        return f"{base} gpus[{devices}]" if devices else base

    def agent_info(self) -> AgentInfo:
        me = self.me
        return AgentInfo(
            hostname=self.config.advertised_host, port=me.port, resources=me.resources.to_mesos(),
            attributes=attributes_to_mesos(me.attributes), id=AgentID(me.agent_id) if me.agent_id else None,
        )

    def state(self) -> dict[str, Any]:
        return http_api.state(self.view)

    # --- who this agent is (``Identity``), as attributes of the service --------------------------

    @property
    def agent_id(self) -> str | None:
        return self.me.agent_id

    @agent_id.setter
    def agent_id(self, value: str | None) -> None:
        self.me.agent_id = value

    @property
    def boot_id(self) -> str:
        return self.me.boot_id

    @property
    def port(self) -> int:
        return self.me.port

    @property
    def resources(self) -> Resources:
        return self.me.resources

    @property
    def attributes(self) -> dict[str, str | float]:
        return self.me.attributes

    @property
    def recovery_report(self) -> list[str]:
        return self.me.recovery_report

    @property
    def version(self) -> str:
        return self.me.version

    @property
    def start_time(self) -> float:
        return self.me.start_time

    @property
    def frameworks(self) -> dict[str, FrameworkInfo]:
        return self.tracker.frameworks

    @property
    def url(self) -> str:
        return f"{'https' if self._server_ssl is not None else 'http'}://{self.config.host}:{self.port}"
