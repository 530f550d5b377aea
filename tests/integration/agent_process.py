"""Real processes for integration tests (one way to start and stop them).

``agent_process(master, work, *extra, log=None)`` starts ``python -m agent.main`` in its own session
against ``master`` (``host:port``, a URL, or ``zk://``), waits for its ``agora-agent listening on
URL`` line and yields that URL (``https://`` with ``--tls-cert``); its stderr goes to ``log``
(appended) or nowhere. On exit it is retired with SIGUSR1 (its tasks are killed, none outlives
the test) by ``stop_process``.

``start_ready(argv, ready, log)`` starts any such process (a master: ``agora-master listening
on``) and returns it with its ready line, stopping it if the line does not come. ``stop_process``
sends SIGCONT (a test may have SIGSTOPped it) and SIGTERM, then SIGKILL to its whole process group
if it does not stop within 15 s.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import IO

RESOURCES = "cpus:2;mem:1024;disk:1000"


@contextlib.asynccontextmanager
async def agent_process(
    master: str, work: Path, *extra: str, resources: str = RESOURCES, ready_within: float = 30.0,
    log: Path | None = None,
) -> AsyncIterator[str]:
    argv = (sys.executable, "-m", "agent.main", "--master", master, "--work-dir", str(work),
            "--resources", resources, "--isolation", "psutil", "--log-level", "WARNING", *extra)
    proc, line = await start_ready(argv, "agora-agent listening on", log, ready_within)
    try:
        yield line.rsplit(" ", 1)[-1]
    finally:
        # SIGUSR1 retires the agent: it kills and reports its tasks, then exits (SIGTERM would
        # leave them running for a later agent to recover, outliving the test)
        await stop_process(proc, stop_signal=signal.SIGUSR1)


async def start_ready(
    argv: Sequence[str], ready: str, log: Path | None = None, within: float = 30.0
) -> tuple[asyncio.subprocess.Process, str]:
    """Start ``argv`` in its own session (stderr appended to ``log``, else discarded) and wait for
    its first stdout line, which must start with ``ready``; ``(process, line)``."""
    with _stderr_to(log) as err:
        proc = await asyncio.create_subprocess_exec(
            *argv, stdout=asyncio.subprocess.PIPE,
            stderr=err if err is not None else asyncio.subprocess.DEVNULL, start_new_session=True,
        )
    try:
        assert proc.stdout is not None
        line = (await asyncio.wait_for(proc.stdout.readline(), within)).decode().strip()
        assert line.startswith(ready), (line, _text(log))
    except BaseException:
        await stop_process(proc)
        raise
    return proc, line


def _stderr_to(log: Path | None) -> contextlib.AbstractContextManager[IO[bytes] | None]:
    if log is None:
        return contextlib.nullcontext()
    log.parent.mkdir(parents=True, exist_ok=True)
    return open(log, "ab")


def _text(log: Path | None) -> str:
    return log.read_text(errors="replace") if log is not None else ""


async def stop_process(
    proc: asyncio.subprocess.Process, grace: float = 15.0, stop_signal: int = signal.SIGTERM
) -> None:
    """SIGCONT and ``stop_signal`` (SIGTERM), then SIGKILL to the process group after ``grace``
    seconds; waits for the exit."""
    if proc.returncode is not None:
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGCONT)  # a stopped process would not see the SIGTERM
    with contextlib.suppress(ProcessLookupError):
        proc.send_signal(stop_signal)
    try:
        await asyncio.wait_for(proc.wait(), grace)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        await proc.wait()
