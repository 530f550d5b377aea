"""ExecutorAPI over loopback HTTP with a raw client: the wire format, validation and queueing."""

from __future__ import annotations

import asyncio
import base64
import io
import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import attrs
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from agent.executor_api import (
    ExecutorAPI,
    ExecutorAPIError,
    UnknownExecutor,
    executor_environment,
    format_duration,
)
from protocol.mesos import (
    AgentID,
    AgentInfo,
    ExecutorID,
    ExecutorInfo,
    ExecutorType,
    FrameworkID,
    FrameworkInfo,
    Reason,
    Source,
    TaskID,
    TaskInfo,
    TaskStatus,
)
from protocol.recordio import RecordIODecoder
from protocol.task_states import TaskState

from ...raw_chunks import RawChunkStream

FW, EX = "fw-1", "ex-1"
AGENT = AgentInfo(hostname="agent.local", port=5051, id=AgentID("agent-S1"))
UUID = bytes(range(16))
WAIT = 10.0


@attrs.define
class Host:
    updates: list[tuple[str, str, TaskStatus]] = attrs.field(factory=list)
    messages: list[bytes] = attrs.field(factory=list)
    log: list[str] = attrs.field(factory=list)
    changed: asyncio.Event = attrs.field(factory=asyncio.Event)

    def on_executor_update(self, framework_id: str, executor_id: str, status: TaskStatus) -> None:
        self.updates.append((framework_id, executor_id, status))
        self.changed.set()

    def on_executor_message(self, framework_id: str, executor_id: str, data: bytes) -> None:
        self.messages.append(data)
        self.changed.set()

    def on_executor_subscribed(self, framework_id: str, executor_id: str) -> None:
        self.log.append(f"subscribed {framework_id}/{executor_id}")
        self.changed.set()

    def on_executor_disconnected(self, framework_id: str, executor_id: str) -> None:
        self.log.append(f"disconnected {framework_id}/{executor_id}")
        self.changed.set()

    async def until(self, pred: Any) -> None:
        async def loop() -> None:
            while not pred():
                self.changed.clear()
                await self.changed.wait()

        await asyncio.wait_for(loop(), WAIT)


@attrs.define
class Rig:
    host: Host
    api: ExecutorAPI
    server: TestServer
    session: aiohttp.ClientSession
    responses: list[aiohttp.ClientResponse] = attrs.field(factory=list)

    def close_responses(self) -> None:
        for r in self.responses:
            r.close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.port}/api/v1/executor"

    async def post(self, body: Any, **headers: str) -> aiohttp.ClientResponse:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        hdrs = {"Content-Type": "application/json", **headers}
        resp = await self.session.post(self.url, data=data, headers=hdrs)
        self.responses.append(resp)
        return resp


@pytest.fixture
async def rig() -> AsyncIterator[Rig]:
    host = Host()
    api = ExecutorAPI(host, lambda: AGENT, heartbeat_interval=3600.0, liveness_check=0.05)
    app = web.Application()
    app.add_routes(api.routes())
    server = TestServer(app, host="127.0.0.1", port=0)
    await server.start_server()
    async with aiohttp.ClientSession() as session:
        rig = Rig(host, api, server, session)
        try:
            yield rig
        finally:
            rig.close_responses()
            await api.close()
            await server.close()


def register(api: ExecutorAPI, eid: str = EX) -> None:
    api.register_executor(
        FrameworkInfo(user="u", name="fw", id=FrameworkID(FW)),
        ExecutorInfo(executor_id=ExecutorID(eid), type=ExecutorType.CUSTOM),
        container_id="c-1",
    )


def subscribe_body(
    eid: str = EX, tasks: tuple[str, ...] = (), updates: tuple[dict[str, Any], ...] = ()
) -> dict[str, Any]:
    return {
        "type": "SUBSCRIBE",
        "framework_id": {"value": FW},
        "executor_id": {"value": eid},
        "subscribe": {
            "unacknowledged_tasks": [{"name": t, "task_id": {"value": t}} for t in tasks],
            "unacknowledged_updates": [{"status": u} for u in updates],
        },
    }


def update_body(task: str = "t1", state: str = "TASK_RUNNING", **extra: Any) -> dict[str, Any]:
    status = {"task_id": {"value": task}, "state": state, "uuid": base64.b64encode(UUID).decode(), **extra}
    return {
        "type": "UPDATE",
        "framework_id": {"value": FW},
        "executor_id": {"value": EX},
        "update": {"status": status},
    }


