"""The batch HTTP API on an in-memory port: the API is given a ``BatchPort`` (never the service),
so the shapes of its answers are tested here over a real ``BatchCore`` with no store, no master
and no agents. The service itself is driven through the same API in tests/integration/batch."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from frameworks.batch.api import BatchApi
from frameworks.batch.config import BatchConfig
from frameworks.batch.core import BatchCore, Effect, Kill, Persist
from frameworks.batch.fairshare import Factors, Share
from frameworks.batch.logtail import KeptTail, kept
from frameworks.batch.model import JobSpec
from frameworks.batch.planner import AgentCapacity, OfferView
from frameworks.batch.ports import BatchPort
from frameworks.batch.records import JobRecord
from frameworks.batch.store import AccountingQuery
from frameworks.client.api_auth import ApiAuth
from frameworks.kit.host import Connection, SandboxRead
from protocol.resources import Resources
from protocol.task_states import TaskState


class MemoryBatch:
    """A ``BatchPort`` over a pure core: what is "written" and what goes to the master are lists."""

    def __init__(self) -> None:
        self.core = BatchCore()
        self.auth = ApiAuth()
        self.config = BatchConfig()
        self.roles: tuple[str, ...] = ("*",)
        self.framework_name = "agora-batch"
        self.rounds = 0
        self.flushes = 0
        self.clock = 100.0
        self.written: list[int] = []  # job ids, in the order they were made durable
        self.sent: list[Effect] = []  # effects for the master
        self.tails: dict[tuple[str, str], KeptTail] = {}
        self.sandbox = SandboxRead(status=503, reached=False)

    @property
    def jobs(self) -> Mapping[int, JobRecord]:
        return self.core.jobs

    @property
    def cluster(self) -> Sequence[AgentCapacity]:
        return self.core.cluster

    def now(self) -> float:
        return self.clock

    def job(self, job_id: int) -> JobRecord:
        return self.core.job(job_id)

    def master_ui(self) -> str | None:
        return None

    def connection(self) -> Connection:
        return Connection(framework_id="fw-1", connected=True, master="127.0.0.1:5050", offers=0)

    def priorities(self, now: float) -> dict[int, Factors]:
        return self.core.priorities(now)

    def shares(self, now: float) -> dict[tuple[str, str], Share]:
        return self.core.shares(now)

    def admission(self, spec: JobSpec, user: str | None) -> str | None:
        return self.core.admission(spec, user)

    def expected_starts(self) -> dict[int, float | None]:
        return self.core.expected_starts([], self.clock)

    def metrics_text(self) -> bytes:
        return b"# nothing\n"

    async def read_cluster(self) -> None:
        return None

    async def accounting(self, query: AccountingQuery) -> list[dict[str, Any]]:
        return []

    async def kept_tail(self, task_id: str, stream: str) -> KeptTail | None:
        return self.tails.get((task_id, stream))

    async def read_sandbox(self, agent_id: str | None, task_id: str, stream: str, offset: int,
                           length: int) -> SandboxRead:
        return self.sandbox

    async def service_summary(self, job: JobRecord) -> dict[str, int] | None:
        return None

    async def service_results(self, job: JobRecord, offset: int, limit: int, state: str | None) -> dict[str, Any]:
        return {"tasks": []}

    async def follow_events(self, since: int | None) -> AsyncIterator[dict[str, Any]]:
        yield {"seq": 1, "kind": "heartbeat"}

    def _apply(self, effects: list[Effect]) -> None:
        for e in effects:
            if isinstance(e, Persist):
                self.written += e.job_ids
            else:
                self.sent.append(e)

    async def submit(self, specs: list[JobSpec], owner: str, verified: bool, inputs: list[str] | None) -> list[int]:
        ids, effects = self.core.submit_many(specs, self.clock, owner, None)
        self.written += ids
        self._apply(effects)
        return ids

    async def hold(self, job_id: int, who: str) -> None:
        self._apply([Persist((job_id,)), *self.core.hold(job_id, self.clock, who)])

    async def release(self, job_id: int, who: str) -> None:
        self._apply([Persist((job_id,)), *self.core.release(job_id, self.clock, who)])

    async def requeue(self, job_id: int, who: str) -> None:
        self._apply([Persist((job_id,)), *self.core.requeue(job_id, self.clock, who)])

    async def update(self, job_id: int, changes: Mapping[str, Any], who: str) -> None:
        self._apply([Persist((job_id,)), *self.core.update(job_id, changes, self.clock, who)])

    def cancel(self, job_id: int, who: str) -> None:
        self._apply(self.core.cancel(job_id, self.clock, who))

    def kill_attempt(self, task_id: str, agent_id: str | None, why: str) -> None:
        self.sent.append(Kill(task_id, agent_id, why))


def _port(m: MemoryBatch) -> BatchPort:
    return m  # the in-memory port is a BatchPort (a missing member fails mypy here)


@pytest.fixture
async def api() -> AsyncIterator[tuple[MemoryBatch, aiohttp.ClientSession, str]]:
    port = MemoryBatch()
    app = web.Application()
    app.add_routes(BatchApi(_port(port)).routes())
    server = TestServer(app, host="127.0.0.1", port=0)
    await server.start_server()
    try:
        async with aiohttp.ClientSession() as http:
            yield port, http, str(server.make_url("")).rstrip("/")
    finally:
        await server.close()


SPEC = {"name": "hi", "shell": "echo hi", "cpus": 0.5, "mem": 64}


async def test_submit_answers_the_new_id_after_the_port_made_it_durable(
    api: tuple[MemoryBatch, aiohttp.ClientSession, str],
) -> None:
    port, http, url = api
    async with http.post(f"{url}/api/v1/jobs", json=SPEC, headers={"X-Agora-User": "ann"}) as resp:
        assert resp.status == 201 and await resp.json() == {"id": 1, "state": "PENDING"}
    assert port.written[0] == 1 and port.jobs[1].user == "ann"
    async with http.post(f"{url}/api/v1/jobs", json={"jobs": [SPEC, {**SPEC, "name": "two"}]}) as resp:
        body = await resp.json()
        assert resp.status == 201 and body["ids"] == [2, 3] and [j["name"] for j in body["jobs"]] == ["hi", "two"]
    async with http.get(f"{url}/api/v1/jobs", params={"state": "pending"}) as resp:
        assert [j["id"] for j in (await resp.json())["jobs"]] == [1, 2, 3]


async def test_refusals_are_answered_with_their_status_and_words(
    api: tuple[MemoryBatch, aiohttp.ClientSession, str],
) -> None:
    port, http, url = api
    async with http.post(f"{url}/api/v1/jobs", json={"name": "x"}) as resp:
        assert resp.status == 400 and "error" in await resp.json()
    async with http.post(f"{url}/api/v1/jobs", json={**SPEC, "queue": "gpu"}) as resp:
        assert resp.status == 400 and "queue 'gpu' is not served by agora-batch" in (await resp.json())["error"]
    async with http.get(f"{url}/api/v1/jobs/9") as resp:
        assert resp.status == 404 and await resp.json() == {"error": "no job 9"}
    async with http.get(f"{url}/api/v1/jobs", params={"state": "nope"}) as resp:
        assert resp.status == 400
    assert port.written == [] and port.sent == []


async def test_cancel_hold_and_kill_are_port_commands(api: tuple[MemoryBatch, aiohttp.ClientSession, str]) -> None:
    port, http, url = api
    async with http.post(f"{url}/api/v1/jobs", json=SPEC) as resp:
        assert resp.status == 201
    async with http.post(f"{url}/api/v1/jobs/1/hold") as resp:
        assert resp.status == 200 and (await resp.json())["id"] == 1
    assert port.jobs[1].held
    async with http.post(f"{url}/api/v1/jobs/1/release") as resp:
        assert resp.status == 200 and not port.jobs[1].held
    async with http.post(f"{url}/api/v1/jobs/1/tasks/0/kill") as resp:
        assert resp.status == 409  # nothing runs
    async with http.post(f"{url}/api/v1/jobs/1/cancel") as resp:
        assert resp.status == 200 and (await resp.json())["state"] == "CANCELLED"
    async with http.post(f"{url}/api/v1/jobs/1/cancel") as resp:
        assert resp.status == 409
    async with http.get(f"{url}/api/v1/framework") as resp:
        assert await resp.json() == {
            "framework_id": "fw-1", "connected": True, "master": "127.0.0.1:5050", "jobs": {"CANCELLED": 1},
            "offers": 0, "rounds": 0, "flushes": 0,
        }


async def test_logs_fall_back_to_the_kept_tail_when_the_agent_is_out_of_reach(
    api: tuple[MemoryBatch, aiohttp.ClientSession, str],
) -> None:
    port, http, url = api
    jid, _ = port.core.submit(JobSpec(name="t", argv=("true",), cpus=1.0, mem=64.0), port.clock)
    async with http.get(f"{url}/api/v1/jobs/{jid}/logs") as resp:
        assert resp.status == 404 and "has not started" in (await resp.json())["error"]
    offer = OfferView("o1", "a1", "h1", "*", Resources.of(cpus=2.0, mem=512.0))
    port.core.schedule([offer], port.clock)
    attempt = port.jobs[jid].tasks[0].current
    assert attempt is not None
    task_id = attempt.task_id
    port.core.on_update(task_id, TaskState.TASK_RUNNING, port.clock, agent_id="a1")
    async with http.get(f"{url}/api/v1/jobs/{jid}/logs") as resp:
        assert resp.status == 503 and await resp.json() == {"error": "agent a1 is not reachable from here"}
    port.tails[(task_id, "stdout")] = kept(0, b"hello\n")
    async with http.get(f"{url}/api/v1/jobs/{jid}/logs") as resp:
        body = await resp.json()
        assert body["data"] == "hello\n" and body["kept"]["to"] == 6 and body["task"] == 0
    port.sandbox = SandboxRead(data={"data": "live", "offset": 0})
    async with http.get(f"{url}/api/v1/jobs/{jid}/logs") as resp:
        assert await resp.json() == {"task": 0, "attempt": 0, "stream": "stdout", "data": "live", "offset": 0}
    port.sandbox = SandboxRead(status=500, error="boom")
    async with http.get(f"{url}/api/v1/jobs/{jid}/logs") as resp:
        assert resp.status == 500 and await resp.json() == {"error": "boom"}
