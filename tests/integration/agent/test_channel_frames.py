"""The agent channel hands every master message to the one handler, whichever frame carried it:
the kills, teardowns and drains a master decided while the agent was away arrive in the same
frame as ``REGISTERED`` (the master's writer coalesces one loop tick), and must not be dropped."""

from __future__ import annotations

import asyncio

from aiohttp import WSMsgType, web

from agent.channel import AgentChannel
from protocol import codec
from protocol.agent_channel import PATH, Frame, KillTask, Ping, Register, Registered, ShutdownFramework, frame
from protocol.mesos_common import AgentID, FrameworkID, TaskID


async def _serve(first: list[Frame]) -> tuple[web.AppRunner, int]:
    """A master that answers REGISTER with ``first`` (frames sent back to back) and then idles."""

    async def handle(request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        msg = await ws.receive()
        assert msg.type is WSMsgType.BINARY
        for f in first:
            await ws.send_bytes(codec.encode_msgpack(f))
        async for _ in ws:
            pass
        return ws

    app = web.Application()
    app.router.add_get(PATH, handle)
    runner = web.AppRunner(app, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    return runner, site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]


REG = Registered(agent_id=AgentID("a1"), master_id="m", epoch=1, ping_interval=5.0, ping_timeout=15.0)
KILL = KillTask(framework_id=FrameworkID("f1"), task_id=TaskID("t1"), reason="agent was partitioned")
SHUTDOWN = ShutdownFramework(framework_id=FrameworkID("f2"))


async def _received(frames: list[Frame], want: int) -> list[object]:
    runner, port = await _serve(frames)
    got: list[object] = []
    done = asyncio.Event()

    def on_message(body: object) -> None:
        got.append(body)
        if len(got) >= want:
            done.set()

    ch = AgentChannel(
        f"127.0.0.1:{port}",
        lambda: Register(hostname="h", port=1, agent_id=AgentID("a1")),
        lambda r: None,
        on_message,
        lambda: None,
    )
    task = asyncio.get_running_loop().create_task(ch.run())
    try:
        async with asyncio.timeout(10):
            await done.wait()
    finally:
        ch.close()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await runner.cleanup()
    return got


async def test_messages_in_the_registration_frame_are_handled() -> None:
    got = await _received([frame(REG, KILL, SHUTDOWN, epoch=1)], want=2)
    assert got == [KILL, SHUTDOWN]


async def test_messages_before_registered_are_handled_after_it_in_order() -> None:
    got = await _received([frame(Ping(seq=1), KILL, REG, SHUTDOWN, epoch=1)], want=2)
    assert got == [KILL, SHUTDOWN]
