"""The master's web UI over HTTP: a real master in-process on loopback, a simulated agent speaking
the real agent channel (``SimAgent``) whose registered port is a small aiohttp app serving the real
``agent.files`` endpoints over a temporary sandbox root, and a framework (``SchedulerDriver``) that
launches a task. The UI's routes are mounted on their own app (the master's router is frozen once
it serves); the handlers only need the running ``MasterService``."""

from __future__ import annotations

import functools
import socket
from collections.abc import AsyncIterator
from pathlib import Path

import attrs
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from agent import files
from frameworks.client.driver import SchedulerDriver
from frameworks.client.testing import SimAgent
from frameworks.client.transport import HttpTransport
from master.config import MasterConfig
from master.events import QuotaUpdated, WeightUpdated
from master.service import MasterService
from master.webui import WebUI, add_webui
from master.webui.html import esc, path
from master.webui.testing import Tables
from protocol.backoff import Backoff
from protocol.mesos import Capability, CapabilityType, CommandInfo, FrameworkInfo, TaskInfo
from protocol.mesos_common import TaskID
from protocol.resources import Resources
from protocol.task_states import TaskState

EVIL = "<script>alert(1)</script>"


@attrs.define
class Cluster:
    master: MasterService
    agent: SimAgent
    driver: SchedulerDriver
    ui: TestClient[web.Request, web.Application]
    webui: WebUI
    sandboxes: Path
    files_site: web.AppRunner
    framework_id: str = ""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[Cluster]:
    master = MasterService(
        MasterConfig(ip="127.0.0.1", port=0, work_dir=str(tmp_path / "master"), heartbeat_interval=1.0,
                     ping_interval=0.5, ping_timeout=5.0, read_timeout=5.0)
    )
    await master.start()
    sandboxes = tmp_path / "sandboxes"
    sandboxes.mkdir()
    files_app = web.Application()
    files.add_routes(files_app, sandboxes)
    files_site = web.AppRunner(files_app, access_log=None)
    await files_site.setup()
    site = web.TCPSite(files_site, "127.0.0.1", 0)
    await site.start()
    files_port = int(files_site.addresses[0][1])
    agent = SimAgent(master.url, "cpus:2;mem:1024;disk:2048", hostname="127.0.0.1",
                     attributes=f"rack:{EVIL}", port=files_port)
    ui_app = web.Application()
    webui = add_webui(ui_app, master)
    ui = TestClient(TestServer(ui_app, host="127.0.0.1", port=0))
    driver = SchedulerDriver(
        FrameworkInfo(user="u", name="web-ui-it", roles=("analytics",),
                      capabilities=tuple(Capability(type=c) for c in (CapabilityType.MULTI_ROLE,
                                                                      CapabilityType.REUSABLE_OFFERS))),
        HttpTransport(master.url), backoff=Backoff(0.01, 0.1),
    )
    try:
        await agent.start()
        await agent.wait_registered()
        await ui.start_server()
        async with driver:
            yield Cluster(master, agent, driver, ui, webui, sandboxes, files_site,
                          await driver.wait_subscribed(30))
    finally:
        await ui.close()
        await agent.stop()
        await files_site.cleanup()
        await master.stop()


async def launch(c: Cluster, tid: str = "t1") -> str:
    """Launch ``tid`` (cpus 1, mem 128) from the one offer; returns the offer id, whose remainder
    stays outstanding (a reusable offer)."""
    d = c.driver
    await d.wait_for(lambda: len(d.offers) == 1)
    (offer,) = list(d.offers)
    info = TaskInfo(name=f"job {tid}", task_id=TaskID(tid), resources=Resources.parse("cpus:1;mem:128").to_mesos(),
                    command=CommandInfo(value="sleep 60"))
    await d.launch(offer.offer_id, [info])
    await d.wait_for(lambda: tid in d.tasks and d.tasks[tid].state is TaskState.TASK_RUNNING)
    # the lease keeps its remainder outstanding under the same id
    await d.wait_for(lambda: offer.offer_id in d.offers
                     and d.offers.get(offer.offer_id).resources.scalar("cpus") == 1)
    return offer.offer_id


