"""Task processes (shell): spawn a command task (sandbox, environment, user, isolation, log
pipes), watch it, signal it, and turn what happens to it into tracker events — its exit (reported
once its logs are complete), a kernel OOM kill, a limit breach."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import errno
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs

from agent import tasks as tk
from agent import users
from agent.checkpoint import CheckpointError
from agent.environment import task_environment
from agent.isolation import MonitorIsolator
from agent.launcher import Launcher, LaunchError, Proc, spawn
from agent.logs import FLUSH_TIMEOUT
from agent.ports import ProcessPort, StatusPort
from agent.taskspec import TaskSpec

log = logging.getLogger(__name__)


def task_key(fid: str, tid: str) -> str:
    return f"t/{fid}/{tid}"


@attrs.frozen
class SpawnResult:
    spec: TaskSpec
    proc: Proc | None
    error: str | None = None
    logs: str | None = None  # the sandbox, when the log writer has the task's stdout/stderr
    no_space: bool = False  # failed for want of room in the work dir (ENOSPC): worth one retry after the reserve


class TaskProcesses:
    def __init__(self, status: StatusPort, port: ProcessPort) -> None:
        self.tracker, self.submit, self.clock, self.me = status.tracker, status.submit, status.clock, status.me
        self.checkpoint, self.isolator, self.logs, self.usage = port.sandboxes, port.isolator, port.logs, port.usage
        self.gpus, self.metrics, self.pool = port.gpus, port.metrics, port.pool
        self.launcher = Launcher(self.on_exit)
        self.setpriv = users.setpriv_path()
        self._exit_waits: dict[str, tuple[int | None, asyncio.TimerHandle]] = {}  # exits waiting for their logs
        self._oom_fds: dict[str, int] = {}  # task key -> the isolator's OOM descriptor being watched
        self._releases: list[str] = []  # ended tasks whose cgroups are freed in the next worker hop
        # a batch's log pipes, handed to the writer together (``open_logs``), taken by the spawns
        self._streams: dict[str, tuple[tuple[int, int], tuple[int, int]] | None] = {}

    def environment(self, spec: TaskSpec, sandbox: str, executor_id: str | None = None,
                    extra: tuple[tuple[str, str], ...] = ()) -> dict[str, str]:
        """The task's environment (``agent/environment.py``) with exactly its GPU devices."""
        env = task_environment(
            agent_id=self.me.agent_id or "", framework_id=spec.framework_id, task_id=spec.task_id,
            executor_id=executor_id or spec.executor_id or spec.task_id, sandbox=sandbox,
            path=os.environ.get("PATH"), extra=extra,
        )
        env.update(self.gpus().environment(spec.gpu_devices))  # the agent's values win
        return env

    # --- spawn ------------------------------------------------------------------------------

    def open_logs(self, specs: list[TaskSpec]) -> None:
        """Checkpoint thread, before a batch's spawns: make the command tasks' sandboxes and hand
        all their log pipes to the writer at once (``LogWriterClient.open_many``); each spawn then
        takes its own. A task whose sandbox cannot be made is left to its spawn (which fails it)."""
        if self.logs is None:
            return
        tasks: list[tuple[str, Path]] = []
        for spec in specs:
            if spec.command is None:
                continue
            try:
                sandbox = self.checkpoint.task_sandbox(spec.framework_id, spec.task_id, spec.pod_executor)
                sandbox.mkdir(parents=True, exist_ok=True)
            except (CheckpointError, OSError):
                continue
            tasks.append((task_key(spec.framework_id, spec.task_id), sandbox))
        if tasks:
            self._streams.update(self.logs.open_many(tasks))

    def spawn_blocking(self, spec: TaskSpec) -> SpawnResult:
        """Checkpoint thread (or a spawner thread): sandbox, environment, isolation, spawn. The
        caller writes the pid record (the checkpoint's batch state is single-threaded)."""
        fid, tid = spec.framework_id, spec.task_id
        key = task_key(fid, tid)
        assert spec.command is not None
        handed = key in self._streams
        pipes = self._streams.pop(key, None)  # handed to the writer with its batch (open_logs)
        try:
            sandbox = self.checkpoint.task_sandbox(fid, tid, spec.pod_executor)
            env = self.environment(spec, str(sandbox), extra=spec.command.environment)
            argv = spec.command.argv
            if spec.run_as is not None:  # hand the sandbox to the task's user, then drop privileges
                argv = users.enter(spec.run_as, sandbox, argv, self.setpriv)
            join = self.isolator.prepare(key, spec.mem_limit, spec.cpus)
            if self.logs is not None and not handed:
                sandbox.mkdir(parents=True, exist_ok=True)
                pipes = self.logs.open_streams(key, sandbox)
            proc = spawn(key, argv, env, sandbox, self.checkpoint.exit_status_path(fid, tid), join,
                         stdio=pipes[0] if pipes else None, keep=pipes[1] if pipes else None)
        except (LaunchError, CheckpointError, OSError) as e:
            self.isolator.release(key)
            cause = e if isinstance(e, OSError) else e.__cause__ or e.__context__
            no_space = isinstance(cause, OSError) and cause.errno == errno.ENOSPC
            return SpawnResult(spec, None, f"Failed to launch: {e}", no_space=no_space)
        finally:
            for fd in (*pipes[0], *pipes[1]) if pipes else ():
                os.close(fd)
        return SpawnResult(spec, proc, logs=str(sandbox) if pipes else None)

    def spawned(self, r: SpawnResult) -> None:
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
        self.metrics.launched.inc()
        self.submit(self.tracker.handle(tk.Spawned(fid, tid, r.proc.pid), now))

    # --- signals ----------------------------------------------------------------------------

    def signal(self, fid: str, tid: str, name: str) -> None:
        key = task_key(fid, tid)
        if name == "KILL":
            self.kill(key)
        else:
            self.launcher.signal(key, name)

    def kill(self, key: str) -> None:
        """SIGKILL the task's process group now and, off the loop, every process in its cgroup
        (whatever left the group: ``setsid``, a daemon)."""
        self.launcher.signal(key, "KILL")
        self.background(self.isolator.kill, key)

    def released(self, fid: str, tid: str, terminal_state: str | None, command: bool) -> None:
        """The task is terminal: nothing of it survives (its cgroup goes when its process ends)."""
        key = task_key(fid, tid)
        if terminal_state is not None:
            self.metrics.terminal.labels(state=terminal_state).inc()
        if command and key in self.launcher:
            self.launcher.signal(key, "KILL")

    def background(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run blocking isolator work (a kill, a cgroup removal) off the event loop."""
        def done(f: concurrent.futures.Future[Any]) -> None:
            if not f.cancelled() and f.exception() is not None:
                log.error("%s failed: %r", getattr(fn, "__name__", fn), f.exception())

        try:
            self.pool.submit(fn, *args).add_done_callback(done)
        except RuntimeError:  # shutting down: do it here
            with contextlib.suppress(Exception):
                fn(*args)

    # --- ends and limits --------------------------------------------------------------------

    def on_exit(self, key: str, code: int | None) -> None:
        kind, fid, xid = key.split("/", 2)
        now = self.clock.now()
        if kind == "t":
            self._task_ended(key, fid, xid, now)
            if self.logs is not None and self.logs.waits_for(key):
                # report the end once its logs are complete (the writer drains the pipes): a
                # framework that reads them on hearing of it finds everything the task wrote
                timer = asyncio.get_running_loop().call_later(FLUSH_TIMEOUT, self.logs_complete, key)
                self._exit_waits[key] = (code, timer)
                return
            if self.logs is not None:
                self.logs.untrack(key)
            self.submit(self.tracker.handle(tk.Exited(fid, xid, code), now))
        else:
            self.submit(self.tracker.handle(tk.ExecutorTerminated(fid, xid, code), now))

    def logs_complete(self, key: str) -> None:
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
            self.limit(fid, tid, msg, tk.KillReason.MEMORY, now)
        ru = self.launcher.pop_rusage(key)
        cg = self.isolator.usage(key)
        cpu = max(ru[0] if ru else 0.0, cg.cpu_seconds if cg else 0.0)
        self.usage.ended((fid, tid), cpu, ru[1] if ru else None, now)
        if isinstance(self.isolator, MonitorIsolator):
            self.isolator.release(key)  # bookkeeping only
        else:
            # the tasks ending in one loop tick free their cgroups in one worker hop
            if not self._releases:
                asyncio.get_running_loop().call_soon(self._release_ended)
            self._releases.append(key)

    def _release_ended(self) -> None:
        keys, self._releases = self._releases, []
        if keys:
            self.background(self._release_all, keys)

    def _release_all(self, keys: list[str]) -> None:
        """Worker thread: free the cgroups of tasks that ended (one failing does not stop the rest)."""
        for key in keys:
            try:
                self.isolator.release(key)
            except Exception:
                log.exception("releasing the cgroup of %s failed", key)

    def limit(self, fid: str, tid: str, message: str, kind: tk.KillReason, now: float) -> None:
        t = self.tracker.get(fid, tid)
        if t is None or t.terminal or t.kill_reason in (tk.KillReason.MEMORY, tk.KillReason.DISK):
            return
        self.metrics.limit.inc()
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
        self.limit(fid, tid, msg, tk.KillReason.MEMORY, self.clock.now())

    def close(self) -> None:
        self._release_ended()
        for key in list(self._oom_fds):
            self.unwatch_oom(key)
        for _code, timer in self._exit_waits.values():
            timer.cancel()  # recovery reads these exits from their exit files
        self._exit_waits.clear()
