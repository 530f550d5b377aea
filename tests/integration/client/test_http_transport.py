"""HttpTransport + driver over real HTTP on loopback: a tiny aiohttp front for the fake master
(msgpack and JSON, RecordIO stream, Mesos-Stream-Id, 307 redirect, 4xx and a dropped stream)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest
from aiohttp import web

from frameworks.client.driver import Disconnected, SchedulerDriver
from frameworks.client.fake import FakeMaster, MemoryStream
from frameworks.client.transport import CallRejected, HttpTransport, base_url
from protocol import codec, recordio
from protocol.backoff import Backoff
from protocol.mesos import Call, CallType, Capability, CapabilityType, CommandInfo, FrameworkInfo, TaskInfo
from protocol.mesos_common import TaskID
from protocol.resources import Resources
from protocol.task_states import TaskState


def http_front(master: FakeMaster, stream_media: str | None = None, bad_frame: bool = False) -> web.Application:
    """``stream_media`` forces the event stream's encoding (a master that ignores Accept);
    ``bad_frame``: the first stream carries one frame that is not an event after SUBSCRIBED."""
    streams: list[MemoryStream] = []

    async def scheduler(request: web.Request) -> web.StreamResponse:
        ctype = request.headers.get("Content-Type", "")
        call = codec.decode(Call, await request.read(), ctype)
        if call.type is CallType.SUBSCRIBE:
            try:
                stream = master.subscribe(call, wire=False)
            except CallRejected as exc:
                return web.Response(status=exc.status, text=exc.message)
            streams.append(stream)
            out = stream_media or ctype
            resp = web.StreamResponse(headers={"Content-Type": out, "Mesos-Stream-Id": stream.stream_id})
            resp.enable_chunked_encoding()
            await resp.prepare(request)
            async for ev in stream:
                await resp.write(recordio.encode(codec.encode(ev, out)))
                if bad_frame and len(streams) == 1:
                    await resp.write(recordio.encode(b"\xc1 not an event"))
                    stream.end()
            return resp
        try:
            master.handle(call, request.headers.get("Mesos-Stream-Id"))
        except CallRejected as exc:
            return web.Response(status=exc.status, text=exc.message)
        return web.Response(status=202)

    async def on_shutdown(app: web.Application) -> None:
        for s in streams:
            s.end()

    app = web.Application()
    app.router.add_post("/api/v1/scheduler", scheduler)
    app.on_shutdown.append(on_shutdown)
    return app


@contextlib.asynccontextmanager
async def serve(app: web.Application) -> AsyncIterator[str]:
    runner = web.AppRunner(app, shutdown_timeout=1.0)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield f"127.0.0.1:{port}"
    finally:
        await runner.cleanup()


def info(*caps: CapabilityType) -> FrameworkInfo:
    return FrameworkInfo(user="u", name="http-test", capabilities=tuple(Capability(type=c) for c in caps))


@pytest.mark.parametrize("media", [codec.MSGPACK, codec.JSON])
async def test_driver_over_http(media: str) -> None:
    master = FakeMaster(wire=False)
    master.add_agent("cpus:2;mem:512")
    async with serve(http_front(master)) as addr:
        driver = SchedulerDriver(
            info(CapabilityType.REUSABLE_OFFERS), HttpTransport(addr, media), backoff=Backoff(0.001, 0.01)
        )
        async with driver:
            fid = await driver.wait_subscribed(30)
            await driver.wait_for(lambda: len(driver.offers) == 1)
            (offer,) = list(driver.offers)
            t = TaskInfo(name="t", task_id=TaskID("t1"), resources=Resources.parse("cpus:1;mem:64").to_mesos(),
                         command=CommandInfo(value="true"))
            await driver.launch(offer.offer_id, [t])
            await master.wait_for(lambda: "t1" in master.tasks and not master.unacknowledged)
            assert master.tasks["t1"].state is TaskState.TASK_RUNNING
            # a dropped stream: the driver resubscribes with the same id over HTTP
            master.disconnect()
            await master.wait_for(lambda: master.framework(fid).subscriptions == 2, 30)
            await driver.wait_for(lambda: driver.connected and driver.subscriptions == 2)
            assert driver.framework_id == fid
            master.finish_task("t1")
            await driver.wait_for(lambda: "t1" not in driver.tasks)
            await master.wait_for(lambda: not master.unacknowledged, 30)


async def test_redirect_is_followed_and_4xx_is_a_call_rejected() -> None:
    master = FakeMaster(wire=False)
    async with serve(http_front(master)) as leader:
        standby = web.Application()

        async def redirect(request: web.Request) -> web.Response:
            raise web.HTTPTemporaryRedirect(f"//{leader}/api/v1/scheduler")

        standby.router.add_post("/api/v1/scheduler", redirect)
        async with serve(standby) as follower:
            tr = HttpTransport(follower)
            driver = SchedulerDriver(info(), tr, backoff=Backoff(0.001, 0.01))
            async with driver:
                await driver.wait_subscribed(30)
                assert tr.base == base_url(leader)
                with pytest.raises(CallRejected) as err:
                    await tr.send(Call(type=CallType.REVIVE), driver.stream_id)  # no framework_id
                assert err.value.status == 400


async def test_unreachable_master_keeps_retrying() -> None:
    from frameworks.cli.common import free_port

    driver = SchedulerDriver(info(), HttpTransport(f"127.0.0.1:{free_port()}"), backoff=Backoff(0.001, 0.01))
    async with driver:
        with pytest.raises(TimeoutError):
            await driver.wait_subscribed(0.3)
        assert not driver.connected
    await asyncio.wait_for(driver.join(), 1)


def test_base_url_forms() -> None:
    assert base_url("h:5050") == "http://h:5050"
    assert base_url("//h:5050/api/v1/scheduler") == "http://h:5050"
    assert base_url("http://h:1/x?y") == "http://h:1"
    with pytest.raises(ValueError):
        base_url("http://")


async def test_stream_is_decoded_as_the_master_labels_it() -> None:
    master = FakeMaster(wire=False)
    master.add_agent("cpus:1;mem:64")
    async with serve(http_front(master, stream_media=codec.JSON)) as addr:
        driver = SchedulerDriver(info(), HttpTransport(addr, codec.MSGPACK), backoff=Backoff(0.001, 0.01))
        async with driver:
            await driver.wait_subscribed(30)
            await driver.wait_for(lambda: len(driver.offers) == 1)


async def test_a_bad_frame_is_a_disconnect_and_the_driver_fails_over() -> None:
    master = FakeMaster(wire=False)
    async with serve(http_front(master, bad_frame=True)) as addr:
        driver = SchedulerDriver(info(), HttpTransport(addr), backoff=Backoff(0.001, 0.01))
        events = driver.events()
        async with driver:
            fid = await driver.wait_subscribed(30)
            async with asyncio.timeout(30):
                marker = None
                async for ev in events:
                    if isinstance(ev, Disconnected):
                        marker = ev
                        break
            assert marker is not None and marker.reason.startswith("bad event from the master")
            await driver.wait_for(lambda: driver.subscriptions == 2 and driver.connected, 30)
            assert driver.framework_id == fid
            await events.aclose()
