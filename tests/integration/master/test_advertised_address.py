"""A master bound to a wildcard publishes (and compares itself to the leader by) its advertised
address: standbys and pymesos read MasterInfo.address from ZooKeeper (protocol/detector.py)."""

from __future__ import annotations

import socket
from pathlib import Path

import aiohttp

from master.service import MasterService
from protocol import codec
from protocol.detector import master_address

from .conftest import master_config


async def test_a_wildcard_bind_publishes_the_resolved_hostname(tmp_path: Path) -> None:
    svc = MasterService(master_config(tmp_path / "m", ip="0.0.0.0", hostname="localhost"))
    await svc.start()
    try:
        expect = socket.gethostbyname("localhost")
        info = svc.state.master_info
        assert info.address is not None and info.address.ip == expect and info.address.hostname == "localhost"
        assert info.pid == f"master@{expect}:{svc.port}"
        # what a detector (a standby, pymesos) reads is what the master calls itself
        published = master_address(codec.encode_json(info))
        assert published == f"{expect}:{svc.port}" == svc._own_address()
        async with aiohttp.ClientSession() as s, s.get(
            f"http://127.0.0.1:{svc.port}/redirect", allow_redirects=False
        ) as r:
            assert r.status == 307 and r.headers["Location"] == f"//localhost:{svc.port}"
    finally:
        await svc.stop()
