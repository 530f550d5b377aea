"""``agora elastic`` against a live elastic service (on the fake master), found directly, through
``AGORA_ELASTIC`` and through a master's ``/state`` (``frameworks[].webui_url``)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from click.testing import CliRunner, Result

from frameworks.cli.elastic import elastic
from frameworks.client.fake import FakeMaster
from frameworks.elastic.jobs import Phase
from frameworks.elastic.service import ElasticService
from protocol.mesos import Reason
from protocol.task_states import TaskState

JOB = """
name = "digits"
[worker]
command = "{python} -m frameworks.elastic.examples.digits worker"
cpus = 1
mem = 128
[scaling]
min_workers = 1
max_workers = 3
"""


@pytest.fixture
async def service(tmp_path: Path) -> AsyncIterator[ElasticService]:
    master = FakeMaster()
    master.add_agent("cpus:2;mem:1024")
    svc = ElasticService("fake", tmp_path / "svc", transport=master.transport(), tick=0.05)
    async with svc:
        yield svc


async def run(*args: str, env: dict[str, str] | None = None) -> Result:
    return await asyncio.to_thread(CliRunner().invoke, elastic, list(args), env=env, catch_exceptions=False)


async def test_submit_list_show_scale_cancel(service: ElasticService, tmp_path: Path) -> None:
    job_file = tmp_path / "job.toml"
    job_file.write_text(JOB)
    r = await run("--elastic", service.url, "submit", str(job_file))
    assert r.exit_code == 0, r.output
    job_id = int(r.output.strip())
    job = service.core.jobs[job_id]
    await service.wait_for(
        lambda: (
            job.running() == 2
            and all(w.phase is Phase.RUNNING for w in job.live_workers())
            and "no free capacity" in job.reason
        )
    )

    r = await run("list", "--json", env={"AGORA_ELASTIC": service.url})
    listing = json.loads(r.output)
    assert listing["jobs"][0]["workers"] == 2 and "no free capacity" in listing["jobs"][0]["reason"]
    r = await run("--elastic", service.url, "list")
    assert r.exit_code == 0 and "digits" in r.output and "1..3" in r.output

    r = await run("--elastic", service.url, "show", str(job_id))
    assert r.exit_code == 0, r.output
    assert (
        "elastic job 1" in r.output and "reason: at its fair share" in r.output and "elastic-1-w0" in r.output
    )
    r = await run("--elastic", service.url, "show", str(job_id), "--json")
    assert json.loads(r.output)["worker_list"][0]["task_id"] == "elastic-1-w0"

    r = await run("--elastic", service.url, "scale", str(job_id), "--max", "1")
    assert r.exit_code == 0 and "1..1 workers" in r.output
    await service.wait_for(lambda: job.running() == 1 and len(job.live_workers()) == 1)
    r = await run("--elastic", service.url, "scale", str(job_id))
    assert r.exit_code != 0 and "--max" in r.output

    r = await run("--elastic", service.url, "cancel", str(job_id))
    assert r.exit_code == 0 and "cancelled" in r.output
    r = await run("--elastic", service.url, "cancel", str(job_id))
    assert r.exit_code == 1 and "already cancelled" in r.output
    r = await run("--elastic", service.url, "show", "42")
    assert r.exit_code == 1 and "no elastic job 42" in r.output


async def test_submit_with_overrides_and_bad_specs(service: ElasticService, tmp_path: Path) -> None:
    job_file = tmp_path / "job.toml"
    job_file.write_text(JOB)
    r = await run("--elastic", service.url, "submit", str(job_file), "--max", "5", "--json")
    assert r.exit_code == 0, r.output
    job_id = json.loads(r.output)["id"]
    assert service.core.jobs[job_id].spec.scaling.max_workers == 5
    bad = tmp_path / "bad.toml"
    bad.write_text(JOB.replace("max_workers = 3", "max_workers = 0"))
    r = await run("--elastic", service.url, "submit", str(bad))
    assert r.exit_code == 1 and "scaling.max_workers" in r.output
    r = await run("--elastic", service.url, "submit", str(bad), "--min", "1")
    assert r.exit_code == 1 and "scaling.max_workers" in r.output
    # a spec from flags alone, and flags over a file
    r = await run(
        "--elastic",
        service.url,
        "submit",
        "--json",
        "-s",
        "name=flags",
        "-s",
        "worker.command=sleep 60",
        "-s",
        "min_workers=1",
        "-s",
        "max_workers=2",
        "-s",
        "epochs=3",
    )
    assert r.exit_code == 0, r.output
    flagged = service.core.jobs[json.loads(r.output)["id"]].spec
    assert (flagged.name, flagged.worker.command, flagged.data.epochs) == ("flags", ("sleep", "60"), 3)
    r = await run("--elastic", service.url, "submit", str(job_file), "-s", "priority=5", "--json")
    assert service.core.jobs[json.loads(r.output)["id"]].spec.priority == 5
    r = await run("--elastic", service.url, "submit", "-s", "bogus=1")
    assert r.exit_code == 1 and "unknown flag" in r.output
    r = await run("--elastic", service.url, "submit")
    assert r.exit_code == 2 and "JOB_FILE" in r.output


async def test_found_through_the_master_state(service: ElasticService) -> None:
    frameworks: list[dict[str, Any]] = [{"name": "agora-batch", "webui_url": "http://127.0.0.1:1"}]

    async def state(_: web.Request) -> web.Response:
        return web.json_response({"frameworks": frameworks})

    app = web.Application()
    app.router.add_get("/state", state)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    master = f"127.0.0.1:{runner.addresses[0][1]}"
    try:
        r = await run("--master", master, "list", env={"AGORA_ELASTIC": ""})
        assert r.exit_code == 1 and "no elastic framework is registered" in r.output
        frameworks.append({"name": "agora-elastic", "webui_url": service.url, "active": True})
        r = await run("--master", master, "list", "--json", env={"AGORA_ELASTIC": ""})
        assert r.exit_code == 0 and json.loads(r.output) == {"jobs": []}
    finally:
        await runner.cleanup()


async def test_show_says_why_workers_keep_failing(tmp_path: Path) -> None:
    master = FakeMaster()
    master.add_agent("cpus:1;mem:1024")
    svc = ElasticService(
        "fake", tmp_path / "svc", transport=master.transport(), tick=0.05, backoff_initial=30.0
    )
    async with svc:
        job_file = tmp_path / "job.toml"
        job_file.write_text(JOB)
        r = await run("--elastic", svc.url, "submit", str(job_file))
        job = svc.core.jobs[int(r.output.strip())]
        await svc.wait_for(lambda: job.running() == 1)
        (w,) = job.live_workers()
        master.set_state(w.task_id, TaskState.TASK_KILLING, "memory limit exceeded")
        master.finish_task(
            w.task_id,
            TaskState.TASK_FAILED,
            "Memory limit exceeded",
            reason=Reason.REASON_CONTAINER_LIMITATION_MEMORY,
        )
        await svc.wait_for(lambda: "backing off" in job.reason)
        r = await run("--elastic", svc.url, "show", str(job.job_id))
        assert r.exit_code == 0, r.output
        assert "reason: backing off after 1 worker failure(s) in a row (1x killed by its agent" in r.output
        assert "last worker failure: killed by its agent for exceeding its memory limit" in r.output
        r = await run("--elastic", svc.url, "show", str(job.job_id), "--json")
        assert json.loads(r.output)["last_failure"]["in_a_row"] == 1