class Stream:
    def __init__(self, resp: aiohttp.ClientResponse) -> None:
        self.resp = resp
        self.decoder = RecordIODecoder()
        self.records: list[dict[str, Any]] = []

    async def next(self) -> dict[str, Any]:
        async def read() -> dict[str, Any]:
            while not self.records:
                chunk = await self.resp.content.readany()
                if not chunk:
                    raise EOFError("stream ended")
                self.records += [json.loads(r) for r in self.decoder.feed(chunk)]
            return self.records.pop(0)

        return await asyncio.wait_for(read(), WAIT)

    async def next_non_heartbeat(self) -> dict[str, Any]:
        while True:
            ev = await self.next()
            if ev["type"] != "HEARTBEAT":
                return ev

    async def ended(self) -> bool:
        try:
            while True:
                await self.next()
        except EOFError:
            return True


async def open_stream(rig: Rig, body: dict[str, Any] | None = None) -> Stream:
    resp = await rig.post(body or subscribe_body(), Accept="application/json")
    assert resp.status == 200, await resp.text()
    return Stream(resp)


async def test_subscribe_stream_format(rig: Rig) -> None:
    register(rig.api)
    s = await open_stream(rig)
    assert s.resp.headers["Content-Type"].startswith("application/json")
    assert s.resp.headers.get("Transfer-Encoding") == "chunked"
    assert "Mesos-Stream-Id" not in s.resp.headers
    first = await s.next()
    assert first["type"] == "SUBSCRIBED"
    sub = first["subscribed"]
    assert sub["executor_info"]["executor_id"] == {"value": EX}
    assert sub["executor_info"]["framework_id"] == {"value": FW}
    assert sub["framework_info"]["id"] == {"value": FW}
    assert sub["agent_info"] == {"hostname": "agent.local", "port": 5051, "id": {"value": "agent-S1"}}
    assert sub["container_id"] == {"value": "c-1"}
    assert (await s.next())["type"] == "HEARTBEAT"
    await rig.host.until(lambda: rig.api.subscribed(FW, EX))
    assert rig.host.log == [f"subscribed {FW}/{EX}"]


async def test_queued_events_delivered_in_order_after_subscribe(rig: Rig) -> None:
    register(rig.api)
    await rig.api.launch(FW, EX, TaskInfo(name="t1", task_id=TaskID("t1")))
    await rig.api.message(FW, EX, b"hello")
    await rig.api.launch_group(
        FW, EX, [TaskInfo(name="a", task_id=TaskID("a")), TaskInfo(name="b", task_id=TaskID("b"))]
    )
    s = await open_stream(rig)
    assert (await s.next())["type"] == "SUBSCRIBED"
    launch = await s.next_non_heartbeat()
    assert launch == {"type": "LAUNCH", "launch": {"task": {"name": "t1", "task_id": {"value": "t1"}}}}
    assert await s.next_non_heartbeat() == {"type": "MESSAGE", "message": {"data": "aGVsbG8="}}
    group = await s.next_non_heartbeat()
    assert [t["task_id"]["value"] for t in group["launch_group"]["task_group"]["tasks"]] == ["a", "b"]
    # Live events too.
    await rig.api.kill(FW, EX, "t1", grace_seconds=2.5)
    assert await s.next_non_heartbeat() == {
        "type": "KILL",
        "kill": {"task_id": {"value": "t1"}, "kill_policy": {"grace_period": {"nanoseconds": 2500000000}}},
    }
    await rig.api.acknowledged(FW, EX, "t1", UUID)
    ack = await s.next_non_heartbeat()
    assert ack["acknowledged"] == {"task_id": {"value": "t1"}, "uuid": base64.b64encode(UUID).decode()}


async def test_update_is_completed_and_forwarded(rig: Rig) -> None:
    register(rig.api)
    resp = await rig.post(update_body())
    assert resp.status == 202
    [(fid, eid, status)] = rig.host.updates
    assert (fid, eid) == (FW, EX)
    assert status.executor_id == ExecutorID(EX) and status.agent_id == AgentID("agent-S1")
    assert status.source is Source.SOURCE_EXECUTOR and status.uuid == UUID
    assert status.timestamp is not None and status.state is TaskState.TASK_RUNNING


