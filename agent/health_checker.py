"""Runs command tasks' health checks and checks (shell; the decisions are ``agent/health.py``).

One asyncio task per task and kind: wait ``delay``, then probe every ``interval``: a COMMAND
check is a process in the task's sandbox with the task's environment, as the task's user, in a
session of its own (killed with its group at the timeout); an HTTP check is a GET on
``127.0.0.1`` (redirects followed, certificates not verified, as Mesos' ``curl -k -L``); a TCP
check opens a connection to ``127.0.0.1``. Each outcome goes to ``on_outcome`` on the event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from collections.abc import Callable, Mapping
from pathlib import Path

import aiohttp

from agent.health import Outcome, Policy, Probe

log = logging.getLogger(__name__)

Key = tuple[str, str, bool]  # (framework id, task id, health?)


class Checkers:
    def __init__(self, on_outcome: Callable[[str, str, Policy, Outcome], None]) -> None:
        self.on_outcome = on_outcome
        self._tasks: dict[Key, asyncio.Task[None]] = {}
        self._session: aiohttp.ClientSession | None = None

    def start(
        self,
        framework_id: str,
        task_id: str,
        policy: Policy,
        env: Mapping[str, str],
        cwd: Path,
        wrap: Callable[[tuple[str, ...]], tuple[str, ...]] | None = None,
    ) -> None:
        key = (framework_id, task_id, policy.health)
        if key in self._tasks:
            return
        self._tasks[key] = asyncio.get_running_loop().create_task(
            self._loop(framework_id, task_id, policy, dict(env), cwd, wrap), name=f"check-{task_id}"
        )

    def running(self, framework_id: str, task_id: str) -> bool:
        return any(k[:2] == (framework_id, task_id) for k in self._tasks)

    def stop(self, framework_id: str, task_id: str) -> None:
        for health in (True, False):
            t = self._tasks.pop((framework_id, task_id, health), None)
            if t is not None:
                t.cancel()

    async def close(self) -> None:
        tasks = list(self._tasks.values())
        self._tasks.clear()
        for t in tasks:
            t.cancel()
        for t in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def _loop(
        self,
        fid: str,
        tid: str,
        policy: Policy,
        env: dict[str, str],
        cwd: Path,
        wrap: Callable[[tuple[str, ...]], tuple[str, ...]] | None,
    ) -> None:
        await asyncio.sleep(policy.delay)
        while True:
            try:
                outcome = await self.probe(policy.probe, policy.timeout, env, cwd, wrap)
            except asyncio.CancelledError:
                raise
            except Exception as e:  # a probe that cannot even start failed
                outcome = Outcome(False, None, f"{policy.probe.describe()} could not run: {e}")
            self.on_outcome(fid, tid, policy, outcome)
            await asyncio.sleep(policy.interval)

    async def probe(
        self,
        probe: Probe,
        limit: float,
        env: Mapping[str, str],
        cwd: Path,
        wrap: Callable[[tuple[str, ...]], tuple[str, ...]] | None = None,
    ) -> Outcome:
        if probe.kind == "COMMAND":
            return await self._command(probe, limit, env, cwd, wrap)
        if probe.kind == "HTTP":
            return await self._http(probe, limit)
        return await self._tcp(probe, limit)

    async def _command(
        self,
        probe: Probe,
        limit: float,
        env: Mapping[str, str],
        cwd: Path,
        wrap: Callable[[tuple[str, ...]], tuple[str, ...]] | None,
    ) -> Outcome:
        from agent.taskspec import command_spec

        cmd = command_spec(probe.command) if probe.command is not None else None
        assert cmd is not None
        argv = cmd.argv
        if wrap is not None:
            argv = wrap(argv)
        full_env = {**env, **dict(cmd.environment)}
        proc = await asyncio.create_subprocess_exec(
            *argv, env=full_env, cwd=cwd, stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL, start_new_session=True,
        )
        try:
            code = await asyncio.wait_for(proc.wait(), limit or None)
        except (TimeoutError, asyncio.CancelledError) as e:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            await proc.wait()
            if isinstance(e, asyncio.CancelledError):
                raise
            return Outcome(False, None, f"{probe.describe()} did not finish within {limit:g} s")
        code = 128 - code if code < 0 else code
        if code == 0:
            return Outcome(True, 0)
        return Outcome(False, code, f"{probe.describe()} exited with status {code}")

    async def _http(self, probe: Probe, limit: float) -> Outcome:
        if self._session is None:
            self._session = aiohttp.ClientSession()
        url = f"{probe.scheme}://127.0.0.1:{probe.port}{probe.path}"
        try:
            async with self._session.get(
                url, ssl=False, allow_redirects=True,
                timeout=aiohttp.ClientTimeout(total=limit or None),
            ) as resp:
                code = resp.status
        except TimeoutError:
            return Outcome(False, None, f"{probe.describe()} got no answer within {limit:g} s")
        except (aiohttp.ClientError, OSError) as e:
            return Outcome(False, None, f"{probe.describe()} failed: {e}")
        if probe.http_ok(code):
            return Outcome(True, code)
        return Outcome(False, code, f"{probe.describe()} answered {code}")

    async def _tcp(self, probe: Probe, limit: float) -> Outcome:
        try:
            _reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", probe.port), limit or None)
        except TimeoutError:
            return Outcome(False, 0, f"{probe.describe()} not open within {limit:g} s")
        except OSError as e:
            return Outcome(False, 0, f"{probe.describe()} failed: {e.strerror or e}")
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()
        return Outcome(True, 1)
