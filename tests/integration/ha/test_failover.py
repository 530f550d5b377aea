"""R15 with real processes: three ``agora-master``s contend in a real ZooKeeper, a real agent and
the client library follow ``zk://``; ``kill -9`` the leader and a standby takes over within about
the session timeout with a higher epoch, the running task keeps running and reconciles RUNNING,
new launches work. A standby redirects (307) to the leader. A leader cut off from ZooKeeper
(SIGSTOP past the session timeout) exits non-zero when it notices."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path

import aiohttp
import psutil
import pytest

from frameworks.client.driver import Scheduler, SchedulerDriver
from frameworks.client.placement import Ask, first_fit
from frameworks.client.transport import HttpTransport
from protocol.backoff import Backoff
from protocol.mesos import CommandInfo, FrameworkInfo, TaskInfo, TaskStatus
from protocol.mesos_common import TaskID
from protocol.resources import Resources
from protocol.task_states import TaskState

from .cluster import SESSION_TIMEOUT, MasterProc, agent, detector, masters, state, wait_ready

pytestmark = pytest.mark.slow


class Updates(Scheduler):
    def __init__(self) -> None:
        self.seen: list[TaskStatus] = []
        self.subscriptions = 0

    def subscribed(self, driver: SchedulerDriver, framework_id: str, master_info: object) -> None:
        self.subscriptions += 1

    def update(self, driver: SchedulerDriver, status: TaskStatus) -> None:
        self.seen.append(status)

    def last(self, tid: str) -> TaskStatus | None:
        return next((s for s in reversed(self.seen) if s.task_id.value == tid), None)


def task(tid: str, cmd: str, res: Resources) -> TaskInfo:
    return TaskInfo(name=tid, task_id=TaskID(tid), resources=res.to_mesos(), command=CommandInfo(shell=True, value=cmd))


def by_address(ms: list[MasterProc], address: str) -> MasterProc:
    return next(m for m in ms if m.address == address)


async def test_kill9_leader_standby_takes_over_agent_and_framework_follow(zk_url: str, tmp_path: Path) -> None:
    async with masters(zk_url, tmp_path, 3) as ms, detector(zk_url) as det:
        first = by_address(ms, await det.leader(within=20))
        standby = next(m for m in ms if m is not first)
        # a standby redirects the scheduler API to the leader, Mesos' way
        async with aiohttp.ClientSession() as s, s.post(
            standby.url + "/api/v1/scheduler?x=1", data=b"{}", headers={"Content-Type": "application/json"},
            allow_redirects=False,
        ) as r:
            assert r.status == 307
            assert r.headers["Location"] == f"//{first.address}/api/v1/scheduler?x=1"
        await wait_ready(first.address)
        epoch1 = (await state(first.address))["epoch"]

        async with agent(zk_url, tmp_path / "agent", tmp_path / "agent.log"):
            ups = Updates()
            d = SchedulerDriver(
                FrameworkInfo(user=os.environ.get("USER", "nobody"), name="ha-it", failover_timeout=300.0),
                HttpTransport(zk_url), ups, backoff=Backoff(0.05, 0.5),
            )
            async with d:
                fid = await d.wait_subscribed(30)
                shape = Resources.of(cpus=0.1, mem=32)
                p = await d.wait_for(lambda: first_fit(list(d.offers), Ask(shape)), 30)
                await d.launch(p.offer_id, [task("long", "sleep 300", p.resources)])
                await d.wait_for(lambda: (s := ups.last("long")) is not None and s.state is TaskState.TASK_RUNNING, 30)
                sleepers = [q for q in psutil.process_iter(["cmdline", "cwd"])
                            if (q.info["cwd"] or "").startswith(str(tmp_path)) and "sleep 300" in " ".join(q.info["cmdline"] or [])]
                assert sleepers

                killed_at = time.monotonic()
                first.proc.kill()  # kill -9 the leader
                await first.proc.wait()
                new_address = await det.wait_change(first.address, within=15)
                elected_after = time.monotonic() - killed_at
                assert new_address is not None and new_address != first.address
                assert elected_after < SESSION_TIMEOUT * 4, elected_after
                new = by_address(ms, new_address)

                # the framework re-subscribes with its id at the new leader, the agent re-registers
                await d.wait_for(lambda: ups.subscriptions >= 2 and d.connected, 30)
                assert d.framework_id == fid
                ups.seen.clear()
                deadline = time.monotonic() + 30
                while (s := ups.last("long")) is None:
                    assert time.monotonic() < deadline, "no reconciliation answer for the running task"
                    await d.reconcile([("long", None)])
                    try:
                        await d.wait_for(lambda: ups.last("long") is not None, 1.0)
                    except TimeoutError:
                        pass
                assert s.state is TaskState.TASK_RUNNING
                assert all(q.is_running() for q in sleepers)
                st = await state(new.address)
                assert isinstance(st["epoch"], int) and isinstance(epoch1, int) and st["epoch"] > epoch1

                # new launches work through the new leader
                p = await d.wait_for(lambda: first_fit(list(d.offers), Ask(shape)), 30)
                await d.launch(p.offer_id, [task("after", "true", p.resources)])
                await d.wait_for(lambda: (s := ups.last("after")) is not None and s.state is TaskState.TASK_FINISHED, 30)
                await d.teardown()
        assert "master core failed" not in new.log_text()  # nothing reached it before it recovered
        # the remaining standby still points at the new leader
        other = next(m for m in ms if m is not first and m is not new)
        async with aiohttp.ClientSession() as s, s.get(other.url + "/state", allow_redirects=False) as r:
            assert r.status == 307 and r.headers["Location"] == f"//{new.address}/state"


async def test_a_leader_cut_off_from_zookeeper_exits(zk_url: str, tmp_path: Path) -> None:
    async with masters(zk_url, tmp_path, 2) as ms, detector(zk_url) as det:
        leader = by_address(ms, await det.leader(within=20))
        await wait_ready(leader.address)
        os.kill(leader.proc.pid, signal.SIGSTOP)  # frozen past the session timeout
        try:
            other = await det.wait_change(leader.address, within=15)
        finally:
            os.kill(leader.proc.pid, signal.SIGCONT)
        assert other is not None and other != leader.address
        code = await asyncio.wait_for(leader.proc.wait(), 15)
        assert code != 0
        text = leader.log_text()
        assert "exiting (leading master" in text, text[-2000:]
        # the new leader serves
        await wait_ready(other)
        st = await state(other)
        assert st["epoch"] is not None


async def test_a_leader_partitioned_from_zookeeper_exits(tmp_path: Path) -> None:
    """ZooKeeper unreachable (its own server killed): the client cannot learn that its session
    expired, so after the session timeout of disconnection the leader assumes it and exits."""
    from .conftest import zookeeper

    with zookeeper() as own:
        url = f"zk://{own.hosts}/agora-partition"
        async with masters(url, tmp_path, 1) as (m,), detector(url) as det:
            assert await det.leader(within=20) == m.address
            await wait_ready(m.address)
            await det.close()
            own.proc.kill()
            started = time.monotonic()
            code = await asyncio.wait_for(m.proc.wait(), 20)
            assert code != 0
            assert time.monotonic() - started >= SESSION_TIMEOUT * 0.9
            assert "disconnected from ZooKeeper for longer than the session timeout" in m.log_text()
