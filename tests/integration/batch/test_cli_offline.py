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


async def test_state_filters_by_st_code_or_name_and_refuses_unknown_ones(tmp_path: Path) -> None:
    async with BatchService("127.0.0.1:9", tmp_path) as svc:
        loop = asyncio.get_running_loop()

        async def cli(*args: str) -> tuple[int, str]:
            return await loop.run_in_executor(None, lambda: _run(*args, url=svc.url))

        assert (await cli("submit", "--", "true")) == (0, "1\n")
        assert (await cli("submit", "--", "true")) == (0, "2\n")
        assert (await cli("cancel", "2"))[0] == 0
        for state, ids in (("PD", [1]), ("pd", [1]), ("PENDING", [1]), ("pending", [1]), ("CA", [2]),
                           ("CANCELLED", [2]), ("CD", []), ("R", [])):
            code, out = await cli("list", "--state", state, "--json")
            assert code == 0 and [j["id"] for j in json.loads(out)["jobs"]] == ids, state
        code, out = await cli("list", "--state", "bogus")
        assert code == 2
        assert "Invalid value for '--state': unknown state 'bogus'; one of PD|PENDING, R|RUNNING, CD|SUCCEEDED" in out
        code, out = await cli("list", "--help")
        assert "PD|PENDING, R|RUNNING, CD|SUCCEEDED, F|FAILED, CA|CANCELLED" in " ".join(out.split())


async def test_after_a_job_that_does_not_exist_is_refused_at_submit(tmp_path: Path) -> None:
    async with BatchService("127.0.0.1:9", tmp_path) as svc:
        loop = asyncio.get_running_loop()

        async def cli(*args: str) -> tuple[int, str]:
            return await loop.run_in_executor(None, lambda: _run(*args, url=svc.url))

        code, out = await cli("submit", "--after", "99", "--", "true")
        assert (code, out) == (1, "Error: after: no job 99\n")  # the service's words, no HTTP
        code, out = await cli("show", "999")
        assert (code, out) == (1, "Error: no job 999\n")
        code, out = await cli("list", "--json")
        assert json.loads(out)["jobs"] == []  # nothing was made, no id spent
        assert (await cli("submit", "--", "true")) == (0, "1\n")
        assert (await cli("submit", "--after-any", "1", "--", "true")) == (0, "2\n")
        assert (await cli("cancel", "1"))[0] == 0
        # a job after one that already ended the wrong way: cancelled at once with all its tasks
        assert (await cli("submit", "--count", "2", "--after", "1", "--", "true")) == (0, "3\n")
        code, out = await cli("list")
        row = next(line.split() for line in out.splitlines() if line.split()[:1] == ["3"])
        assert row[3] == "CA" and row[6] == "cancelled:2", row  # ID NAME USER ST QUEUE PRIO TASKS


async def test_bad_lifecycle_input_is_refused_with_the_field_and_changes_nothing(tmp_path: Path) -> None:
    """Malformed cron expressions, a policy without a schedule, a notify URL that is not http(s),
    and a bad update of a periodic job: each names its field, nothing is made or changed."""
    async with BatchService("127.0.0.1:9", tmp_path) as svc:
        loop = asyncio.get_running_loop()

        async def cli(*args: str) -> tuple[int, str]:
            return await loop.run_in_executor(None, lambda: _run(*args, url=svc.url))

        for args, said in (
            (("--schedule", "61 * * * *"), "Error: schedule: '61 * * * *' is not a valid cron expression"),
            (("--schedule", "every minute"), "Error: schedule: 'every minute' has 2 fields; a cron expression has 5"),
            (("--concurrency", "forbid"), "Error: concurrency: only a periodic job (one with a schedule)"),
            (("--notify", "ftp://x/y"), "Error: notify: expected an http:// or https:// URL, got 'ftp://x/y'"),
        ):
            code, out = await cli("submit", *args, "--", "true")
            assert code == 1 and out.startswith(said), (args, out)
        assert json.loads((await cli("list", "--json"))[1])["jobs"] == []  # no job, no id spent
        code, out = await cli("submit", "--schedule", "0 3 * * *", "--concurrency", "forbid", "--", "true")
        assert (code, out) == (0, "1\n")
        code, out = await cli("update", "1", "--schedule", "* * *")
        assert code == 1 and out.startswith("Error: schedule: '* * *' has 3 fields"), out
        code, out = await cli("update", "1", "--concurrency", "sometimes")
        assert code == 2 and "'sometimes' is not one of 'allow', 'forbid', 'replace'" in out
        code, out = await cli("list", "--periodic", "--json")
        (tmpl,) = json.loads(out)["jobs"]
        assert (tmpl["schedule"], tmpl["concurrency"], tmpl["runs"]) == ("0 3 * * *", "forbid", 0)
        assert tmpl["next_run"] % 86400 == 3 * 3600  # 03:00 UTC
        code, out = await cli("show", "1", "--json")
        assert json.loads(out)["changes"] == []  # the refused updates left no trace
        # a service job's inputs are not in a job file: show --toml says so rather than print a
        # file that would submit something else
        inputs = tmp_path / "inputs.txt"
        inputs.write_text("a\nb\n")
        code, out = await cli("submit", "--service", "cat", "--inputs", str(inputs))
        assert (code, out) == (0, "2\n")
        code, out = await cli("show", "2", "--toml")
        assert code == 1 and out.startswith("Error: job 2 is a service job: a job file does not carry its inputs"), out
