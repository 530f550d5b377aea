"""A real ``agora-agent`` process for integration tests (one way to start and stop it).

``agent_process(master, work, *extra)`` starts ``python -m agent.main`` in its own session against
``master`` (``host:port``, a URL, or ``zk://``), waits for its ``agora-agent listening on URL`` line
and yields that URL (``https://`` with ``--tls-cert``); on exit it is stopped with SIGTERM, then
SIGKILL of its whole process group if it does not stop within 15 s (``stop_process``).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path

RESOURCES = "cpus:2;mem:1024;disk:1000"


@contextlib.asynccontextmanager
async def agent_process(
    master: str, work: Path, *extra: str, resources: str = RESOURCES, ready_within: float = 30.0
) -> AsyncIterator[str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "agent.main", "--master", master, "--work-dir", str(work),
        "--resources", resources, "--isolation", "psutil", "--log-level", "WARNING", *extra,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL, start_new_session=True,
    )
    try:
        assert proc.stdout is not None
        line = (await asyncio.wait_for(proc.stdout.readline(), ready_within)).decode().strip()
        assert line.startswith("agora-agent listening on"), line
        yield line.rsplit(" ", 1)[-1]
    finally:
        await stop_process(proc)


async def stop_process(proc: asyncio.subprocess.Process, grace: float = 15.0) -> None:
    """SIGTERM, then SIGKILL to the process group after ``grace`` seconds; waits for the exit."""
    if proc.returncode is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        proc.send_signal(signal.SIGTERM)
    try:
        await asyncio.wait_for(proc.wait(), grace)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        await proc.wait()
