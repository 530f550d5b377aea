"""The scheduler endpoint's transport rules, in the order Mesos checks them, on a real master."""

from __future__ import annotations

import json
from pathlib import Path

import aiohttp

from master.service import MasterService
from protocol import codec, mesos

from ..cluster import master_config

SUB = {
    "type": "SUBSCRIBE",
    "subscribe": {"framework_info": {"user": "u", "name": "edge", "roles": ["*"],
                                     "capabilities": [{"type": "MULTI_ROLE"}], "failover_timeout": 100}},
}


async def post(s: aiohttp.ClientSession, url: str, body: bytes | str, **headers: str) -> tuple[int, str, dict[str, str]]:
    skip = [] if "Content-Type" in headers else ["Content-Type"]
    async with s.post(url + "/api/v1/scheduler", data=body, headers=headers, skip_auto_headers=skip) as r:
        return r.status, await r.text(), dict(r.headers)


async def test_transport_status_codes(master: MasterService) -> None:
    url = master.url
    async with aiohttp.ClientSession() as s:
        async with s.get(url + "/api/v1/scheduler") as r:
            assert r.status == 405 and r.headers["Allow"] == "POST"
        st, txt, _ = await post(s, url, b"{}")
        assert st == 400 and "Content-Type" in txt
        for ctype in ("application/x-protobuf", "text/plain"):
            st, _, _ = await post(s, url, b"{}", **{"Content-Type": ctype})
            assert st == 415
        st, txt, _ = await post(s, url, b"{not json", **{"Content-Type": "application/json"})
        assert st == 400 and txt.startswith("Failed to parse body into JSON")
        st, txt, _ = await post(s, url, json.dumps({"type": "SUBSCRIBE", "subscribe": {"framework_info": {"name": "x"}}}),
                                **{"Content-Type": "application/json"})
        assert st == 400 and txt.startswith("Failed to convert JSON into Call protobuf"), txt
        st, txt, _ = await post(s, url, json.dumps({"type": "ACCEPT"}), **{"Content-Type": "application/json"})
        assert st == 400 and txt.startswith("Failed to validate scheduler::Call"), txt
        st, _, _ = await post(s, url, json.dumps(SUB), **{"Content-Type": "application/json", "Accept": "application/x-protobuf"})
        assert st == 406
        st, txt, _ = await post(s, url, json.dumps(SUB), **{"Content-Type": "application/json", "Mesos-Stream-Id": "x"})
        assert st == 400 and "Mesos-Stream-Id" in txt
        kill = {"type": "KILL", "framework_id": {"value": "nope"}, "kill": {"task_id": {"value": "t"}}}
        st, txt, _ = await post(s, url, json.dumps(kill), **{"Content-Type": "application/json"})
        assert st == 400 and txt == "Framework cannot be found"
        # msgpack garbage and a msgpack bomb -> 400 at once
        for bad in (b"\xc1", b"\xdd\xff\xff\xff\xff", b"\xdb\xff\xff\xff\xff", b"\x91" * 20000):
            st, _, _ = await post(s, url, bad, **{"Content-Type": "application/x-msgpack"})
            assert st == 400
        # a real subscription
        async with s.post(url + "/api/v1/scheduler", data=json.dumps(SUB),
                          headers={"Content-Type": "application/json", "Accept": "application/json"}) as r:
            assert r.status == 200 and r.headers["Content-Type"] == "application/json"
            assert r.headers.get("Transfer-Encoding") == "chunked"
            sid = r.headers["Mesos-Stream-Id"]
            first = await r.content.readuntil(b"\n")
            rec = json.loads(await r.content.readexactly(int(first)))
            assert rec["type"] == "SUBSCRIBED" and rec["subscribed"]["heartbeat_interval_seconds"] == 1.0
            fid = rec["subscribed"]["framework_id"]["value"]
            assert rec["subscribed"]["master_info"]["version"] == "1.11.0"
            first = await r.content.readuntil(b"\n")
            assert json.loads(await r.content.readexactly(int(first))) == {"type": "HEARTBEAT"}
            kill["framework_id"] = {"value": fid}
            st, txt, _ = await post(s, url, json.dumps(kill), **{"Content-Type": "application/json"})
            assert st == 400 and "Mesos-Stream-Id" in txt
            st, txt, _ = await post(s, url, json.dumps(kill), **{"Content-Type": "application/json", "Mesos-Stream-Id": "other"})
            assert st == 400 and "didn't match" in txt
            st, txt, hdrs = await post(s, url, json.dumps(kill), **{"Content-Type": "application/json", "Mesos-Stream-Id": sid})
            assert st == 202 and txt == "" and hdrs["Content-Length"] == "0"
            # mesoshttp's REQUEST shape (top-level list) is accepted
            req = {"type": "REQUEST", "framework_id": {"value": fid}, "requests": [
                {"resources": [{"name": "cpus", "type": "SCALAR", "scalar": {"value": 1}}]}]}
            st, _, _ = await post(s, url, json.dumps(req), **{"Content-Type": "application/json", "Mesos-Stream-Id": sid})
            assert st == 202
        # stream gone -> framework disconnected -> 403
        await master.wait_until(lambda: not master.state.frameworks[fid].connected)
        st, txt, _ = await post(s, url, json.dumps(kill), **{"Content-Type": "application/json", "Mesos-Stream-Id": "x"})
        assert st == 403
        # a late call on the stream that just ended is accepted and ignored (pymesos dies on non-2xx)
        st, txt, _ = await post(s, url, json.dumps(kill), **{"Content-Type": "application/json", "Mesos-Stream-Id": sid})
        assert st == 202
        async with s.get(url + "/version") as r:
            v = await r.json()
            assert tuple(int(x) for x in v["version"].split(".")) == (1, 11, 0)
        async with s.get(url + "/redirect", allow_redirects=False) as r:
            assert r.status == 307 and r.headers["Location"] == f"//127.0.0.1:{master.port}"
        async with s.get(url + "/health") as r:
            assert r.status == 200


