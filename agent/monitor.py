"""The agent's periodic work (shell): the monitor loop (usage sampling, memory breaches, the disk
watch, sandbox GC, the estimator and QoS controller, usage reports to the master) and the timer
loop (the cores' deadlines: kill escalation, update resends)."""

from __future__ import annotations

import asyncio
import contextlib
import logging

from agent import status_updates as su
from agent import tasks as tk
from agent.checkpoint import CheckpointError
from agent.config import AgentConfig
from agent.disk import gc_max_age, quota_message, restore_reserve
from agent.diskwatch import fs_usage, measure
from agent.isolation import Breach, Usage
from agent.ports import MonitorPort, StatusPort, Submit
from agent.processes import task_key
from protocol.agent_channel import TaskUsageEntry, UsageReport
from protocol.clock import Clock
from protocol.mesos_common import FrameworkID, TaskID

log = logging.getLogger(__name__)


class Monitor:
    def __init__(self, config: AgentConfig, status: StatusPort, port: MonitorPort) -> None:
        self.config, self.clock, self.tracker, self.link = config, status.clock, status.tracker, status.link
        self.checkpoint, self.usage, self.isolator, self.launcher = port.sandboxes, port.usage, port.sampler, port.live
        self.processes, self.journal, self.oversubscription = port.limits, port.journal, port.estimator
        self.sandbox_gc, self.reserve, self.metrics = port.sandbox_gc, port.reserve, port.metrics
        self.disk_used = 0.0  # the work dir's file system, fraction in use at the last disk check

    def init_disk(self) -> None:
        """Blocking: the work dir's reserve, and how full its file system is (for the GC sweep)."""
        self.reserve.ensure()
        with contextlib.suppress(OSError):
            self.disk_used = fs_usage(self.config.work_dir)[0]

    def gc_max_age(self) -> float:
        """How long a finished sandbox stays now (``agent.disk.gc_max_age``)."""
        return gc_max_age(self.config.gc_delay, self.config.gc_disk_headroom, self.disk_used)

    async def watch_disk(self, now: float) -> None:
        """Every ``--disk-watch-interval``: how full the work dir is (sandbox GC), what each running
        task's sandbox holds (usage; a task past its disk is killed), the reserve taken back."""
        sandboxes = {}
        limits: dict[str, int | None] = {}
        for t in self.tracker.active():
            if t.spec.command is None or t.pid is None:
                continue
            key = task_key(*t.key)
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
                self.processes.limit(fid, tid, msg, tk.KillReason.DISK, now)
        if self.reserve.released and restore_reserve(report.free, self.reserve.size):
            await asyncio.to_thread(self.reserve.ensure)

    def report_usage(self) -> None:
        """The running tasks' figures that changed since the last report, to the master."""
        link = self.link()
        if link is None or not link.registered:
            return
        live = [t.key for t in self.tracker.active() if t.spec.command is not None]
        changed = self.usage.report(live)
        if changed:
            link.send(UsageReport(tuple(
                TaskUsageEntry(FrameworkID(fid), TaskID(tid), u.cpu_seconds, u.mem_rss_bytes, u.mem_peak_bytes,
                               -1 if u.disk_used_bytes is None else u.disk_used_bytes, u.timestamp)
                for (fid, tid), u in changed
            )))

    def _sample(self) -> tuple[dict[str, Usage], list[Breach]]:
        """Worker thread, once per tick: the isolator's figures, then its spare cgroups topped up
        (in the same thread hop)."""
        out = self.isolator.sample()
        try:
            self.isolator.fill()
        except OSError:
            log.exception("spare cgroups not made")
        return out

    async def run(self) -> None:
        cfg = self.config
        last_estimate = last_report = last_disk = 0.0
        while True:
            await self.clock.sleep(cfg.monitor_interval)
            try:
                usage, breaches = await asyncio.to_thread(self._sample)
            except Exception:
                log.exception("usage sampling failed")
                continue
            now = self.clock.now()
            self.metrics.running.set(len(self.tracker.active()))
            if self.journal.drops_pending:
                await asyncio.to_thread(self.journal.reap_dropped)
            if now - last_disk >= cfg.disk_watch_interval:
                last_disk = now
                await self.watch_disk(now)
            expired = self.sandbox_gc.due(now, self.gc_max_age())
            if expired:
                await asyncio.to_thread(self.sandbox_gc.remove, expired)
            for key, u in usage.items():
                kind, fid, tid = key.split("/", 2)
                if kind == "t" and key in self.launcher:
                    self.usage.sampled((fid, tid), u.cpu_seconds, u.rss, now)
            for b in breaches:
                _, fid, tid = b.key.split("/", 2)
                self.processes.limit(fid, tid, b.message, tk.KillReason.MEMORY, now)
            if now - last_estimate >= cfg.estimate_interval:
                last_estimate = now
                self.oversubscription.step(usage, now)
            if cfg.usage_report_interval > 0 and now - last_report >= cfg.usage_report_interval:
                last_report = now
                self.report_usage()


async def timer_loop(tracker: tk.TaskTracker, updates: su.StatusUpdateManager, submit: Submit, clock: Clock,
                     wake: asyncio.Event) -> None:
    """Delivers ``Tick``s to the two cores when their earliest deadline is due. ``wake`` is set
    whenever something may have moved a deadline (a message, the end of a work run); most such
    wake-ups change nothing, so the sleeper is re-armed only when the earliest deadline changed,
    and a ``Tick`` is delivered only when a deadline is due."""

    async def wake_after(delay: float) -> None:
        await clock.sleep(delay)
        wake.set()

    sleeper: asyncio.Future[None] | None = None
    armed: float | None = None
    try:
        while True:
            wake.clear()
            deadlines = [d for d in (tracker.next_deadline(), updates.next_deadline()) if d is not None]
            deadline = min(deadlines) if deadlines else None
            now = clock.now()
            if deadline is not None and deadline <= now:
                submit(tracker.handle(tk.Tick(), now))
                submit(updates.handle(su.Tick(), now))
                await asyncio.sleep(0)  # let the tick's effects run before looking again
                continue
            if deadline != armed or (sleeper is not None and sleeper.done()):
                if sleeper is not None:
                    sleeper.cancel()
                sleeper, armed = None, deadline
                if deadline is not None:
                    sleeper = asyncio.ensure_future(wake_after(deadline - now))
            await wake.wait()
    finally:
        if sleeper is not None:
            sleeper.cancel()
