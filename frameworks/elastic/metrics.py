"""Prometheus metrics of the elastic framework service (``GET /metrics``), read from the core at
scrape time: jobs by state, workers per job and kind, worker endings, training figures."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Protocol

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from frameworks.elastic.state import JobState

if TYPE_CHECKING:
    from frameworks.elastic.service_core import ElasticCore
    from frameworks.kit.host import Connection

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class Scraped(Protocol):
    """What the collector reads at scrape time (the elastic service, never changed)."""

    @property
    def core(self) -> ElasticCore: ...

    @property
    def rounds(self) -> int: ...

    @property
    def auth_failures(self) -> dict[str, int]: ...

    def connection(self) -> Connection: ...


class ElasticCollector(Collector):
    def __init__(self, service: Scraped) -> None:
        self.service = service

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        svc = self.service
        core = svc.core
        up = GaugeMetricFamily("agora_elastic_connected", "1 while subscribed to the master")
        up.add_metric([], 1.0 if svc.connection().connected else 0.0)
        yield up
        rounds = CounterMetricFamily("agora_elastic_rounds", "Scheduling rounds run")
        rounds.add_metric([], float(svc.rounds))
        yield rounds
        states = GaugeMetricFamily("agora_elastic_jobs", "Jobs by state", labels=["state"])
        for st in JobState:
            states.add_metric([st.value], float(sum(1 for j in core.jobs.values() if j.state is st)))
        yield states
        workers = GaugeMetricFamily(
            "agora_elastic_workers",
            "Workers of a live job (launched, not being killed)",
            labels=["job", "kind"],
        )
        bounds = GaugeMetricFamily(
            "agora_elastic_worker_bounds", "A live job's worker range", labels=["job", "bound"]
        )
        endings = CounterMetricFamily(
            "agora_elastic_worker_events", "Worker launches and endings", labels=["job", "event"]
        )
        figures = GaugeMetricFamily(
            "agora_elastic_training", "Training figures of a live job", labels=["job", "figure"]
        )
        for j in core.jobs.values():
            jid = str(j.job_id)
            for event, n in sorted(j.counts.items()):
                endings.add_metric([jid, event], float(n))
            if j.terminal:
                continue
            workers.add_metric([jid, "regular"], float(j.counted(False)))
            workers.add_metric([jid, "revocable"], float(j.counted(True)))
            bounds.add_metric([jid, "min"], float(j.spec.scaling.min_workers))
            bounds.add_metric([jid, "max"], float(j.spec.scaling.max_workers))
            for key in ("samples_per_second", "loss", "accuracy", "progress", "generation"):
                value = j.progress.get(key)
                if isinstance(value, int | float):
                    figures.add_metric([jid, key], float(value))
        yield workers
        yield bounds
        yield endings
        yield figures


def registry(service: Scraped) -> CollectorRegistry:
    reg = CollectorRegistry(auto_describe=False)
    reg.register(ElasticCollector(service))
    return reg


def render(reg: CollectorRegistry) -> bytes:
    return generate_latest(reg)
