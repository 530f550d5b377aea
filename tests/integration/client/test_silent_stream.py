"""Over real HTTP: a master whose stream goes silent (no heartbeats) is a disconnect after
``heartbeat_misses`` intervals; the driver closes the stream and subscribes again."""

from __future__ import annotations

import asyncio

from aiohttp import web

from frameworks.client.driver import SchedulerDriver
from frameworks.client.transport import HttpTransport
from protocol import codec, mesos, recordio
from protocol.backoff import Backoff
from protocol.mesos_common import FrameworkID


async def test_silent_http_stream_is_dropped_and_resubscribed() -> None:
    subscribes: list[float] = []
    changed = asyncio.Event()

    async def scheduler(request: web.Request) -> web.StreamResponse:
        subscribes.append(asyncio.get_running_loop().time())
        changed.set()
        resp = web.StreamResponse(headers={"Mesos-Stream-Id": f"s{len(subscribes)}", "Content-Type": codec.MSGPACK})
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        ev = mesos.Event(
            type=mesos.EventType.SUBSCRIBED,
            subscribed=mesos.Subscribed(framework_id=FrameworkID("f1"), heartbeat_interval_seconds=0.05),
        )
        await resp.write(recordio.encode(codec.encode_msgpack(ev)))
        try:
            await asyncio.sleep(30)  # silent: no heartbeats
        except (asyncio.CancelledError, ConnectionError):
            pass
        return resp

    app = web.Application()
    app.router.add_post("/api/v1/scheduler", scheduler)
    runner = web.AppRunner(app, shutdown_timeout=0.1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    info = mesos.FrameworkInfo(user="u", name="silent")
    d = SchedulerDriver(
        info,
        HttpTransport(f"127.0.0.1:{port}"),
        heartbeat_misses=3,
        backoff=Backoff(0.001, 0.001),
        reconcile_on_subscribe=False,
    )
    try:
        async with d:
            async with asyncio.timeout(10):
                while len(subscribes) < 2:
                    changed.clear()
                    await changed.wait()
        # dropped after ~3 silent intervals (0.15 s), not the 30 s first-event timeout
        assert subscribes[1] - subscribes[0] < 5.0
    finally:
        await runner.cleanup()
