"""Fetching a task's URIs (shell glue): ``agent/fetcher.py`` fills the sandbox in worker threads,
then the tracker spawns the task (``Fetched``) or fails it (``FetchFailed``); progress on the way
becomes TASK_STARTING messages."""

from __future__ import annotations

import logging

from agent import tasks as tk
from agent.checkpoint import Checkpoint, CheckpointError
from agent.fetch_plan import failure as fetch_failure
from agent.fetcher import Fetched, Fetcher
from agent.ports import Submit
from agent.processes import task_key
from agent.taskspec import TaskSpec
from protocol.clock import Clock

log = logging.getLogger(__name__)


async def fetch(spec: TaskSpec, checkpoint: Checkpoint, fetcher: Fetcher, tracker: tk.TaskTracker, submit: Submit,
                clock: Clock) -> None:
    fid, tid = spec.framework_id, spec.task_id
    assert spec.command is not None
    run_as = spec.run_as

    def progress(message: str) -> None:
        submit(tracker.handle(tk.FetchProgress(fid, tid, message), clock.now()))

    try:
        sandbox = checkpoint.task_sandbox(fid, tid, spec.pod_executor)
    except CheckpointError as e:
        result: object = e
    else:
        owner = (run_as.uid, run_as.gid) if run_as is not None else None
        result = await fetcher.fetch(task_key(fid, tid), tid, spec.command.uris, sandbox, owner, progress)
    if result is None:
        return  # cancelled: the task was killed
    now = clock.now()
    if isinstance(result, Fetched):
        log.info("task %s/%s: %s", fid, tid, result.message)
        submit(tracker.handle(tk.Fetched(fid, tid, result.message), now))
    else:
        why = getattr(result, "message", None) or str(result)
        log.warning("task %s/%s: %s", fid, tid, why)
        submit(tracker.handle(tk.FetchFailed(fid, tid, fetch_failure(tid, why)), now))
