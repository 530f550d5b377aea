"""What the elastic service's HTTP API (``api.py``) may ask of the service: one narrow, typed port.

``ElasticApi`` is given an ``ElasticPort``, never the service: the jobs and their coordinators'
status to answer from, an agent's sandbox for a worker's logs, and the commands a request turns
into (submit, scale, cancel). ``ElasticService`` (``service.py``) implements it; a test about HTTP
shapes may give the API a small in-memory port instead (``tests/unit/elastic/test_api_port.py``).

A request naming a job that does not exist gets ``NoSuchJob`` from ``job``; a command the core
refuses raises its ``ServiceError`` (the API maps each to an HTTP status, ``api.error_status``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from frameworks.client.api_auth import ApiAuth
from frameworks.elastic.jobs import Job
from frameworks.elastic.spec import JobSpec
from frameworks.kit.host import Connection, SandboxRead


class ElasticPort(Protocol):
    """Everything ``ElasticApi`` is given."""

    @property
    def auth(self) -> ApiAuth:
        """Who may call the API (``--credentials``/``--acls``), as read now."""

    @property
    def roles(self) -> tuple[str, ...]:
        """The roles the service subscribes with."""

    @property
    def jobs(self) -> Mapping[int, Job]:
        """Every job the service knows, by id."""

    def job(self, job_id: int) -> Job:
        """The job (``NoSuchJob``: none)."""

    def master_ui(self) -> str | None:
        """The master's web UI, linked from the pages."""

    def connection(self) -> Connection:
        """The framework id, whether subscribed, the master, offers held."""

    def coordinator_urls(self) -> dict[int, str]:
        """The coordinators running now, by job id."""

    def coordinator_status(self, job_id: int) -> dict[str, Any] | None:
        """The job's coordinator's status (generation, workers, shards, log; None: none runs)."""

    def metrics_text(self) -> bytes:
        """``/metrics`` in the Prometheus text format."""

    async def read_sandbox(self, agent_id: str | None, task_id: str, stream: str, offset: int,
                           length: int) -> SandboxRead:
        """A stream of a worker's sandbox, read from its agent."""

    async def submit_durably(self, spec: JobSpec, owner: str | None) -> int:
        """Submit the job and return its id once it is written."""

    def scale(self, job_id: int, max_workers: int | None = None, min_workers: int | None = None) -> None:
        """Change the job's worker range (``ServiceError``: refused)."""

    def cancel(self, job_id: int) -> None:
        """Cancel the job (``ServiceError``: refused)."""
