"""Service jobs from Python: the library's equivalent of ``agora job submit --service CMD
--inputs FILE`` and ``agora job results`` (the batch service's HTTP API; standard library only)::

    from frameworks.service.client import ServiceClient

    client = ServiceClient("http://127.0.0.1:5051")          # the batch service (agora job's --batch)
    squares = client.map("python square.py", [str(i) for i in range(10_000)], count=2, retries=1)

    job = client.submit("python square.py", inputs, count=4)  # or step by step
    client.wait(job)
    for r in client.results(job):                             # in input order
        print(r.index, r.state, r.result)

``map`` returns the results in input order, or raises ``ServiceJobFailed`` naming the service
tasks that failed (with their messages) and carrying every result. Authentication as the CLI:
``token`` (Bearer) or ``principal`` with ``secret`` (HTTP Basic); ``ca``: the cluster CA of an
https service.
"""

from __future__ import annotations

import base64
import json
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import attrs

TERMINAL = frozenset({"SUCCEEDED", "FAILED", "CANCELLED"})


class ServiceError(RuntimeError):
    """The batch service refused a call (its status and message) or could not be reached."""


@attrs.frozen
class ServiceResult:
    index: int
    input: str
    state: str  # DONE, FAILED, CANCELLED (PENDING or SENT while the job runs)
    result: str | None  # the result line, or why it failed
    failures: int
    sends: int
    sent_at: float | None
    ended_at: float | None


class ServiceJobFailed(ServiceError):
    def __init__(self, job_id: int, job: Mapping[str, Any], results: list[ServiceResult]) -> None:
        bad = [r for r in results if r.state != "DONE"]
        shown = "; ".join(f"#{r.index} {r.input!r}: {r.state.lower()}: {r.result}" for r in bad[:5])
        more = f" (and {len(bad) - 5} more)" if len(bad) > 5 else ""
        super().__init__(f"service job {job_id} {str(job.get('state')).lower()}: {job.get('reason')}: {shown}{more}")
        self.job_id = job_id
        self.results = results


class ServiceClient:
    def __init__(
        self, batch_url: str, *, token: str | None = None, principal: str | None = None, secret: str | None = None,
        ca: str | None = None, timeout: float = 60.0,
    ) -> None:
        self.url = batch_url.rstrip("/")
        self.timeout = timeout
        self.ssl = ssl.create_default_context(cafile=ca) if ca else None  # an https service: the cluster CA
        self.headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if token:
            self.headers["Authorization"] = f"Bearer {token}"
        elif principal is not None and secret is not None:
            basic = base64.b64encode(f"{principal}:{secret}".encode()).decode()
            self.headers["Authorization"] = f"Basic {basic}"

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.url + path, data=data, method=method, headers=self.headers)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout, context=self.ssl) as resp:
                return json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            try:
                message = json.loads(exc.read()).get("error", exc.reason)
            except (ValueError, AttributeError):
                message = exc.reason
            raise ServiceError(f"{method} {path}: {exc.code} {message}") from None
        except (urllib.error.URLError, OSError) as exc:
            raise ServiceError(f"cannot reach the batch service at {self.url}: {exc}") from None

    def submit(
        self, command: str, inputs: Sequence[str], *, count: int = 1, cpus: float = 1.0, mem: float = 128.0,
        retries: int = 0, window: int | None = None, env: Mapping[str, str] | None = None, queue: str = "*",
        name: str | None = None, priority: int = 0,
    ) -> int:
        """Submit a service job: ``command`` (run by ``/bin/sh -c``) on ``count`` warm instances,
        one service task per input (a line of text). Returns the job id."""
        body: dict[str, Any] = {
            "shell": command, "service": True, "inputs": list(inputs), "count": count, "cpus": cpus, "mem": mem,
            "max_retries": retries, "env": dict(env or {}), "queue": queue, "priority": priority,
        }
        if window is not None:
            body["window"] = window
        if name:
            body["name"] = name
        return int(self._call("POST", "/api/v1/jobs", body)["id"])

    def job(self, job_id: int) -> dict[str, Any]:
        """The job's summary (state, reason, ...)."""
        out: dict[str, Any] = self._call("GET", f"/api/v1/jobs/{job_id}?summary=1")
        return out

    def wait(self, job_id: int, timeout: float | None = None, poll: float = 0.05) -> dict[str, Any]:
        """Until the job ends (its summary); ``ServiceError`` after ``timeout`` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            job = self.job(job_id)
            if job.get("state") in TERMINAL:
                return job
            if deadline is not None and time.monotonic() > deadline:
                raise ServiceError(f"service job {job_id} still {job.get('state')} after {timeout:g}s")
            time.sleep(min(poll, 1.0))
            poll = min(poll * 1.5, 1.0)

    def results(self, job_id: int, state: str | None = None) -> Iterator[ServiceResult]:
        """The job's service tasks in input order (of one ``state`` only, when given)."""
        offset: int | None = 0
        while offset is not None:
            query = {"offset": str(offset), "limit": "10000", **({"state": state} if state else {})}
            page = self._call("GET", f"/api/v1/jobs/{job_id}/results?{urllib.parse.urlencode(query)}")
            for t in page["tasks"]:
                yield ServiceResult(
                    t["index"], t["input"], t["state"], t["result"], t["failures"], t["sends"], t["sent_at"],
                    t["ended_at"],
                )
            offset = page.get("next")

    def cancel(self, job_id: int) -> None:
        self._call("POST", f"/api/v1/jobs/{job_id}/cancel", {})

    def map(self, command: str, inputs: Sequence[str], *, timeout: float | None = None, **submit: Any) -> list[str]:
        """Submit, wait, and return the results in input order; ``ServiceJobFailed`` when any
        service task did not succeed."""
        job_id = self.submit(command, inputs, **submit)
        job = self.wait(job_id, timeout)
        results = list(self.results(job_id))
        if job.get("state") != "SUCCEEDED" or any(r.state != "DONE" for r in results):
            raise ServiceJobFailed(job_id, job, results)
        return [r.result or "" for r in results]
