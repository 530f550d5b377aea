"""The batch service's HTTP API works without a master: submissions are durable, listed,
shown with reasons, cancelled, validated with clear errors, and survive a restart."""

from __future__ import annotations

from pathlib import Path

import aiohttp
import msgpack

from frameworks.batch.service import BatchService

NO_MASTER = "127.0.0.1:9"  # discard port: nothing listens; the driver keeps retrying quietly


async def test_submit_list_show_cancel_and_restart(tmp_path: Path) -> None:
    async with BatchService(NO_MASTER, tmp_path) as svc, aiohttp.ClientSession() as http:
        r = await http.post(f"{svc.url}/api/v1/jobs", json={"argv": ["true"], "count": 3, "cpus": 0.5})
        assert r.status == 201
        first = (await r.json())["id"]
        r = await http.post(
            f"{svc.url}/api/v1/jobs",
            data=msgpack.packb({"shell": "echo hi", "after": [first]}),
            headers={"Content-Type": "application/x-msgpack", "Accept": "application/x-msgpack"},
        )
        assert r.status == 201
        second = msgpack.unpackb(await r.read())["id"]
        assert second == first + 1

        r = await http.post(f"{svc.url}/api/v1/jobs", json={"argv": ["true"], "cpus": -1})
        assert r.status == 400
        assert "cpus" in (await r.json())["error"]
        r = await http.post(f"{svc.url}/api/v1/jobs", data=b"{not json", headers={"Content-Type": "application/json"})
        assert r.status == 400

        r = await http.post(f"{svc.url}/api/v1/jobs", json={"argv": ["true"], "after": [99]})
        assert r.status == 400 and (await r.json())["error"] == "after: no job 99"
        r = await http.get(f"{svc.url}/api/v1/jobs?state=bogus")
        assert r.status == 400
        assert (await r.json())["error"] == (
            "state: unknown job state 'bogus' (one of PENDING, RUNNING, SUCCEEDED, FAILED, CANCELLED)"
        )
        pending = await (await http.get(f"{svc.url}/api/v1/jobs?state=pending")).json()
        assert [j["id"] for j in pending["jobs"]] == [first, second]

        listing = await (await http.get(f"{svc.url}/api/v1/jobs")).json()
        assert [(j["id"], j["state"], j["count"]) for j in listing["jobs"]] == [
            (first, "PENDING", 3),
            (second, "PENDING", 1),
        ]
        detail = await (await http.get(f"{svc.url}/api/v1/jobs/{first}")).json()
        assert detail["spec"]["argv"] == ["true"] and len(detail["task_list"]) == 3
        # Pollers ask for the summary (no tasks) or one task.
        summary = await (await http.get(f"{svc.url}/api/v1/jobs/{first}?summary=1")).json()
        assert "task_list" not in summary and summary["tasks"] == {"PENDING": 3}
        assert {k: v for k, v in detail.items() if k not in ("spec", "task_list", "changes")} == summary
        one = await (await http.get(f"{svc.url}/api/v1/jobs/{first}?task=2")).json()
        assert [t["index"] for t in one["task_list"]] == [2] and one["task_list"][0]["phase"] == "PENDING"
        assert (await http.get(f"{svc.url}/api/v1/jobs/{first}?task=3")).status == 404
        assert (await http.get(f"{svc.url}/api/v1/jobs/{first}?task=x")).status == 400

        r = await http.post(f"{svc.url}/api/v1/jobs/{first}/cancel")
        assert (await r.json())["state"] == "CANCELLED"
        r = await http.post(f"{svc.url}/api/v1/jobs/{first}/cancel")
        assert r.status == 409
        assert (await http.get(f"{svc.url}/api/v1/jobs/999")).status == 404
        # The dependent job can never run now: it is cancelled with the reason.
        dep = await (await http.get(f"{svc.url}/api/v1/jobs/{second}")).json()
        assert dep["state"] == "CANCELLED" and dep["reason"] == f"dependency job {first} cancelled"

    async with BatchService(NO_MASTER, tmp_path) as svc, aiohttp.ClientSession() as http:
        listing = await (await http.get(f"{svc.url}/api/v1/jobs")).json()
        assert [(j["id"], j["state"]) for j in listing["jobs"]] == [(first, "CANCELLED"), (second, "CANCELLED")]
        r = await http.post(f"{svc.url}/api/v1/jobs", json={"argv": ["true"]})
        assert (await r.json())["id"] == second + 1
