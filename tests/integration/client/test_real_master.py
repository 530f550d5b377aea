"""The client library and the CLI views against a real in-process master on loopback, with a
simulated agent (``frameworks.client.testing.SimAgent``) speaking the real agent channel."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from click.testing import CliRunner

from frameworks.cli import cluster
from frameworks.client.driver import SchedulerDriver
from frameworks.client.testing import SimAgent
from frameworks.client.transport import HttpTransport
from master.service import MasterService
from protocol import codec
from protocol.backoff import Backoff
from protocol.mesos import Capability, CapabilityType, CommandInfo, Event, FrameworkInfo, Reason, TaskInfo
from protocol.mesos_common import TaskID
from protocol.resources import Resources
from protocol.task_states import TaskState

from ..cluster import master_config, running_master


@pytest.fixture
async def master(tmp_path: Path) -> AsyncIterator[MasterService]:
    async with running_master(tmp_path / "master") as svc:
        yield svc


@pytest.fixture
async def agent(master: MasterService) -> AsyncIterator[SimAgent]:
    a = SimAgent(master.url, "cpus:2;mem:1024", hostname="sim-1", attributes="rack:r1")
    await a.start()
    await a.wait_registered()
    try:
        yield a
    finally:
        await a.stop()


def info(*caps: CapabilityType) -> FrameworkInfo:
    return FrameworkInfo(user="u", name="client-it", capabilities=tuple(Capability(type=c) for c in caps))


def task(tid: str) -> TaskInfo:
    return TaskInfo(
        name=tid,
        task_id=TaskID(tid),
        resources=Resources.parse("cpus:1;mem:128").to_mesos(),
        command=CommandInfo(value="true"),
    )


@pytest.mark.parametrize("media", [codec.MSGPACK, codec.JSON])
async def test_reusable_offer_round_trip(master: MasterService, agent: SimAgent, media: str) -> None:
    d = SchedulerDriver(
        info(CapabilityType.REUSABLE_OFFERS), HttpTransport(master.url, media), backoff=Backoff(0.01, 0.1)
    )
    async with d:
        await d.wait_subscribed(30)
        await d.wait_for(lambda: len(d.offers) == 1)
        (offer,) = list(d.offers)
        oid = offer.offer_id
        assert offer.attributes == {"rack": "r1"}
        assert offer.resources.scalar("cpus") == 2
        await d.launch(oid, [task("a")])
        await agent.wait_for(lambda: agent.running_tasks() == ["a"])
        await d.wait_for(lambda: "a" in d.tasks and d.tasks["a"].state is TaskState.TASK_RUNNING)
        # the lease kept its remainder under the same id
        await d.wait_for(lambda: oid in d.offers and d.offers.get(oid).resources.scalar("cpus") == 1)
        await agent.finish("a")
        await d.wait_for(lambda: "a" not in d.tasks)
        # ... and grows back when the task ends
        await d.wait_for(lambda: oid in d.offers and d.offers.get(oid).resources.scalar("cpus") == 2)
        await d.launch(oid, [task("b")])
        await agent.wait_for(lambda: agent.running_tasks() == ["b"])
        # acknowledgements reached the agent: nothing pending
        await agent.wait_for(lambda: not agent.tasks["a"].pending and not agent.tasks["b"].pending)
        await d.teardown()


async def test_classic_offers_and_cli_views(master: MasterService, agent: SimAgent) -> None:
    addr = master.url.removeprefix("http://")
    runner = CliRunner()

    async def cli(cmd: Any) -> Any:
        # the CLI blocks on HTTP and the master runs on this loop: call it from a thread
        res = await asyncio.to_thread(runner.invoke, cmd, ["--master", addr, "--json"])
        assert res.exit_code == 0, res.output
        return json.loads(res.output)

    d = SchedulerDriver(info(), HttpTransport(master.url), backoff=Backoff(0.01, 0.1))
    async with d:
        await d.wait_subscribed(30)
        await d.wait_for(lambda: len(d.offers) == 1)
        (offer,) = list(d.offers)
        (o,) = await cli(cluster.offers)
        assert (o["id"], o["holder"], o["hostname"]) == (offer.offer_id, "client-it", "sim-1")
        assert o["age"] is not None and o["reusable"] is False

        await d.launch(offer.offer_id, [task("c")])
        assert offer.offer_id not in d.offers
        await agent.wait_for(lambda: agent.running_tasks() == ["c"])
        await d.wait_for(lambda: "c" in d.tasks and d.tasks["c"].state is TaskState.TASK_RUNNING)

        (row,) = await cli(cluster.agents)
        assert row["hostname"] == "sim-1" and row["resources"]["cpus"] == 2 and row["used_resources"]["cpus"] == 1
        assert [f["name"] for f in await cli(cluster.frameworks)] == ["client-it"]
        assert [(t["id"], t["state"]) for t in await cli(cluster.tasks)] == [("c", "TASK_RUNNING")]

        # explicit reconciliation of a task the master does not know -> a terminal answer
        events = d.events()
        await d.reconcile([("ghost", None)])
        async with asyncio.timeout(10):
            async for ev in events:
                if isinstance(ev, Event) and ev.update is not None and ev.update.status.task_id.value == "ghost":
                    assert ev.update.status.reason is Reason.REASON_RECONCILIATION
                    break
        await d.kill("c")
        await d.wait_for(lambda: "c" not in d.tasks)


async def test_failover_to_a_restarted_master_keeps_the_framework_id(tmp_path: Path) -> None:
    from frameworks.cli.common import free_port

    port = free_port()
    cfg = master_config(tmp_path / "m", port=port)
    first = MasterService(cfg)
    await first.start()
    d = SchedulerDriver(info(CapabilityType.REUSABLE_OFFERS), HttpTransport(f"127.0.0.1:{port}"),
                        backoff=Backoff(0.01, 0.05))
    second: MasterService | None = None
    try:
        async with d:
            fid = await d.wait_subscribed(30)
            await first.stop()
            await d.wait_for(lambda: not d.connected, 30)
            second = MasterService(cfg)
            await second.start()
            await d.wait_for(lambda: d.connected and d.subscriptions == 2, 30)
            assert d.framework_id == fid
            async with aiohttp.ClientSession() as http, http.get(second.url + "/state") as resp:
                state = await resp.json()
            assert [f["id"] for f in state["frameworks"]] == [fid]
    finally:
        if second is not None:
            await second.stop()
        await first.stop()


async def test_revocable_offers_and_placement(master: MasterService, agent: SimAgent) -> None:
    from frameworks.client.placement import Ask, first_fit

    await agent.slack("cpus:4;mem:512")
    plain = SchedulerDriver(info(CapabilityType.REUSABLE_OFFERS), HttpTransport(master.url), backoff=Backoff(0.01, 0.1))
    rev = SchedulerDriver(
        FrameworkInfo(user="u", name="rev-it", capabilities=(
            Capability(type=CapabilityType.REUSABLE_OFFERS), Capability(type=CapabilityType.REVOCABLE_RESOURCES))),
        HttpTransport(master.url), backoff=Backoff(0.01, 0.1),
    )
    async with plain:
        await plain.wait_subscribed(30)
        # the regular resources go to the first framework; it never sees revocable ones
        await plain.wait_for(lambda: plain.offers.available().scalar("cpus") == 2, 30)
        assert not plain.offers.available().revocable()
        async with rev:
            await rev.wait_subscribed(30)
            await rev.wait_for(lambda: rev.offers.available().revocable().scalar("cpus") == 4, 30)
            assert not rev.offers.available().non_revocable().scalar("cpus")
            # placement uses revocable resources only when the ask allows it
            assert first_fit(list(rev.offers), Ask(Resources.of(cpus=1, mem=64))) is None
            p = first_fit(list(rev.offers), Ask(Resources.of(cpus=1, mem=64), allow_revocable=True))
            assert p is not None and p.revocable
            t = TaskInfo(name="r", task_id=TaskID("r1"), resources=p.resources.to_mesos(),
                         command=CommandInfo(value="x"))
            await rev.launch(p.offer_id, [t])
            await agent.wait_for(lambda: "r1" in agent.running_tasks())
            await rev.wait_for(lambda: "r1" in rev.tasks and rev.tasks["r1"].state is TaskState.TASK_RUNNING)
