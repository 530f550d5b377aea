"""The elastic framework service against the client library's in-memory fake master (no agents,
no worker processes: the fake marks launched tasks RUNNING and the test ends them). The per-job
coordinators are real (aiohttp on 127.0.0.1)."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from frameworks.client.fake import FakeMaster
from frameworks.elastic import messages as m
from frameworks.elastic import policy
from frameworks.elastic.jobs import Ending, Job, Phase
from frameworks.elastic.service import ElasticService
from frameworks.elastic.spec import from_mapping
from frameworks.elastic.state import JobState
from protocol.mesos import CallType, Reason
from protocol.task_states import TaskState


def spec(name: str, lo: int, hi: int, **kw: Any) -> Any:
    doc: dict[str, Any] = {
        "name": name,
        "worker": {"command": "{python} -m frameworks.elastic.examples.digits worker", "cpus": 1, "mem": 128},
        "scaling": {"min_workers": lo, "max_workers": hi},
        "data": {"num_shards": 4, "epochs": 1},
    }
    for k, v in kw.items():
        section, _, key = k.partition("__")
        if key:
            doc.setdefault(section, {})[key] = v
        else:
            doc[section] = v
    return from_mapping(doc)


def make(master: FakeMaster, work_dir: Path, **kw: Any) -> ElasticService:
    kw.setdefault("tick", 0.05)
    kw.setdefault("backoff_initial", 0.2)
    return ElasticService("fake", work_dir, transport=master.transport(), **kw)


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[tuple[FakeMaster, ElasticService]]:
    master = FakeMaster()
    service = make(master, tmp_path)
    async with service:
        assert service.driver is not None
        await service.driver.wait_subscribed(5)
        yield master, service


def workers(job: Job, revocable: bool | None = None) -> int:
    return job.counted(revocable)


def running_tasks(master: FakeMaster, job_id: int) -> list[str]:
    return sorted(t.task_id for t in master.running() if t.task_id.startswith(f"elastic-{job_id}-"))


async def settled(service: ElasticService, job_id: int, n: int, within: float = 10.0) -> Job:
    """Wait until the job has ``n`` running workers and nothing in flight."""
    job = service.core.jobs[job_id]

    def ok() -> bool:
        live = job.live_workers()
        return len(live) == n and all(w.phase is Phase.RUNNING for w in live)

    await service.wait_for(ok, within)
    return job


async def test_starts_at_min_then_grows_to_max_when_capacity_appears(
    cluster: tuple[FakeMaster, ElasticService],
) -> None:
    master, service = cluster
    master.add_agent("cpus:1;mem:1024")
    job_id = service.submit(spec("digits", 1, 3))
    job = await settled(service, job_id, 1)
    assert job.state is JobState.RUNNING and job.coordinator_url
    # the gang of the minimum was declared (REQUEST), then the rest
    fw = master.framework()
    assert fw.requests and fw.requests[0].count == 2 and fw.requests[0].gang_id is None
    await service.wait_for(lambda: "no free capacity" in job.reason)
    info = master.tasks[running_tasks(master, job_id)[0]].info
    env = {v.name: v.value for v in info.command.environment.variables}  # type: ignore[union-attr]
    assert env["AGORA_ELASTIC_COORDINATOR"] == job.coordinator_url
    assert env["AGORA_ELASTIC_WORKER_ID"] == info.task_id.value
    assert info.command.arguments[0].endswith("python") or "python" in info.command.arguments[0]  # type: ignore[union-attr]

    master.add_agent("cpus:2;mem:1024")  # a second agent's resources appear
    job = await settled(service, job_id, 3)
    await service.wait_for(lambda: job.reason == "")
    assert job.counts["launched"] == 3
    assert len({w.agent_id for w in job.live_workers()}) == 2
    await service.wait_for(lambda: not master.framework().requests)  # nothing more wanted


async def test_gang_of_the_minimum_is_all_or_nothing(cluster: tuple[FakeMaster, ElasticService]) -> None:
    master, service = cluster
    master.add_agent("cpus:2;mem:1024")
    job_id = service.submit(spec("big", 3, 4))
    job = service.core.jobs[job_id]
    await service.wait_for(lambda: "does not fit" in job.reason)
    assert not master.tasks and job.state is JobState.PENDING
    fw = master.framework()
    await service.wait_for(lambda: fw.requests and fw.requests[0].gang_min == 3)
    master.add_agent("cpus:1;mem:1024")
    job = await settled(service, job_id, 3)
    assert job.state is JobState.RUNNING


async def test_revocation_shrinks_the_job_and_it_prefers_revocable_above_min(
    cluster: tuple[FakeMaster, ElasticService],
) -> None:
    master, service = cluster
    agent = master.add_agent("cpus:1;mem:1024", revocable="cpus:2;mem:1024")
    job_id = service.submit(spec("digits", 1, 3))
    job = await settled(service, job_id, 3)
    assert workers(job, False) == 1 and workers(job, True) == 2  # the minimum on regular resources
    rev = [w.task_id for w in job.live_workers() if w.revocable]
    # the estimate shrinks: the revocable capacity is gone and its tasks are revoked
    master.agents[agent].total = master.agents[agent].total.non_revocable()
    for tid in rev:
        master.revoke(tid)
    for o in master.offers_of(master.framework().framework_id):
        master.rescind(o.offer_id)
    master.allocate()
    job = await settled(service, job_id, 1)
    assert job.counts["revoked"] == 2 and workers(job, True) == 0
    assert job.state is JobState.RUNNING


async def test_a_failed_worker_shrinks_the_job_then_it_regrows_after_a_backoff(
    cluster: tuple[FakeMaster, ElasticService],
) -> None:
    master, service = cluster
    master.add_agent("cpus:2;mem:1024")
    job_id = service.submit(spec("digits", 1, 2))
    job = await settled(service, job_id, 2)
    victim = running_tasks(master, job_id)[-1]
    master.fail_task(victim, "killed by signal 9")
    await service.wait_for(lambda: job.counts.get("failed") == 1 and "backing off" in job.reason)
    assert workers(job) == 1
    job = await settled(service, job_id, 2)  # replaced once the backoff is over
    assert job.counts["launched"] == 3
    assert any(w.task_id == victim and w.ending is not None for w in job.ended)


async def test_an_agents_memory_kill_is_a_failure_backed_off_and_not_killed_again(tmp_path: Path) -> None:
    """The agent kills a worker over its memory limit (TASK_KILLING, then TASK_FAILED with
    REASON_CONTAINER_LIMITATION_MEMORY): the service never sends a KILL for it, counts a failure,
    backs off before replacing it (longer on a repeat) and says why in the job's reason."""
    master = FakeMaster()
    skew = [0.0]  # the service's clock runs ahead on demand (the re-send of kills is after 10 s)
    # and stands still on demand: while the backoff is checked, however long a loaded machine
    # takes to get there, the 0.2 s backoff cannot run out under the test's feet
    frozen: list[float | None] = [None]

    def now() -> float:
        stopped = frozen[0]
        return stopped if stopped is not None else time.time() + skew[0]

    service = make(master, tmp_path, now=now)
    async with service:
        assert service.driver is not None
        await service.driver.wait_subscribed(5)
        master.add_agent("cpus:2;mem:1024")
        job_id = service.submit(spec("digits", 1, 2))
        job = await settled(service, job_id, 2)
        for n in (1, 2):
            victim = running_tasks(master, job_id)[-1]
            master.set_state(victim, TaskState.TASK_KILLING, "memory limit exceeded")
            rounds = service.rounds
            skew[0] += 20.0  # long past the kill re-send interval
            await service.wait_for(lambda r=rounds: service.rounds >= r + 3)
            assert job.workers[victim].phase is Phase.RUNNING and workers(job) == 2  # still counted
            frozen[0] = now()
            master.finish_task(
                victim,
                TaskState.TASK_FAILED,
                "Memory limit exceeded: 140 MB > 128 MB",
                reason=Reason.REASON_CONTAINER_LIMITATION_MEMORY,
            )
            await service.wait_for(lambda n=n: job.counts.get("failed") == n and "backing off" in job.reason)
            assert f"{n}x killed by its agent for exceeding its memory limit" in job.reason
            (ended,) = [w for w in job.ended if w.task_id == victim]
            assert ended.ending is Ending.FAILED and ended.reason == "REASON_CONTAINER_LIMITATION_MEMORY"
            assert job.backoff_until - (ended.ended_at or 0.0) == pytest.approx(0.2 * 2 ** (n - 1))
            assert workers(job) == 1  # not relaunched at once
            frozen[0] = None
            await settled(service, job_id, 2)  # replaced after the backoff
        assert not master.calls_of(CallType.KILL)  # no KILL was ever sent
        assert job.counts == {"launched": 4, "failed": 2} and "killed" not in job.counts
        assert job.same_failures == 2 and job.state is JobState.RUNNING


