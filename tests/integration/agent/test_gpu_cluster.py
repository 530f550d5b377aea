"""GPUs end to end on a real master, a real agent process (``--nvidia-gpu-devices 0,1`` over a
fake NVML) and the batch framework: two concurrent ``--gpus 1`` jobs see different
``CUDA_VISIBLE_DEVICES``, a third waits with a reason, and after ``kill -9`` of the agent and a
restart the running ones keep their devices (the third gets one only when a job ends). And a
framework without ``GPU_RESOURCES`` is told why it gets no offers."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from agent import nvml
from frameworks.batch.model import JobState, spec_from_dict
from frameworks.batch.service import BatchService
from frameworks.client.driver import SchedulerDriver
from frameworks.client.transport import HttpTransport
from master.service import MasterService
from protocol import mesos
from protocol.backoff import Backoff

from ..agent_process import start_ready, stop_process
from ..cluster import master_config

pytestmark = pytest.mark.slow

H100 = "NVIDIA H100 80GB HBM3"


@pytest.fixture
async def master(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[MasterService]:
    path = nvml.FakeNvml.write(
        tmp_path / "nvml.json", [{"uuid": f"GPU-{i}", "name": H100, "memory_mb": 81559} for i in range(4)]
    )
    monkeypatch.setenv(nvml.FAKE_ENV, str(path))  # the agent processes started here see four H100s
    svc = MasterService(master_config(tmp_path / "master"))
    svc.gpu_watch_interval = 0.2
    await svc.start()
    try:
        yield svc
    finally:
        await svc.stop()


async def start_agent(master: MasterService, work: Path) -> asyncio.subprocess.Process:
    argv = (sys.executable, "-m", "agent.main", "--master", f"127.0.0.1:{master.port}", "--work-dir", str(work),
            "--resources", "cpus:2;mem:1024;disk:1000", "--nvidia-gpu-devices", "0,1", "--isolation", "psutil",
            "--log-level", "WARNING")
    proc, _ = await start_ready(argv, "agora-agent listening on", work.parent / "agent.log")
    return proc


async def agent_state(master: MasterService) -> dict[str, Any]:
    (agent,) = [a for a in master.state.agents.values() if a.reachable]
    async with aiohttp.ClientSession() as http, http.get(f"http://{agent.hostname}:{agent.port}/state") as r:
        state: dict[str, Any] = await r.json()
    return state


async def test_gpu_jobs_get_their_own_devices_and_keep_them_across_kill_9(
    master: MasterService, tmp_path: Path
) -> None:
    seen = tmp_path / "seen"
    seen.mkdir()
    proc = await start_agent(master, tmp_path / "agent")
    try:
        async with BatchService(master.url, tmp_path / "batch") as batch:
            assert batch.driver is not None

            def submit() -> int:
                cmd = f'echo "$CUDA_VISIBLE_DEVICES" > {seen}/$AGORA_JOB_ID; exec sleep 120'
                job_id, fx = batch.core.submit(spec_from_dict({"shell": cmd, "gpus": 1, "cpus": 0.1, "mem": 32}), batch.now())
                batch._absorb(fx)
                return job_id

            def running(*jobs: int) -> bool:
                return all(batch.core.job(j).state is JobState.RUNNING for j in jobs)

            one, two, three = submit(), submit(), submit()
            await batch.driver.wait_for(lambda: running(one, two), 30)
            await batch.driver.wait_for(lambda: batch.core.job(three).reason, 30)
            assert batch.core.job(three).state is JobState.PENDING  # waits, with a reason
            files = {j: seen / str(j) for j in (one, two)}
            await batch.driver.wait_for(lambda: all(f.exists() and f.read_text().endswith("\n") for f in files.values()), 20)
            devices = {j: f.read_text().strip() for j, f in files.items()}
            assert sorted(devices.values()) == ["0", "1"]

            before = await agent_state(master)
            pids = {t["id"]: t["pid"] for t in before["tasks"]}
            held = {g["index"]: g["tasks"] for g in before["gpus"]}

            (rec,) = master.state.agents.values()
            old_port = rec.port
            proc.send_signal(signal.SIGKILL)  # kill -9: the tasks live on
            await proc.wait()
            proc = await start_agent(master, tmp_path / "agent")
            await master.wait_until(lambda: rec.port != old_port and rec.reachable and rec.conn_id is not None, 30)
            assert len(master.state.agents) == 1  # the same agent, re-registered
            after = await agent_state(master)
            assert {t["id"]: t["pid"] for t in after["tasks"]} == pids  # re-attached, not restarted
            assert {g["index"]: g["tasks"] for g in after["gpus"]} == held
            assert {t["id"]: t["gpus"] for t in after["tasks"]} == {
                t["id"]: t["gpus"] for t in before["tasks"]
            }
            assert running(one, two) and batch.core.job(three).state is JobState.PENDING
            assert batch.core.job(three).reason

            batch._absorb(batch.core.cancel(one, batch.now()))  # its device goes to the waiting job
            await batch.driver.wait_for(lambda: running(three), 30)
            third = seen / str(three)
            await batch.driver.wait_for(lambda: third.exists() and third.read_text().endswith("\n"), 20)
            assert third.read_text().strip() == devices[one]
            final = await agent_state(master)
            assert {g["index"]: len(g["tasks"]) for g in final["gpus"]} == {0: 1, 1: 1}
    finally:
        await stop_process(proc, stop_signal=signal.SIGUSR1)


async def test_a_framework_without_gpu_resources_is_told_why(
    master: MasterService, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    proc = await start_agent(master, tmp_path / "agent")
    try:
        info = mesos.FrameworkInfo(user=os.environ.get("USER", "nobody"), name="cpu-only")
        driver = SchedulerDriver(info, HttpTransport(master.url), backoff=Backoff(0.01, 0.1))
        with caplog.at_level(logging.WARNING, logger="agora.master"):
            async with driver:
                fid = await driver.wait_subscribed(30)
                want = "gets no offers: every agent with free resources has GPUs and it lacks the GPU_RESOURCES"
                await master.wait_until(lambda: any(want in r.getMessage() for r in caplog.records), 20)
                assert not driver.offers
                async with aiohttp.ClientSession() as http, http.get(master.url + "/state") as r:
                    state = await r.json()
                (fw,) = [f for f in state["frameworks"] if f["id"] == fid]
                assert fw["offers_reason"] == (
                    "every agent with free resources is excluded: agent has GPUs and the framework lacks "
                    "the GPU_RESOURCES capability (Mesos semantics)"
                )
                cli = await asyncio.create_subprocess_exec(
                    sys.executable, "-c", "from frameworks.cli.main import main; main()", "offers", "--master", master.url,
                    stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
                    env={**os.environ, "COLUMNS": "250"},
                )
                out, err = await asyncio.wait_for(cli.communicate(), 60)
                text = out.decode()
                assert cli.returncode == 0, err.decode()
                assert "Frameworks without offers" in text and "cpu-only" in text
                assert "lacks the GPU_RESOURCES capability" in " ".join(text.split())
        assert sum(want in r.getMessage() for r in caplog.records) == 1  # once, not every check
    finally:
        await stop_process(proc, stop_signal=signal.SIGUSR1)
