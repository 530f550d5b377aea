"""The batch service keeps the tail of each attempt's output (``--log-tail``): a real master and
agent (in-process, real task processes), a job that prints more than the tail, the agent's sandbox
removed by its GC (``--gc-delay``), and then ``agora job logs`` (a real CLI process) still prints
the job's last lines and says on stderr that it shows the kept tail."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import aiohttp

from frameworks.batch.model import JobState, spec_from_dict
from frameworks.batch.service import BatchService

from ..cluster import running_cluster

LINES = 3000  # "line 0001 ..." 10 bytes each plus the text: ~120KB of stdout, more than the 4KB kept


async def test_job_logs_show_the_kept_tail_after_the_sandbox_is_gone(tmp_path: Path) -> None:
    script = f"for i in $(seq -w 1 {LINES}); do echo \"line $i of the job's output, padded to a longer line\"; done; echo bye >&2"
    expected = "".join(f"line {i:04d} of the job's output, padded to a longer line\n" for i in range(1, LINES + 1))
    async with (
        running_cluster(tmp_path, agent={"gc_delay": 1.0, "monitor_interval": 0.1}) as (master, agent),
        BatchService(master.url, tmp_path / "batch", log_tail=4096) as batch,
    ):
        job_id, effects = batch.core.submit(spec_from_dict({"shell": script, "cpus": 0.5, "mem": 32}), batch.now())
        batch._absorb(effects)
        assert batch.driver is not None
        await batch.driver.wait_for(lambda: batch.core.job(job_id).state is JobState.SUCCEEDED, 30)
        assert batch.driver.framework_id
        attempt = batch.core.job(job_id).tasks[0].current
        assert attempt is not None
        sandbox = agent.checkpoint.sandboxes / batch.driver.framework_id / attempt.task_id
        store = batch.store.open()
        # kept when the attempt ended; the agent removes the sandbox a second after the end
        await batch.driver.wait_for(lambda: store.tail(attempt.task_id, "stderr") is not None, 20)
        await batch.driver.wait_for(lambda: not sandbox.exists(), 20)

        assert batch.tails.requests >= 1  # kept through the agent's /files/tails, not per attempt
        tail = store.tail(attempt.task_id, "stdout")
        assert tail is not None and tail.size == len(expected) and len(tail.data) == 4096
        assert tail.data.decode() == expected[-4096:]
        async with aiohttp.ClientSession() as http, http.get(f"{batch.url}/api/v1/jobs/{job_id}/logs") as r:
            assert r.status == 200, await r.text()
            body = await r.json()
        assert body["data"] == expected[-4096:] and body["offset"] == len(expected) - 4096
        assert body["kept"] == {
            "from": len(expected) - 4096, "to": len(expected),
            "note": f"its sandbox is gone; the last 4KB of its stdout (bytes {len(expected) - 4096}-{len(expected)}),"
                    " as the batch service kept it",
        }

        cli = await asyncio.create_subprocess_exec(
            sys.executable, "-c", "from frameworks.cli.main import main; main()", "job", "--batch", batch.url,
            "logs", str(job_id), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(cli.communicate(), 30)
        assert cli.returncode == 0, err
        assert out.decode() == expected[-4096:]
        assert err.decode() == f"job {job_id} task 0: {body['kept']['note']}\n"
        cli = await asyncio.create_subprocess_exec(
            sys.executable, "-c", "from frameworks.cli.main import main; main()", "job", "--batch", batch.url,
            "logs", "--stderr", str(job_id), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(cli.communicate(), 30)
        assert (cli.returncode, out.decode()) == (0, "bye\n")
        assert "all 4 bytes of its stderr, as the batch service kept it" in err.decode()


async def test_no_tail_is_kept_with_log_tail_0(tmp_path: Path) -> None:
    async with (
        running_cluster(tmp_path, agent={"gc_delay": 1.0, "monitor_interval": 0.1}) as (master, agent),
        BatchService(master.url, tmp_path / "batch", log_tail=0) as batch,
    ):
        job_id, effects = batch.core.submit(spec_from_dict({"shell": "echo hi", "cpus": 0.5, "mem": 32}), batch.now())
        batch._absorb(effects)
        assert batch.driver is not None
        await batch.driver.wait_for(lambda: batch.core.job(job_id).state is JobState.SUCCEEDED, 30)
        assert batch.driver.framework_id
        attempt = batch.core.job(job_id).tasks[0].current
        assert attempt is not None
        sandbox = agent.checkpoint.sandboxes / batch.driver.framework_id / attempt.task_id
        await batch.driver.wait_for(lambda: not sandbox.exists(), 20)
        assert batch.store.open().tail(attempt.task_id, "stdout") is None
        async with aiohttp.ClientSession() as http, http.get(f"{batch.url}/api/v1/jobs/{job_id}/logs") as r:
            assert r.status == 404  # the agent's answer: nothing kept, nothing made up