async def test_a_shard_that_crashes_its_workers_is_set_aside(
    cluster: tuple[FakeMaster, ElasticService],
) -> None:
    """Every worker that leases shard 0 crashes: the service tells the coordinator each death, and
    after three the shard is set aside with the reason instead of being retried forever."""
    master, service = cluster
    master.add_agent("cpus:1;mem:1024")
    job_id = service.submit(spec("poison", 1, 1))
    job = service.core.jobs[job_id]
    for n in (1, 2, 3):
        await settled(service, job_id, 1)
        (tid,) = running_tasks(master, job_id)
        coord = service.coordinators[job_id]
        coord.core.join(m.JoinRequest(tid), coord.clock.now())
        assert coord.core.lease(m.WorkerRequest(tid), coord.clock.now()).shard == 0
        master.fail_task(tid, "killed by signal 11")
        await service.wait_for(lambda n=n: job.counts.get("failed") == n)
    st = service.coordinators[job_id].core.status(0.0)
    (aside,) = st["shards"]["set_aside_detail"]
    assert aside["shard"] == 0 and "3 workers died holding it" in aside["reason"]
    assert "killed by signal 11" in aside["reason"]
    await service.wait_for(lambda: job.progress.get("set_aside") == 1)


async def test_a_lost_agent_shrinks_the_job_but_never_below_its_minimum_while_it_holds_it(
    cluster: tuple[FakeMaster, ElasticService],
) -> None:
    master, service = cluster
    a1 = master.add_agent("cpus:2;mem:1024")
    master.add_agent("cpus:2;mem:1024")
    job_id = service.submit(spec("digits", 2, 4))
    job = await settled(service, job_id, 4)
    lowest = [4]

    def track() -> bool:
        lowest[0] = min(lowest[0], workers(job))
        return False

    master.remove_agent(a1)
    job = await settled(service, job_id, 2)
    assert job.counts["lost"] == 2
    # a second job cannot take this job's minimum
    other = service.submit(spec("other", 1, 2))
    await service.wait_for(lambda: track() or "does not fit" in service.core.jobs[other].reason)
    assert workers(job) == 2 and lowest[0] >= 2