async def test_message_and_heartbeat_calls(rig: Rig) -> None:
    register(rig.api)
    msg = {
        "type": "MESSAGE",
        "framework_id": {"value": FW},
        "executor_id": {"value": EX},
        "message": {"data": "aGk="},
    }
    assert (await rig.post(msg)).status == 202
    assert rig.host.messages == [b"hi"]
    hb = {"type": "HEARTBEAT", "framework_id": {"value": FW}, "executor_id": {"value": EX}}
    assert (await rig.post(hb)).status == 202


@pytest.mark.parametrize(
    ("body", "status", "fragment"),
    [
        (b"{not json", 400, "Failed to parse body into JSON"),
        ({"type": "UPDATE", "framework_id": {"value": FW}}, 400, "executor_id"),
        ({"type": "UPDATE", "framework_id": {"value": FW}, "executor_id": {"value": EX}}, 400, "update"),
        ({"framework_id": {"value": FW}, "executor_id": {"value": EX}}, 400, "type"),
        (update_body(uuid="AAAA"), 400, "UUID"),
        ({**update_body(), "executor_id": {"value": "nobody"}}, 400, "not known"),
        (update_body(state="TASK_STAGING"), 400, "TASK_STAGING"),
        (b"[]", 400, "Failed to"),
        (b"null", 400, "Failed to"),
        (b"[" * 5000 + b"]" * 5000, 400, "Failed to"),
        (b"\xff\xfe", 400, "Failed to"),
        ({"type": 5, "framework_id": {"value": FW}, "executor_id": {"value": EX}}, 400, "type"),
        ({"type": "SUBSCRIBE", "framework_id": "fw", "executor_id": {"value": EX}}, 400, "framework_id"),
        ({"type": "BOGUS", "framework_id": {"value": FW}, "executor_id": {"value": EX}}, 400, "type"),
        ({**update_body(), "update": {"status": {"state": "TASK_RUNNING"}}}, 400, "task_id"),
        ({**update_body(), "update": {"status": {"task_id": {"value": "t"}, "state": "NOPE"}}}, 400, "state"),
    ],
)
async def test_bad_calls(rig: Rig, body: Any, status: int, fragment: str) -> None:
    register(rig.api)
    resp = await rig.post(body)
    assert resp.status == status
    assert fragment in await resp.text()
    assert rig.host.updates == []


async def test_update_without_uuid_is_refused(rig: Rig) -> None:
    register(rig.api)
    body = update_body()
    del body["update"]["status"]["uuid"]
    resp = await rig.post(body)
    assert resp.status == 400 and "uuid" in await resp.text()


async def test_media_types(rig: Rig) -> None:
    register(rig.api)
    resp = await rig.session.post(rig.url, data=b"{}", headers={"Content-Type": "application/x-protobuf"})
    rig.responses.append(resp)
    assert resp.status == 415
    resp = await rig.post(subscribe_body(), Accept="application/x-protobuf")
    assert resp.status == 406


async def test_disconnect_is_reported(rig: Rig) -> None:
    register(rig.api)
    s = await open_stream(rig)
    await s.next()
    await rig.host.until(lambda: rig.api.subscribed(FW, EX))
    s.resp.close()
    await rig.host.until(lambda: not rig.api.subscribed(FW, EX))
    assert rig.host.log[-1] == f"disconnected {FW}/{EX}"


async def test_resubscribe_replaces_stream_and_skips_known_tasks(rig: Rig) -> None:
    register(rig.api)
    first = await open_stream(rig)
    await first.next()
    await rig.host.until(lambda: rig.api.subscribed(FW, EX))
    first.resp.close()
    await rig.host.until(lambda: not rig.api.subscribed(FW, EX))
    # While disconnected: t1 (already known to the executor) and t2 queued.
    await rig.api.launch(FW, EX, TaskInfo(name="t1", task_id=TaskID("t1")))
    await rig.api.launch(FW, EX, TaskInfo(name="t2", task_id=TaskID("t2")))
    again = subscribe_body(
        tasks=("t1",),
        updates=(
            {"task_id": {"value": "t1"}, "state": "TASK_RUNNING", "uuid": base64.b64encode(UUID).decode()},
        ),
    )
    second = await open_stream(rig, again)
    assert (await second.next())["type"] == "SUBSCRIBED"
    ev = await second.next_non_heartbeat()
    assert ev["launch"]["task"]["task_id"] == {"value": "t2"}
    # Its unacknowledged update went to the host again (the host dedups by uuid).
    assert [s.uuid for _, _, s in rig.host.updates] == [UUID]
    assert rig.host.updates[0][2].agent_id == AGENT.id
    # A third subscription replaces the second stream, which ends.
    third = await open_stream(rig)
    assert (await third.next())["type"] == "SUBSCRIBED"
    assert await second.ended()
    assert rig.api.subscribed(FW, EX)


