"""Periodic jobs, webhooks and the job event stream end to end, through the CLI against real
master, agent and batch service processes: a periodic job runs twice at a one-second test
interval and `job list --periodic` shows its next run; a webhook that fails once is retried and
received by a local test server; `agora events --jobs` follows a job from submit to finish."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from click.testing import CliRunner

from frameworks.cli.common import wait_until
from frameworks.cli.events import events
from frameworks.cli.up import LocalCluster

from .test_batch_e2e import cli, show, submit, succeeds

QUICK = ("--cpus", "0.1", "--mem", "16")


def test_a_periodic_job_runs_twice_at_a_one_second_interval(cluster: LocalCluster) -> None:
    parent = submit(cluster, *QUICK, "--name", "tick", "--schedule", "* * * * * *", "--concurrency", "forbid", "--", "true")
    try:
        _runs_twice(cluster, parent)
    finally:  # never leave a job firing every second in the cluster the package shares
        cli(cluster, "cancel", str(parent))
    code, out = cli(cluster, "submit", "--schedule", "61 * * * *", "--", "true")
    assert code == 1 and "schedule: '61 * * * *' is not a valid cron expression" in out


def _runs_twice(cluster: LocalCluster, parent: int) -> None:
    wait_until(lambda: show(cluster, parent).get("runs", 0) >= 2, 30, "two runs started")
    runs = [j for j in json.loads(cli(cluster, "list", "--json")[1])["jobs"] if j.get("parent_id") == parent]
    assert len(runs) >= 2
    for run in runs[:2]:
        succeeds(cluster, run["id"], timeout=30)
    first, second = (show(cluster, r["id"]) for r in runs[:2])
    assert first["name"] == second["name"] == "tick"
    assert second["due_at"] - first["due_at"] >= 1.0  # distinct scheduled times, none doubled
    code, out = cli(cluster, "list", "--periodic")
    assert code == 0 and "* * * * * *" in out and "forbid" in out, out
    d = show(cluster, parent)
    assert d["state"] == "PENDING" and d["reason"].startswith("periodic: next run ")
    assert cli(cluster, "cancel", str(parent))[0] == 0


class Hook:
    """A local webhook receiver: answers 500 to the first POST, 200 to the next ones."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.received = threading.Event()
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
                hook.bodies.append(body)
                ok = len(hook.bodies) > 1
                self.send_response(200 if ok else 500)
                self.send_header("Content-Length", "0")
                self.end_headers()
                if ok:
                    hook.received.set()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def hook() -> Iterator[Hook]:
    h = Hook()
    try:
        yield h
    finally:
        h.close()


def test_a_webhook_gets_the_final_state_and_a_failed_post_is_retried(cluster: LocalCluster, hook: Hook) -> None:
    jid = submit(cluster, *QUICK, "--notify", hook.url, "--shell", "--", "exit 3")
    assert hook.received.wait(60), hook.bodies
    assert len(hook.bodies) == 2 and hook.bodies[0] == hook.bodies[1]
    body = hook.bodies[1]
    assert body["event"] == "finished"
    assert body["job"]["id"] == jid and body["job"]["state"] == "FAILED" and body["job"]["exit_code"] == 3
    wait_until(lambda: show(cluster, jid)["state"] == "FAILED", 30, "failed")


def test_agora_events_jobs_follows_a_job_from_submit_to_finish(cluster: LocalCluster) -> None:
    jid = submit(cluster, *QUICK, "--", "true")
    succeeds(cluster, jid)
    assert cluster.batch_url
    r = CliRunner().invoke(
        events, ["--jobs", "--batch", cluster.batch_url, "--job", str(jid), "--since", "0", "--count", "3"],
        catch_exceptions=False,
    )
    assert r.exit_code == 0, r.output
    lines = [line.split(" ", 1)[1] for line in r.output.splitlines()]
    assert lines == [
        f"job {jid} (true) submitted PENDING",
        f"job {jid} (true) started RUNNING",
        f"job {jid} (true) finished SUCCEEDED",
    ]
