"""The batch service against a real in-process master and a simulated agent (no task processes):
what a docs writer saw on a real cluster."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from frameworks.batch.model import JobState, spec_from_dict
from frameworks.batch.service import BatchService
from frameworks.client.testing import SimAgent
from master.service import MasterService

from ..cluster import running_master


@pytest.fixture
async def master(tmp_path: Path) -> AsyncIterator[MasterService]:
    async with running_master(tmp_path / "master") as svc:
        yield svc


async def until(batch: BatchService, pred: Callable[[], object], within: float = 20.0) -> None:
    """``pred`` re-checked after every event and call of the service's driver (heartbeats included)."""
    assert batch.driver is not None
    await batch.driver.wait_for(pred, within)


def submit(batch: BatchService, **spec: object) -> int:
    job_id, effects = batch.core.submit(spec_from_dict({"shell": "sleep 30", **spec}), batch.now())
    batch._absorb(effects)
    return job_id


async def test_a_preemptible_job_runs_on_revocable_cpus_while_the_lease_is_busy(
    master: MasterService, tmp_path: Path
) -> None:
    """Agent cpus:2 with 2 revocable cpus (--resource-estimator fixed --oversubscribed cpus:2): a
    2x1-cpu regular job, then a preemptible 2x1-cpu one. It used to wait 'all held resources in
    use' for as long as the first job ran (the master never offered the revocable cpus with the
    mem they need); submitted together both ran."""
    async with SimAgent(master.url, "cpus:2;mem:1024", hostname="sim-1") as agent:
        await agent.wait_registered()
        await agent.slack("cpus:2")
        async with BatchService(master.url, tmp_path / "batch") as batch:
            regular = submit(batch, cpus=1, count=2)
            await until(batch, lambda: batch.core.job(regular).counts().get("RUNNING") == 2)
            preemptible = submit(batch, cpus=1, count=2, preemptible=True)
            await until(batch, lambda: batch.core.job(preemptible).state is JobState.RUNNING, 10)
            await agent.wait_for(lambda: len(agent.running_tasks()) == 4, 20)
            assert all(t.revocable for t in batch.core.job(preemptible).tasks)


async def test_a_gang_bigger_than_the_cluster_says_it_cannot_fit(master: MasterService, tmp_path: Path) -> None:
    async with SimAgent(master.url, "cpus:2;mem:1024", hostname="sim-1") as agent:
        await agent.wait_registered()
        async with BatchService(master.url, tmp_path / "batch") as batch:
            gang = submit(batch, cpus=1, mem=16, count=4, gang=4)
            want = "cannot fit in the cluster: 4 x cpus:1;mem:16 at once, its agents have room for 2"
            await until(batch, lambda: want in (batch.core.job(gang).reason or ""))
            assert batch.core.job(gang).state is JobState.PENDING


async def test_a_fractional_gpu_is_refused_at_submit_unless_an_agent_shares_gpus(
    master: MasterService, tmp_path: Path
) -> None:
    import aiohttp

    async with SimAgent(master.url, "cpus:2;mem:1024;gpus:1", hostname="sim-1") as agent:
        await agent.wait_registered()
        async with BatchService(master.url, tmp_path / "batch") as batch, aiohttp.ClientSession() as http:
            r = await http.post(f"{batch.url}/api/v1/jobs", json={"argv": ["true"], "gpus": 0.5})
            assert r.status == 400
            assert (await r.json())["error"].startswith("gpus: 0.5 is not a whole number; a task gets whole GPUs")
            r = await http.post(f"{batch.url}/api/v1/jobs", json={"argv": ["true"], "gpus": 1})
            assert r.status == 201
    async with SimAgent(master.url, "cpus:2;mem:1024;gpus:1", hostname="sim-2", attributes="gpu_sharing:true") as agent:
        await agent.wait_registered()
        async with BatchService(master.url, tmp_path / "batch2") as batch, aiohttp.ClientSession() as http:
            r = await http.post(f"{batch.url}/api/v1/jobs", json={"argv": ["true"], "gpus": 0.5})
            assert r.status == 201, await r.text()