async def test_kill_before_delivery_reports_killed_during_launch(rig: Rig) -> None:
    register(rig.api)
    await rig.api.launch(FW, EX, TaskInfo(name="t1", task_id=TaskID("t1")))
    await rig.api.launch_group(
        FW, EX, [TaskInfo(name="a", task_id=TaskID("a")), TaskInfo(name="b", task_id=TaskID("b"))]
    )
    await rig.api.kill(FW, EX, "t1", None)
    await rig.api.kill(FW, EX, TaskID("b"), None)  # the whole group goes
    got = [(s.task_id.value, s.state, s.reason, s.source) for _, _, s in rig.host.updates]
    assert got == [
        ("t1", TaskState.TASK_KILLED, Reason.REASON_TASK_KILLED_DURING_LAUNCH, Source.SOURCE_AGENT),
        ("a", TaskState.TASK_KILLED, Reason.REASON_TASK_KILLED_DURING_LAUNCH, Source.SOURCE_AGENT),
        ("b", TaskState.TASK_KILLED, Reason.REASON_TASK_KILLED_DURING_LAUNCH, Source.SOURCE_AGENT),
    ]
    assert all(
        s.uuid is not None and len(s.uuid) == 16 and s.agent_id == AGENT.id for _, _, s in rig.host.updates
    )
    s = await open_stream(rig)
    assert (await s.next())["type"] == "SUBSCRIBED"
    await rig.api.message(FW, EX, b"x")
    assert (await s.next_non_heartbeat())["type"] == "MESSAGE"  # nothing else was left queued


async def test_shutdown_before_subscribe(rig: Rig) -> None:
    register(rig.api)
    await rig.api.launch(FW, EX, TaskInfo(name="t1", task_id=TaskID("t1")))
    await rig.api.shutdown(FW, EX)
    await rig.api.shutdown(FW, EX)  # idempotent
    with pytest.raises(ExecutorAPIError, match="shutting down"):
        await rig.api.launch(FW, EX, TaskInfo(name="t2", task_id=TaskID("t2")))
    s = await open_stream(rig)
    assert (await s.next())["type"] == "SUBSCRIBED"
    assert await s.next_non_heartbeat() == {"type": "SHUTDOWN"}


async def test_unknown_executor_and_framework_without_id(rig: Rig) -> None:
    with pytest.raises(UnknownExecutor):
        await rig.api.launch(FW, "ghost", TaskInfo(name="t", task_id=TaskID("t")))
    with pytest.raises(ExecutorAPIError, match=r"framework_info\.id"):
        rig.api.register_executor(
            FrameworkInfo(user="u", name="n"), ExecutorInfo(executor_id=ExecutorID("e"))
        )
    assert not rig.api.subscribed(FW, "ghost")


async def test_close_ends_streams_and_refuses_calls(rig: Rig) -> None:
    register(rig.api)
    s = await open_stream(rig)
    await s.next()
    await rig.api.close()
    assert await s.ended()
    assert (await rig.post(update_body())).status == 503
    assert rig.host.log[-1] == f"disconnected {FW}/{EX}"


async def test_unregister_ends_stream_silently(rig: Rig) -> None:
    register(rig.api)
    s = await open_stream(rig)
    await s.next()
    rig.api.unregister_executor(FW, EX)
    assert await s.ended()
    assert not rig.api.registered(FW, EX)
    assert rig.host.log == [f"subscribed {FW}/{EX}"]


