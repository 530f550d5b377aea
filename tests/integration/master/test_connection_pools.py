"""Agent connections are counted apart from the general connection cap (schedulers, operators),
against their own cap; the defaults scale with the open-file limit and do not throttle one
framework below what the master serves."""

from __future__ import annotations

import resource
from pathlib import Path

import aiohttp
import pytest

from master.config import MasterConfig
from master.service import MasterService, agent_connection_cap
from master.testing_agent import FakeAgent
from protocol import agent_channel as ac

from ..cluster import master_config


async def test_agents_do_not_use_the_general_connection_cap(tmp_path: Path) -> None:
    svc = MasterService(master_config(tmp_path / "m", max_connections=3, max_agent_connections=6))
    await svc.start()
    agents = [FakeAgent(svc.url, "cpus:1;mem:128", hostname=f"h{i}") for i in range(6)]
    try:
        for a in agents:  # twice the general cap
            await a.connect()
        guard = svc.guard
        assert guard is not None
        await svc.wait_until(lambda: len(svc.state.agents) == 6)
        assert guard.agents == 6 and guard.active == 0 and guard.refused == 0
        # the general pool is untouched: clients are served
        async with aiohttp.ClientSession() as s:
            for _ in range(3):
                async with s.get(svc.url + "/health") as r:
                    assert r.status == 200
        # the seventh agent finds its own pool full: 503 (it retries with backoff)
        async with aiohttp.ClientSession() as s:
            with pytest.raises(aiohttp.WSServerHandshakeError) as e:
                await s.ws_connect(svc.url + ac.PATH)
            assert e.value.status == 503
        assert guard.agents_refused == 1 and guard.agents == 6
        # an agent that leaves frees its slot
        await agents[0].close()
        await guard.wait_until(lambda: guard.agents == 5, 5)
    finally:
        for a in agents:
            await a.close()
        await svc.stop()


def test_default_caps_scale_with_the_open_file_limit() -> None:
    cfg = MasterConfig()
    assert cfg.max_agent_connections == 0 and cfg.max_connections == 1000
    cap = agent_connection_cap(cfg)
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)  # raised by agent_connection_cap
    assert cap == max(100, soft - 256 - min(1000, soft // 10))
    # a config lifting the general cap far above the file limit does not starve the agents
    assert agent_connection_cap(cfg.replace(max_connections=10 * soft)) == max(100, soft - 256 - soft // 10)
    assert agent_connection_cap(cfg.replace(max_agent_connections=7)) == 7
    # one framework may use what the master serves (~5,000 calls/s), bounded all the same
    assert cfg.rate_limit_qps == 5000.0 and cfg.rate_limit_burst == 10000.0
