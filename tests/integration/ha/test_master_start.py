"""A master started with ``--zk`` and no reachable ZooKeeper fails to start with a clear message
(and leaves nothing running), and a bad ``--zk`` URL is a configuration error."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from master.config import ConfigError, MasterConfig, load
from master.service import MasterService


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_unreachable_zookeeper_fails_the_start(tmp_path: Path) -> None:
    cfg = MasterConfig(ip="127.0.0.1", port=0, work_dir=str(tmp_path), zk=f"zk://127.0.0.1:{_closed_port()}/agora",
                       zk_session_timeout=0.5)
    svc = MasterService(cfg)
    with pytest.raises(OSError, match="cannot reach ZooKeeper at 127"):
        await svc.start()
    assert not svc.running and svc.election is not None and svc.registry is None


def test_bad_zk_urls_are_config_errors() -> None:
    assert load(None, zk="zk://h:2181/agora", zk_session_timeout=2).zk_session_timeout == 2.0
    with pytest.raises(ConfigError, match="--zk"):
        load(None, zk="zk://h:2181")
    with pytest.raises(ConfigError, match="zk_session_timeout"):
        load(None, zk="zk://h:2181/a", zk_session_timeout=0)