async def get(c: Cluster, url: str, status: int = 200) -> str:
    async with c.ui.get(url) as r:
        body = await r.text()
        assert r.status == status, body
        return body


async def test_summary_splits_allocated_and_offered(cluster: Cluster) -> None:
    c = cluster
    await launch(c)
    page = await get(c, "/")
    split = {row[0]: row[1:] for row in Tables(page).with_header("resource")}
    # total, allocated (tasks), offered (not in use), idle
    assert split["cpus"] == ["2", "1", "1", "0"]
    assert split["mem"] == ["1 GB", "128 MB", "896 MB", "0 MB"]
    assert split["disk"] == ["2 GB", "0 MB", "2 GB", "0 MB"]
    assert split["gpus"] == ["0", "0", "0", "0"]
    assert c.master.master_id in page
    assert "1 active, 0 inactive" in page
    assert dict(Tables(page).with_header("state"))["TASK_RUNNING"] == "1"

    offers = await get(c, "/ui/offers")
    (row,) = Tables(offers).with_header("offer")
    # the framework by its name (its id on hover)
    assert row[1:6] == ["web-ui-it", c.agent.agent_id, "127.0.0.1", "analytics", "cpus 1, mem 896 MB, disk 2 GB"]
    assert f'title="{c.framework_id}"' in offers

    await c.master.dispatch(WeightUpdated(role="analytics", weight=2.5))
    await c.master.dispatch(QuotaUpdated(role="analytics", guarantee=Resources.parse("cpus:1;mem:256"),
                                         limit=Resources.parse("cpus:2;mem:512")))
    await c.master.dispatch(QuotaUpdated(role="batch", guarantee=Resources.parse("cpus:0.5"), limit=None))
    roles = {r[0]: r[1:] for r in Tables(await get(c, "/ui/roles")).with_header("role")}
    # weight, quota guarantee, quota limit, allocated, offered, frameworks
    assert roles["analytics"] == ["2.5", "cpus 1, mem 256 MB", "cpus 2, mem 512 MB", "cpus 1, mem 128 MB",
                                  "cpus 1, mem 896 MB, disk 2 GB", "web-ui-it"]
    assert roles["batch"] == ["1", "cpus 0.5", "no limit", "-", "-", "-"]


async def test_task_on_framework_agent_and_tasks_pages(cluster: Cluster) -> None:
    c = cluster
    await launch(c)
    aid = c.agent.agent_id
    assert aid is not None

    fw = await get(c, path("ui", "frameworks", c.framework_id))
    (task_row,) = Tables(fw).with_header("task")
    assert task_row[:4] == ["t1", "job t1", "TASK_RUNNING", aid]
    assert "MULTI_ROLE" in fw and "REUSABLE_OFFERS" in fw and "analytics" in fw

    ag = await get(c, path("ui", "agents", aid))
    (task_row,) = Tables(ag).with_header("task")
    assert task_row[:4] == ["t1", "job t1", "TASK_RUNNING", "web-ui-it"]
    split = {row[0]: row[1:] for row in Tables(ag).with_header("resource")}
    assert split["cpus"] == ["2", "1", "1", "0"]

    listing = Tables(await get(c, "/ui/agents")).with_header("agent")
    assert [r[:4] for r in listing] == [[aid, f"127.0.0.1:{c.agent.port}", "active", "1 / 2"]]
    frameworks = Tables(await get(c, "/ui/frameworks")).with_header("framework")
    assert [r[:4] for r in frameworks] == [[c.framework_id, "web-ui-it", "analytics", "active"]]

    running = Tables(await get(c, "/ui/tasks?state=TASK_RUNNING")).with_header("task")
    assert [r[0] for r in running] == ["t1"]
    assert "no tasks" in await get(c, "/ui/tasks?state=TASK_FAILED")

    await c.driver.kill("t1")
    await c.driver.wait_for(lambda: "t1" not in c.driver.tasks)
    fw = await get(c, path("ui", "frameworks", c.framework_id))
    assert "Active tasks (0)" in fw and "Completed tasks (1)" in fw
    assert [r[0] for r in Tables(await get(c, "/ui/tasks?state=TASK_KILLED")).with_header("task")] == ["t1"]


