"""Queues: a batch service refuses a job for a queue (role) it does not subscribe with, naming the
roles it serves, and `agora job submit` shows that error and exits 1 (nobody waits forever for
offers that never come); `agora up --queues` checks its roles before starting anything."""

from __future__ import annotations

import asyncio
from pathlib import Path

from click.testing import CliRunner, Result

from frameworks.batch.service import BatchService
from frameworks.cli.main import cli
from frameworks.cli.up import up

NO_MASTER = "127.0.0.1:9"  # discard port: nothing listens; the service's driver keeps retrying quietly


async def test_submit_to_a_queue_the_service_does_not_serve_fails_at_once(tmp_path: Path) -> None:
    env = {"AGORA_CONFIG": str(tmp_path / "config.toml"), "AGORA_MASTER": NO_MASTER}
    async with BatchService(NO_MASTER, tmp_path / "batch", roles=("ml", "*")) as svc:

        def agora(*args: str) -> Result:
            return CliRunner().invoke(cli, ["job", "--batch", svc.url, *args], env=env, catch_exceptions=False)

        bad = await asyncio.to_thread(agora, "submit", "--queue", "gpu", "--", "true")
        assert bad.exit_code == 1, bad.output
        assert "queue 'gpu' is not served by agora-batch" in bad.output
        assert "roles 'ml', '*'" in bad.output and bad.output.startswith("Error: ")
        good = await asyncio.to_thread(agora, "submit", "--queue", "ml", "--", "true")
        assert good.exit_code == 0, good.output
        also = await asyncio.to_thread(agora, "submit", "--", "true")  # the default queue '*'
        assert also.exit_code == 0, also.output
        assert sorted(j.spec.queue for j in svc.core.jobs.values()) == ["*", "ml"]


def test_up_refuses_a_bad_queue_name_before_starting_anything(tmp_path: Path) -> None:
    r = CliRunner().invoke(up, ["--queues", "ml,../x", "--work-dir", str(tmp_path / "w")])
    assert r.exit_code == 2 and "--queues" in r.output and "'../x'" in r.output
    assert not (tmp_path / "w").exists()
    helptext = CliRunner().invoke(up, ["--help"]).output
    assert "--queues, --roles" in helptext
