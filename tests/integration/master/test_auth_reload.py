"""Revoking credentials without a restart: SIGHUP makes the master re-read ``--credentials`` and
``--acls`` (``master.auth.reload_auth``) and the agent its ``--http-credentials``
(``agent.auth.reload_all``). A revoked token is refused from the next request on; a file that
fails to parse keeps the previous set (an error is logged; never fall open)."""

from __future__ import annotations

import asyncio
import json
import logging
import signal
import sys
from pathlib import Path

import aiohttp
import pytest

from master.auth import reload_auth
from master.service import MasterService
from master.testing_agent import FakeAgent
from protocol.authn import basic_header, bearer_header

from ..agent_process import stop_process
from ..cluster import master_config
from .test_auth import ACLS, AG, CREDENTIALS, OPS, get, write_auth_files


def revoke_ops(d: Path) -> None:
    creds = dict(CREDENTIALS, tokens=[t for t in CREDENTIALS["tokens"] if t["principal"] != "ops"])
    (d / "credentials.json").write_text(json.dumps(creds))


async def test_a_revoked_token_is_refused_at_once_and_a_bad_file_keeps_the_old_set(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    svc = MasterService(master_config(tmp_path / "master", **write_auth_files(tmp_path / "auth")))
    await svc.start()
    try:
        assert (await get(svc.url + "/state", OPS))[0] == 200
        revoke_ops(tmp_path / "auth")
        assert (await get(svc.url + "/state", OPS))[0] == 200  # nothing re-read until told
        assert await reload_auth(svc)
        assert (await get(svc.url + "/state", OPS))[0] == 401
        assert (await get(svc.url + "/state", basic_header("fw", "fw-secret")))[0] == 200
        # a file that does not parse (or is gone) keeps the set in force: the revocation stands
        # and nothing opens up
        (tmp_path / "auth" / "credentials.json").write_text('{"tokens": [')
        with caplog.at_level(logging.ERROR, logger="master.auth"):
            assert not await reload_auth(svc)
        assert "keeping the previous credentials and ACLs" in caplog.text
        (tmp_path / "auth" / "acls.json").unlink()
        assert not await reload_auth(svc)
        assert (await get(svc.url + "/state", OPS))[0] == 401
        assert (await get(svc.url + "/state"))[0] == 401
        assert (await get(svc.url + "/state", basic_header("fw", "fw-secret")))[0] == 200
        assert svc.counters["auth_reloads_total"] >= 1 and svc.counters["auth_reload_failures_total"] >= 1
    finally:
        await svc.stop()


async def test_reloaded_acls_reach_the_core(tmp_path: Path) -> None:
    svc = MasterService(master_config(tmp_path / "master", **write_auth_files(tmp_path / "auth")))
    await svc.start()
    first, second = FakeAgent(svc.url, authorization=AG), FakeAgent(svc.url, authorization=AG)
    try:
        await first.connect()
        acls = dict(ACLS, register_agents=[{"principals": {"values": ["ag2"]}, "agents": {"type": "ANY"}}])
        (tmp_path / "auth" / "acls.json").write_text(json.dumps(acls))
        assert await reload_auth(svc)
        with pytest.raises(ConnectionError):  # 'ag' may no longer register agents
            await second.connect()
        assert svc.state.unauthorized == 1 and len(svc.state.agents) == 1
    finally:
        await first.close()
        await second.close()
        await svc.stop()


async def _status(url: str, auth: str | None) -> int:
    async with aiohttp.ClientSession() as s, s.get(url, headers={"Authorization": auth} if auth else {}) as r:
        return r.status


async def _logged(stream: asyncio.StreamReader, text: bytes) -> None:
    async with asyncio.timeout(10):
        while text not in await stream.readline():
            pass


async def test_sighup_reloads_a_real_master(tmp_path: Path) -> None:
    files = write_auth_files(tmp_path / "auth")
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "master.main", "--ip", "127.0.0.1", "--port", "0", "--work-dir", str(tmp_path / "m"),
        "--credentials", str(files["credentials"]), "--acls", str(files["acls"]), "--authenticate-http-readonly",
        "--log-level", "INFO", stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        start_new_session=True,
    )
    try:
        assert proc.stdout is not None and proc.stderr is not None
        line = (await asyncio.wait_for(proc.stdout.readline(), 30)).decode().strip()
        url = line.rsplit(" ", 1)[-1]
        assert await _status(url + "/state", bearer_header("ops-token")) == 200
        revoke_ops(tmp_path / "auth")
        proc.send_signal(signal.SIGHUP)
        await _logged(proc.stderr, b"reload: ")  # the master's loop handled the signal
        assert await _status(url + "/state", bearer_header("ops-token")) == 401
        assert await _status(url + "/state", basic_header("fw", "fw-secret")) == 200
        (tmp_path / "auth" / "credentials.json").write_text("not json {")
        proc.send_signal(signal.SIGHUP)
        await _logged(proc.stderr, b"keeping the previous credentials")  # logged; the old set stays
        assert await _status(url + "/state", basic_header("fw", "fw-secret")) == 200
        assert await _status(url + "/state", bearer_header("ops-token")) == 401
        assert proc.returncode is None
    finally:
        await stop_process(proc)
