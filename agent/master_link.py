"""The agent's side of the master connection (shell): what it registers with, what each master
message becomes (tracker and status-update events), launches checked and given their user and
GPUs, statuses made into ``TaskStatus`` updates and sent, retirement (``SIGUSR1``)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any, Protocol

import attrs

from agent import status_updates as su
from agent import tasks as tk
from agent import users
from agent.checkpoint import AgentMeta, Checkpoint
from agent.config import AgentConfig
from agent.effects import WriteFramework
from agent.environment import container_id
from agent.gpus import GpuBook, Refused
from agent.oversubscription import Oversubscription
from agent.ports import Metrics, StatusPort
from agent.taskspec import SpecError, TaskSpec, task_spec
from agent.usage import UsageBook
from protocol.agent_channel import (
    AGENT_HTTPS,
    AcknowledgeMsg,
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
    Unregister,
)
from protocol.ids import new_status_uuid
from protocol.mesos import CapabilityType, ContainerStatus, Reason, Source, TaskInfo, TaskStatus
from protocol.mesos_common import AgentID, ContainerID, ExecutorID, FrameworkID, Label, Labels, TaskID
from protocol.resources import attributes_to_mesos
from protocol.task_states import TaskState, is_terminal

log = logging.getLogger(__name__)

Refusal = tuple[TaskInfo, str, str, TaskState]  # the task, why, the reason, the state it is reported in


class ExecutorControl(Protocol):
    """What master messages ask of custom executors (``agent/executors.py``)."""

    def shutdown(self, fid: str, eid: str, grace: float) -> None: ...
    def call(self, method: str, *args: Any) -> None: ...


def to_update(fid: str, status: TaskStatus) -> su.Update:
    return su.Update(fid, status.task_id.value, status.uuid or b"", status.state, status)


class MasterLink:
    def __init__(
        self, config: AgentConfig, status: StatusPort, checkpoint: Checkpoint, usage: UsageBook,
        gpus: Callable[[], GpuBook], isolation: str, executors: ExecutorControl, oversubscription: Oversubscription,
        resources_identity: Callable[[], str], metrics: Metrics, wake: asyncio.Event,
    ) -> None:
        # the cores, the work queue, the link, the clock and the identity through one port (agent/ports.py)
        self.tracker, self.updates, self.submit, self.link = status.tracker, status.updates, status.submit, status.link
        self.me, self.clock, self.config, self.checkpoint = status.me, status.clock, config, checkpoint
        self.usage, self.gpus, self.isolation, self.executors = usage, gpus, isolation, executors
        self.oversubscription, self.resources_identity = oversubscription, resources_identity
        self.metrics, self.wake = metrics, wake
        self.retiring = False  # SIGUSR1: new launches are dropped, every task is killed, then exit

    # --- registration ----------------------------------------------------------------------------

    def build_register(self) -> Register:
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
        me, frameworks = self.me, self.tracker.frameworks
        return Register(
            hostname=self.config.advertised_host,
            port=me.port,
            resources=me.resources.to_mesos(),
            agent_id=AgentID(me.agent_id) if me.agent_id else None,
            attributes=attributes_to_mesos(me.attributes),
            version=me.version,
            isolation=self.isolation,
            boot_id=me.boot_id,
            tasks=tuple(running),
            frameworks=tuple(frameworks[f] for f in sorted(fids) if f in frameworks),
            capabilities=(AGENT_HTTPS,) if me.https else (),
        )

    def on_registered(self, reg: Registered) -> None:
        new_id = reg.agent_id.value
        me = self.me
        if new_id != me.agent_id:
            if me.agent_id is not None:
                log.warning("master assigned a new agent id %s (was %s)", new_id, me.agent_id)
            me.agent_id = new_id
            meta = AgentMeta(
                new_id, me.boot_id, self.resources_identity(), self.config.attributes or "", self.config.hostname
            )
            self.checkpoint.write_agent(meta)
        log.info("registered with master %s as %s (epoch %d)", reg.master_id, new_id, reg.epoch)
        self.metrics.registered.set(1)
        self.oversubscription.reset()
        self.submit(self.updates.handle(su.Resumed(), self.clock.now()))
        link = self.link()
        if self.retiring and link is not None:  # a new master must not offer it either
            link.send(Unregister())
        self.wake.set()

    def on_disconnected(self) -> None:
        self.metrics.registered.set(0)
        self.updates.handle(su.Paused(), self.clock.now())
        log.info("disconnected from the master")

    def retire(self) -> None:
        """Stop taking work: from now on every launch is answered TASK_DROPPED (TASK_LOST for
        frameworks that are not partition aware) so its framework re-runs it elsewhere, and the
        master is told (``UNREGISTER``) to offer nothing more on this agent."""
        if self.retiring:
            return
        self.retiring = True
        log.info("retiring: refusing new launches, asking the master to stop offering this agent")
        link = self.link()
        if link is not None and link.registered:
            link.send(Unregister())

    # --- master messages -----------------------------------------------------------------------

    def on_message(self, body: object) -> None:
        now = self.clock.now()
        if isinstance(body, RunTasks):
            self.run_tasks(body, now)
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
        self.wake.set()

    def run_tasks(self, rt: RunTasks, now: float) -> None:
        fid = rt.framework_id.value
        if self.retiring:
            self._drop_launch(rt, now)
            return
        fi = rt.framework_info
        if fi.id is None:
            fi = attrs.evolve(fi, id=rt.framework_id)
        if self.tracker.frameworks.get(fid) != fi:
            self.tracker.frameworks[fid] = fi
            self.submit([WriteFramework(fid)])  # (re)written in the checkpoint thread, in order
        killing = any(c.type is CapabilityType.TASK_KILLING_STATE for c in fi.capabilities)
        group_ids = tuple(t.task_id.value for t in rt.tasks) if rt.group else ()
        specs: list[TaskSpec] = []
        errors: list[Refusal] = []
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
                self.gpus().release((fid, spec.task_id))
            specs = []
        for info, msg, reason, state in errors:
            self.submit(self.tracker.handle(tk.LaunchRejected(fid, info.task_id.value, msg, None, reason, state), now))
        effects: list[Any] = []
        launch_group = group_ids if rt.group and rt.executor is not None else ()
        for spec in specs:
            effects.extend(self.tracker.handle(tk.LaunchTask(spec, launch_group), now))
        self.submit(effects)

    def _assign_gpus(self, specs: list[TaskSpec]) -> tuple[list[TaskSpec], list[Refusal]]:
        """Give each new task asking for ``gpus`` its devices (``agent/gpus.py``); a task the book
        refuses (fractional without sharing, no free device) is answered instead of run."""
        out: list[TaskSpec] = []
        refused: list[Refusal] = []
        book = self.gpus()
        for spec in specs:
            key = (spec.framework_id, spec.task_id)
            known = self.tracker.get(*key)
            if known is not None:  # a duplicate launch: the tracker ignores it, devices stay
                out.append(spec)
                continue
            got = book.assign(key, spec.gpus)
            if isinstance(got, Refused):
                assert spec.info is not None
                log.warning("task %s/%s refused: %s", spec.framework_id, spec.task_id, got.message)
                refused.append((spec.info, got.message, got.reason, TaskState.TASK_ERROR if got.error else TaskState.TASK_FAILED))
                continue
            out.append(attrs.evolve(spec, gpu_devices=tuple(d.index for d in got)) if got else spec)
        return out, refused

    def _drop_launch(self, rt: RunTasks, now: float) -> None:
        """A launch that reached a retiring agent: answered TASK_DROPPED (the master shows
        TASK_LOST to frameworks that are not partition aware), nothing is started or checkpointed."""
        fid = rt.framework_id.value
        eid = rt.executor.executor_id.value if rt.group and rt.executor is not None else None
        dropped = 0
        for info in rt.tasks:
            effects = self.tracker.handle(tk.LaunchRejected(
                fid, info.task_id.value, "Agent is retiring (SIGUSR1): launch refused", eid,
                "REASON_AGENT_REMOVED_BY_OPERATOR", TaskState.TASK_DROPPED,
            ), now)
            if effects:  # none for a duplicate of a task it knows: that one is being killed
                dropped += 1
            self.submit(effects)
        log.info("retiring: dropped %d task(s) launched for %s", dropped, fid)

    # --- status updates ----------------------------------------------------------------------

    def emit(self, eff: tk.EmitStatus) -> None:
        """A status from the tracker becomes a ``TaskStatus`` (uuid, timestamp, agent id, reason,
        ``exit_code`` label, the final usage on a terminal one) for the status-update manager."""
        now = self.clock.now()
        if eff.executor_id is None:  # a task of a task group: reported under its DEFAULT executor
            t = self.tracker.get(eff.framework_id, eff.task_id)
            if t is not None and t.spec.executor_id is not None:
                eff = attrs.evolve(eff, executor_id=t.spec.executor_id)
        labels = None
        if eff.exit_code is not None:
            labels = Labels((Label("exit_code", str(eff.exit_code)),))
        agent_id = self.me.agent_id
        status = TaskStatus(
            task_id=TaskID(eff.task_id),
            state=eff.state,
            message=eff.message,
            source=Source(eff.source),
            reason=Reason(eff.reason) if eff.reason else None,
            agent_id=AgentID(agent_id) if agent_id else None,
            executor_id=ExecutorID(eff.executor_id or eff.task_id),
            timestamp=now,
            uuid=new_status_uuid(),
            labels=labels,
            healthy=eff.healthy,
            check_status=eff.check_status,
            container_status=ContainerStatus(ContainerID(
                container_id(agent_id or "", eff.framework_id, eff.executor_id or eff.task_id)
            )),
        )
        used = self.usage.get((eff.framework_id, eff.task_id)) if is_terminal(eff.state) else None
        if used is not None:  # the final figures ride on the terminal update (protocol.usage)
            status = attrs.evolve(status, labels=Labels((*(labels.labels if labels else ()), *used.labels())))
        self.submit(self.updates.handle(su.UpdateGenerated(to_update(eff.framework_id, status)), now))

    def send_update(self, eff: su.SendUpdate) -> None:
        link = self.link()
        if link is None:
            return
        status = eff.update.status
        assert isinstance(status, TaskStatus)
        if status.agent_id is None and self.me.agent_id:
            status = attrs.evolve(status, agent_id=AgentID(self.me.agent_id))
        msg = StatusUpdateMsg(FrameworkID(eff.update.framework_id), status, eff.latest_state)
        if link.send(msg):
            self.metrics.updates.inc()
