"""The web UI in a real browser: headless Debian Chromium (``scripts/install-chromium``) driven
by Playwright (its own browser builds are never downloaded: ``executable_path``), against a real
master and a real agent in-process on loopback, and a framework launching a real task that prints
a line every fifth of a second until the test lets it finish.

A user opens the home page (checks its numbers), clicks Tasks, the task, its stdout, and watches
new lines appear in the pailer while the page stays open (waiting on the DOM, never sleeping);
then drains the agent from the maintenance page and reactivates it. Chromium is gone afterwards.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import psutil
import pytest
from playwright.async_api import BrowserContext, Page, async_playwright

from agent.config import AgentConfig
from agent.service import AgentService
from frameworks.client.driver import SchedulerDriver
from frameworks.client.transport import HttpTransport
from master.config import MasterConfig
from master.service import MasterService
from master.webui.testing import Tables
from protocol.backoff import Backoff
from protocol.mesos import Capability, CapabilityType, CommandInfo, FrameworkInfo, TaskInfo
from protocol.mesos_common import TaskID
from protocol.resources import Resources
from protocol.task_states import TaskState

pytestmark = pytest.mark.slow

CHROMIUM = "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]
# prints "line 1", "line 2", ... until the test creates "stop" in the sandbox (its working
# directory), then "done"
TICKER = 'i=0; while [ ! -e stop ]; do i=$((i+1)); echo "line $i"; sleep 0.2; done; echo done'
WAIT_MS = 15_000


def _chromium_processes() -> list[psutil.Process]:
    out = []
    for p in psutil.Process().children(recursive=True):
        try:
            if "chrom" in p.name().lower() and p.status() != psutil.STATUS_ZOMBIE:
                out.append(p)
        except psutil.NoSuchProcess:
            pass
    return out


@pytest.fixture
async def browser(tmp_path: Path) -> AsyncIterator[BrowserContext]:
    assert shutil.which(CHROMIUM), "Debian's chromium is missing: run scripts/install-chromium"
    async with async_playwright() as pw:
        context = await pw.chromium.launch_persistent_context(
            str(tmp_path / "chromium-profile"),  # a fresh --user-data-dir
            executable_path=CHROMIUM, headless=True, args=FLAGS, timeout=30_000,
        )
        try:
            yield context
        finally:
            await context.close()
    assert _chromium_processes() == []  # Chromium and its helpers are gone


async def _text(page: Page, selector: str) -> str:
    return str(await page.locator(selector).inner_text())


async def test_home_tasks_task_and_a_live_stdout_pailer(browser: BrowserContext, tmp_path: Path) -> None:
    master = MasterService(MasterConfig(ip="127.0.0.1", port=0, work_dir=str(tmp_path / "master"),
                                        heartbeat_interval=1.0, ping_interval=0.5, ping_timeout=5.0,
                                        read_timeout=5.0))
    await master.start()
    agent = AgentService(AgentConfig(master=f"127.0.0.1:{master.port}", work_dir=tmp_path / "agent",
                                     resources="cpus:2;mem:1024;disk:2048", default_grace=0.5))
    driver = SchedulerDriver(
        FrameworkInfo(user=os.environ.get("USER", "nobody"), name="browser-it", roles=("analytics",),
                      capabilities=tuple(Capability(type=c) for c in (CapabilityType.MULTI_ROLE,
                                                                      CapabilityType.REUSABLE_OFFERS))),
        HttpTransport(master.url), backoff=Backoff(0.01, 0.1),
    )
    try:
        await agent.start()
        async with driver:
            fid = await driver.wait_subscribed(30)
            await driver.wait_for(lambda: len(driver.offers) == 1)
            (offer,) = list(driver.offers)
            info = TaskInfo(name="ticker <b>1</b>", task_id=TaskID("ticker"),
                            resources=Resources.parse("cpus:0.5;mem:128").to_mesos(),
                            command=CommandInfo(value=TICKER))
            await driver.launch(offer.offer_id, [info])
            await driver.wait_for(lambda: "ticker" in driver.tasks
                                  and driver.tasks["ticker"].state is TaskState.TASK_RUNNING)
            # the reusable offer keeps its remainder outstanding: offered, not allocated
            await driver.wait_for(lambda: offer.offer_id in driver.offers
                                  and driver.offers.get(offer.offer_id).resources.scalar("cpus") == 1.5)

            page = await browser.new_page()
            page.set_default_timeout(WAIT_MS)
            dialogs: list[str] = []
            page.on("dialog", lambda d: dialogs.append(d.message))

            # home: the numbers, offered and allocated apart
            await page.goto(master.url + "/")
            home = await page.content()
            split = {row[0]: row[1:] for row in Tables(home).with_header("resource")}
            assert split["cpus"] == ["2", "0.5", "1.5", "0"]  # total, allocated, offered, idle
            assert split["mem"] == ["1 GB", "128 MB", "896 MB", "0 MB"]
            assert dict(Tables(home).with_header("state"))["TASK_RUNNING"] == "1"
            (active,) = [t for t in Tables(home).tables_with_header("task") if t]
            assert [r[:4] for r in active] == [["ticker", "ticker <b>1</b>", "TASK_RUNNING", "browser-it"]]
            assert await page.locator("b").count() == 0  # the task's name is text, not markup
            # the framework by its name, its id on hover
            assert await page.get_attribute(f"table a.fw[href='/ui/frameworks/{fid}']", "title") == fid
            assert dict(Tables(home).facts())["version"].startswith("Agora ")

            # home -> tasks -> the task -> its stdout
            await page.click("header >> text=Tasks")
            await page.wait_for_url("**/ui/tasks")
            await page.click(f"table a[href='/ui/tasks/{fid}/ticker']")
            await page.wait_for_url(f"**/ui/tasks/{fid}/ticker")
            assert "TASK_RUNNING" in await _text(page, "dl.facts")
            await page.click("#task-logs a[href$='/files/stdout']")
            await page.wait_for_url(f"**/ui/tasks/{fid}/ticker/files/stdout")

            first = await _text(page, "#log")
            last = max(int(line.split()[1]) for line in first.splitlines() if line.startswith("line "))
            # the pailer appends what the task prints after the page was made
            await page.wait_for_function(
                "n => document.getElementById('log').textContent.includes('line ' + n + '\\n')", arg=last + 3,
            )
            assert "following" in await _text(page, "#pailer-status")
            (agent.checkpoint.sandbox(fid, "ticker") / "stop").touch()
            await page.wait_for_function("() => document.getElementById('log').textContent.endsWith('done\\n')")
            await driver.wait_for(lambda: "ticker" not in driver.tasks, 15)
            text = await _text(page, "#log")
            lines = text.split()
            assert text.count("line 1\n") == 1  # nothing appended twice
            numbers = [int(x) for x in lines if x.isdigit()]
            assert numbers == list(range(1, len(numbers) + 1))

            # the download link serves the whole file
            href = await page.get_attribute("a[download]", "href")
            assert href is not None
            got = await page.request.get(master.url + href)
            assert got.ok and (await got.text()).endswith("done\n")

            # the task's page, now that it has ended: exit code, message, how long it ran
            await page.goto(f"{master.url}/ui/tasks/{fid}/ticker")
            facts = dict(Tables(await page.content()).facts())
            assert facts["state"] == "TASK_FINISHED" and facts["exit code"] == "0", facts
            assert facts["message"] != "-" and facts["duration"].endswith("s"), facts
            assert facts["framework"] == "browser-it"
            (finished, *_) = Tables(await page.content()).with_header("state")
            assert finished[0] == "TASK_FINISHED" and finished[2] == facts["message"]  # the message column

            # maintenance: drain the agent with its button, then reactivate it
            aid = agent.agent_id
            assert aid is not None
            await page.goto(master.url + "/ui/maintenance")
            await page.fill(f"form[data-agent='{aid}'] input[name=reason]", "new disk")
            await page.click(f"form[data-agent='{aid}'] button")
            await page.wait_for_selector("text=Out of service (1)")
            # its one task has finished: DRAIN_AGENT leaves it drained at once
            assert await _text(page, ".maint-state") == "drained"
            (row,) = Tables(await page.content()).with_header("agent")
            assert row[2:5] == ["drained", "DRAINING", "new disk"]
            assert master.state.agents[aid].draining
            await page.click(f"form[data-agent='{aid}'] button >> text=reactivate")
            await page.wait_for_selector("text=Out of service (0)")
            assert not master.state.agents[aid].draining
            assert dialogs == []
    finally:
        await agent.kill_all_tasks(within=10)  # the ticker never outlives the test, even on failure
        await agent.stop()
        await master.stop()