async def test_msgpack_stream_and_rate_limit(tmp_path: Path) -> None:
    svc = MasterService(master_config(tmp_path / "m", rate_limit_qps=1.0, rate_limit_burst=3.0))
    await svc.start()
    try:
        async with aiohttp.ClientSession() as s:
            info = mesos.FrameworkInfo(user="u", name="rl", principal="p1")
            body = codec.encode_msgpack(mesos.Call.make_subscribe(info))
            async with s.post(svc.url + "/api/v1/scheduler", data=body,
                              headers={"Content-Type": codec.MSGPACK, "Accept": codec.MSGPACK}) as r:
                assert r.status == 200 and r.headers["Content-Type"] == codec.MSGPACK
                sid = r.headers["Mesos-Stream-Id"]
                n = int(await r.content.readuntil(b"\n"))
                ev = codec.decode_msgpack(mesos.Event, await r.content.readexactly(n))
                assert ev.subscribed is not None
                fid = ev.subscribed.framework_id
                codes = []
                for _ in range(6):
                    call = codec.encode_msgpack(mesos.Call.make_revive(fid))
                    async with s.post(svc.url + "/api/v1/scheduler", data=call,
                                      headers={"Content-Type": codec.MSGPACK, "Mesos-Stream-Id": sid}) as rr:
                        codes.append(rr.status)
                assert codes[:2] == [202, 202] and 429 in codes  # past capacity: an error, not a crash
                assert svc.counters["rate_limited_total"] >= 1
                assert fid.value in svc.state.frameworks
    finally:
        await svc.stop()


async def test_json_stream_is_ascii_single_line_records(master: MasterService) -> None:
    """mesoshttp slices text by byte length, so records must be ASCII and
    contain no raw newline even when an agent's hostname is not ASCII."""
    from master.testing_agent import FakeAgent

    agent = FakeAgent(master.url, hostname="h\u00f4te-\u00e9\u4e2d")
    await agent.connect()
    try:
        async with aiohttp.ClientSession() as s, s.post(
            master.url + "/api/v1/scheduler", data=json.dumps(SUB),
            headers={"Content-Type": "application/json", "Accept": "application/json"},
        ) as r:
            types = []
            while "OFFERS" not in types:
                n = int(await r.content.readuntil(b"\n"))
                rec = await r.content.readexactly(n)
                assert rec.isascii() and b"\n" not in rec
                ev = json.loads(rec)
                types.append(ev["type"])
                if ev["type"] == "OFFERS":
                    assert ev["offers"]["offers"][0]["hostname"] == "h\u00f4te-\u00e9\u4e2d"
            assert types[:2] == ["SUBSCRIBED", "HEARTBEAT"]
    finally:
        await agent.close()