async def test_two_jobs_converge_to_the_policy_split(cluster: tuple[FakeMaster, ElasticService]) -> None:
    master, service = cluster
    master.add_agent("cpus:3;mem:2048")
    master.add_agent("cpus:3;mem:2048")
    a = service.submit(spec("a", 1, 5))
    await settled(service, a, 5)
    b = service.submit(spec("b", 1, 3))
    expected = policy.plan(
        [policy.JobView("a", 1, 5, order=0), policy.JobView("b", 1, 3, order=1)], policy.Capacity(6)
    )

    def converged() -> bool:
        ja, jb = service.core.jobs[a], service.core.jobs[b]
        return (
            ja.running() == expected.target("a").total
            and jb.running() == expected.target("b").total
            and not any(w.phase is not Phase.RUNNING for w in ja.live_workers() + jb.live_workers())
        )

    await service.wait_for(converged)
    assert (expected.target("a").total, expected.target("b").total) == (4, 2)
    assert service.core.jobs[a].counts["killed"] == 1  # b's share came from a
    # nothing moves any more: a fixed point
    rounds = service.rounds
    await service.wait_for(lambda: service.rounds >= rounds + 5)
    assert converged() and service.core.jobs[a].counts["killed"] == 1


async def test_scale_and_cancel(cluster: tuple[FakeMaster, ElasticService]) -> None:
    master, service = cluster
    master.add_agent("cpus:4;mem:2048")
    job_id = service.submit(spec("digits", 1, 4))
    await settled(service, job_id, 4)
    service.scale(job_id, max_workers=2)
    job = await settled(service, job_id, 2)
    assert job.counts["killed"] == 2
    service.cancel(job_id)
    await service.wait_for(lambda: not job.live_workers() and job.coordinator_url is None)
    assert job.state is JobState.CANCELLED and not master.running()


