"""Custom executors (shell): start the executor process, hand it tasks through the executor
HTTP API (``agent.executor_api.ExecutorAPI``), and receive its updates as the API's host."""

from __future__ import annotations

import logging
from typing import Any

import attrs

from agent import status_updates as su
from agent import tasks as tk
from agent import users
from agent.checkpoint import CheckpointError
from agent.launcher import LaunchError
from agent.master_link import to_update
from agent.ports import ExecutorSpawnPort, StatusPort
from agent.taskspec import SpecError, TaskSpec, command_spec
from protocol.agent_channel import ExecutorMessageMsg
from protocol.mesos import ExecutorInfo, TaskStatus
from protocol.mesos_common import AgentID, ExecutorID, FrameworkID

log = logging.getLogger(__name__)


def exec_key(fid: str, eid: str) -> str:
    return f"e/{fid}/{eid}"


class ExecutorGlue:
    """The agent's side of custom executors; also the ``ExecutorHost`` the API calls back. It
    sees two narrow ports (``agent/ports.py``): ``ExecutorSpawnPort`` (fetch, environment, user,
    launcher) to make and stop executor processes, ``StatusPort`` (the cores, the work queue, the
    master link) for what it learns."""

    def __init__(self, procs: ExecutorSpawnPort, status: StatusPort) -> None:
        self.procs, self.status = procs, status
        # what the glue drives, by name
        self.tracker, self.updates, self.submit, self.clock = status.tracker, status.updates, status.submit, status.clock
        self.me, self.link, self.launcher, self.running = status.me, status.link, procs.launcher, procs.running
        self.api: Any = None  # the executor API (agent/executor_api.py), once the agent listens

    def _executor_info(self, spec: TaskSpec) -> ExecutorInfo | None:
        if spec.info is not None and spec.info.executor is not None:
            return spec.info.executor
        return spec.group_executor

    def start(self, eff: tk.StartExecutor) -> None:
        """Start the executor; its ``CommandInfo.uris`` are fetched into its sandbox first (the
        fetcher, as for command tasks; a failed fetch ends it before it starts)."""
        info = self._executor_info(eff.spec)
        if info is not None and info.command is not None and info.command.uris:
            self.procs.spawn(self._fetch_then_start(eff, info), f"fetch-executor-{eff.executor_id}")
            return
        self._start(eff)

    async def _fetch_then_start(self, eff: tk.StartExecutor, info: ExecutorInfo) -> None:
        from agent.fetch_plan import failure
        from agent.fetcher import Fetched

        fid, eid = eff.framework_id, eff.executor_id
        assert info.command is not None
        fi = self.tracker.frameworks.get(fid)
        procs = self.procs
        try:
            run_as = users.resolve_task(info.command.user, fi.user if fi else None, allow_root=procs.allow_root,
                                        switch_user=procs.switch_user)
            sandbox = procs.sandboxes.sandbox(fid, eid)
        except (users.UserError, CheckpointError) as e:
            self.submit(self.tracker.handle(
                tk.ExecutorTerminated(fid, eid, None, f"Executor failed to start: {e}"), self.clock.now()))
            return
        owner = (run_as.uid, run_as.gid) if run_as is not None else None
        result = await procs.fetcher.fetch(exec_key(fid, eid), eid, info.command.uris, sandbox, owner, lambda _m: None)
        if result is None:
            return  # the agent is stopping
        if isinstance(result, Fetched):
            log.info("executor %s/%s: %s", fid, eid, result.message)
            self._start(eff)
            return
        log.warning("executor %s/%s: %s", fid, eid, result.message)
        self.submit(self.tracker.handle(
            tk.ExecutorTerminated(fid, eid, None, failure(eid, result.message)), self.clock.now()))

    def _start(self, eff: tk.StartExecutor) -> None:
        fid, eid = eff.framework_id, eff.executor_id
        now = self.clock.now()
        info = self._executor_info(eff.spec)
        fi = self.tracker.frameworks.get(fid)
        if info is None or fi is None or self.api is None or info.command is None:
            self.submit(self.tracker.handle(tk.ExecutorTerminated(fid, eid, None, "Executor could not be started"), now))
            return
        key = exec_key(fid, eid)
        try:
            from agent.executor_api import executor_environment

            if fi.id is None:
                fi = attrs.evolve(fi, id=FrameworkID(fid))
            self.api.register_executor(fi, info)
            procs = self.procs
            sandbox = procs.sandboxes.sandbox(fid, eid)
            # with the devices of the task it starts with
            env = procs.environment(eff.spec, str(sandbox), executor_id=eid, extra=command_spec(info.command).environment)
            env.update(
                executor_environment(
                    fid, eid, self.me.agent_id or "", str(sandbox), procs.api_address(),
                    checkpoint=bool(fi.checkpoint), shutdown_grace_seconds=procs.shutdown_grace,
                )
            )
            exit_path = procs.sandboxes.executor_exit_path(fid, eid)
            exit_path.parent.mkdir(parents=True, exist_ok=True)
            argv = command_spec(info.command).argv
            run_as = users.resolve_task(info.command.user, fi.user, allow_root=procs.allow_root,
                                        switch_user=procs.switch_user)
            if run_as is not None:  # the executor runs as the task's user, like a command task
                argv = users.enter(run_as, sandbox, argv, procs.setpriv)
            proc = self.launcher.launch(key, argv, env, sandbox, exit_path)
        except (LaunchError, CheckpointError, SpecError, OSError, ValueError) as e:
            log.warning("executor %s/%s failed to start: %s", fid, eid, e)
            self.submit(self.tracker.handle(tk.ExecutorTerminated(fid, eid, None, f"Executor failed to start: {e}"), now))
            return
        self.submit(self.tracker.handle(tk.ExecutorStarted(fid, eid, proc.pid), now))

    def hand(self, eff: tk.HandToExecutor) -> None:
        fid, eid = eff.framework_id, eff.executor_id
        done: set[str] = set()
        for tid in eff.task_ids:
            if tid in done:
                continue
            first = self.tracker.get(fid, tid)
            group = first.launch_group if first is not None else ()
            if group:
                infos = []
                for g in group:
                    rec = self.tracker.get(fid, g)
                    if rec is not None and rec.spec.info is not None and not rec.terminal:
                        infos.append(rec.spec.info)
                    done.add(g)
                if infos:
                    self.call("launch_group", fid, eid, infos)
            else:
                rec = self.tracker.get(fid, tid)
                done.add(tid)
                if rec is not None and rec.spec.info is not None and not rec.terminal:
                    info = rec.spec.info
                    self.call("launch", fid, eid, info)

    def call(self, method: str, *args: Any) -> None:
        if self.api is None:
            return

        async def call() -> None:
            try:
                await getattr(self.api, method)(*args)
            except Exception as e:
                log.info("executor API %s%r failed: %s", method, args[:2], e)

        if self.running():
            self.procs.spawn(call(), f"executor-{method}")

    def shutdown(self, fid: str, eid: str, grace: float) -> None:
        self.call("shutdown", fid, eid)
        key = exec_key(fid, eid)
        if key in self.launcher:
            self.launcher.signal(key, "TERM")

            async def escalate() -> None:
                await self.clock.sleep(grace)
                self.launcher.signal(key, "KILL")

            if self.running():
                self.procs.spawn(escalate(), "executor-shutdown")

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
            self.tracker.executor_uuids[status.uuid] = executor_id
        if status.agent_id is None and self.me.agent_id:
            status = attrs.evolve(status, agent_id=AgentID(self.me.agent_id))
        self.submit(self.updates.handle(su.UpdateGenerated(to_update(framework_id, status)), now))
        self.submit(effects)

    def on_executor_message(self, framework_id: str, executor_id: str, data: bytes) -> None:
        link = self.link()
        if link is not None:
            link.send(ExecutorMessageMsg(FrameworkID(framework_id), ExecutorID(executor_id), data))

    def on_executor_subscribed(self, framework_id: str, executor_id: str) -> None:
        log.info("executor %s/%s subscribed", framework_id, executor_id)
        api = self.api
        known = api.reported_tasks(framework_id, executor_id) if api is not None else frozenset()
        # a no-op unless the executor was re-attached after an agent restart and awaited
        self.submit(self.tracker.handle(tk.ExecutorReregistered(framework_id, executor_id, known), self.clock.now()))

    def on_executor_disconnected(self, framework_id: str, executor_id: str) -> None:
        log.info("executor %s/%s disconnected", framework_id, executor_id)
