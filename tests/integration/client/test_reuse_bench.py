"""scripts/bench/reuse.py runs end to end (simulated agent, tiny sizes) and ends with its JSON line."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from frameworks.cli.common import REPO_ROOT, child_env

pytestmark = pytest.mark.slow


def test_reuse_bench_smoke() -> None:
    res = subprocess.run(
        [sys.executable, str(REPO_ROOT / "scripts/bench/reuse.py"), "--agent", "sim", "--tasks", "12",
         "--runs", "1", "--mesos-interval", "0", "--within", "60"],
        capture_output=True, env=child_env(), cwd=REPO_ROOT, timeout=110,
    )
    assert res.returncode == 0, res.stderr.decode()[-2000:]
    last = json.loads(res.stdout.decode().strip().splitlines()[-1])
    assert last["bench"] == "reuse" and set(last["modes"]) == {"reusable", "classic"}
    assert last["modes"]["reusable"]["same_offer"]["median"] == 1.0  # every next task on the same lease
    assert last["modes"]["classic"]["same_offer"]["median"] == 0.0