async def test_finished_training_ends_the_job_successfully(
    cluster: tuple[FakeMaster, ElasticService],
) -> None:
    master, service = cluster
    master.add_agent("cpus:2;mem:1024")
    job_id = service.submit(spec("tiny", 1, 1, data={"num_shards": 1, "epochs": 1}))
    job = await settled(service, job_id, 1)
    (tid,) = running_tasks(master, job_id)
    core = service.coordinators[job_id].core
    core.join(m.JoinRequest(tid), 0.0)
    lease = core.lease(m.WorkerRequest(tid), 0.0)
    assert lease.lease_id is not None
    core.complete(m.LeaseDone(tid, lease.lease_id, samples=10), 0.0)
    await service.wait_for(lambda: job.finished)
    assert not master.framework().requests
    master.finish_task(tid)
    await service.wait_for(lambda: job.state is JobState.SUCCEEDED)
    await service.wait_for(lambda: job_id not in service.coordinators)
    assert job.counts.get("finished") == 1
    assert job.reason == "finished: every shard is done"  # was "" (the CLI showed "(at its maximum)")


async def test_restart_reattaches_to_running_workers(tmp_path: Path) -> None:
    master = FakeMaster()
    master.add_agent("cpus:2;mem:1024")
    first = make(master, tmp_path)
    async with first:
        job_id = first.submit(spec("digits", 1, 2))
        await settled(first, job_id, 2)
        port = first.core.jobs[job_id].coordinator_port
        fid = first.driver.framework_id if first.driver else None
    assert len(master.running()) == 2  # the workers keep running while the framework is away
    second = make(master, tmp_path)
    async with second:
        assert second.driver is not None
        assert await second.driver.wait_subscribed(5) == fid
        job = await settled(second, job_id, 2)
        assert job.coordinator_port == port and second.coordinators[job_id].port == port
        assert job.counts["launched"] == 2  # re-attached, nothing relaunched
        # a worker that died while we were away is noticed through reconciliation
        victim = running_tasks(master, job_id)[0]
        master.finish_task(victim, TaskState.TASK_FAILED)
        await second.wait_for(lambda: job.counts.get("failed") == 1)


