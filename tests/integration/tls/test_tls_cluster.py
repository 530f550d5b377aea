"""A cluster with TLS on, end to end: a master serving only HTTPS/WSS with mTLS for agents, a real
agent process (wss:// channel with its client certificate, its own HTTPS server), the native client
over https with the pinned CA launching a real task, and the batch service (https API found through
the master's webui_url) driven by the CLI with ``--ca``."""

from __future__ import annotations

from pathlib import Path

import aiohttp
import pytest

from frameworks.batch.service import BatchService
from frameworks.client.driver import Scheduler, SchedulerDriver
from frameworks.client.placement import Ask, first_fit
from frameworks.client.transport import HttpTransport
from frameworks.elastic.service import ElasticService
from master.service import MasterService
from protocol import tls
from protocol.backoff import Backoff
from protocol.mesos import CommandInfo, FrameworkInfo, TaskInfo, TaskStatus
from protocol.mesos_common import TaskID
from protocol.resources import Resources
from protocol.task_states import TaskState

from .conftest import Certs, agent_process, agent_tls_args, run_cli

pytestmark = pytest.mark.slow


class Final(Scheduler):
    def __init__(self) -> None:
        self.final: dict[str, TaskStatus] = {}

    def update(self, driver: SchedulerDriver, status: TaskStatus) -> None:
        if status.state in (TaskState.TASK_FINISHED, TaskState.TASK_FAILED, TaskState.TASK_ERROR,
                            TaskState.TASK_LOST, TaskState.TASK_DROPPED):
            self.final[status.task_id.value] = status


async def test_native_client_launches_a_task_on_a_real_agent_over_tls(
    master: MasterService, certs: Certs, tmp_path: Path
) -> None:
    c = certs.cluster
    assert master.url.startswith("https://127.0.0.1:")
    async with agent_process(master, tmp_path / "agent", *agent_tls_args(c)) as agent_url:
        assert agent_url.startswith("https://")
        await master.wait_until(lambda: any(a.conn_id is not None for a in master.state.agents.values()), 30)
        # the agent's own HTTP API is https too, trusted through the same CA
        connector = aiohttp.TCPConnector(ssl=tls.client_context(c.ca))
        async with aiohttp.ClientSession(connector=connector) as http, http.get(agent_url + "/health") as r:
            assert r.status == 200 and (await r.json())["status"] == "ok"

        final = Final()
        d = SchedulerDriver(FrameworkInfo(user="u", name="tls-it"), HttpTransport(master.url, ca=c.ca), final,
                            backoff=Backoff(0.01, 0.1))
        async with d:
            await d.wait_subscribed(30)
            p = await d.wait_for(lambda: first_fit(list(d.offers), Ask(Resources.of(cpus=0.5, mem=64))), 30)
            task = TaskInfo(name="hello", task_id=TaskID("hello"), resources=p.resources.to_mesos(),
                            command=CommandInfo(shell=True, value="echo hello over tls"))
            await d.launch(p.offer_id, [task])
            await d.wait_for(lambda: "hello" in final.final, 60)
            assert final.final["hello"].state is TaskState.TASK_FINISHED
            # the agent registered as an https one: offers carry https URLs, and the master's web
            # UI reads the sandbox over https (verifying the agent against --tls-ca)
            assert set(d.offers.agent_urls.values()) == {agent_url}
            fid = d.framework_id
            ctx = tls.client_context(c.ca)
            async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=ctx)) as http, http.get(
                f"{master.url}/ui/tasks/{fid}/hello/files/read", params={"path": "stdout"}
            ) as r:
                body = await r.json()
                assert r.status == 200, body
            assert "hello over tls" in body["data"]
            await d.teardown()
    assert master.guard is not None and master.guard.handshake_failures == 0


async def test_bare_host_port_with_a_ca_means_https(master: MasterService, certs: Certs) -> None:
    t = HttpTransport(master.url.removeprefix("https://"), ca=certs.cluster.ca)
    assert t.base == master.url
    await t.close()


async def test_cli_finds_the_https_batch_service_through_the_master(
    master: MasterService, certs: Certs, tmp_path: Path
) -> None:
    c = certs.cluster
    batch = BatchService(master.url, tmp_path / "batch", ca=c.ca, tls_cert=c.agent_cert, tls_key=c.agent_key)
    async with batch:
        assert batch.url.startswith("https://")
        await master.wait_until(lambda: any(f.info.name == "agora-batch" for f in master.state.frameworks.values()), 30)
        code, out, err = await run_cli("--ca", str(c.ca), "job", "--master", master.url, "--json", "list")
        assert code == 0, err
        assert '"jobs": []' in out
        # the same through AGORA_CA and a bare host:port (which then means https)
        code, out, err = await run_cli(
            "job", "--master", master.url.removeprefix("https://"), "--json", "list", env={"AGORA_CA": str(c.ca)}
        )
        assert code == 0, err


async def test_cli_submits_to_the_https_elastic_service(master: MasterService, certs: Certs, tmp_path: Path) -> None:
    c = certs.cluster
    svc = ElasticService(master.url, tmp_path / "elastic", ca=c.ca, tls_cert=c.agent_cert, tls_key=c.agent_key)
    async with svc:
        assert svc.url.startswith("https://")
        await master.wait_until(lambda: any(f.info.name == "agora-elastic" for f in master.state.frameworks.values()), 30)
        bad = tmp_path / "job.toml"
        bad.write_text("this is [[ not toml\n")
        # the TOML reaches the service over https (and is refused there, on its merits)
        code, _, err = await run_cli("--ca", str(c.ca), "elastic", "--master", master.url, "submit", str(bad))
        assert code != 0 and "Error: submit refused: " in err, err
        code, _, err = await run_cli("elastic", "--elastic", svc.url, "submit", str(bad))
        assert code != 0 and "TLS certificate is not trusted" in err, err
