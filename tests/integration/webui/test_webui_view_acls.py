"""The web UI's pages show what ``/state`` shows the same principal: frameworks and tasks that
``view_frameworks`` / ``view_tasks`` (protocol/acls.py) hide from it are left off every list page,
and their pages are 404s. 'alice-ui' may view only user alice's; 'ops' everything."""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path

import aiohttp

from frameworks.client.driver import SchedulerDriver
from frameworks.client.testing import SimAgent
from frameworks.client.transport import HttpTransport
from master.config import MasterConfig
from master.service import MasterService
from protocol.authn import bearer_header
from protocol.backoff import Backoff
from protocol.mesos import CommandInfo, FrameworkInfo, TaskInfo
from protocol.mesos_common import TaskID
from protocol.resources import Resources
from protocol.task_states import TaskState


def one_offer(d: SchedulerDriver) -> bool:
    return len(d.offers) == 1


def running(d: SchedulerDriver, task_id: str) -> bool:
    t = d.tasks.get(task_id)
    return t is not None and t.state is TaskState.TASK_RUNNING


async def test_list_pages_show_only_what_the_principal_may_view(tmp_path: Path) -> None:
    (tmp_path / "credentials.json").write_text(json.dumps({"tokens": [
        {"principal": "ops", "token": "ops-token", "kind": "operator"},
        {"principal": "alice-ui", "token": "alice-token", "kind": "operator"},
    ]}))
    rules = [{"principals": {"values": ["ops"]}, "users": {"type": "ANY"}},
             {"principals": {"values": ["alice-ui"]}, "users": {"values": ["alice"]}},
             {"principals": {"type": "ANY"}, "users": {"type": "NONE"}}]
    (tmp_path / "acls.json").write_text(json.dumps({"permissive": True, "view_frameworks": rules, "view_tasks": rules}))
    master = MasterService(MasterConfig(
        ip="127.0.0.1", port=0, work_dir=str(tmp_path / "master"), heartbeat_interval=1.0, ping_interval=0.5,
        ping_timeout=5.0, read_timeout=5.0, credentials=str(tmp_path / "credentials.json"),
        acls=str(tmp_path / "acls.json"), authenticate_http_readonly=True,
    ))
    await master.start()
    agent = SimAgent(master.url, "cpus:2;mem:1024", hostname="sim-ui-acl")
    drivers: list[SchedulerDriver] = []
    fids: dict[str, str] = {}
    try:
        await agent.start()
        for user in ("bob", "alice"):
            d = SchedulerDriver(FrameworkInfo(user=user, name=f"{user}-fw"), HttpTransport(master.url),
                                backoff=Backoff(0.01, 0.1))
            drivers.append(d)
            await d.start()
            fids[user] = await d.wait_subscribed(30)
            await d.wait_for(partial(one_offer, d), 30)
            (offer,) = list(d.offers)
            task = TaskInfo(name=f"{user}-task", task_id=TaskID(f"{user}-t"),
                            resources=Resources.parse("cpus:1;mem:128").to_mesos(), command=CommandInfo(value="sleep 60"))
            await d.launch(offer.offer_id, [task])
            await d.wait_for(partial(running, d, f"{user}-t"), 30)

        async def page(token: str, url: str) -> tuple[int, str]:
            async with s.get(master.url + url, headers={"Authorization": bearer_header(token)}) as r:
                return r.status, await r.text()

        async with aiohttp.ClientSession() as s:
            for url in ("/ui/frameworks",):
                status, body = await page("alice-token", url)
                assert status == 200 and "alice-fw" in body and "bob-fw" not in body, url
                status, body = await page("ops-token", url)
                assert status == 200 and "alice-fw" in body and "bob-fw" in body, url
            for url in ("/ui/tasks", f"/ui/agents/{agent.agent_id}"):
                status, body = await page("alice-token", url)
                assert status == 200 and "alice-task" in body and "bob-task" not in body, url
                status, body = await page("ops-token", url)
                assert status == 200 and "alice-task" in body and "bob-task" in body, url
            # offers and roles: nothing of bob's framework (its id) for alice
            offered_to = {str(o["framework_id"]) for o in master.operator_api.offers_list()}
            for url in ("/ui/offers", "/ui/roles", "/"):
                status, body = await page("alice-token", url)
                assert status == 200 and fids["bob"] not in body, url
                status, body = await page("ops-token", url)
                assert status == 200, url
                if url == "/ui/offers":
                    assert all(fid in body for fid in offered_to)
            assert (await page("alice-token", f"/ui/frameworks/{fids['bob']}"))[0] == 404
            assert (await page("alice-token", f"/ui/tasks/{fids['bob']}/bob-t"))[0] == 404
            assert (await page("alice-token", f"/ui/tasks/{fids['alice']}/alice-t"))[0] == 200
            assert (await page("ops-token", f"/ui/tasks/{fids['bob']}/bob-t"))[0] == 200
    finally:
        for d in drivers:
            await d.stop()
        await agent.stop()
        await master.stop()