async def test_http_api(cluster: tuple[FakeMaster, ElasticService]) -> None:
    master, service = cluster
    master.add_agent("cpus:2;mem:1024")
    toml = """
name = "digits"
[worker]
command = "{python} -m frameworks.elastic.examples.digits worker"
cpus = 1
mem = 128
[scaling]
min_workers = 1
max_workers = 2
"""
    api = service.url + "/api/v1"
    async with aiohttp.ClientSession() as http:
        r = await http.post(api + "/jobs", data=toml, headers={"Content-Type": "application/toml"})
        assert r.status == 201, await r.text()
        job_id = (await r.json())["id"]
        r = await http.post(api + "/jobs", json={"toml": toml.replace("max_workers = 2", "max_workers = 0")})
        assert r.status == 400 and "scaling.max_workers" in (await r.json())["error"]
        r = await http.post(api + "/jobs", json={"name": "x", "worker": {"command": "true"}})
        assert r.status == 400 and "scaling" in (await r.json())["error"]
        await settled(service, job_id, 2)
        listing = await (await http.get(api + "/jobs")).json()
        assert [j["id"] for j in listing["jobs"]] == [job_id] and listing["jobs"][0]["workers"] == 2
        show = await (await http.get(api + f"/jobs/{job_id}")).json()
        assert show["state"] == "RUNNING" and len(show["worker_list"]) == 2 and show["coordinator"]
        assert "coordinator_status" in show
        r = await http.post(api + f"/jobs/{job_id}/scale", json={"max_workers": 1})
        assert r.status == 200 and (await r.json())["max_workers"] == 1
        r = await http.post(api + f"/jobs/{job_id}/scale", json={"max_workers": "x"})
        assert r.status == 400
        assert (await http.get(api + "/jobs/99")).status == 404
        # logs: the fake agents have no HTTP address; bad requests are refused
        assert (await http.get(api + f"/jobs/{job_id}/logs")).status == 503
        assert (await http.get(api + f"/jobs/{job_id}/logs?worker=7")).status == 404
        assert (await http.get(api + f"/jobs/{job_id}/logs?worker=x")).status == 400
        assert (await http.get(api + f"/jobs/{job_id}/logs?stream=stdin")).status == 400
        await settled(service, job_id, 1)
        r = await http.post(api + f"/jobs/{job_id}/cancel")
        assert r.status == 200 and (await r.json())["state"] == "CANCELLED"
        assert (await http.post(api + f"/jobs/{job_id}/cancel")).status == 409
        text = await (await http.get(service.url + "/metrics")).text()
        assert 'agora_elastic_jobs{state="CANCELLED"} 1.0' in text and "agora_elastic_connected 1.0" in text
        assert f'agora_elastic_worker_events_total{{event="killed",job="{job_id}"}}' in text
        fw = await (await http.get(service.url + "/api/v1/framework")).json()
        assert fw["connected"] and fw["jobs"] == {"CANCELLED": 1}


async def test_a_higher_priority_job_takes_capacity_but_not_the_minimum(
    cluster: tuple[FakeMaster, ElasticService],
) -> None:
    master, service = cluster
    master.add_agent("cpus:4;mem:2048")
    low = service.submit(spec("low", 1, 4))
    await settled(service, low, 4)
    high = service.submit(spec("high", 2, 4, priority=10))
    jl, jh = service.core.jobs[low], service.core.jobs[high]
    lowest = [4]

    def done() -> bool:
        lowest[0] = min(lowest[0], jl.counted())
        live = jl.live_workers() + jh.live_workers()
        return jh.running() == 3 and jl.running() == 1 and all(w.phase is Phase.RUNNING for w in live)

    await service.wait_for(done)
    assert lowest[0] >= 1 and jl.counts["killed"] == 3
    await service.wait_for(lambda: "no free capacity" in jh.reason and "fair share" in jl.reason)


async def test_kills_decided_while_the_master_is_away_are_sent_after_resubscribing(
    cluster: tuple[FakeMaster, ElasticService],
) -> None:
    master, service = cluster
    master.add_agent("cpus:2;mem:1024")
    job_id = service.submit(spec("digits", 1, 2))
    job = await settled(service, job_id, 2)
    assert service.driver is not None
    subscriptions = service.driver.subscriptions
    master.down = True
    master.disconnect()
    await service.wait_for(lambda: service.driver is not None and not service.driver.connected)
    service.cancel(job_id)
    await service.wait_for(lambda: all(w.phase is Phase.KILLING for w in job.live_workers()))
    assert len(master.running()) == 2  # nobody could tell the master yet
    master.down = False
    await service.wait_for(lambda: not job.live_workers())
    assert service.driver.subscriptions == subscriptions + 1 and not master.running()
    assert job.counts["killed"] == 2 and job.state is JobState.CANCELLED
