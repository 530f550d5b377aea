"""The agent's checkpoint writer (shell): runs a batch of disk effects from the work queue
(``agent/effects.py``) with group commit — every write and drop of the batch in queue order, the
batch's spawns (their task records are written by then), then one ``commit`` (each file with a
new durable update fdatasync'd once). A terminal update is durable before it is sent, any update
is written before it is sent. Finished tasks' files are recycled later, off this thread: the
sweep (``reap_dropped``, once per monitor tick, for every task dropped since the last one) truncates
each acknowledged task's log and exit file and renames them into the checkpoint's pool, from which
new tasks' files are renamed (``Checkpoint.recycle_task``; the crash argument is in
``agent/checkpoint.py``, "Recycled files"). A launch that reuses the id of a dropped task takes the
drop back and removes the old files itself, or, when the sweep already holds them, waits for that
sweep to finish: the sweep never touches a live task's files, and it holds no lock while it works."""

from __future__ import annotations

import concurrent.futures
import contextlib
import errno
import logging
import threading
from collections.abc import Callable

from agent import status_updates as su
from agent import tasks as tk
from agent.checkpoint import Checkpoint, CheckpointError, PidRecord, TaskRecordFile
from agent.diskwatch import Reserve
from agent.effects import WriteFramework, WriteKill, WritePid
from agent.processes import SpawnResult
from agent.taskspec import TaskSpec

log = logging.getLogger(__name__)


class Journal:
    def __init__(
        self,
        checkpoint: Checkpoint,
        tracker: tk.TaskTracker,
        reserve: Reserve,
        boot_id: str,
        spawn: Callable[[TaskSpec], SpawnResult],
        spawners: concurrent.futures.ThreadPoolExecutor,
        open_logs: Callable[[list[TaskSpec]], None] | None = None,
    ) -> None:
        self.checkpoint, self.tracker, self.reserve, self.boot_id = checkpoint, tracker, reserve, boot_id
        self._spawn, self._spawners = spawn, spawners
        self._open_logs = open_logs  # a batch's log pipes to the writer in one go, before its spawns
        self._drops: dict[tuple[str, str], None] = {}  # finished tasks whose files are to be recycled
        self._sweeping: set[tuple[str, str]] = set()  # those the sweep is recycling now
        self._drops_lock = threading.Condition()  # guards both; notified when a sweep ends

    @property
    def drops_pending(self) -> bool:
        return bool(self._drops)

    def run(self, batch: list[object]) -> list[SpawnResult]:
        """Runs in the checkpoint thread (or inline on the loop for a batch of plain appends,
        see ``effects.needs_thread``)."""
        cp = self.checkpoint
        spawns = [e for e in batch if isinstance(e, tk.SpawnTask)]
        for w in batch:  # writes and drops in queue order (an ack may precede its task's drop)
            if isinstance(w, tk.SpawnTask):
                continue
            if isinstance(w, tk.DropTask):
                with contextlib.suppress(CheckpointError, OSError):
                    cp.release(w.framework_id, w.task_id)
                # recycling happens later, off this thread (``reap_dropped``); a finished log
                # left behind is harmless on recovery
                with self._drops_lock:
                    self._drops[(w.framework_id, w.task_id)] = None
                continue
            for attempt in (0, 1):
                try:
                    self._write(w)
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
            if self._open_logs is not None:
                self._open_logs([s for s in specs if s.command is not None])
            spawned = list(self._spawners.map(self._spawn, specs))
        else:
            spawned = [self._spawn(sp) for sp in specs]
        if any(r.no_space for r in spawned) and self.reserve.release():
            # the work dir is full (a recycled checkpoint log takes no new room, so the task's
            # sandbox or files can be the first to find out): the reserve makes room, once
            spawned = [self._spawn(r.spec) if r.no_space else r for r in spawned]
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

    def _write(self, eff: object) -> None:
        cp, tracker = self.checkpoint, self.tracker
        if isinstance(eff, tk.CheckpointTask):
            s = eff.spec
            key = (s.framework_id, s.task_id)
            assert s.info is not None
            record = TaskRecordFile(s.framework_id, s.info, s.group_executor, s.killing_state, s.gpu_devices,
                                    s.group if len(s.group) > 1 else ())
            # Under the lock: a task id reused before its old files were recycled waits for the
            # sweep, and the sweep's removal of a framework directory it found empty can never
            # run between this write's framework check and its task log (it would take the new
            # log with it).
            with self._drops_lock:
                while key in self._sweeping:
                    self._drops_lock.wait()
                if self._drops.pop(key, 0) is None:
                    cp.remove_task(s.framework_id, s.task_id)
                fi = tracker.frameworks.get(s.framework_id)
                if fi is not None and not cp.has_framework(s.framework_id):
                    cp.write_framework(s.framework_id, fi)
                cp.write_task(record)
        elif isinstance(eff, su.CheckpointUpdate):
            u = eff.update
            if (u.framework_id, u.task_id) not in tracker.ephemeral:
                cp.append_update(u.framework_id, u.task_id, u.status, sync=eff.durable)
        elif isinstance(eff, su.CheckpointAck):
            if (eff.framework_id, eff.task_id) not in tracker.ephemeral:
                cp.append_ack(eff.framework_id, eff.task_id, eff.uuid)
        elif isinstance(eff, WritePid):
            cp.write_pid(eff.framework_id, eff.task_id, eff.record)
        elif isinstance(eff, WriteKill):
            cp.write_kill(eff.framework_id, eff.task_id, eff.reason, eff.deadline)
        elif isinstance(eff, WriteFramework):
            info = tracker.frameworks.get(eff.framework_id)
            if info is not None:
                cp.write_framework(eff.framework_id, info)

    def reap_dropped(self) -> None:
        """Worker thread: recycle the files of every task dropped since the last sweep into the
        pool (one pass, no lock held while the files move), then remove empty framework
        directories."""
        with self._drops_lock:
            keys = list(self._drops)
            self._drops.clear()
            self._sweeping.update(keys)
        frameworks: set[str] = set()
        try:
            for key in keys:
                try:
                    self.checkpoint.recycle_task(*key)
                    frameworks.add(key[0])
                except (OSError, CheckpointError):
                    log.exception("checkpoint recycling failed for %s/%s", *key)
        finally:
            with self._drops_lock:
                self._sweeping.clear()
                self._drops_lock.notify_all()
        for fid in frameworks:
            with contextlib.suppress(OSError, CheckpointError), self._drops_lock:  # not while a task log is written
                if not any(t.spec.framework_id == fid for t in list(self.tracker.tasks.values())):
                    self.checkpoint.remove_framework_if_empty(fid)
