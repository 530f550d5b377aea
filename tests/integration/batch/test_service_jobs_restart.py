"""A service job survives a restart of the batch service: a real master (in process), a real
agent process running the service executor and its command, the batch service stopped mid-job
and started again on the same port and work dir. The instance connects again and goes on (it is
not failed or relaunched); the service tasks it had in flight are sent again unless their answers
reach the restarted service first; every result is kept once."""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Callable
from pathlib import Path

from frameworks.batch.model import JobState, spec_from_dict
from frameworks.batch.service import BatchService

from ..agent_process import agent_process
from ..cluster import running_master

WORKER = '''
import os, sys, time
from frameworks.service import agora_service

gate = sys.argv[1]
for task in agora_service():
    with open(gate + ".log", "a") as log:
        log.write(task.input + "\\n")
    while task.input == "gate" and not os.path.exists(gate):
        time.sleep(0.01)  # the worker's own wait (the test opens the gate once the service stopped)
    task.done(str(task.input) * 2)
'''


async def poll(pred: Callable[[], bool], within: float, what: str, story: Callable[[], object] = str) -> None:
    deadline = time.monotonic() + within
    while not pred():
        assert time.monotonic() < deadline, f"timed out waiting for {what}: {story()}"
        await asyncio.sleep(0.02)


async def test_an_instance_reconnects_to_a_restarted_batch_service(tmp_path: Path) -> None:
    worker = tmp_path / "worker.py"
    worker.write_text(WORKER)
    gate = tmp_path / "gate"
    async with running_master(tmp_path / "master") as master, agent_process(master.url, tmp_path / "agent"):
        async with BatchService(master.url, tmp_path / "batch") as batch:
            port = batch.port
            spec = spec_from_dict(
                {"shell": f"{sys.executable} {worker} {gate}", "service": True, "window": 2, "cpus": 0.5, "mem": 64}
            )
            job_id, effects = batch.core.submit(spec, batch.now())
            await batch.warm.submitted(batch.core.job(job_id), ["1", "gate", "3", "4"])
            batch._absorb(effects)
            run = batch.warm.dispatch.runs[job_id]
            await poll(lambda: run.summary()["done"] == 1 and run.summary()["sent"] == 2, 60, "1 done, gate and 3 sent")
        # stopped mid-job: the instance's channel closed (going away); the worker is still on "gate"
        gate.touch()  # lets the worker past "gate": its answers, with no channel, are dropped
        async with BatchService(master.url, tmp_path / "batch", port=port) as batch:
            await poll(
                lambda: batch.core.job(job_id).state is JobState.SUCCEEDED, 60, "the job to succeed",
                lambda: (batch.core.job(job_id), batch.warm.summary and batch.warm.dispatch.runs.get(job_id),
                         list(batch.warm.dispatch.book), list(batch.warm.conns)),
            )
            results = await batch.warm.results(batch.core.job(job_id), 0, 10, None)
            job = batch.core.job(job_id)
            history = [a.state for t in job.tasks for a in t.history]
    assert [(t["input"], t["state"], t["result"]) for t in results["tasks"]] == [
        ("1", "DONE", "11"), ("gate", "DONE", "gategate"), ("3", "DONE", "33"), ("4", "DONE", "44"),
    ]
    sends = {t["input"]: t["sends"] for t in results["tasks"]}
    # done before the stop or sent after the restart: once; in flight at the stop ("gate", "3"): sent
    # again unless the instance's answer reached the restarted service first (a matter of timing)
    assert sends["1"] == sends["4"] == 1 and sends["gate"] in (1, 2) and sends["3"] in (1, 2), sends
    assert history == ["TASK_FINISHED"]  # one instance throughout: never failed, never relaunched
    worked = (tmp_path / "gate.log").read_text().splitlines()
    # at least once across the restart; only what was in flight at the stop may be worked twice
    assert worked.count("1") == worked.count("4") == 1, worked
    assert worked.count("gate") in (1, 2) and worked.count("3") in (1, 2), worked