async def test_log_page_and_sandbox_browsing_through_the_agent(cluster: Cluster) -> None:
    c = cluster
    await launch(c)
    box = c.sandboxes / c.framework_id / "t1"
    box.mkdir(parents=True)
    (box / "stdout").write_text("epoch 1 loss 0.5\n<b>not bold</b>\n")
    (box / "stderr").write_text("warning: slow\n")
    (box / "out").mkdir()
    (box / "out" / "model.bin").write_bytes(b"\x00\x01weights")
    base = path("ui", "tasks", c.framework_id, "t1", "files")

    stdout = await get(c, base + "/stdout")
    assert "epoch 1 loss 0.5" in stdout
    assert "&lt;b&gt;not bold&lt;/b&gt;" in stdout and "<b>not bold</b>" not in stdout
    assert "warning: slow" in await get(c, base + "/stderr")

    listing = {r[1]: r for r in Tables(await get(c, base)).with_header("mode")}
    assert set(listing) == {"out/", "stderr", "stdout"}
    assert listing["stdout"][2] == f"{(box / 'stdout').stat().st_size} B"
    inner = Tables(await get(c, base + "?path=out")).with_header("mode")
    assert [r[1] for r in inner] == ["model.bin"]

    async with c.ui.get(base + "/download", params={"path": "out/model.bin"}) as r:
        assert r.status == 200 and await r.read() == b"\x00\x01weights"

    # the tailer's JSON: what the file grew by from an offset
    size = (box / "stdout").stat().st_size
    with (box / "stdout").open("a") as f:
        f.write("epoch 2 loss 0.4\n")
    async with c.ui.get(base + "/read", params={"path": "stdout", "offset": str(size)}) as r:
        got = await r.json()
    assert got == {"data": "epoch 2 loss 0.4\n", "offset": size, "next_offset": size + 17}

    # refused before the agent is asked; a missing file is the agent's 404
    await get(c, base + "/view?path=../../etc/passwd", 400)
    await get(c, base + "/view?path=/etc/passwd", 400)
    assert "answered 404" in await get(c, base + "/view?path=nope", 404)


async def test_a_symlink_out_of_the_sandbox_serves_nothing_through_the_proxy(cluster: Cluster) -> None:
    """A task that links another task's sandbox into its own reads nothing of it through the
    UI's proxy (nor from the agent directly); links inside its own sandbox still work."""
    c = cluster
    await launch(c)
    mine, theirs = c.sandboxes / c.framework_id / "t1", c.sandboxes / "other-fw" / "t9"
    mine.mkdir(parents=True)
    theirs.mkdir(parents=True)
    (theirs / "stdout").write_text("the other tenant's secret\n")
    (mine / "stdout").write_text("mine\n")
    (mine / "peek").symlink_to(theirs)
    (mine / "peek-file").symlink_to(theirs / "stdout")
    (mine / "also-mine").symlink_to(mine / "stdout")
    base = path("ui", "tasks", c.framework_id, "t1", "files")
    for sub in ("peek/stdout", "peek-file"):
        async with c.ui.get(base + "/read", params={"path": sub, "offset": "0"}) as r:
            body = await r.text()
            assert r.status == 403 and "secret" not in body, (sub, r.status, body)
        async with c.ui.get(base + "/download", params={"path": sub}) as r:
            assert r.status == 403 and b"secret" not in await r.read()
        assert "secret" not in await get(c, base + f"/view?path={sub}", 403)
    assert "secret" not in await get(c, base + "?path=peek", 403)
    async with c.ui.get(base + "/read", params={"path": "also-mine", "offset": "0"}) as r:
        assert r.status == 200 and (await r.json())["data"] == "mine\n"
    # the agent's own endpoint, asked directly for the same path
    port = int(c.files_site.addresses[0][1])
    async with c.ui.session.get(f"http://127.0.0.1:{port}/files/read",
                                params={"path": f"{c.framework_id}/t1/peek/stdout"}) as r:
        assert r.status == 403


