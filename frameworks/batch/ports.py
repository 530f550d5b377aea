"""What the batch service's HTTP API (``api.py``) may ask of the service: one narrow, typed port.

``BatchApi`` is given a ``BatchPort``, never the service: the queries it answers from (the jobs,
priorities, shares, expected starts, the store's accounting and kept log tails, an agent's
sandbox) and the commands it turns requests into (submit, cancel, hold, release, requeue, update,
kill an attempt), each command durable before it returns where the answer promises it.
``BatchService`` (``service.py``) implements it; a test about HTTP shapes may give the API a
small in-memory port instead (``tests/unit/batch/test_api_port.py``).

Requests name jobs that may not exist: ``job`` raises ``BatchError`` (404), a command the core
refuses raises ``BatchError`` (409) or ``SpecError`` (400, a bad field of an update).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any, Protocol

from frameworks.batch.config import BatchConfig
from frameworks.batch.fairshare import Factors, Share
from frameworks.batch.logtail import KeptTail
from frameworks.batch.model import JobSpec
from frameworks.batch.planner import AgentCapacity
from frameworks.batch.records import JobRecord
from frameworks.batch.store import AccountingQuery
from frameworks.client.api_auth import ApiAuth
from frameworks.kit.host import Connection, SandboxRead


class BatchQueries(Protocol):
    """What the API reads (never to change it)."""

    @property
    def auth(self) -> ApiAuth:
        """Who may call the API (``--credentials``/``--acls``), as read now."""

    @property
    def config(self) -> BatchConfig:
        """Users, fair share and limits (``--config``)."""

    @property
    def roles(self) -> tuple[str, ...]:
        """The roles the service subscribes with: the queues it serves."""

    @property
    def framework_name(self) -> str: ...

    @property
    def jobs(self) -> Mapping[int, JobRecord]:
        """Every job the service knows, by id."""

    @property
    def cluster(self) -> Sequence[AgentCapacity]:
        """The cluster's agents as last read from the master (empty: not read)."""

    @property
    def rounds(self) -> int:
        """Scheduling rounds run."""

    @property
    def flushes(self) -> int:
        """Store writes of task progress."""

    def now(self) -> float: ...

    def job(self, job_id: int) -> JobRecord:
        """The job (``BatchError``: no such job)."""

    def master_ui(self) -> str | None:
        """The master's web UI, linked from the pages."""

    def connection(self) -> Connection:
        """The framework id, whether subscribed, the master, offers held."""

    def priorities(self, now: float) -> dict[int, Factors]: ...

    def shares(self, now: float) -> dict[tuple[str, str], Share]: ...

    def admission(self, spec: JobSpec, user: str | None) -> str | None:
        """Why the limits refuse this submission, or None."""

    def expected_starts(self) -> dict[int, float | None]:
        """When each pending job is expected to start, on the offers held now."""

    def metrics_text(self) -> bytes:
        """``/metrics`` in the Prometheus text format."""

    async def read_cluster(self) -> None:
        """Read the cluster's agents from the master now (``cluster``)."""

    async def accounting(self, query: AccountingQuery) -> list[dict[str, Any]]: ...

    async def kept_tail(self, task_id: str, stream: str) -> KeptTail | None:
        """The tail of an ended attempt's output kept in the store (None: none kept)."""

    async def read_sandbox(self, agent_id: str | None, task_id: str, stream: str, offset: int,
                           length: int) -> SandboxRead:
        """A stream of an attempt's sandbox, read from its agent."""

    async def service_summary(self, job: JobRecord) -> dict[str, int] | None:
        """A service job's service-task counts (None: not a service job)."""

    async def service_results(self, job: JobRecord, offset: int, limit: int, state: str | None) -> dict[str, Any]:
        """A page of a service job's service tasks with their results."""

    def follow_events(self, since: int | None) -> AsyncIterator[dict[str, Any]]:
        """The job events as they happen (first the held ones numbered after ``since``)."""


class BatchCommands(Protocol):
    """What the API asks the service to do."""

    async def submit(self, specs: list[JobSpec], owner: str, verified: bool, inputs: list[str] | None) -> list[int]:
        """Create the jobs (all or none; ``BatchError`` refuses them), durable before it returns.
        ``verified``: ``owner`` is an authenticated principal (``run_as`` trusts it)."""

    async def hold(self, job_id: int, who: str) -> None: ...

    async def release(self, job_id: int, who: str) -> None: ...

    async def requeue(self, job_id: int, who: str) -> None: ...

    async def update(self, job_id: int, changes: Mapping[str, Any], who: str) -> None:
        """Change the job's fields (``SpecError``: a bad field), durable before it returns."""

    def cancel(self, job_id: int, who: str) -> None:
        """Cancel the job: its running attempts are killed (``BatchError``: it has ended)."""

    def kill_attempt(self, task_id: str, agent_id: str | None, why: str) -> None:
        """Kill one running attempt (it ends as a crash would)."""


class BatchPort(BatchQueries, BatchCommands, Protocol):
    """Everything ``BatchApi`` is given."""
