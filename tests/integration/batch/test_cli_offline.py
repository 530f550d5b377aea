"""`agora job` against a batch service (no master needed): submit, list, show, cancel, wait."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from click.testing import CliRunner

from frameworks.batch.service import BatchService
from frameworks.cli.job import job


def _run(*args: str, url: str) -> tuple[int, str]:
    result = CliRunner().invoke(job, ["--batch", url, *args], catch_exceptions=False)
    return result.exit_code, result.output


async def test_cli_round_trip(tmp_path: Path) -> None:
    async with BatchService("127.0.0.1:9", tmp_path) as svc:
        loop = asyncio.get_running_loop()

        async def cli(*args: str) -> tuple[int, str]:
            return await loop.run_in_executor(None, lambda: _run(*args, url=svc.url))

        code, out = await cli("submit", "--count", "2", "--cpus", "0.5", "--env", "A=1", "--", "echo", "hi")
        assert code == 0 and out.strip() == "1"
        code, out = await cli("submit", "--after", "1", "--shell", "--", "echo $A")
        assert code == 0 and out.strip() == "2"
        code, out = await cli("list", "--json")
        jobs = json.loads(out)["jobs"]
        assert [(j["id"], j["state"]) for j in jobs] == [(1, "PENDING"), (2, "PENDING")]
        code, out = await cli("list")
        assert "PD" in out and "ID" in out
        code, out = await cli("show", "1")
        assert code == 0 and "job 1" in out and "PENDING" in out
        code, out = await cli("submit", "--env", "BAD", "--", "true")
        assert code == 2 and "NAME=VALUE" in out
        code, out = await cli("submit", "--cpus", "-1", "--", "true")
        assert code == 1 and "cpus" in out
        code, out = await cli("cancel", "1")
        assert code == 0 and out.strip() == "job 1 cancelled"
        code, out = await cli("wait", "1")
        assert code == 1 and "cancelled" in out
        code, out = await cli("wait", "2", "--json")
        waited = json.loads(out)
        assert code == 1 and waited["reason"] == "dependency job 1 cancelled"
        assert [t["phase"] for t in waited["task_list"]] == ["CANCELLED"]  # the whole job at the end