async def test_the_pailer_follows_a_rotated_log(cluster: Cluster) -> None:
    """The agent's log writer (agent.logger.Stream) rotates stdout under the pailer: the tailer's
    JSON keeps counting from where it was (stream offsets) across files; one that fell behind the
    kept window goes on from the oldest kept byte; the page shows the tail across files."""
    import os

    from agent.logger import Stream

    c = cluster
    await launch(c)
    box = c.sandboxes / c.framework_id / "t1"
    box.mkdir(parents=True)
    dirfd = os.open(box, os.O_RDONLY | os.O_DIRECTORY)
    r, w = os.pipe()
    os.close(w)
    writer = Stream("t", "stdout", dirfd, r, 4096, 3)  # a 12 KB window
    stream = b"".join(b"step %06d\n" % i for i in range(3000))  # 36,000 bytes
    base = path("ui", "tasks", c.framework_id, "t1", "files")

    async def drain(offset: int) -> tuple[bytes, int | None, int]:
        out, first = b"", None
        while True:
            async with c.ui.get(base + "/read", params={"path": "stdout", "offset": str(offset)}) as resp:
                got = await resp.json()
            if not got["data"]:
                return out, first, offset
            assert got["next_offset"] == got["offset"] + len(got["data"].encode())
            assert first is None or got["offset"] == offset  # only a first read may move forward
            first = got["offset"] if first is None else first
            out += got["data"].encode()
            offset = got["next_offset"]

    try:
        writer.feed(stream[:3600])
        assert await drain(0) == (stream[:3600], 0, 3600)
        writer.feed(stream[3600:9600])  # two rotations while the pailer waits
        assert sorted(p.name for p in box.iterdir() if p.name.startswith("stdout")) == ["stdout", "stdout.1", "stdout.2"]
        assert await drain(3600) == (stream[3600:9600], 3600, 9600)
        writer.feed(stream[9600:])  # more than the window: what the pailer had not read is gone
        oldest = 36_000 - 2 * 4096 - 36_000 % 4096
        assert await drain(9600) == (stream[oldest:], oldest, 36_000)
        page = await get(c, base + "/stdout")
        assert "step 002999" in page and "step 000000" not in page
    finally:
        writer.close()
        os.close(dirfd)


async def test_unreachable_agent_is_a_clear_page_not_a_500(cluster: Cluster) -> None:
    c = cluster
    await launch(c)
    await c.files_site.cleanup()  # the agent's HTTP endpoint goes away; its channel stays up
    base = path("ui", "tasks", c.framework_id, "t1", "files")
    for url in (base + "/stdout", base):
        page = await get(c, url, 502)
        assert "is unreachable" in page and f"127.0.0.1:{c.agent.port}" in page
    async with c.ui.get(base + "/read", params={"path": "stdout"}) as r:
        assert r.status == 502 and "unreachable" in (await r.json())["error"]


async def test_escaping_unknown_ids_and_recovering(cluster: Cluster) -> None:
    c = cluster
    aid = c.agent.agent_id
    assert aid is not None
    for url in ("/ui/agents", path("ui", "agents", aid)):
        page = await get(c, url)
        assert EVIL not in page and esc(EVIL) in page

    for url in (path("ui", "agents", EVIL), path("ui", "frameworks", "nope"),
                path("ui", "tasks", c.framework_id, "nope", "files"), path("ui", "tasks", "nope", "t", "files", "stdout")):
        page = await get(c, url, 404)
        assert "Not found" in page and EVIL not in page

    c.master.ready = False
    try:
        for url in ("/", "/ui/agents", path("ui", "tasks", c.framework_id, "t1", "files")):
            assert "recovering" in await get(c, url, 503)
    finally:
        c.master.ready = True


