"""`agora agent show` on a real cluster whose agent oversubscribes: a preemptible job on revocable
cpus is shown apart from the regular use (`cpus 1/1 (+2 revocable)`), not summed into it
(`cpus 3/1`), which is how /state's used_resources has it."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner, Result

from frameworks.cli.common import wait_until
from frameworks.cli.main import cli
from frameworks.cli.up import start_cluster


def test_agent_show_splits_regular_and_revocable_use(tmp_path: Path) -> None:
    c = start_cluster(1, tmp_path / "c", port=0, resources="cpus:1;mem:1024", ready_timeout=60, with_elastic=False,
                      agent_args=("--resource-estimator", "fixed", "--oversubscribed", "cpus:2"))
    env = {"AGORA_MASTER": c.master_url, "AGORA_CONFIG": str(tmp_path / "config.toml"), "AGORA_BATCH": ""}

    def agora(*args: str) -> Result:
        return CliRunner().invoke(cli, list(args), env=env, catch_exceptions=False)

    try:
        for extra in ((), ("--preemptible",)):
            r = agora("job", "submit", "--cpus", "1" if not extra else "2", "--mem", "16", *extra, "--", "sleep", "60")
            assert r.exit_code == 0, r.output

        def both_running() -> bool:
            jobs = json.loads(agora("job", "list", "--json").output)["jobs"]
            return len(jobs) == 2 and all(j["state"] == "RUNNING" for j in jobs)

        wait_until(both_running, 60, "both jobs running")
        shown = agora("agent", "show", "S0")
        assert shown.exit_code == 0 and "cpus 1/1 (+2 revocable)" in shown.output, shown.output
        row = json.loads(agora("agent", "show", "S0", "--json").output)
        assert row["used_resources"]["cpus"] == 3.0 and row["revocable_used_resources"] == {"cpus": 2.0}
    finally:
        c.stop(grace=5)
