"""The elastic framework on a real cluster (agora-master + agora-agent processes) with the digits
example as real worker tasks:

1. one agent with room for one worker: the job starts at its minimum (1 of 1..3);
2. a second agent appears whose only room is revocable (fixed estimator, oversubscribed
   cpus+mem): the job grows to its maximum with two revocable workers;
3. the regular worker is ``kill -9``-ed: the job shrinks (TASK_FAILED), training continues, and
   after the failure backoff it grows back onto the freed regular slot;
4. the second agent restarts with a smaller estimate: the allocator revokes the revocable workers
   (TASK_KILLED, REASON_CONTAINER_PREEMPTED) and the job shrinks to its minimum again;
5. training finishes with >= 90% test accuracy.

The same cluster then runs ``agora up --demo``'s elastic hook, which starts ``python -m
frameworks.elastic`` itself (no elastic framework is registered at that point), finds it through
the master's ``/state`` and trains the digits job to >= 90% through the HTTP API.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from pathlib import Path

import psutil
import pytest

from frameworks.cli.common import ManagedProcess, child_env, command_for, start_process, stop_process
from frameworks.cli.up import LocalCluster, start_cluster
from frameworks.elastic import demo, policy
from frameworks.elastic.jobs import Job, Phase
from frameworks.elastic.service import ElasticService
from frameworks.elastic.spec import from_mapping
from frameworks.elastic.state import JobState

pytestmark = pytest.mark.slow

SPEC = {
    "name": "digits",
    "worker": {
        "command": "{python} -m frameworks.elastic.examples.digits worker --step-delay 0.02",
        "cpus": 0.5,
        "mem": 192,  # numpy + scikit-learn workers use ~130 MB; the agent enforces this limit
    },
    "scaling": {"min_workers": 1, "max_workers": 3, "revocable_ok": True},
    "data": {"dataset": "sklearn-digits", "num_shards": 24, "epochs": 12},
    "checkpoint": {"interval": 2.0},
}


def start_agent(cluster: LocalCluster, work_dir: Path, name: str, oversubscribed: str) -> ManagedProcess:
    return start_process(
        name,
        [
            *command_for("agora-agent", "agent.main"),
            "--master",
            cluster.master_url.removeprefix("http://"),
            "--port",
            "0",
            "--work-dir",
            str(work_dir / name),
            "--resources",
            "cpus:0.25;mem:512;disk:1024",  # too small for a regular worker
            "--resource-estimator",
            "fixed",
            "--oversubscribed",
            oversubscribed,
        ],
        log_path=work_dir / "logs" / f"{name}.log",
        env=child_env(),
    )


def worker_processes(root: Path, task_id: str | None = None) -> list[psutil.Process]:
    """Our worker tasks' processes (their sandboxes are under ``root``)."""
    out = []
    for p in psutil.process_iter(["cmdline"]):
        try:
            env = p.environ()
        except psutil.Error:
            continue
        if not env.get("MESOS_SANDBOX", "").startswith(str(root)):
            continue
        if task_id is None or env.get("AGORA_ELASTIC_WORKER_ID") == task_id:
            out.append(p)
    return out


def kill_workers(root: Path) -> None:
    for p in worker_processes(root):
        with contextlib.suppress(psutil.Error):
            p.kill()


def shape(job: Job) -> tuple[int, int, int]:
    return job.counted(), job.counted(True), job.running()


async def test_grow_kill_revoke_and_reach_90_percent(tmp_path: Path) -> None:
    cluster = await asyncio.to_thread(
        start_cluster, 1, tmp_path, 0, False, "cpus:0.5;mem:512;disk:1024", 30.0
    )
    extra: list[ManagedProcess] = []
    try:
        service = ElasticService(
            cluster.master_url.removeprefix("http://"), tmp_path / "elastic", tick=0.2, heartbeat_timeout=2.0
        )
        async with service:
            assert service.driver is not None
            await service.driver.wait_subscribed(20)
            job_id = service.submit(from_mapping(SPEC))
            job = service.core.jobs[job_id]

            # 1. starts at its minimum
            await service.wait_for(
                lambda: job.state is JobState.RUNNING and "no free capacity" in job.reason, 30
            )
            assert shape(job) == (1, 0, 1)

            # 2. a second agent (revocable room only) appears: grows to the maximum
            extra.append(start_agent(cluster, tmp_path, "agent-1", "cpus:1;mem:384"))
            await service.wait_for(lambda: shape(job) == (3, 2, 3) and job.reason == "", 30)

            # 3. kill -9 the regular worker: the job shrinks and keeps training, then regrows
            (regular,) = [w for w in job.live_workers() if not w.revocable]
            procs = [p for p in worker_processes(tmp_path, regular.task_id) if "python" in p.name()]
            assert procs, "the regular worker's process was not found"
            for proc in procs:
                proc.kill()
            await service.wait_for(lambda: job.counts.get("failed") == 1 and "backing off" in job.reason, 20)
            assert job.counted() == 2
            done_at_kill = job.progress.get("completed_total") or 0
            await service.wait_for(lambda: shape(job) == (3, 2, 3), 30)
            await service.wait_for(lambda: (job.progress.get("completed_total") or 0) > done_at_kill, 20)

            # 4. the revocable estimate shrinks: the revocable workers are revoked, the job shrinks
            a1 = extra[0]
            os.kill(a1.pid, signal.SIGTERM)  # the agent stops; its tasks keep running
            await asyncio.to_thread(a1.popen.wait, 15)
            extra.append(start_agent(cluster, tmp_path, "agent-1", "cpus:0.1;mem:16"))
            try:
                await service.wait_for(lambda: job.counts.get("revoked") == 2, 40)
            except TimeoutError:
                raise AssertionError(diagnose(service)) from None
            assert shape(job)[:2] == (1, 0) and job.state in (JobState.RUNNING, JobState.SCALING)
            print(f"progress when revoked: {job.progress.get('progress')}")
            assert all(w.ending is not None for w in job.ended)

            # 5. training finishes anyway
            await service.wait_for(lambda: job.terminal, 90)
            assert job.state is JobState.SUCCEEDED, job.reason
            assert job.progress["reports"]["test_accuracy"] >= 0.90
            assert job.progress["progress"] == 1.0 and (job.progress["generation"] or 0) >= 6
            assert job.counts["launched"] == 4 and job.counts["finished"] >= 1
            assert not any(w.phase is not Phase.ENDED for w in job.workers.values())

        # the demo hook starts its own elastic framework (none is registered now) and trains
        ok = await asyncio.to_thread(demo.run_demo, cluster.master_url, None, 120.0, lambda _s: None, 0.25)
        assert ok
    finally:
        kill_workers(tmp_path)
        for agent in extra:
            stop_process(agent, grace=2.0)
        await asyncio.to_thread(cluster.stop, 2.0)
        kill_workers(tmp_path)


