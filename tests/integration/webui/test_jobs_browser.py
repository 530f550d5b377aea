"""Batch and elastic jobs in the real browser (headless Debian Chromium through Playwright, as
``test_browser.py``): a real master and agent in-process, the batch and elastic services with
their APIs behind the master's credential file (the browser signs in as alice with HTTP Basic).

The user goes from the master's web UI to the batch framework's page, follows its web UI link to
the batch jobs, opens alice's running job and watches the live log of its running task grow; then,
the same way from the master's UI, the elastic service's page, its training job (workers,
generation, why not at max) and the live output of its worker, where the generation change
appears when the job is scaled up. Nothing sleeps: every wait is on the DOM or on the services'
state.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from playwright.async_api import BrowserContext, async_playwright

from agent.config import AgentConfig
from agent.service import AgentService
from frameworks.batch.model import JobState, spec_from_dict
from frameworks.batch.service import BatchService
from frameworks.elastic.service import ElasticService
from frameworks.elastic.spec import from_mapping
from master.config import MasterConfig
from master.service import MasterService
from master.webui.testing import Tables

from .test_browser import CHROMIUM, FLAGS, TICKER, WAIT_MS, _chromium_processes

pytestmark = pytest.mark.slow

DIGITS = {
    "name": "digits",
    "worker": {"command": "{python} -m frameworks.elastic.examples.digits worker --step-delay 0.05",
               "cpus": 0.5, "mem": 256},
    "scaling": {"min_workers": 1, "max_workers": 1},  # one worker; the test scales it to two
    "data": {"dataset": "sklearn-digits", "num_shards": 24, "epochs": 50},
}


@pytest.fixture
async def alices_browser(tmp_path: Path) -> AsyncIterator[BrowserContext]:
    assert shutil.which(CHROMIUM), "Debian's chromium is missing: run scripts/install-chromium"
    async with async_playwright() as pw:
        context = await pw.chromium.launch_persistent_context(
            str(tmp_path / "chromium-profile"), executable_path=CHROMIUM, headless=True, args=FLAGS,
            timeout=30_000, http_credentials={"username": "alice", "password": "alice-pw"},
        )
        try:
            yield context
        finally:
            await context.close()
    assert _chromium_processes() == []


async def test_a_batch_and_an_elastic_job_page_with_live_logs(alices_browser: BrowserContext, tmp_path: Path) -> None:
    creds = tmp_path / "credentials.json"
    creds.write_text(json.dumps({"credentials": [{"principal": "alice", "secret": "alice-pw"}]}))
    master = MasterService(MasterConfig(ip="127.0.0.1", port=0, work_dir=str(tmp_path / "master"),
                                        heartbeat_interval=1.0, ping_interval=0.5, ping_timeout=5.0,
                                        read_timeout=5.0))
    await master.start()
    agent = AgentService(AgentConfig(master=f"127.0.0.1:{master.port}", work_dir=tmp_path / "agent",
                                     resources="cpus:3;mem:2048;disk:2048", default_grace=0.5))
    batch = BatchService(master.url, tmp_path / "batch", credentials=creds)
    elastic = ElasticService(master.url, tmp_path / "elastic", credentials=creds)
    try:
        await agent.start()
        await batch.start()
        await elastic.start()
        job_id, effects = batch.core.submit(spec_from_dict({"name": "ticker", "shell": TICKER, "cpus": 0.5,
                                                            "mem": 64}), batch.now(), user="alice")
        batch._absorb(effects)
        assert batch.driver is not None
        await batch.driver.wait_for(lambda: batch.core.job(job_id).state is JobState.RUNNING, 30)
        train = elastic.submit(from_mapping(DIGITS), user="alice")

        def membership() -> tuple[int, int] | None:  # the coordinator's (generation, world size)
            coord = elastic.coordinators.get(train)
            st = coord.core.status(coord.clock.now()) if coord is not None else None
            return (st["generation"], st["world_size"]) if st is not None and st["world_size"] else None

        generation, _ = await elastic.wait_for(lambda: elastic.core.jobs[train].running() >= 1 and membership(), 60)

        page = await alices_browser.new_page()
        page.set_default_timeout(WAIT_MS)

        # the master's UI: the batch framework's page links to its web UI
        await page.goto(master.url + "/ui/frameworks")
        await page.click(f"table a[href='/ui/frameworks/{batch.driver.framework_id}']")
        await page.wait_for_url(f"**/ui/frameworks/{batch.driver.framework_id}")
        assert "agora-batch" in await page.inner_text("main")
        await page.click(f"a[href='{batch.url}']")
        await page.wait_for_url(batch.url + "/")
        jobs = {row[0]: row for row in Tables(await page.content()).with_header("ID")}
        assert jobs[str(job_id)][1:4] == ["ticker", "alice", "RUNNING"]
        assert "signed in as alice" in await page.inner_text("header")

        # alice's job: user, state, its task's attempt, and the live log of the running task
        await page.click(f"table a[href='/ui/jobs/{job_id}']")
        await page.wait_for_url(f"**/ui/jobs/{job_id}")
        facts = await page.inner_text("dl.facts")
        assert "alice" in facts and "RUNNING" in facts
        (attempt,) = Tables(await page.content()).with_header("TASK")
        assert attempt[:4] == ["0", "RUNNING", "0", f"j{job_id}-0-0"]
        await page.wait_for_function("() => document.getElementById('log').textContent.includes('line 3\\n')")
        first = max(int(x.split()[1]) for x in (await page.inner_text("#log")).splitlines() if x.startswith("line "))
        await page.wait_for_function(  # it grows while the page stays open
            "n => document.getElementById('log').textContent.includes('line ' + n + '\\n')", arg=first + 3)
        assert "following" in await page.inner_text("#pailer-status")
        text = await page.inner_text("#log")
        assert text.count("line 1\n") == 1

        # the elastic service, reached the same way: the training job's page and a worker's live output
        assert elastic.driver is not None and elastic.driver.framework_id is not None
        await page.goto(master.url + "/ui/frameworks")
        await page.click(f"table a[href='/ui/frameworks/{elastic.driver.framework_id}']")
        await page.wait_for_url(f"**/ui/frameworks/{elastic.driver.framework_id}")
        assert "agora-elastic" in await page.inner_text("main")
        await page.click(f"a[href='{elastic.url}']")
        await page.wait_for_url(elastic.url + "/")
        rows = {row[0]: row for row in Tables(await page.content()).with_header("ID")}
        assert rows[str(train)][1:4] == ["digits", "alice", "RUNNING"]
        await page.click(f"table a[href='/ui/jobs/{train}']")
        await page.wait_for_url(f"**/ui/jobs/{train}")
        facts = await page.inner_text("dl.facts")
        assert "why not at max" in facts and "generation" in facts and "samples/s" in facts
        (live,) = Tables(await page.content()).tables_with_header("#")
        assert [(r[0], r[3]) for r in live] == [("0", "RUNNING")]
        await page.wait_for_function("() => document.getElementById('log').textContent.includes('rank 0 of 1 ')")
        # worker 0's stderr, its training log, open while alice scales the job to two workers: the
        # generation change it sees appears in the page as it happens
        await page.goto(elastic.url + f"/ui/jobs/{train}?worker=0&stream=stderr")
        await page.wait_for_function("() => document.getElementById('pailer-status').textContent.includes('following')")
        elastic.scale(train, max_workers=2)
        await page.wait_for_function("g => document.getElementById('log').textContent.includes('generation ' + g + ' -> ')",
                                     arg=generation)
        assert "following" in await page.inner_text("#pailer-status")
    finally:
        await agent.kill_all_tasks(within=10)
        await elastic.stop()
        await batch.stop()
        await agent.stop()
        await master.stop()
