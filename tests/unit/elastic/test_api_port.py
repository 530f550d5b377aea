"""The elastic HTTP API on an in-memory port: the API is given an ``ElasticPort`` (never the
service), so the shapes of its answers are tested here over a real ``ElasticCore`` with no store,
master, coordinators or agents. The service itself is driven through the same API in
tests/harness/elastic and tests/integration/elastic."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from frameworks.client.api_auth import ApiAuth
from frameworks.elastic.api import ElasticApi
from frameworks.elastic.effects import Effect
from frameworks.elastic.jobs import Job
from frameworks.elastic.ports import ElasticPort
from frameworks.elastic.service_core import ElasticCore
from frameworks.elastic.spec import JobSpec
from frameworks.kit.host import Connection, SandboxRead


class MemoryElastic:
    """An ``ElasticPort`` over a pure core: what is written and decided are lists."""

    def __init__(self) -> None:
        self.core = ElasticCore()
        self.auth = ApiAuth()
        self.roles: tuple[str, ...] = ("*",)
        self.clock = 50.0
        self.written: list[int] = []
        self.effects: list[Effect] = []
        self.status: dict[int, dict[str, Any]] = {}

    @property
    def jobs(self) -> Mapping[int, Job]:
        return self.core.jobs

    def job(self, job_id: int) -> Job:
        return self.core.job(job_id)

    def master_ui(self) -> str | None:
        return None

    def connection(self) -> Connection:
        return Connection(framework_id=None, connected=False, master="127.0.0.1:5050", offers=0)

    def coordinator_urls(self) -> dict[int, str]:
        return {k: f"http://127.0.0.1:{9000 + k}" for k in self.status}

    def coordinator_status(self, job_id: int) -> dict[str, Any] | None:
        return self.status.get(job_id)

    def metrics_text(self) -> bytes:
        return b"# nothing\n"

    async def read_sandbox(self, agent_id: str | None, task_id: str, stream: str, offset: int,
                           length: int) -> SandboxRead:
        return SandboxRead(status=503, reached=False)

    async def submit_durably(self, spec: JobSpec, owner: str | None) -> int:
        job_id, effects = self.core.submit(spec, self.clock, user=owner)
        self.effects += effects
        self.written.append(job_id)
        return job_id

    def scale(self, job_id: int, max_workers: int | None = None, min_workers: int | None = None) -> None:
        self.effects += self.core.scale(job_id, self.clock, max_workers=max_workers, min_workers=min_workers)

    def cancel(self, job_id: int) -> None:
        self.effects += self.core.cancel(job_id, self.clock)


def _port(m: MemoryElastic) -> ElasticPort:
    return m  # the in-memory port is an ElasticPort (a missing member fails mypy here)


@pytest.fixture
async def api() -> AsyncIterator[tuple[MemoryElastic, aiohttp.ClientSession, str]]:
    port = MemoryElastic()
    app = web.Application()
    app.add_routes(ElasticApi(_port(port)).routes())
    server = TestServer(app, host="127.0.0.1", port=0)
    await server.start_server()
    try:
        async with aiohttp.ClientSession() as http:
            yield port, http, str(server.make_url("")).rstrip("/")
    finally:
        await server.close()


SPEC = {"name": "j", "worker": {"command": "run", "cpus": 1, "mem": 100},
        "scaling": {"min_workers": 1, "max_workers": 3}}


async def test_submit_scale_cancel_through_the_port(api: tuple[MemoryElastic, aiohttp.ClientSession, str]) -> None:
    port, http, url = api
    async with http.post(f"{url}/api/v1/jobs", json=SPEC) as resp:
        assert resp.status == 201 and await resp.json() == {"id": 1, "state": "PENDING"}
    assert port.written == [1]
    async with http.post(f"{url}/api/v1/jobs/1/scale", json={"max_workers": 2}) as resp:
        assert resp.status == 200 and port.jobs[1].spec.scaling.max_workers == 2
    async with http.post(f"{url}/api/v1/jobs/1/scale", json={"max_workers": "two"}) as resp:
        assert resp.status == 400
    async with http.post(f"{url}/api/v1/jobs/1/cancel") as resp:
        assert resp.status == 200 and (await resp.json())["state"] == "CANCELLED"
    async with http.get(f"{url}/api/v1/framework") as resp:
        assert await resp.json() == {"framework_id": None, "connected": False, "master": "127.0.0.1:5050",
                                     "jobs": {"CANCELLED": 1}, "offers": 0, "coordinators": {}}


async def test_a_job_shows_its_coordinators_status_and_unknown_jobs_are_404(
    api: tuple[MemoryElastic, aiohttp.ClientSession, str],
) -> None:
    port, http, url = api
    async with http.get(f"{url}/api/v1/jobs/7") as resp:
        assert resp.status == 404
    async with http.post(f"{url}/api/v1/jobs/7/cancel") as resp:
        assert resp.status == 404
    async with http.post(f"{url}/api/v1/jobs", json=SPEC) as resp:
        assert resp.status == 201
    port.status[1] = {"generation": 3, "world_size": 2, "workers": [], "shards": {"done": 1, "set_aside_detail": []},
                      "log": [str(i) for i in range(20)]}
    async with http.get(f"{url}/api/v1/jobs/1") as resp:
        st = (await resp.json())["coordinator_status"]
        assert st == {"generation": 3, "world_size": 2, "workers": [], "shards": {"done": 1},
                      "log": [str(i) for i in range(5, 20)]}
    async with http.get(f"{url}/api/v1/framework") as resp:
        assert (await resp.json())["coordinators"] == {"1": "http://127.0.0.1:9001"}
    async with http.get(f"{url}/api/v1/jobs/1/logs") as resp:
        assert resp.status == 404  # no worker yet