def diagnose(service: ElasticService) -> str:
    lines = [f"plan: {service.core.last_plan}", f"demands: {service.core.demands()}"]
    if service.driver is not None:
        lines.append(f"offers: {[(o.offer_id, str(o.available)) for o in service.driver.offers]}")
    for j in service.core.jobs.values():
        lines.append(
            f"job {j.job_id} {j.state.value} {j.reason!r} counts={j.counts} "
            f"workers={[(w.task_id, w.phase.value, w.state) for w in j.workers.values()]}"
        )
    return "\n".join(lines)


def sleeper(name: str, lo: int, hi: int) -> dict[str, object]:
    """A job whose workers just sleep: the scheduling is what is under test here."""
    return {
        "name": name,
        "worker": {"command": "{python} -c 'import time; time.sleep(300)'", "cpus": 0.25, "mem": 64},
        "scaling": {"min_workers": lo, "max_workers": hi},
    }


async def test_two_jobs_converge_to_the_policy_split_and_a_restart_reattaches(tmp_path: Path) -> None:
    cluster = await asyncio.to_thread(start_cluster, 1, tmp_path, 0, False, "cpus:2;mem:1024;disk:1024", 30.0)
    try:
        master = cluster.master_url.removeprefix("http://")
        service = ElasticService(master, tmp_path / "elastic", tick=0.2)
        async with service:
            assert service.driver is not None
            fid = await service.driver.wait_subscribed(20)
            a = service.submit(from_mapping(sleeper("a", 1, 6)))
            ja = service.core.jobs[a]
            await service.wait_for(lambda: ja.running() == 6 and ja.reason == "", 30)
            expected = policy.plan(
                [policy.JobView("a", 1, 6, regular=6, order=0), policy.JobView("b", 2, 4, order=1)],
                policy.Capacity(2),
            )
            want = (expected.target("a").total, expected.target("b").total)
            assert want == (5, 3)
            service.core.revive_grace = 15.0  # a loaded machine may take a while to re-offer
            b = service.submit(from_mapping(sleeper("b", 2, 4)))
            jb = service.core.jobs[b]

            def split() -> tuple[int, int]:
                if any(w.phase is not Phase.RUNNING for w in ja.live_workers() + jb.live_workers()):
                    return (-1, -1)
                return (ja.running(), jb.running())

            # a's killed worker's slot is in transit between its TASK_KILLED and the offer that
            # returns it; a round in that window once saw 7 slots and took a second worker from a
            # (4+4 is a fixed point too), so this was flaky until returning slots counted as free
            try:
                await service.wait_for(lambda: split() == want, 30)
            except TimeoutError:
                raise AssertionError(diagnose(service)) from None
            assert ja.counts.get("killed") == 1  # b's third worker came from a, a stayed above its min
            views = [
                policy.JobView(
                    str(j.job_id), j.spec.scaling.min_workers, j.spec.scaling.max_workers, j.counted()
                )
                for j in (ja, jb)
            ]
            assert policy.plan(views, policy.Capacity(0)).changes == ()  # a fixed point
            ports = {a: ja.coordinator_port, b: jb.coordinator_port}

        # a restarted framework re-attaches: same framework id, same coordinator ports, no relaunch
        again = ElasticService(master, tmp_path / "elastic", tick=0.2)
        async with again:
            assert again.driver is not None
            assert await again.driver.wait_subscribed(20) == fid
            ja, jb = again.core.jobs[a], again.core.jobs[b]
            await again.wait_for(lambda: (ja.running(), jb.running()) == want, 30)
            assert {a: ja.coordinator_port, b: jb.coordinator_port} == ports
            assert ja.counts["launched"] == 6 and jb.counts["launched"] == 3
            assert {again.coordinators[a].port, again.coordinators[b].port} == set(ports.values())
            again.cancel(a)
            again.cancel(b)
            await again.wait_for(lambda: not ja.live_workers() and not jb.live_workers(), 30)
            assert ja.state is JobState.CANCELLED and jb.state is JobState.CANCELLED
    finally:
        kill_workers(tmp_path)
        await asyncio.to_thread(cluster.stop, 2.0)
        kill_workers(tmp_path)
