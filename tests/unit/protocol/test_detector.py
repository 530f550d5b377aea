"""The leader-detection rules (``protocol.detector``): zk:// URLs, which znode leads, what a
MasterInfo znode says, and the redirect a standby answers (``master.ha.LeaderRedirect``)."""

from __future__ import annotations

import json

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from master.ha import LeaderRedirect
from protocol.detector import (
    DetectorError,
    MasterResolver,
    ZkUrl,
    is_zk_url,
    leader_node,
    master_address,
    parse_zk_url,
)


def test_zk_urls_parse_like_mesos() -> None:
    assert parse_zk_url("zk://127.0.0.1:2181/agora") == ZkUrl("127.0.0.1:2181", "/agora")
    assert parse_zk_url("zk://a:1,b:2,c:3/mesos/prod/") == ZkUrl("a:1,b:2,c:3", "/mesos/prod")
    assert parse_zk_url("zoo://h:2181/x").url == "zk://h:2181/x"
    assert is_zk_url(" zk://h:1/p") and not is_zk_url("127.0.0.1:5050") and not is_zk_url("http://h:1")


@pytest.mark.parametrize(
    "bad", ["http://h:1/p", "zk://h:1", "zk://h:1/", "zk:///p", "zk://h/p", "zk://h:x/p", "zk://u:pw@h:1/p"]
)
def test_bad_zk_urls_are_refused(bad: str) -> None:
    with pytest.raises(DetectorError):
        parse_zk_url(bad)


def test_the_lowest_info_sequence_leads_and_other_children_are_ignored() -> None:
    assert leader_node([]) is None
    assert leader_node(["log_replicas"]) is None
    kids = ["json.info_0000000012", "log_replicas", "json.info_0000000003", "json.info_x", "info_0000000001"]
    assert leader_node(kids) == "json.info_0000000003"
    # numeric, not lexical, past the 10 digits ZooKeeper pads to
    assert leader_node(["json.info_10000000000", "json.info_9999999999"]) == "json.info_9999999999"


def test_master_address_reads_mesos_master_info_json() -> None:
    info = {"id": "m", "ip": 16777343, "port": 5050, "hostname": "box", "address": {"ip": "127.0.0.1", "port": 5050, "hostname": "box"}}
    assert master_address(json.dumps(info).encode()) == "127.0.0.1:5050"
    assert master_address(json.dumps({"hostname": "box", "port": 7}).encode()) == "box:7"
    assert master_address(b"master@127.0.0.1:5050") is None  # pre-JSON Mesos: unsupported
    assert master_address(b"\xff") is None
    assert master_address(b"[1]") is None
    assert master_address(json.dumps({"address": {"ip": "h", "port": 0}}).encode()) is None


async def test_a_fixed_master_resolves_to_itself() -> None:
    r = MasterResolver("127.0.0.1:5050")
    assert not r.is_zk
    assert await r.resolve() == "127.0.0.1:5050"
    await r.close()


async def _client(leading: bool, leader: str | None) -> TestClient[web.Request, web.Application]:
    app = web.Application(middlewares=[LeaderRedirect(lambda: leading, lambda: leader, lambda: "me:1").middleware()])

    async def ok(request: web.Request) -> web.Response:
        return web.Response(text="served")

    app.router.add_route("*", "/{tail:.*}", ok)
    client = TestClient(TestServer(app))
    await client.start_server()
    return client


@pytest.mark.parametrize(
    ("leading", "leader", "path", "status", "location"),
    [
        (False, "l:5050", "/api/v1/scheduler?a=b", 307, "//l:5050/api/v1/scheduler?a=b"),
        (False, "l:5050", "/state", 307, "//l:5050/state"),
        (False, "l:5050", "/api/v1/agent", 307, "//l:5050/api/v1/agent"),
        (False, "l:5050", "/redirect", 307, "//l:5050"),
        (False, None, "/api/v1/scheduler", 503, None),
        (False, "me:1", "/state", 503, None),  # our own old znode still leads
        (False, None, "/health", 200, None),
        (False, "l:5050", "/version", 200, None),
        (True, "me:1", "/api/v1/scheduler", 200, None),
    ],
)
async def test_a_standby_redirects_to_the_leader(
    leading: bool, leader: str | None, path: str, status: int, location: str | None
) -> None:
    client = await _client(leading, leader)
    try:
        r = await client.post(path, allow_redirects=False)
        assert r.status == status
        assert r.headers.get("Location") == location
        await r.release()
    finally:
        await client.close()
