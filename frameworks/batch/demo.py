"""The sample batch workload ``agora up --demo`` runs: a job array, a gang whose 4 ranks find each
other and allreduce (``examples/allreduce.py``), and a dependent job.

``run_demo(master_url, batch_url)`` submits them through the batch framework's HTTP API, prints
progress, and returns True when every job succeeded.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

from frameworks.cli.common import http_get_json, http_post_json

TERMINAL = {"SUCCEEDED", "FAILED", "CANCELLED"}

DEMO_JOBS: list[dict[str, Any]] = [
    {
        "name": "array-hello",
        "shell": 'echo "hello from task $AGORA_TASK_INDEX of $AGORA_ARRAY_SIZE on $(hostname)"',
        "count": 20,
        "cpus": 0.1,
        "mem": 32,
    },
    {
        "name": "gang-allreduce",
        # the ranks meet at MASTER_ADDR:MASTER_PORT and sum a vector over TCP (standard library)
        "argv": [sys.executable, str(Path(__file__).resolve().parent / "examples" / "allreduce.py")],
        "count": 4,
        "gang": 4,
        "cpus": 0.25,
        "mem": 64,
        "priority": 10,
    },
]


def run_demo(master_url: str, batch_url: str | None, timeout: float = 300.0, echo: Any = print) -> bool:
    if not batch_url:
        echo("demo: the batch framework is not running")
        return False
    api = batch_url.rstrip("/") + "/api/v1"
    ids = [http_post_json(f"{api}/jobs", spec)["id"] for spec in DEMO_JOBS]
    dependent = {
        "name": "after-array",
        "shell": "echo all array tasks finished; date",
        "cpus": 0.1,
        "mem": 32,
        "after": [ids[0]],
    }
    ids.append(http_post_json(f"{api}/jobs", dependent)["id"])
    echo(f"demo: submitted batch jobs {ids} (array of 20, gang of 4, one after the array)")
    deadline = time.monotonic() + timeout
    last = ""
    while True:
        jobs = {j["id"]: j for j in http_get_json(f"{api}/jobs")["jobs"] if j["id"] in ids}
        line = "  ".join(
            f"{j['id']}:{j['name']}={j['state'].lower()}({j['tasks'].get('SUCCEEDED', 0)}/{j['count']})"
            for j in jobs.values()
        )
        if line != last:
            echo(f"demo: {line}")
            last = line
        if all(j["state"] in TERMINAL for j in jobs.values()) and len(jobs) == len(ids):
            break
        if time.monotonic() > deadline:
            echo(f"demo: timed out after {timeout:g}s")
            return False
        time.sleep(0.5)
    good = all(j["state"] == "SUCCEEDED" for j in jobs.values())
    for j in jobs.values():
        if j["state"] != "SUCCEEDED":
            echo(f"demo: job {j['id']} {j['state'].lower()}: {j.get('reason')}")
    return good