async def test_agent_refusing_connections_is_a_clear_page(cluster: Cluster) -> None:
    """A task on an agent registered at a port nothing listens on (connection refused)."""
    c = cluster
    dead_port = _free_port()
    await launch(c)
    other = SimAgent(c.master.url, "cpus:1;mem:256", hostname="127.0.0.1", port=dead_port)
    await other.start()
    try:
        await other.wait_registered()
        await c.driver.wait_for(lambda: any(o.agent_id == other.agent_id for o in c.driver.offers))
        (offer,) = [o for o in c.driver.offers if o.agent_id == other.agent_id]
        info = TaskInfo(name="t2", task_id=TaskID("t2"), resources=Resources.parse("cpus:1;mem:64").to_mesos(),
                        command=CommandInfo(value="sleep 60"))
        await c.driver.launch(offer.offer_id, [info])
        await c.driver.wait_for(lambda: "t2" in c.driver.tasks and c.driver.tasks["t2"].state is TaskState.TASK_RUNNING)
        page = await get(c, path("ui", "tasks", c.framework_id, "t2", "files", "stdout"), 502)
        assert f"127.0.0.1:{dead_port} is unreachable" in page
    finally:
        await other.stop()


async def test_the_master_itself_serves_the_ui(cluster: Cluster) -> None:
    """The routes are wired into the master's own app (the tests above use a separate app)."""
    import aiohttp

    async with aiohttp.ClientSession() as s:
        async with s.get(cluster.master.url + "/") as r:
            assert r.status == 200
            assert r.content_type == "text/html"
            body = await r.text()
        assert "Cluster summary" in body and "/ui/agents" in body
        async with s.get(cluster.master.url + "/ui/frameworks/no-such-framework") as r:
            assert r.status == 404
        async with s.get(cluster.master.url + "/state") as r:
            assert r.status == 200 and r.content_type == "application/json"


async def test_task_page_and_one_agent_session_closed_with_the_app(cluster: Cluster) -> None:
    c = cluster
    await launch(c)
    box = c.sandboxes / c.framework_id / "t1"
    box.mkdir(parents=True)
    (box / "stdout").write_text("hello\n")
    page = await get(c, path("ui", "tasks", c.framework_id, "t1"))
    assert "Task t1" in page and "TASK_RUNNING" in page and "/ui/tasks/" + c.framework_id + "/t1/files/stdout" in page
    await get(c, path("ui", "tasks", c.framework_id, "nope"), 404)

    base = path("ui", "tasks", c.framework_id, "t1", "files")
    assert c.webui._http is None  # opened on first use
    assert "hello" in await get(c, base + "/stdout")
    session = c.webui._http
    assert session is not None
    await get(c, base)
    async with c.ui.get(base + "/download", params={"path": "stdout"}) as r:
        assert await r.read() == b"hello\n"
    assert c.webui._http is session  # one session for every request to the agents
    await c.ui.close()  # the app's cleanup closes it
    assert session.closed and c.webui._http is None


def _draining_is(master: MasterService, agent_id: str, want: bool) -> bool:
    return master.state.agents[agent_id].draining is want


async def test_maintenance_page_follows_drain_and_reactivate(cluster: Cluster) -> None:
    import aiohttp

    c = cluster
    aid = c.agent.agent_id
    assert aid is not None
    page = await get(c, "/ui/maintenance")
    (row,) = Tables(page).with_header("agent")  # the out-of-service table is empty
    assert row[:3] == [aid, f"127.0.0.1:{c.agent.port}", "in service"] and row[-1] == "drain"
    assert "Out of service (0)" in page
    async with aiohttp.ClientSession() as s:
        # (no task runs on the agent: DRAIN_AGENT leaves it drained at once)
        for call, state in (("DRAIN_AGENT", "drained"), ("REACTIVATE_AGENT", "in service")):
            body = {"type": call, call.lower(): {"agent_id": {"value": aid}}}
            async with s.post(c.master.url + "/api/v1", json=body) as r:
                assert r.status in (200, 202), await r.text()
            await c.master.wait_until(functools.partial(_draining_is, c.master, aid, call == "DRAIN_AGENT"), 10)
            page = await get(c, "/ui/maintenance")
            (row,) = Tables(page).with_header("agent")
            assert row[2] == state and row[-1] == ("reactivate" if call == "DRAIN_AGENT" else "drain")
            assert ("Out of service (1)" if call == "DRAIN_AGENT" else "Out of service (0)") in page
