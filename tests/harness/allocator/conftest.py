"""The allocator scheduling harness: fluent builders and a driver over a fake clock.

    sim.agent("a1").cpus(8).gpus(2).add()
    sim.framework("f1").role("ml").capabilities("REUSABLE_OFFERS").gpu().add()
    decisions = sim.allocate()

No network, no threads: events go straight into the pure allocator core and the tests assert the
exact decisions that come out.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from master.allocator import (
    AcceptResult,
    AgentAdded,
    Allocator,
    AllocatorConfig,
    Decision,
    Demand,
    DemandDeclared,
    Event,
    FrameworkAdded,
    Launch,
    Offer,
    OfferCreated,
    OfferRescinded,
    OffersAccepted,
    OffersDeclined,
    OfferUpdated,
    Operation,
    ResourcesRecovered,
)
from protocol.resources import Resources


def R(text: str) -> Resources:
    return Resources.parse(text)


class AgentBuilder:
    def __init__(self, sim: Sim, agent_id: str) -> None:
        self._sim = sim
        self._id = agent_id
        self._parts: list[str] = []
        self._attrs: dict[str, str | float] = {}
        self._host = f"{agent_id}.example"

    def cpus(self, n: float) -> AgentBuilder:
        self._parts.append(f"cpus:{n}")
        return self

    def mem(self, n: float) -> AgentBuilder:
        self._parts.append(f"mem:{n}")
        return self

    def disk(self, n: float) -> AgentBuilder:
        self._parts.append(f"disk:{n}")
        return self

    def gpus(self, n: float) -> AgentBuilder:
        self._parts.append(f"gpus:{n}")
        return self

    def ports(self, begin: int, end: int) -> AgentBuilder:
        self._parts.append(f"ports:[{begin}-{end}]")
        return self

    def reserved(self, role: str, text: str) -> AgentBuilder:
        """Static reservation: ``reserved("ml", "cpus:2;gpus:1")``."""
        for part in text.split(";"):
            name, value = part.split(":", 1)
            self._parts.append(f"{name}({role}):{value}")
        return self

    def attr(self, name: str, value: str | float) -> AgentBuilder:
        self._attrs[name] = value
        return self

    def resources(self) -> Resources:
        return R(";".join(self._parts))

    def add(self) -> str:
        self._sim.handle(AgentAdded(self._id, self._host, self.resources(), self._attrs))
        return self._id


class FrameworkBuilder:
    def __init__(self, sim: Sim, framework_id: str) -> None:
        self._sim = sim
        self._id = framework_id
        self._roles: list[str] = []
        self._caps: set[str] = set()
        self._active = True

    def role(self, role: str) -> FrameworkBuilder:
        self._roles.append(role)
        return self

    def capabilities(self, *caps: str) -> FrameworkBuilder:
        self._caps.update(caps)
        return self

    def reusable(self) -> FrameworkBuilder:
        return self.capabilities("REUSABLE_OFFERS")

    def revocable(self) -> FrameworkBuilder:
        return self.capabilities("REVOCABLE_RESOURCES")

    def gpu(self) -> FrameworkBuilder:
        """GPU_RESOURCES: may be offered agents with GPUs (others never are, as in Mesos)."""
        return self.capabilities("GPU_RESOURCES")

    def inactive(self) -> FrameworkBuilder:
        self._active = False
        return self

    def add(self) -> str:
        self._sim.handle(
            FrameworkAdded(self._id, tuple(self._roles or ["*"]), frozenset(self._caps), self._active)
        )
        return self._id


class Sim:
    def __init__(self, config: AllocatorConfig | None = None) -> None:
        self.alloc = Allocator(config or AllocatorConfig(offer_id_prefix="t"))
        self.now = 1000.0
        self.log: list[Decision] = []

    # builders
    def agent(self, agent_id: str) -> AgentBuilder:
        return AgentBuilder(self, agent_id)

    def framework(self, framework_id: str) -> FrameworkBuilder:
        return FrameworkBuilder(self, framework_id)

    # driving
    def handle(self, event: Event) -> list[Decision]:
        out = self.alloc.handle(event, self.now)
        self.log.extend(out)
        return out

    def allocate(self) -> list[Decision]:
        out = self.alloc.allocate(self.now)
        self.log.extend(out)
        return out

    def advance(self, seconds: float) -> list[Decision]:
        """Move the clock and run a pass (as the shell does when a deadline fires)."""
        self.now += seconds
        return self.allocate()

    def accept(self, fid: str, offer_ids: list[str] | str, *ops: Operation, refuse: float | None = None) -> AcceptResult:
        ids = (offer_ids,) if isinstance(offer_ids, str) else tuple(offer_ids)
        result = self.alloc.accept(OffersAccepted(fid, ids, ops, refuse), self.now)
        self.log.extend(result.decisions)
        return result

    def decline(self, fid: str, offer_ids: list[str] | str, refuse: float | None = None) -> list[Decision]:
        ids = (offer_ids,) if isinstance(offer_ids, str) else tuple(offer_ids)
        return self.handle(OffersDeclined(fid, ids, refuse))

    def finish(self, fid: str, agent_id: str, task_id: str) -> list[Decision]:
        return self.handle(ResourcesRecovered(fid, agent_id, task_id))

    def demand(self, fid: str, *demands: Demand) -> list[Decision]:
        return self.handle(DemandDeclared(fid, demands))

    # reading
    def offers(self, fid: str) -> list[Offer]:
        return sorted(self.alloc.offers_of(fid), key=lambda o: o.offer_id)

    def offer_on(self, fid: str, agent_id: str) -> Offer:
        found = [o for o in self.alloc.offers_of(fid) if o.agent_id == agent_id]
        assert len(found) == 1, f"expected one offer of {fid} on {agent_id}, got {found}"
        return found[0]

    # helpers (static: tests reach them through the fixture)
    R = staticmethod(R)

    @staticmethod
    def launch(task_id: str, text: str, priority: int = 0) -> Launch:
        return Launch(task_id, R(text), priority)

    @staticmethod
    def created(decisions: list[Decision]) -> list[Offer]:
        return [d.offer for d in decisions if isinstance(d, OfferCreated)]

    @staticmethod
    def updated(decisions: list[Decision]) -> list[Offer]:
        return [d.offer for d in decisions if isinstance(d, OfferUpdated)]

    @staticmethod
    def rescinded(decisions: list[Decision]) -> list[str]:
        return [d.offer_id for d in decisions if isinstance(d, OfferRescinded)]

    @staticmethod
    def summary(decisions: list[Decision]) -> list[tuple[str, ...]]:
        """Decisions as comparable tuples: (kind, framework, agent, resources-string)."""
        out: list[tuple[str, ...]] = []
        for d in decisions:
            if isinstance(d, OfferCreated | OfferUpdated):
                kind = "created" if isinstance(d, OfferCreated) else "updated"
                out.append((kind, d.offer.framework_id, d.offer.agent_id, str(d.offer.resources)))
            elif isinstance(d, OfferRescinded):
                out.append(("rescinded", d.framework_id, d.agent_id, d.offer_id))
            else:
                out.append(("revoke", d.framework_id, d.agent_id, ",".join(d.task_ids)))
        return out


@pytest.fixture
def sim() -> Iterator[Sim]:
    yield Sim()


def make_sim(**config: object) -> Sim:
    return Sim(AllocatorConfig(offer_id_prefix="t", **config))  # type: ignore[arg-type]


@pytest.fixture
def sim_factory() -> object:
    return make_sim
