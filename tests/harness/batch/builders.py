"""Fluent builders for batch planner scenarios: ``job(1).cpus(2).count(4).gang(4)``."""

from __future__ import annotations

from typing import Any

import attrs

from frameworks.batch.model import Dependency, JobSpec
from frameworks.batch.planner import JobView, OfferView
from protocol.resources import Resources


class JobBuilder:
    def __init__(self, job_id: int) -> None:
        self._id = job_id
        self._spec: dict[str, Any] = {"name": f"job{job_id}", "argv": ("true",), "cpus": 1.0, "mem": 128.0}
        self._view: dict[str, Any] = {"submitted_at": float(job_id)}
        self._pending: tuple[int, ...] | None = None

    def cpus(self, v: float) -> JobBuilder:
        self._spec["cpus"] = v
        return self

    def mem(self, v: float) -> JobBuilder:
        self._spec["mem"] = v
        return self

    def gpus(self, v: float) -> JobBuilder:
        self._spec["gpus"] = v
        return self

    def count(self, n: int) -> JobBuilder:
        self._spec["count"] = n
        return self

    def gang(self, n: int) -> JobBuilder:
        self._spec["gang"] = n
        return self

    def priority(self, p: int) -> JobBuilder:
        self._spec["priority"] = p
        return self

    def queue(self, q: str) -> JobBuilder:
        self._spec["queue"] = q
        return self

    def preemptible(self) -> JobBuilder:
        self._spec["preemptible"] = True
        return self

    def constraint(self, name: str, value: str) -> JobBuilder:
        self._spec["constraints"] = (*self._spec.get("constraints", ()), (name, value))
        return self

    def after(self, job_id: int) -> JobBuilder:
        self._spec["after"] = (*self._spec.get("after", ()), Dependency(job_id))
        return self

    def pending(self, *indexes: int) -> JobBuilder:
        self._pending = indexes
        return self

    def active(self, n: int, gang_started: bool = True) -> JobBuilder:
        self._view.update(active=n, gang_started=gang_started)
        return self

    def blocked(self, why: str) -> JobBuilder:
        self._view["blocked"] = why
        return self

    def holding_since(self, t: float) -> JobBuilder:
        self._view["hold_since"] = t
        return self

    def build(self) -> JobView:
        spec = JobSpec(**self._spec)
        pending = self._pending if self._pending is not None else tuple(range(spec.count))
        return JobView(job_id=self._id, spec=spec, pending=pending, **self._view)


class OfferBuilder:
    """An offer; one with any resources also carries the ports ``[31000-31099]`` (as an agent's
    default range does) unless ``ports`` says otherwise."""

    def __init__(self, offer_id: str) -> None:
        self._id = offer_id
        self._res = Resources.empty()
        self._role = "*"
        self._attrs: dict[str, str] = {}
        self._ports: tuple[tuple[int, int], ...] | None = None
        self._address = ""

    def ports(self, *ranges: tuple[int, int]) -> OfferBuilder:
        self._ports = ranges
        return self

    def address(self, addr: str) -> OfferBuilder:
        self._address = addr
        return self

    def cpus(self, v: float, *, revocable: bool = False) -> OfferBuilder:
        self._res = self._res + Resources.of(cpus=v, revocable=revocable)
        return self

    def mem(self, v: float) -> OfferBuilder:
        self._res = self._res + Resources.of(mem=v)
        return self

    def gpus(self, v: float) -> OfferBuilder:
        self._res = self._res + Resources.of(gpus=v)
        return self

    def role(self, r: str) -> OfferBuilder:
        self._role = r
        return self

    def attr(self, name: str, value: str) -> OfferBuilder:
        self._attrs[name] = value
        return self

    def build(self) -> OfferView:
        res = self._res
        ports = ((31000, 31099),) if self._ports is None else self._ports
        if res and ports:
            res = res + Resources.of(ports=ports)
        return OfferView(
            self._id, f"agent-{self._id}", f"host-{self._id}", self._role, res, self._attrs, self._address
        )


def job(job_id: int) -> JobBuilder:
    return JobBuilder(job_id)


def offer(offer_id: str) -> OfferBuilder:
    return OfferBuilder(offer_id)


def views(*builders: JobBuilder | OfferBuilder) -> list[Any]:
    return [attrs.evolve(b.build()) for b in builders]
