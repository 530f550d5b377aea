"""One live connection per agent id: a second process claiming a connected agent's id (with the
same credential, or none) is refused and the real agent and its tasks are untouched; once the
first connection is gone the id registers again (a restarted agent)."""

from __future__ import annotations

import aiohttp

from master.service import MasterService
from master.testing_agent import FakeAgent
from protocol import mesos
from protocol.resources import Resources
from protocol.task_states import TaskState

from .test_native_msgpack import MsgpackScheduler

ET = mesos.EventType


async def test_a_second_connection_cannot_take_over_a_connected_agent(master: MasterService) -> None:
    real = FakeAgent(master.url)
    impostor = FakeAgent(master.url)
    aid = await real.connect()
    async with aiohttp.ClientSession() as http:
        sched = MsgpackScheduler(master.url, http)
        try:
            fid = await sched.subscribe(mesos.FrameworkInfo(user="u", name="fw"))
            ev = await sched.next(ET.OFFERS)
            assert ev.offers is not None
            offer = ev.offers.offers[0]
            t = mesos.TaskInfo(name="t", task_id=mesos.TaskID("t"), agent_id=offer.agent_id,
                               resources=Resources.of(cpus=0.1, mem=16).to_mesos(),
                               command=mesos.CommandInfo(value="sleep 100"))
            await sched.call(mesos.Call.make_accept(mesos.FrameworkID(fid), (offer.id,), (mesos.Operation.make_launch(t),)))
            await real.wait_for(lambda: real.state_of(fid, "t") is TaskState.TASK_RUNNING)
            impostor.agent_id = aid  # claims the id, reports no tasks
            try:
                await impostor.connect()
                raise AssertionError("the second connection registered")
            except ConnectionError:
                pass
            refused = [m.refused for m in impostor.received if m.refused is not None]
            assert refused and "connected on another connection" in refused[0].message
            ag = master.state.agents[aid]
            assert ag.conn_id is not None and not real.closed.is_set()
            assert master.state.frameworks[fid].tasks["t"].state in (TaskState.TASK_STARTING, TaskState.TASK_RUNNING)
            assert master.state.counters["agent_takeovers_refused"] == 1
            # the real agent restarts: its old connection is gone, the id registers again
            await real.disconnect()
            await master.wait_until(lambda: master.state.agents[aid].conn_id is None)
            assert await real.connect() == aid
            assert master.state.frameworks[fid].tasks["t"].state in (TaskState.TASK_STARTING, TaskState.TASK_RUNNING)
        finally:
            await sched.close()
            await real.close()
            await impostor.close()
