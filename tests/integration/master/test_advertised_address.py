"""A master publishes (and compares itself to the leader by) its advertised address, not the
address it binds: standbys and pymesos read MasterInfo.address from ZooKeeper
(protocol/detector.py). The wildcard-bind rule itself (0.0.0.0 -> the resolved hostname) is
tested without binding a wildcard in tests/unit/master/test_advertised_address.py; here the master
binds 127.0.0.1 and advertises another loopback address."""

from __future__ import annotations

from pathlib import Path

import aiohttp

from master.service import MasterService
from protocol import codec
from protocol.detector import master_address

from ..cluster import master_config


async def test_the_master_publishes_its_advertised_address(tmp_path: Path) -> None:
    svc = MasterService(master_config(tmp_path / "m", ip="127.0.0.1", hostname="localhost", advertise_ip="127.0.0.2"))
    await svc.start()
    try:
        expect = "127.0.0.2"
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
