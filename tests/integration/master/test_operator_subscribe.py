"""The operator event stream (``SUBSCRIBE`` on ``/api/v1``) against a real master: a real
``agora-agent`` process registers after the subscription, the native client library launches a
real command, and two subscribers (JSON and msgpack) see the changes in order."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections.abc import Callable
from functools import partial
from pathlib import Path

import aiohttp
import pytest

from frameworks.client.driver import SchedulerDriver
from frameworks.client.transport import HttpTransport
from master.service import MasterService
from protocol import codec, mesos, recordio
from protocol.backoff import Backoff
from protocol.mesos_common import TaskID
from protocol.resources import Resources
from protocol.task_states import TaskState

from ..agent_process import agent_process

ET = mesos.OperatorEventType
TS = TaskState
SUBSCRIBE = mesos.OperatorCall(type=mesos.OperatorCallType.SUBSCRIBE)


class OperatorSubscriber:
    """A minimal operator stream reader: every event into a queue, in arrival order."""

    def __init__(self, session: aiohttp.ClientSession, url: str, media: str, auth: str | None = None) -> None:
        self.session, self.url, self.media, self.auth = session, url, media, auth
        self.events: asyncio.Queue[mesos.OperatorEvent] = asyncio.Queue()
        self.seen: list[mesos.OperatorEvent] = []
        self._resp: aiohttp.ClientResponse | None = None
        self._reader: asyncio.Task[None] | None = None

    async def __aenter__(self) -> OperatorSubscriber:
        self._resp = await self.session.post(
            self.url + "/api/v1",
            data=codec.encode(SUBSCRIBE, self.media),
            headers={"Content-Type": self.media, "Accept": self.media, **({"Authorization": self.auth} if self.auth else {})},
        )
        assert self._resp.status == 200, await self._resp.text()
        assert self._resp.headers["Content-Type"] == self.media
        self._reader = asyncio.get_running_loop().create_task(self._read())
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader
        if self._resp is not None:
            self._resp.close()

    async def _read(self) -> None:
        assert self._resp is not None
        dec = recordio.RecordIODecoder()
        with contextlib.suppress(aiohttp.ClientPayloadError):
            async for chunk in self._resp.content.iter_any():
                for rec in dec.feed(chunk):
                    await self.events.put(codec.decode(mesos.OperatorEvent, rec, self.media))

    async def until(self, pred: Callable[[mesos.OperatorEvent], bool], within: float = 30.0) -> mesos.OperatorEvent:
        """Read events (all kept in ``seen``) until one satisfies ``pred``."""
        async with asyncio.timeout(within):
            while True:
                ev = await self.events.get()
                self.seen.append(ev)
                if pred(ev):
                    return ev


def task_update(tid: str, state: TaskState) -> Callable[[mesos.OperatorEvent], bool]:
    def pred(ev: mesos.OperatorEvent) -> bool:
        u = ev.task_updated
        return u is not None and u.status.task_id.value == tid and u.state is state

    return pred


def one_offer(d: SchedulerDriver) -> bool:
    return len(d.offers) == 1


def summary(events: list[mesos.OperatorEvent]) -> list[tuple[str, str]]:
    """(type, what) of each non-heartbeat event: an agent's host, a framework's name, a task's
    id and state."""
    out: list[tuple[str, str]] = []
    for ev in events:
        assert ev.type is not None
        if ev.agent_added is not None:
            out.append((ev.type.value, ev.agent_added.agent.agent_info.hostname))
        elif ev.framework_added is not None:
            out.append((ev.type.value, ev.framework_added.framework.framework_info.name))
        elif ev.task_added is not None:
            out.append((ev.type.value, ev.task_added.task.task_id.value))
        elif ev.task_updated is not None:
            out.append((ev.type.value, f"{ev.task_updated.status.task_id.value} {ev.task_updated.state.value}"))
        elif ev.type is not ET.HEARTBEAT:
            out.append((ev.type.value, ""))
    return out


@pytest.mark.slow
async def test_subscribers_see_agent_framework_and_task_events_in_order(master: MasterService, tmp_path: Path) -> None:
    async with (
        aiohttp.ClientSession() as session,
        OperatorSubscriber(session, master.url, codec.JSON) as js,
        OperatorSubscriber(session, master.url, codec.MSGPACK) as mp,
    ):
        for sub in (js, mp):
            first = await sub.until(lambda ev: True)
            assert first.type is ET.SUBSCRIBED and first.subscribed is not None
            assert first.subscribed.heartbeat_interval_seconds == master.config.heartbeat_interval
            st = first.subscribed.get_state
            assert st is not None and st.get_agents is not None and st.get_agents.agents == ()
        await master.wait_until(lambda: len(master.operator_streams.subscribers) == 2)
        async with aiohttp.ClientSession() as s, s.get(master.url + "/metrics/snapshot") as r:
            assert (await r.json())["master/operator_event_stream_subscriptions"] == 2

        async with agent_process(f"127.0.0.1:{master.port}", tmp_path / "agent"):
            for sub in (js, mp):
                await sub.until(lambda ev: ev.type is ET.AGENT_ADDED)
            info = mesos.FrameworkInfo(user=os.environ.get("USER", "nobody"), name="op-watch")
            driver = SchedulerDriver(info, HttpTransport(master.url), backoff=Backoff(0.01, 0.1))
            async with driver:
                await driver.wait_subscribed(30)
                await driver.wait_for(lambda: len(driver.offers) == 1, 30)
                (offer,) = list(driver.offers)
                t = mesos.TaskInfo(
                    name="t1", task_id=TaskID("t1"), resources=Resources.parse("cpus:0.1;mem:32").to_mesos(),
                    command=mesos.CommandInfo(value="sleep 0.2"),
                )
                await driver.launch(offer.offer_id, [t])
                for sub in (js, mp):
                    await sub.until(task_update("t1", TS.TASK_FINISHED))
                await driver.teardown()
                for sub in (js, mp):
                    await sub.until(lambda ev: ev.type is ET.FRAMEWORK_REMOVED)

        expected = [
            ("SUBSCRIBED", ""),
            ("AGENT_ADDED", "127.0.0.1"),
            ("FRAMEWORK_ADDED", "op-watch"),
            ("TASK_ADDED", "t1"),
            ("TASK_UPDATED", "t1 TASK_STARTING"),
            ("TASK_UPDATED", "t1 TASK_RUNNING"),
            ("TASK_UPDATED", "t1 TASK_FINISHED"),
            ("FRAMEWORK_REMOVED", ""),
        ]
        for sub in (js, mp):
            got = [e for e in summary(sub.seen) if e in expected]
            # TASK_STARTING is the agent's to send or not; everything else comes, once, in this order
            assert [e for e in got if e[1] != "t1 TASK_STARTING"] == [e for e in expected if e[1] != "t1 TASK_STARTING"]
            assert got.count(("TASK_UPDATED", "t1 TASK_STARTING")) <= 1
        added = next(e for e in mp.seen if e.type is ET.AGENT_ADDED)
        assert added.agent_added is not None
        assert {r.name for r in added.agent_added.agent.total_resources} >= {"cpus", "mem"}
        fin = next(e for e in js.seen if task_update("t1", TS.TASK_FINISHED)(e))
        assert fin.task_updated is not None and fin.task_updated.framework_id.value == driver.framework_id

    await master.wait_until(lambda: not master.operator_streams.subscribers and not master.state.feed.streams)


async def test_agora_events_follows_a_real_master(master: MasterService) -> None:
    from click.testing import CliRunner

    from frameworks.cli.events import events
    from frameworks.client.testing import SimAgent

    addr = master.url.removeprefix("http://")
    # the CLI blocks on HTTP while the master runs on this loop: run it in a thread
    cli = asyncio.create_task(
        asyncio.to_thread(CliRunner().invoke, events, ["--master", addr, "--json", "--count", "2"])
    )
    await master.wait_until(lambda: len(master.operator_streams.subscribers) == 1, 20)
    agent = SimAgent(master.url, "cpus:1;mem:256", hostname="sim-events")
    await agent.start()
    try:
        res = await asyncio.wait_for(cli, 30)
    finally:
        await agent.stop()
    assert res.exit_code == 0, res.output
    first, second = (json.loads(line) for line in res.output.splitlines())
    assert first["type"] == "SUBSCRIBED" and first["subscribed"]["heartbeat_interval_seconds"] == 1.0
    assert second["type"] == "AGENT_ADDED"
    assert second["agent_added"]["agent"]["agent_info"]["hostname"] == "sim-events"
    await master.wait_until(lambda: not master.operator_streams.subscribers)


async def test_read_acls_decide_what_each_operator_stream_shows(tmp_path: Path) -> None:
    """view_frameworks / view_tasks (protocol/acls.py) filter the stream as they filter GET_STATE:
    'alice-ui' may view only user alice's frameworks and tasks, 'ops' everything; agents are
    shown to both (there is no view_agents)."""
    from frameworks.client.testing import SimAgent
    from protocol.authn import bearer_header

    from ..cluster import master_config

    (tmp_path / "credentials.json").write_text(json.dumps({"tokens": [
        {"principal": "ops", "token": "ops-token", "kind": "operator"},
        {"principal": "alice-ui", "token": "alice-token", "kind": "operator"},
    ]}))
    mine = [{"principals": {"values": ["ops"]}, "users": {"type": "ANY"}},
            {"principals": {"values": ["alice-ui"]}, "users": {"values": ["alice"]}},
            {"principals": {"type": "ANY"}, "users": {"type": "NONE"}}]
    (tmp_path / "acls.json").write_text(json.dumps({"permissive": True, "view_frameworks": mine, "view_tasks": mine}))
    master = MasterService(master_config(
        tmp_path / "master", credentials=str(tmp_path / "credentials.json"), acls=str(tmp_path / "acls.json"),
        authenticate_http_readwrite=True,
    ))
    await master.start()
    agent = SimAgent(master.url, "cpus:2;mem:1024", hostname="sim-acl")
    try:
        async with (
            aiohttp.ClientSession() as session,
            OperatorSubscriber(session, master.url, codec.JSON, bearer_header("ops-token")) as ops,
            OperatorSubscriber(session, master.url, codec.JSON, bearer_header("alice-token")) as alice,
        ):
            await agent.start()
            for user in ("bob", "alice"):  # bob's events are all published before alice's
                info = mesos.FrameworkInfo(user=user, name=f"{user}-fw")
                driver = SchedulerDriver(info, HttpTransport(master.url), backoff=Backoff(0.01, 0.1))
                await driver.start()
                await driver.wait_subscribed(30)
                await driver.wait_for(partial(one_offer, driver), 30)
                (offer,) = list(driver.offers)
                t = mesos.TaskInfo(
                    name=f"t-{user}", task_id=TaskID(f"t-{user}"),
                    resources=Resources.parse("cpus:0.1;mem:32").to_mesos(), command=mesos.CommandInfo(value="x"),
                )
                await driver.launch(offer.offer_id, [t])
                for sub in (ops, alice):
                    if sub is ops or user == "alice":
                        await sub.until(task_update(f"t-{user}", TS.TASK_RUNNING))
                await driver.stop()  # disconnects; its framework and task stay (failover)
            seen = {sub: [e for e in summary(sub.seen) if e[0] != "SUBSCRIBED"] for sub in (ops, alice)}
            assert ("AGENT_ADDED", "sim-acl") in seen[ops] and ("AGENT_ADDED", "sim-acl") in seen[alice]
            assert {("FRAMEWORK_ADDED", "bob-fw"), ("TASK_ADDED", "t-bob"), ("FRAMEWORK_ADDED", "alice-fw"),
                    ("TASK_ADDED", "t-alice")} <= set(seen[ops])
            assert ("TASK_ADDED", "t-alice") in seen[alice] and ("FRAMEWORK_ADDED", "alice-fw") in seen[alice]
            assert not [e for e in seen[alice] if "bob" in e[1]], seen[alice]
            # a stream opened now: its snapshot holds only what alice-ui may view
            async with OperatorSubscriber(session, master.url, codec.JSON, bearer_header("alice-token")) as late:
                first = await late.until(lambda ev: True)
            assert first.subscribed is not None and first.subscribed.get_state is not None
            st = first.subscribed.get_state
            assert st.get_tasks is not None and [t.task_id.value for t in st.get_tasks.tasks] == ["t-alice"]
            assert st.get_frameworks is not None
            assert [f.framework_info.name for f in st.get_frameworks.frameworks] == ["alice-fw"]
    finally:
        await agent.stop()
        await master.stop()
