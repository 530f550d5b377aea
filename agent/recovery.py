"""Recovery after an agent restart (shell): read the checkpoint back, re-attach live tasks,
report the rest, and make sure nothing unaccounted for keeps running. See README "Recovery"."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
from typing import TYPE_CHECKING

import attrs
import psutil

from agent import status_updates as su
from agent import tasks as tk
from agent.checkpoint import AgentMeta, CheckpointError, CorruptCheckpoint, PidRecord, Recovery
from agent.executors import exec_key
from agent.launcher import find_wrappers, kill_leftovers
from agent.logs import uses_log_pipes
from agent.taskspec import SpecError, TaskSpec, task_spec
from protocol.mesos import ExecutorInfo
from protocol.mesos_common import FrameworkID
from protocol.task_states import is_terminal

if TYPE_CHECKING:
    from agent.service import AgentService

log = logging.getLogger(__name__)


class StartupError(Exception):
    """The agent refuses to start (a corrupt checkpoint in strict mode, changed resources...)."""


async def recover(svc: AgentService) -> None:
    """Read the checkpoint back, re-attach live tasks and queue what must be reported."""
    api = svc.executor_api
    if api is not None:  # executors that outlived the agent may SUBSCRIBE before we know them
        api.recovering = True
    try:
        await _recover(svc)
    finally:
        if api is not None:
            api.recovering = False


async def _recover(svc: AgentService) -> None:
    cfg = svc.config
    try:
        rec = await asyncio.to_thread(svc.checkpoint.recover)
    except CorruptCheckpoint as e:
        if cfg.strict:
            raise StartupError(f"corrupt checkpoint {e.path}: {e.reason}") from e
        log.error("corrupt agent checkpoint %s (%s): starting as a new agent", e.path, e.reason)
        svc.recovery_report.append(f"corrupt {e.path}: {e.reason}")
        await asyncio.to_thread((svc.checkpoint.meta / "agent.json").unlink, missing_ok=True)
        rec = await asyncio.to_thread(svc.checkpoint.recover)
    if rec.broken and cfg.strict:
        names = ", ".join(f"{b.path} ({b.reason})" for b in rec.broken)
        raise StartupError(f"corrupt checkpoint: {names}")
    meta = rec.agent
    rebooted = meta is not None and meta.boot_id != svc.boot_id
    if meta is not None and meta.resources != svc.resources_identity():
        msg = f"resources changed from {meta.resources!r} to {svc.resources_identity()!r}"
        if cfg.strict:
            raise StartupError(f"{msg}; refusing to recover in strict mode")
        log.warning("%s: registering as a new agent; old tasks are killed", msg)
        svc.recovery_report.append(msg)
        await discard_old_tasks(svc, rec, rebooted)
        meta = None
        rec = Recovery(None, {}, (), ())
    svc.agent_id = meta.agent_id if meta is not None else None
    await asyncio.to_thread(
        svc.checkpoint.write_agent,
        AgentMeta(svc.agent_id, svc.boot_id, svc.resources_identity(), cfg.attributes or "", cfg.hostname),
    )
    svc.tracker.frameworks.update(rec.frameworks)
    now = svc.clock.now()
    leftovers: dict[int, tuple[float, str]] = {}
    awaited: dict[tuple[str, str], int | None] = {}  # custom executors: re-attached pid, or None
    # task groups of records written before the group was checkpointed: the tasks of one executor
    old_groups: dict[tuple[str, str], list[str]] = {}
    for t in rec.tasks:
        if t.record is not None and t.record.executor is not None and not t.record.group:
            old_groups.setdefault((t.framework_id, t.record.executor.executor_id.value), []).append(t.task_id)
    for t in rec.tasks:
        if t.broken is not None or t.record is None:
            recover_broken(svc, t.framework_id, t.task_id, t.broken, t.pid)
            continue
        rf = t.record
        fi = svc.frameworks.get(t.framework_id)
        try:
            group = rf.group or tuple(old_groups.get((t.framework_id, rf.executor.executor_id.value), ())
                                      if rf.executor is not None else ())
            # the group's shared fate (one task failing kills the rest) holds across the restart
            spec = task_spec(t.framework_id, rf.task, rf.executor, killing_state=rf.killing_state, group=group)
        except SpecError as e:
            recover_broken(svc, t.framework_id, t.task_id, CorruptCheckpoint(str(t.task_id), str(e)), t.pid)
            continue
        updates = tuple(svc.to_update(t.framework_id, s) for s in (t.log.updates if t.log else ()))
        acked = t.log.acked if t.log else frozenset()
        if any(is_terminal(u.state) and u.uuid in acked for u in updates):
            # finished and acknowledged before the restart; only its removal was pending
            await asyncio.to_thread(svc.checkpoint.unlink_task, t.framework_id, t.task_id)
            continue
        svc.submit(svc.updates.handle(su.Recovered(t.framework_id, t.task_id, updates, acked), now))
        last = updates[-1].state if updates else None
        if rf.gpus:
            spec = attrs.evolve(spec, gpu_devices=rf.gpus)
            if last is None or not is_terminal(last):  # it keeps its devices; no new task gets them
                problem = svc.gpus.restore((t.framework_id, t.task_id), rf.gpus, spec.gpus)
                if problem:
                    log.error("task %s/%s: GPU devices not restored: %s", t.framework_id, t.task_id, problem)
                    svc.recovery_report.append(f"task {t.framework_id}/{t.task_id}: GPUs not restored: {problem}")
        key = svc.task_key(t.framework_id, t.task_id)
        exit_path = svc.checkpoint.exit_status_path(t.framework_id, t.task_id)
        alive, spawned, pid = False, t.pid is not None, t.pid.pid if t.pid else None
        same_boot = t.pid is not None and not rebooted and t.pid.boot_id == svc.boot_id
        if spec.command is None and spec.executor_id is not None:
            if last is None or not is_terminal(last):
                ekey = (t.framework_id, spec.executor_id)
                if ekey not in awaited:
                    info = spec.info.executor if spec.info is not None and spec.info.executor else rf.executor
                    awaited[ekey] = await reattach_executor(svc, t.framework_id, spec.executor_id, info, rebooted)
                pid = awaited[ekey]
                alive = spawned = pid is not None
                if alive:
                    eid = spec.executor_id
                    for u in updates:  # its acks still go back to it
                        if u.uuid and u.uuid not in acked:
                            svc.tracker.executor_uuids[u.uuid] = eid
        elif last is None or not is_terminal(last):
            if t.pid is not None and same_boot:
                alive = svc.launcher.adopt(key, t.pid.pid, t.pid.create_time, exit_path)
            elif t.pid is None and not rebooted:
                # crashed between spawn and the pid checkpoint: find the wrapper by its marker
                for p in find_wrappers(str(exit_path)):
                    with contextlib.suppress(psutil.Error):
                        if svc.launcher.adopt(key, p.pid, p.create_time(), exit_path):
                            alive, spawned, pid = True, True, p.pid
                            svc.submit([svc.write_pid_effect(t.framework_id, t.task_id, PidRecord(p.pid, p.create_time(), svc.boot_id))])
                            break
            if alive and pid is not None:
                svc.isolator.recover(key, pid, spec.mem_limit, spec.cpus)
                svc.watch_oom(key)
                if svc.logs is not None and uses_log_pipes(pid):
                    with contextlib.suppress(CheckpointError):
                        svc.logs.track(key, str(svc.checkpoint.task_sandbox(t.framework_id, t.task_id, spec.pod_executor)), pid)
        exit_code = None
        if not alive:
            # read again now that the wrapper is known gone: it may have recorded the code and
            # ended after the checkpoint was read (the record is written before the wrapper exits)
            exit_code = await asyncio.to_thread(svc.checkpoint.read_exit_status, t.framework_id, t.task_id)
            if exit_code is None:
                exit_code = t.exit_code
        if not alive and same_boot and t.pid is not None:
            # the wrapper is gone (the task ended, or the wrapper was killed while we were
            # down): nothing of the task's process group may live on
            with contextlib.suppress(CheckpointError):
                sandbox = svc.checkpoint.task_sandbox(t.framework_id, t.task_id, spec.pod_executor)
                leftovers[t.pid.pid] = (t.pid.create_time, str(sandbox))
        if spec.executor_id is not None and fi is None:
            log.warning("executor task %s without framework info", t.task_id)
        kill_reason = None
        if t.kill_reason:
            with contextlib.suppress(ValueError):
                kill_reason = tk.KillReason(t.kill_reason)
        svc.submit(
            svc.tracker.handle(
                tk.RecoveredTask(spec, last, spawned, alive, exit_code, pid, kill_reason, t.kill_deadline), now
            )
        )
        svc.recovery_report.append(
            f"task {t.framework_id}/{t.task_id}: {'re-attached pid ' + str(pid) if alive else 'not running'}"
        )
    for b in rec.broken:
        if not b.path.endswith("framework.json"):
            continue
        log.error("corrupt framework checkpoint %s: %s", b.path, b.reason)
    if leftovers:
        killed = await asyncio.to_thread(kill_leftovers, leftovers)
        if killed:
            svc.recovery_report.append(f"killed {killed} leftover processes of ended tasks")
    keep = {pid for pid in awaited.values() if pid is not None}
    if not rebooted:
        await asyncio.to_thread(kill_orphan_executors, svc, keep)
    if keep:
        svc.spawn(await_reregistration(svc, [k for k, pid in awaited.items() if pid is not None]), name="executor-reregister")
    known = {k for k in svc.tracker.tasks}
    live_keys = {svc.task_key(*k) for k in known if svc.task_key(*k) in svc.launcher}
    stale = await asyncio.to_thread(svc.isolator.cleanup, live_keys)
    if stale:
        svc.recovery_report.append(f"removed {stale} cgroups of tasks that are gone")
    executors = {(t.spec.framework_id, t.spec.executor_id) for t in svc.tracker.tasks.values() if t.spec.executor_id}
    swept = await asyncio.to_thread(
        svc.sandbox_gc.sweep, lambda f, x: (f, x) in known or (f, x) in executors, None, svc.gc_max_age())
    if swept:
        svc.recovery_report.append(f"removed {swept} stale sandboxes")
    await svc.drain()

async def reattach_executor(
    svc: AgentService, fid: str, eid: str, info: ExecutorInfo | None, rebooted: bool
) -> int | None:
    """Re-attach a custom executor that outlived the agent (Mesos agent recovery): its wrapper is
    found by its marker and adopted (pid and create time), and it is registered with the executor
    API again, so it can SUBSCRIBE within ``--executor-reregister-timeout``. Only executors of
    frameworks that checkpoint reconnect (the others exit when the agent goes away). Returns the
    wrapper's pid, or None (the executor's tasks are then reported LOST)."""
    fi = svc.frameworks.get(fid)
    api = svc.executor_api
    if rebooted or fi is None or not fi.checkpoint or info is None or api is None:
        return None
    exit_path = svc.checkpoint.executor_exit_path(fid, eid)
    for p in await asyncio.to_thread(find_wrappers, str(exit_path)):
        with contextlib.suppress(psutil.Error):
            if svc.launcher.adopt(exec_key(fid, eid), p.pid, p.create_time(), exit_path):
                if fi.id is None:
                    fi = attrs.evolve(fi, id=FrameworkID(fid))
                api.register_executor(fi, info)
                log.info("executor %s/%s re-attached (pid %d); awaiting its SUBSCRIBE", fid, eid, p.pid)
                svc.recovery_report.append(f"executor {fid}/{eid}: re-attached pid {p.pid}")
                return p.pid
    return None


async def await_reregistration(svc: AgentService, executors: list[tuple[str, str]]) -> None:
    """After ``--executor-reregister-timeout``, the re-attached executors that have not
    SUBSCRIBEd are killed and their tasks reported LOST (a no-op for those that did)."""
    timeout = svc.config.executor_reregister_timeout
    await svc.clock.sleep(timeout)
    now = svc.clock.now()
    for fid, eid in executors:
        msg = f"Executor did not re-register within {timeout:g}s after the agent restarted"
        svc.submit(svc.tracker.handle(tk.ExecutorReregisterTimeout(fid, eid, msg), now))


def kill_orphan_executors(svc: AgentService, keep: frozenset[int] | set[int] = frozenset()) -> None:
    """Custom executors that were not re-attached after an agent restart (their tasks are
    reported LOST) must not live on."""
    prefix = str(svc.checkpoint.meta / "frameworks") + os.sep
    for p in find_wrappers(prefix, prefix=True):
        if p.pid in keep:
            continue
        if os.sep + "executors" + os.sep in p.info["cmdline"][3]:
            log.warning("killing executor left over from before the restart: pid %d", p.pid)
            with contextlib.suppress(OSError):
                os.killpg(p.pid, 9)

def recover_broken(svc: AgentService, fid: str, tid: str, err: CorruptCheckpoint | None, pid: PidRecord | None) -> None:
    why = f"corrupt checkpoint {err.path}: {err.reason}" if err else "corrupt checkpoint"
    log.error("task %s/%s: %s; reporting it LOST", fid, tid, why)
    svc.recovery_report.append(f"task {fid}/{tid}: {why}")
    # The task is reported LOST, so its process must not live on: kill it if we can tell
    # for sure it is ours (pid record with matching boot and create time, or the wrapper's
    # marker on its command line).
    with contextlib.suppress(CheckpointError, OSError):
        victims: list[int] = []
        if pid is not None and pid.boot_id == svc.boot_id:
            with contextlib.suppress(psutil.Error):
                if abs(psutil.Process(pid.pid).create_time() - pid.create_time) < 0.05:
                    victims.append(pid.pid)
        victims.extend(p.pid for p in find_wrappers(str(svc.checkpoint.exit_status_path(fid, tid))))
        for v in set(victims):
            with contextlib.suppress(OSError):
                os.killpg(v, 9)
    with contextlib.suppress(CheckpointError, OSError):
        src = svc.checkpoint.task_log(fid, tid)
        dst = svc.checkpoint.meta / "corrupt" / f"{fid}.{tid}.{int(svc.clock.now())}.log"
        dst.parent.mkdir(parents=True, exist_ok=True)
        os.replace(src, dst)
        svc.checkpoint.exit_status_path(fid, tid).unlink(missing_ok=True)
    spec = TaskSpec(fid, tid, tid, None)
    svc.submit(svc.tracker.recovered_broken(spec, f"Agent restarted; {why}"))

async def discard_old_tasks(svc: AgentService, rec: Recovery, rebooted: bool) -> None:
    for t in rec.tasks:
        if t.pid is not None and not rebooted and t.pid.boot_id == svc.boot_id:
            try:
                p = psutil.Process(t.pid.pid)
                if abs(p.create_time() - t.pid.create_time) < 0.05:
                    os.killpg(t.pid.pid, 9)
            except (psutil.Error, OSError):
                pass

    await asyncio.to_thread(shutil.rmtree, svc.checkpoint.meta / "frameworks", True)
    svc.checkpoint.init()