async def test_a_submission_and_its_launch_share_one_durable_write(master: MasterService, tmp_path: Path) -> None:
    """On a cluster with room, the job and its first LAUNCHING attempt reach the store in one
    transaction before the 201 (and before the ACCEPT): the store read by another connection at
    the answer holds the attempt. A job that cannot be placed is answered all the same, durable."""
    import aiohttp

    from frameworks.batch.store import JobStore

    async with SimAgent(master.url, "cpus:2;mem:1024", hostname="sim-1") as agent:
        await agent.wait_registered()
        async with BatchService(master.url, tmp_path / "batch") as batch, aiohttp.ClientSession() as http:
            batch.submit_hold = 10.0  # the answer waits for the round that launches it, not a timer
            driver = batch.driver
            assert driver is not None
            await until(batch, lambda: driver.connected)
            before = batch.flushes
            r = await http.post(f"{batch.url}/api/v1/jobs", json={"shell": "sleep 30", "cpus": 1, "mem": 16})
            assert r.status == 201, await r.text()
            job_id = (await r.json())["id"]
            assert batch.flushes == before + 1
            reader = JobStore(batch.store.path)
            try:
                stored = {j.job_id: j for j in reader.load()}[job_id]
            finally:
                reader.close()
            attempt = stored.tasks[0].current
            assert attempt is not None and attempt.task_id == batch.core.job(job_id).tasks[0].task_id
            await agent.wait_for(lambda: len(agent.running_tasks()) == 1, 20)

            # 4 cpus on a 2-cpu agent: no round places it; answered after the round that saw the offers
            r = await http.post(f"{batch.url}/api/v1/jobs", json={"shell": "sleep 30", "cpus": 4, "mem": 16})
            assert r.status == 201, await r.text()
            big = (await r.json())["id"]
            reader = JobStore(batch.store.path)
            try:
                stored = {j.job_id: j for j in reader.load()}[big]
            finally:
                reader.close()
            assert stored.tasks[0].current is None and batch.core.job(big).state is JobState.PENDING

            # a periodic job revives nothing: with offers suppressed none are coming, so the round
            # writes it at once (the answer does not wait out the 10 s hold)
            await http.post(f"{batch.url}/api/v1/jobs/{big}/cancel")
            await until(batch, lambda: batch.core.suppressed)
            async with asyncio.timeout(5):
                r = await http.post(f"{batch.url}/api/v1/jobs", json={"shell": "true", "schedule": "@hourly"})
            assert r.status == 201, await r.text()


async def test_a_waiting_job_s_demand_reaches_the_master_and_is_withdrawn(
    master: MasterService, tmp_path: Path
) -> None:
    """The REQUEST is sent off the scheduling loop's path (nothing in a round waits for its
    answer); the master still gets the latest demand book: declared while a job waits behind a
    busy agent, withdrawn (an empty REQUEST) once it is cancelled."""
    async with SimAgent(master.url, "cpus:2;mem:1024", hostname="sim-1") as agent:
        await agent.wait_registered()
        async with BatchService(master.url, tmp_path / "batch") as batch:
            busy = submit(batch, cpus=2, mem=16)
            await agent.wait_for(lambda: len(agent.running_tasks()) == 1, 20)
            assert master.allocator is not None and batch.driver is not None
            alloc, fid = master.allocator, batch.driver.framework_id

            def uses_demand() -> bool | None:
                view = alloc.framework_view(fid) if fid else None
                return None if view is None else view.uses_demand

            waiting = submit(batch, cpus=1, mem=16, count=2)
            await until(batch, lambda: uses_demand() is True)
            assert batch.core.job(waiting).state is JobState.PENDING
            batch._absorb(batch.core.cancel(waiting, batch.now()))
            await until(batch, lambda: uses_demand() is False)
            assert batch.core.job(busy).state is JobState.RUNNING


async def test_a_waiting_gang_starts_as_soon_as_an_agent_joins(master: MasterService, tmp_path: Path) -> None:
    """A gang of 4 (each rank with a port) on one 2-cpu agent waits ("cannot fit"); a second agent
    registers: the master offers the whole gang in its next allocation round once the first
    agent's DECLINE filter is gone (1 s here; not at the 60 s sweep) and the service starts it
    with those offers, though its read of the cluster (kept for a minute here) still shows one
    agent."""
    async with SimAgent(master.url, "cpus:2;mem:1024;ports:[31000-31009]", hostname="sim-1") as first:
        await first.wait_registered()
        async with BatchService(master.url, tmp_path / "batch") as batch:
            batch.cluster_interval = 60.0
            batch.core.decline_seconds = 1.0
            gang = submit(batch, cpus=1, mem=16, count=4, gang=4)
            want = "cannot fit in the cluster: 4 x cpus:1;mem:16 at once, its agents have room for 2"
            await until(batch, lambda: want in (batch.core.job(gang).reason or ""))
            async with SimAgent(master.url, "cpus:2;mem:1024;ports:[31000-31009]", hostname="sim-2") as second:
                await second.wait_registered()
                await until(batch, lambda: batch.core.job(gang).state is JobState.RUNNING, 20)
                await second.wait_for(lambda: len(second.running_tasks()) == 2, 20)
                assert len(first.running_tasks()) == 2