def test_environment() -> None:
    env = executor_environment(FW, EX, "agent-S1", "/work/sb", "127.0.0.1:5051", checkpoint=False)
    assert env == {
        "MESOS_FRAMEWORK_ID": FW,
        "MESOS_EXECUTOR_ID": EX,
        "MESOS_DIRECTORY": "/work/sb",
        "MESOS_SANDBOX": "/work/sb",
        "MESOS_SLAVE_ID": "agent-S1",
        "MESOS_AGENT_ENDPOINT": "127.0.0.1:5051",
        "MESOS_SLAVE_PID": "slave(1)@127.0.0.1:5051",
        "MESOS_HTTP_COMMAND_EXECUTOR": "0",
        "MESOS_EXECUTOR_SHUTDOWN_GRACE_PERIOD": "5secs",
    }
    cp = executor_environment(FW, EX, "a", "/s", "127.0.0.1:1", checkpoint=True, shutdown_grace_seconds=0.25)
    assert cp["MESOS_CHECKPOINT"] == "1"
    assert cp["MESOS_EXECUTOR_SHUTDOWN_GRACE_PERIOD"] == "250ms"
    with pytest.raises(ValueError):
        executor_environment(FW, EX, "a", "/s", "[::1]:5051", checkpoint=False)


@pytest.mark.parametrize(
    ("seconds", "text", "back"),
    [
        (5.0, "5secs", 5.0),
        (0.0, "0ns", 0.0),
        (90.0, "1.5mins", 90.0),
        (0.25, "250ms", 0.25),
        (7200, "2hrs", 7200),
    ],
)
def test_format_duration_round_trips_through_pymesos(seconds: float, text: str, back: float) -> None:
    assert format_duration(seconds) == text
    from pymesos import utils  # installed by scripts/install (scripts/install-compat-clients)

    assert utils.parse_duration(text) == pytest.approx(back)


async def test_oversized_body_is_refused_before_parsing(rig: Rig) -> None:
    register(rig.api)
    body = io.BytesIO(b'{"type":"MESSAGE","pad":"' + b"x" * (2 * 1024 * 1024) + b'"}')
    resp = await rig.session.post(rig.url, data=body, headers={"Content-Type": "application/json"})
    rig.responses.append(resp)
    assert resp.status == 413


class BrokenHost(Host):
    def on_executor_update(self, framework_id: str, executor_id: str, status: TaskStatus) -> None:
        raise RuntimeError("disk full")

    def on_executor_subscribed(self, framework_id: str, executor_id: str) -> None:
        raise RuntimeError("bug")


async def test_host_failures_are_contained(caplog: pytest.LogCaptureFixture) -> None:
    api = ExecutorAPI(BrokenHost(), lambda: AGENT, heartbeat_interval=3600.0, liveness_check=0.05)
    app = web.Application()
    app.add_routes(api.routes())
    server = TestServer(app, host="127.0.0.1", port=0)
    await server.start_server()
    try:
        async with aiohttp.ClientSession() as session:
            rig = Rig(Host(), api, server, session)
            register(api)
            resp = await rig.post(update_body())
            assert resp.status == 500 and "send it again" in await resp.text()
            s = await open_stream(rig)  # the stream survives a failing subscribed callback
            assert (await s.next())["type"] == "SUBSCRIBED"
            await api.message(FW, EX, b"still here")
            assert (await s.next_non_heartbeat())["type"] == "MESSAGE"
            assert "host failed on update" in caplog.text and "disk full" in caplog.text
            rig.close_responses()
    finally:
        await api.close()
        await server.close()


async def test_stream_is_one_record_per_chunk(rig: Rig) -> None:
    """Read from a raw socket: SUBSCRIBED, the HEARTBEAT and each queued event are one HTTP chunk
    each, as Mesos' agent writes them."""
    register(rig.api)
    for t in ("t1", "t2", "t3"):
        await rig.api.launch(FW, EX, TaskInfo(name=t, task_id=TaskID(t)))
    await rig.api.message(FW, EX, b"hello")
    raw = RawChunkStream(f"http://127.0.0.1:{rig.server.port}")
    try:
        await raw.post("/api/v1/executor", json.dumps(subscribe_body()).encode(),
                       {"Content-Type": "application/json", "Accept": "application/json"})
        assert raw.status == 200 and raw.headers["transfer-encoding"] == "chunked"
        async with asyncio.timeout(WAIT):
            types = [json.loads(await raw.record())["type"] for _ in range(6)]
        assert types == ["SUBSCRIBED", "LAUNCH", "LAUNCH", "LAUNCH", "MESSAGE", "HEARTBEAT"]
    finally:
        await raw.close()
