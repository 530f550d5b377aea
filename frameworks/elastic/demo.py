"""The elastic workload ``agora up --demo`` runs: the digits example (softmax regression on
scikit-learn's digits) as an elastic job with 1..3 workers, trained to >= 90% test accuracy.

``run_demo(master_url, batch_url)`` uses the elastic framework registered with the master (named
``agora-elastic``, API at its ``webui_url``); if there is none it starts ``python -m
frameworks.elastic`` itself for the demo (with the cluster's CA and TLS settings) and stops it
again afterwards. It submits the job, prints its progress (workers, generation, samples/s, loss,
accuracy, the reason it is not at its maximum) and returns True when the job succeeded with a
test accuracy of at least 90%.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from frameworks.cli.common import (
    CliError,
    ManagedProcess,
    ca_file,
    child_env,
    free_port,
    http_get_json,
    http_post_json,
    master_state,
    start_process,
    stop_process,
    wait_until,
)

TERMINAL = {"SUCCEEDED", "FAILED", "CANCELLED"}
TARGET_ACCURACY = 0.90

DEMO_JOB: dict[str, Any] = {
    "name": "digits-demo",
    "worker": {
        "command": "{python} -m frameworks.elastic.examples.digits worker --step-delay 0.005",
        "cpus": 0.25,
        "mem": 192,  # a digits worker (numpy + scikit-learn) uses ~130 MB; the agent enforces the limit
    },
    "scaling": {"min_workers": 1, "max_workers": 3, "revocable_ok": True},
    "data": {"dataset": "sklearn-digits", "num_shards": 24, "epochs": 6},
    "checkpoint": {"interval": 5.0},
    "optimizer": {"kind": "momentum", "learning_rate": 0.1, "momentum": 0.9},
}


def find_service(master_url: str) -> str | None:
    """The API URL of the ``agora-elastic`` framework registered with the master, if any."""
    try:
        state = master_state(master_url)
    except CliError:
        return None
    for fw in state.get("frameworks", []):
        if fw.get("name") == "agora-elastic" and fw.get("webui_url") and fw.get("active", True):
            url = str(fw["webui_url"]).rstrip("/")
            try:  # a framework that went away may still be listed (failover timeout)
                http_get_json(url + "/health", timeout=2.0)
            except CliError:
                continue
            return url
    return None


def start_service(
    master_url: str, work_dir: Path, timeout: float = 30.0, service_args: Sequence[str] = ()
) -> tuple[ManagedProcess, str]:
    """Start ``python -m frameworks.elastic`` against the master; returns it and its API URL once
    it has subscribed. ``service_args``: its TLS flags (``--ca``, and with ``--tls-cert``/``--tls-key``
    its API is https); the master's scheme is kept, so an https master is never tried in plaintext."""
    import sys

    port = free_port()
    master = master_url.rstrip("/")
    proc = start_process(
        "elastic",
        [
            sys.executable,
            "-m",
            "frameworks.elastic",
            "--master",
            master,
            "--port",
            str(port),
            "--work-dir",
            str(work_dir),
            "--failover-timeout",
            "1",  # a demo's framework is forgotten soon after it stops
            *service_args,
        ],
        log_path=work_dir / "elastic.log",
        env=child_env(),
    )
    url = f"{'https' if '--tls-cert' in service_args else 'http'}://127.0.0.1:{port}"
    try:
        wait_until(
            lambda: find_service(master_url) == url,
            timeout,
            "the elastic framework to subscribe",
            procs=[proc],
        )
    except BaseException:
        stop_process(proc)
        raise
    return proc, url


def run_demo(
    master_url: str,
    batch_url: str | None = None,
    timeout: float = 300.0,
    echo: Callable[[str], None] = print,
    poll: float = 0.5,
    service_args: Sequence[str] | None = None,
) -> bool:
    """Run the digits job on the elastic framework; True when it reached >= 90% test accuracy.
    ``service_args``: TLS flags for a service it starts itself (``agora up`` gives the cluster's;
    default: ``--ca`` with the CLI's CA, if it has one)."""
    if service_args is None:
        ca = ca_file()
        service_args = ("--ca", ca) if ca else ()
    url = find_service(master_url)
    proc: ManagedProcess | None = None
    work_dir: Path | None = None
    if url is None:
        work_dir = Path(tempfile.mkdtemp(prefix="agora-elastic-demo-"))
        echo(f"demo: no elastic framework is registered; starting one (logs in {work_dir})")
        proc, url = start_service(master_url, work_dir, service_args=service_args)
    good = False
    try:
        good = _run(url, timeout, echo, poll)
        return good
    finally:
        if proc is not None:
            stop_process(proc)
        if work_dir is not None and good:
            shutil.rmtree(work_dir, ignore_errors=True)  # kept (with its log) when the demo failed


def _run(url: str, timeout: float, echo: Callable[[str], None], poll: float) -> bool:
    api = url + "/api/v1"
    job_id = http_post_json(f"{api}/jobs", DEMO_JOB)["id"]
    echo(f"demo: submitted elastic job {job_id} (digits, 1..3 workers) to {url}")
    deadline = time.monotonic() + timeout
    last: tuple[Any, ...] = ()
    printed = 0.0
    while True:
        j = http_get_json(f"{api}/jobs/{job_id}")
        key = (j["state"], j["workers"], j.get("generation"), j.get("reason"))
        if key != last or time.monotonic() - printed > 5.0:
            echo(f"demo: {_line(j)}")
            last, printed = key, time.monotonic()
        if j["state"] in TERMINAL:
            break
        if time.monotonic() > deadline:
            echo(f"demo: timed out after {timeout:g}s; cancelling job {job_id}")
            http_post_json(f"{api}/jobs/{job_id}/cancel", {})
            return False
        time.sleep(poll)
    acc = j.get("test_accuracy")
    good = j["state"] == "SUCCEEDED" and acc is not None and acc >= TARGET_ACCURACY
    echo(
        f"demo: elastic job {job_id} {j['state'].lower()}, test accuracy "
        + ("-" if acc is None else f"{acc:.3f}")
        + ("" if good else f" (wanted >= {TARGET_ACCURACY:.2f}; {j.get('reason') or 'no reason given'})")
    )
    return good


def _line(j: dict[str, Any]) -> str:
    def f(v: Any, fmt: str) -> str:
        return "-" if v is None else fmt.format(v)

    parts = [
        f"state={j['state'].lower()}",
        f"workers={j['workers']}/{j['max_workers']}",
        f"gen={f(j.get('generation'), '{}')}",
        f"progress={f(j.get('progress'), '{:.0%}')}",
        f"loss={f(j.get('loss'), '{:.3f}')}",
    ]
    if j.get("reason"):
        parts.append(f"({j['reason']})")
    return " ".join(parts)
