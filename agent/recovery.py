"""Recovery after an agent restart (shell): read the checkpoint back, look for the processes the
planner names, and run the plan it returns (``agent/recovery_plan.py`` decides everything: what
is refused, re-attached, reported, killed). See README "Recovery"."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
from collections.abc import Callable, Coroutine, Iterable
from pathlib import Path
from typing import Any

import attrs
import psutil

from agent import recovery_plan as rp
from agent import status_updates as su
from agent import tasks as tk
from agent.checkpoint import AgentMeta, Checkpoint, CheckpointError, CorruptCheckpoint, PidRecord, Recovery
from agent.config import AgentConfig
from agent.effects import WritePid
from agent.executors import exec_key
from agent.launcher import find_wrappers, kill_leftovers
from agent.logs import uses_log_pipes
from agent.ports import RecoveryProcesses, Spawn, StatusPort
from agent.taskspec import TaskSpec
from protocol.mesos import FrameworkInfo
from protocol.mesos_common import FrameworkID

log = logging.getLogger(__name__)


class StartupError(Exception):
    """The agent refuses to start (a corrupt checkpoint in strict mode, changed resources...)."""


@attrs.frozen
class RecoveryStart:
    """Recovery's own inputs: the agent's settings (``--strict``, attributes, hostname, the
    executors' re-registration timeout), its checkpoint, the identity of its resources, and the
    service's task owner and work queue (``spawn``, ``drain``)."""

    config: AgentConfig
    checkpoint: Checkpoint
    resources_identity: Callable[[], str]
    spawn: Spawn
    drain: Callable[[], Coroutine[Any, Any, None]]


@attrs.frozen
class RecoveryParts:
    """What recovery reads and drives, never the service: where its facts go (``StatusPort``:
    the cores, the work queue, the clock, the identity whose agent id is set here), what it
    re-attaches and cleans up (``RecoveryProcesses``), and its own inputs (``RecoveryStart``)."""

    status: StatusPort
    procs: RecoveryProcesses
    start: RecoveryStart

    @property
    def boot_id(self) -> str:
        return self.status.me.boot_id

    @property
    def recovery_report(self) -> list[str]:
        return self.status.me.recovery_report


def task_key(fid: str, tid: str) -> str:
    return f"t/{fid}/{tid}"


async def recover(svc: RecoveryParts) -> None:
    """Read the checkpoint back, re-attach live tasks and queue what must be reported."""
    api = svc.procs.executor_registry
    if api is not None:  # executors that outlived the agent may SUBSCRIBE before we know them
        api.recovering = True
    try:
        await _recover(svc)
    finally:
        if api is not None:
            api.recovering = False


async def _recover(svc: RecoveryParts) -> None:
    cfg = svc.start.config
    try:
        rec = await asyncio.to_thread(svc.start.checkpoint.recover)
    except CorruptCheckpoint as e:
        if cfg.strict:
            raise StartupError(f"corrupt checkpoint {e.path}: {e.reason}") from e
        log.error("corrupt agent checkpoint %s (%s): starting as a new agent", e.path, e.reason)
        svc.recovery_report.append(f"corrupt {e.path}: {e.reason}")
        await asyncio.to_thread((svc.start.checkpoint.meta / "agent.json").unlink, missing_ok=True)
        rec = await asyncio.to_thread(svc.start.checkpoint.recover)
    boot = rp.Boot(svc.boot_id, svc.start.resources_identity(), cfg.strict)
    st = rp.start(rec, boot)
    if st.refuse is not None:
        raise StartupError(st.refuse)
    if st.discard is not None:
        log.warning("%s: registering as a new agent; old tasks are killed", st.discard)
        svc.recovery_report.append(st.discard)
        await discard_old_tasks(svc.start.checkpoint, st.discard_pids)
        rec = Recovery(None, {}, (), ())
    svc.status.me.agent_id = st.agent_id
    await asyncio.to_thread(
        svc.start.checkpoint.write_agent,
        AgentMeta(svc.status.me.agent_id, svc.boot_id, svc.start.resources_identity(), cfg.attributes or "", cfg.hostname),
    )
    svc.status.tracker.frameworks.update(rec.frameworks)
    found = await _look(svc, rec, rp.probes(rec, st, boot))
    await run(svc, rp.plan(rec, st, boot, found))
    await svc.start.drain()


async def _look(svc: RecoveryParts, rec: Recovery, probes: Iterable[rp.Probe]) -> rp.Found:
    """Run the planner's probes: adopt the wrappers found (the launcher watches them from now on)
    and register the re-attached executors; then read the exit codes of the wrappers not found."""
    found = rp.Found()
    for p in probes:
        if isinstance(p, rp.AdoptTask):
            exit_path = svc.start.checkpoint.exit_status_path(p.framework_id, p.task_id)
            if svc.procs.launcher.adopt(task_key(p.framework_id, p.task_id), p.pid, p.create_time, exit_path):
                found.tasks[(p.framework_id, p.task_id)] = rp.Alive(p.pid, p.create_time)
        elif isinstance(p, rp.FindTask):
            # crashed between spawn and the pid checkpoint: find the wrapper by its marker
            exit_path = svc.start.checkpoint.exit_status_path(p.framework_id, p.task_id)
            for w in find_wrappers(str(exit_path)):
                with contextlib.suppress(psutil.Error):
                    if svc.procs.launcher.adopt(task_key(p.framework_id, p.task_id), w.pid, w.create_time(), exit_path):
                        found.tasks[(p.framework_id, p.task_id)] = rp.Alive(w.pid, w.create_time(), found=True)
                        break
        else:
            pid = await reattach_executor(svc, p, rec.frameworks[p.framework_id])
            if pid is not None:
                found.executors[(p.framework_id, p.executor_id)] = pid
    for fid, tid in rp.exit_codes_wanted(rec, found):
        code = await asyncio.to_thread(svc.start.checkpoint.read_exit_status, fid, tid)
        if code is not None:
            found.exit_codes[(fid, tid)] = code
    return found


async def run(svc: RecoveryParts, plan: list[rp.Effect]) -> None:
    """The plan's effects, in order (the slow ones off the event loop)."""
    now = svc.status.clock.now()
    for e in plan:
        if isinstance(e, rp.Track):
            svc.status.submit(svc.status.tracker.handle(e.event, now))
        elif isinstance(e, rp.RestoreStream):
            svc.status.submit(svc.status.updates.handle(su.Recovered(e.framework_id, e.task_id, e.updates, e.acked), now))
        elif isinstance(e, rp.Report):
            svc.recovery_report.append(e.line)
        elif isinstance(e, rp.Reattach):
            _reattach(svc, e.framework_id, e.task_id, e.pid, e.spec)
        elif isinstance(e, rp.WritePid):
            svc.status.submit([WritePid(e.framework_id, e.task_id, e.record)])
        elif isinstance(e, rp.RestoreGpus):
            problem = svc.procs.gpus.restore((e.framework_id, e.task_id), e.devices, e.amount)
            if problem:
                log.error("task %s/%s: GPU devices not restored: %s", e.framework_id, e.task_id, problem)
                svc.recovery_report.append(f"task {e.framework_id}/{e.task_id}: GPUs not restored: {problem}")
        elif isinstance(e, rp.AcksToExecutor):
            for uuid in e.uuids:
                svc.status.tracker.executor_uuids[uuid] = e.executor_id
        elif isinstance(e, rp.DropFinished):
            await asyncio.to_thread(svc.start.checkpoint.unlink_task, e.framework_id, e.task_id)
        elif isinstance(e, rp.ReportBroken):
            report_broken(svc, e)
        elif isinstance(e, rp.Warn):
            log.warning("%s", e.message)
        elif isinstance(e, rp.KillLeftovers):
            groups: dict[int, tuple[float, str]] = {}
            for pid, born, fid, tid, pod in e.groups:
                with contextlib.suppress(CheckpointError):
                    groups[pid] = (born, str(svc.start.checkpoint.task_sandbox(fid, tid, pod)))
            killed = await asyncio.to_thread(kill_leftovers, groups) if groups else 0
            if killed:
                svc.recovery_report.append(f"killed {killed} leftover processes of ended tasks")
        elif isinstance(e, rp.KillOrphanExecutors):
            await asyncio.to_thread(kill_orphan_executors, svc.start.checkpoint.meta, e.keep)
        elif isinstance(e, rp.AwaitReregistration):
            svc.start.spawn(await_reregistration(svc, list(e.executors)), "executor-reregister")
        elif isinstance(e, rp.Cleanup):
            await _cleanup(svc)


def _reattach(svc: RecoveryParts, fid: str, tid: str, pid: int, spec: TaskSpec) -> None:
    key = task_key(fid, tid)
    svc.procs.isolator.recover(key, pid, spec.mem_limit, spec.cpus)
    svc.procs.watch_oom(key)
    if svc.procs.logs is not None and uses_log_pipes(pid):
        with contextlib.suppress(CheckpointError):
            svc.procs.logs.track(key, str(svc.start.checkpoint.task_sandbox(fid, tid, spec.pod_executor)), pid)


async def _cleanup(svc: RecoveryParts) -> None:
    known = set(svc.status.tracker.tasks)
    live_keys = {task_key(*k) for k in known if task_key(*k) in svc.procs.launcher}
    stale = await asyncio.to_thread(svc.procs.isolator.cleanup, live_keys)
    if stale:
        svc.recovery_report.append(f"removed {stale} cgroups of tasks that are gone")
    executors = {(t.spec.framework_id, t.spec.executor_id) for t in svc.status.tracker.tasks.values() if t.spec.executor_id}
    swept = await asyncio.to_thread(svc.procs.sweep_sandboxes, lambda f, x: (f, x) in known or (f, x) in executors)
    if swept:
        svc.recovery_report.append(f"removed {swept} stale sandboxes")


async def reattach_executor(svc: RecoveryParts, p: rp.FindExecutor, fi: FrameworkInfo) -> int | None:
    """Re-attach a custom executor that outlived the agent (Mesos agent recovery): its wrapper is
    found by its marker and adopted (pid and create time), and it is registered with the executor
    API again, so it can SUBSCRIBE within ``--executor-reregister-timeout``. Returns the wrapper's
    pid, or None (the executor's tasks are then reported LOST)."""
    api = svc.procs.executor_registry
    if api is None:
        return None
    fid, eid = p.framework_id, p.executor_id
    exit_path = svc.start.checkpoint.executor_exit_path(fid, eid)
    for w in await asyncio.to_thread(find_wrappers, str(exit_path)):
        with contextlib.suppress(psutil.Error):
            if svc.procs.launcher.adopt(exec_key(fid, eid), w.pid, w.create_time(), exit_path):
                if fi.id is None:
                    fi = attrs.evolve(fi, id=FrameworkID(fid))
                api.register_executor(fi, p.info)
                log.info("executor %s/%s re-attached (pid %d); awaiting its SUBSCRIBE", fid, eid, w.pid)
                return w.pid
    return None


async def await_reregistration(svc: RecoveryParts, executors: list[tuple[str, str]]) -> None:
    """After ``--executor-reregister-timeout``, the re-attached executors that have not
    SUBSCRIBEd are killed and their tasks reported LOST (a no-op for those that did)."""
    timeout = svc.start.config.executor_reregister_timeout
    await svc.status.clock.sleep(timeout)
    now = svc.status.clock.now()
    for fid, eid in executors:
        msg = f"Executor did not re-register within {timeout:g}s after the agent restarted"
        svc.status.submit(svc.status.tracker.handle(tk.ExecutorReregisterTimeout(fid, eid, msg), now))


def kill_orphan_executors(meta: Path, keep: frozenset[int] | set[int] = frozenset()) -> None:
    """Custom executors that were not re-attached after an agent restart (their tasks are
    reported LOST) must not live on."""
    prefix = str(meta / "frameworks") + os.sep
    for p in find_wrappers(prefix, prefix=True):
        if p.pid in keep:
            continue
        if os.sep + "executors" + os.sep in p.info["cmdline"][3]:
            log.warning("killing executor left over from before the restart: pid %d", p.pid)
            with contextlib.suppress(OSError):
                os.killpg(p.pid, 9)


def report_broken(svc: RecoveryParts, e: rp.ReportBroken) -> None:
    fid, tid = e.framework_id, e.task_id
    log.error("task %s/%s: %s; reporting it LOST", fid, tid, e.why)
    svc.recovery_report.append(f"task {fid}/{tid}: {e.why}")
    # The task is reported LOST, so its process must not live on: kill it if we can tell
    # for sure it is ours (pid record with matching boot and create time, or the wrapper's
    # marker on its command line).
    with contextlib.suppress(CheckpointError, OSError):
        victims: list[int] = []
        if e.pid is not None:
            with contextlib.suppress(psutil.Error):
                if abs(psutil.Process(e.pid.pid).create_time() - e.pid.create_time) < 0.05:
                    victims.append(e.pid.pid)
        victims.extend(p.pid for p in find_wrappers(str(svc.start.checkpoint.exit_status_path(fid, tid))))
        for v in set(victims):
            with contextlib.suppress(OSError):
                os.killpg(v, 9)
    with contextlib.suppress(CheckpointError, OSError):
        src = svc.start.checkpoint.task_log(fid, tid)
        dst = svc.start.checkpoint.meta / "corrupt" / f"{fid}.{tid}.{int(svc.status.clock.now())}.log"
        dst.parent.mkdir(parents=True, exist_ok=True)
        os.replace(src, dst)
        svc.start.checkpoint.exit_status_path(fid, tid).unlink(missing_ok=True)
    spec = TaskSpec(fid, tid, tid, None)
    svc.status.submit(svc.status.tracker.recovered_broken(spec, f"Agent restarted; {e.why}"))


async def discard_old_tasks(checkpoint: Checkpoint, pids: Iterable[PidRecord]) -> None:
    """Resources changed: kill the old tasks that are still the same processes, drop their
    checkpoints."""
    for pid in pids:
        try:
            p = psutil.Process(pid.pid)
            if abs(p.create_time() - pid.create_time) < 0.05:
                os.killpg(pid.pid, 9)
        except (psutil.Error, OSError):
            pass
    await asyncio.to_thread(shutil.rmtree, checkpoint.meta / "frameworks", True)
    checkpoint.init()
