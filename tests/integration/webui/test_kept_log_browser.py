"""The batch service's job page in the real browser (headless Debian Chromium through Playwright)
after the agent has removed the task's sandbox: the live log shows the tail of the output the
service kept (``--log-tail``) and its status line says that is what it shows."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from playwright.async_api import async_playwright

from frameworks.batch.model import JobState, spec_from_dict
from frameworks.batch.service import BatchService

from ..cluster import running_cluster
from .test_browser import CHROMIUM, FLAGS, WAIT_MS, _chromium_processes

pytestmark = pytest.mark.slow


async def test_the_job_page_shows_the_kept_tail_once_the_sandbox_is_gone(tmp_path: Path) -> None:
    assert shutil.which(CHROMIUM), "Debian's chromium is missing: run scripts/install-chromium"
    script = "for i in $(seq 1 400); do echo \"output line $i\"; done"
    async with (
        running_cluster(tmp_path, agent={"gc_delay": 1.0, "monitor_interval": 0.1}) as (master, agent),
        BatchService(master.url, tmp_path / "batch", log_tail=1024) as batch,
    ):
        job_id, effects = batch.core.submit(spec_from_dict({"shell": script, "cpus": 0.5, "mem": 32}), batch.now())
        batch._absorb(effects)
        assert batch.driver is not None
        await batch.driver.wait_for(lambda: batch.core.job(job_id).state is JobState.SUCCEEDED, 30)
        attempt = batch.core.job(job_id).tasks[0].current
        assert attempt is not None and batch.driver.framework_id
        sandbox = agent.checkpoint.sandboxes / batch.driver.framework_id / attempt.task_id
        await batch.driver.wait_for(lambda: batch.store.open().tail(attempt.task_id, "stdout") is not None, 20)
        await batch.driver.wait_for(lambda: not sandbox.exists(), 20)
        async with async_playwright() as pw:
            browser = await pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=FLAGS, timeout=30_000)
            try:
                page = await browser.new_page()
                await page.goto(f"{batch.url}/ui/jobs/{job_id}")
                await page.wait_for_function(
                    "() => document.getElementById('log').textContent.includes('output line 400')", timeout=WAIT_MS
                )
                text = await page.inner_text("#log")
                status = await page.inner_text("#pailer-status")
            finally:
                await browser.close()
    assert "output line 1\n" not in text and text.endswith("output line 400\n")  # the last 1KB, not the whole
    assert status.startswith("its sandbox is gone; the last 1KB of its stdout (bytes ") and "following" in status
    assert _chromium_processes() == []
