"""The batch and elastic services as clients of a cluster with authentication on: task logs come
from agents run with ``--authenticate-http`` with the service's ``--agent-http-credential``, and a
subscription the master refuses (401: a bad credential) stops the service with the reason instead
of leaving it up with no master (``frameworks.client.options.stop_refused``)."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from agent import auth as agent_auth
from agent import files
from frameworks.batch.model import JobState, spec_from_dict
from frameworks.batch.service import BatchService
from frameworks.client.options import MasterRefused
from frameworks.client.testing import SimAgent
from frameworks.elastic.service import ElasticService
from master.config import MasterConfig
from master.service import MasterService
from protocol.authn import Credentials
from protocol.lifecycle import Service

AGENT_CREDS = {"credentials": [{"principal": "batch-logs", "secret": "l-secret"}]}


def master_config(tmp_path: Path, **kw: Any) -> MasterConfig:
    return MasterConfig(ip="127.0.0.1", port=0, work_dir=str(tmp_path / "master"), heartbeat_interval=1.0,
                        ping_interval=0.5, ping_timeout=5.0, read_timeout=5.0, **kw)


async def test_job_logs_from_an_agent_with_authenticate_http(tmp_path: Path) -> None:
    (tmp_path / "agent-cred.json").write_text(json.dumps({"principal": "batch-logs", "secret": "l-secret"}))
    sandboxes = tmp_path / "sandboxes"
    sandboxes.mkdir()
    # the agent's /files/* behind the agent's own --authenticate-http check
    files_app = web.Application(middlewares=[agent_auth.middleware(Credentials.parse(json.dumps(AGENT_CREDS)))])
    files.add_routes(files_app, sandboxes)
    files_site = web.AppRunner(files_app, access_log=None)
    await files_site.setup()
    await web.TCPSite(files_site, "127.0.0.1", 0).start()
    master = MasterService(master_config(tmp_path))
    await master.start()
    try:
        async with SimAgent(master.url, "cpus:2;mem:1024", hostname="127.0.0.1",
                            port=int(files_site.addresses[0][1])) as agent:
            await agent.wait_registered()
            with_cred = BatchService(master.url, tmp_path / "batch", agent_http_credential=tmp_path / "agent-cred.json")
            async with with_cred as batch, aiohttp.ClientSession() as http:
                job_id, effects = batch.core.submit(spec_from_dict({"shell": "sleep 30", "cpus": 1}), batch.now())
                batch._absorb(effects)
                assert batch.driver is not None
                await batch.driver.wait_for(lambda: batch.core.job(job_id).state is JobState.RUNNING, 20)
                attempt = batch.core.job(job_id).tasks[0].current
                assert attempt is not None and batch.driver.framework_id
                box = sandboxes / batch.driver.framework_id / attempt.task_id
                box.mkdir(parents=True)
                (box / "stdout").write_text("hello from an authenticated agent\n")
                async with http.get(f"{batch.url}/api/v1/jobs/{job_id}/logs") as r:
                    assert r.status == 200, await r.text()
                    assert (await r.json())["data"] == "hello from an authenticated agent\n"
                # without the credential the agent's 401 is passed on (what users saw before)
                batch.host.agent_headers = {}
                async with http.get(f"{batch.url}/api/v1/jobs/{job_id}/logs") as r:
                    assert r.status == 401
    finally:
        await master.stop()
        await files_site.cleanup()


@pytest.mark.parametrize("kind", ["batch", "elastic"])
async def test_a_refused_subscription_stops_the_service_with_the_reason(tmp_path: Path, kind: str) -> None:
    (tmp_path / "credentials.json").write_text(json.dumps({"credentials": [{"principal": "fw", "secret": "right"}]}))
    master = MasterService(master_config(
        tmp_path, credentials=str(tmp_path / "credentials.json"), authenticate_frameworks=True,
        acls=None,
    ))
    await master.start()
    try:
        svc: Service
        if kind == "batch":
            svc = BatchService(master.url, tmp_path / "svc", principal="fw", secret="wrong")
        else:
            svc = ElasticService(master.url, tmp_path / "svc", principal="fw", secret="wrong")
        await svc.start()
        try:
            await asyncio.wait_for(svc.wait_stopped(), 20)
            assert isinstance(svc.failed, MasterRefused)
            assert "HTTP 401" in str(svc.failed) and "check --principal and --secret/--token" in str(svc.failed)
        finally:
            await svc.stop()
    finally:
        await master.stop()


async def test_the_batch_command_exits_non_zero_on_a_refused_credential(tmp_path: Path) -> None:
    (tmp_path / "credentials.json").write_text(json.dumps({"credentials": [{"principal": "fw", "secret": "right"}]}))
    master = MasterService(master_config(
        tmp_path, credentials=str(tmp_path / "credentials.json"), authenticate_frameworks=True,
    ))
    await master.start()
    try:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "frameworks.batch", "--master", master.url, "--principal", "fw",
            "--secret", "wrong", "--port", "0", "--work-dir", str(tmp_path / "batch"),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )
        try:
            out, err = await asyncio.wait_for(proc.communicate(), 60)
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
        assert proc.returncode == 1, (out, err)
        assert b"agora-batch: the master refused the subscription: HTTP 401" in err, err
    finally:
        await master.stop()
