"""Prometheus metrics of the batch framework service (``GET /metrics``), read from the core at
scrape time, plus the wait-time histogram the service observes as tasks start:

- ``agora_batch_jobs{state}``: jobs by state;
- ``agora_batch_pending_jobs{queue,user}`` and ``agora_batch_pending_tasks{queue,user}``: what
  waits (a job is pending while none of its tasks runs);
- ``agora_batch_running_tasks{queue,user}``: tasks launching or running;
- ``agora_batch_task_wait_seconds{queue}`` (histogram): from submission to a task's first start;
- ``agora_batch_fairshare{queue,user}`` (the factor F), ``agora_batch_usage{queue,user}`` (decayed
  billing usage) and ``agora_batch_job_priority{job,queue,user}`` (each pending job's rank);
- ``agora_batch_connected``, ``agora_batch_rounds_total``, ``agora_batch_auth_failures_total``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Protocol

from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from frameworks.batch.model import JobState

if TYPE_CHECKING:
    from frameworks.batch.core import BatchCore
    from frameworks.kit.host import Connection

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class Scraped(Protocol):
    """What the collector reads at scrape time (the batch service, never changed)."""

    @property
    def core(self) -> BatchCore: ...

    @property
    def rounds(self) -> int: ...

    @property
    def auth_failures(self) -> dict[str, int]: ...

    def now(self) -> float: ...

    def connection(self) -> Connection: ...
WAIT_BUCKETS = (0.1, 0.5, 1.0, 5.0, 15.0, 60.0, 300.0, 900.0, 3600.0, 4 * 3600.0, 24 * 3600.0)


class BatchCollector(Collector):
    def __init__(self, service: Scraped) -> None:
        self.service = service

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        svc = self.service
        core = svc.core
        now = svc.now()
        up = GaugeMetricFamily("agora_batch_connected", "1 while subscribed to the master")
        up.add_metric([], 1.0 if svc.connection().connected else 0.0)
        yield up
        rounds = CounterMetricFamily("agora_batch_rounds", "Scheduling rounds run")
        rounds.add_metric([], float(svc.rounds))
        yield rounds
        failures = CounterMetricFamily("agora_batch_auth_failures", "API calls refused 401")
        failures.add_metric([], float(svc.auth_failures.get("api", 0)))
        yield failures
        states = GaugeMetricFamily("agora_batch_jobs", "Jobs by state", labels=["state"])
        by_state: dict[str, int] = {}
        for j in core.jobs.values():
            by_state[j.state.value] = by_state.get(j.state.value, 0) + 1
        for st in JobState:
            states.add_metric([st.value], float(by_state.get(st.value, 0)))
        yield states
        pending_jobs: dict[tuple[str, str], int] = {}
        pending_tasks: dict[tuple[str, str], int] = {}
        running: dict[tuple[str, str], int] = {}
        for j in core.live.values():
            if j.periodic:
                continue
            key = (j.spec.queue, j.user or "")
            if not j.active:
                pending_jobs[key] = pending_jobs.get(key, 0) + 1
            pending_tasks[key] = pending_tasks.get(key, 0) + len(j.pending)
            running[key] = running.get(key, 0) + len(j.active)
        for name, doc, values in (
            ("agora_batch_pending_jobs", "Live jobs none of whose tasks runs, per queue and user", pending_jobs),
            ("agora_batch_pending_tasks", "Tasks waiting to be placed, per queue and user", pending_tasks),
            ("agora_batch_running_tasks", "Tasks launching or running, per queue and user", running),
        ):
            g = GaugeMetricFamily(name, doc, labels=["queue", "user"])
            for (queue, user), n in sorted(values.items()):
                g.add_metric([queue, user], float(n))
            yield g
        shares = core.shares(now)
        factor = GaugeMetricFamily("agora_batch_fairshare", "Fair-share factor F = 2^(-U/S)", labels=["queue", "user"])
        usage = GaugeMetricFamily("agora_batch_usage", "Decayed usage (billing units)", labels=["queue", "user"])
        for (queue, user), s in sorted(shares.items()):
            factor.add_metric([queue, user], s.factor)
            usage.add_metric([queue, user], s.usage.billing)
        yield factor
        yield usage
        prio = GaugeMetricFamily("agora_batch_job_priority", "A pending job's multifactor priority",
                                 labels=["job", "queue", "user"])
        for job_id, f in sorted(core.priorities(now).items()):
            job = core.jobs[job_id]
            if job.pending and not job.periodic:
                prio.add_metric([str(job_id), f.queue, f.user], f.total)
        yield prio


class BatchMetrics:
    """The service's registry: the collector above and the wait-time histogram."""

    def __init__(self, service: Scraped) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(BatchCollector(service))
        self.wait = Histogram(
            "agora_batch_task_wait_seconds", "Seconds from a job's submission to its task's first start",
            ["queue"], buckets=WAIT_BUCKETS, registry=self.registry,
        )

    def render(self) -> bytes:
        return generate_latest(self.registry)
