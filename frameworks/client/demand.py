"""REQUEST helpers: tell the master what the framework is waiting for.

Agora reads a ``REQUEST`` call as the framework's *standing demand* (it replaces the previous
one): a list of ``protocol.mesos.Request``, each ``count`` units of a resource shape, optionally
a gang (``gang_id``, at least ``gang_min`` units offered together, whole or nothing), whether
revocable resources may serve it, a priority, the role it is for, and ``ports``: how many ports
of the agent's port ranges each unit needs (the master picks them). An empty list clears it.

``DemandBook`` keeps the framework's demands by a key of its choosing (a job id, a gang id) and
says when they changed, so the driver sends one REQUEST per change and not per tick.

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs

from protocol.mesos import Request
from protocol.mesos_common import AgentID
from protocol.resources import Resources

__pure__ = True


class DemandError(ValueError):
    """A demand that makes no sense (empty shape, count < 1, gang_min > count, ...)."""


@attrs.frozen
class Demand:
    shape: Resources
    count: int = 1
    gang_id: str | None = None
    gang_min: int | None = None
    revocable_ok: bool = False
    priority: int | None = None
    role: str | None = None
    agent_id: str | None = None
    ports: int = 0

    def __attrs_post_init__(self) -> None:
        if not isinstance(self.shape, Resources) or self.shape.is_empty():
            raise DemandError("a demand needs a non-empty resource shape")
        if not isinstance(self.count, int) or isinstance(self.count, bool) or self.count < 1:
            raise DemandError(f"demand count must be an int >= 1, got {self.count!r}")
        if not isinstance(self.ports, int) or isinstance(self.ports, bool) or not 0 <= self.ports <= 65_535:
            raise DemandError(f"demand ports must be an int within 0..65535, got {self.ports!r}")
        if self.gang_min is not None:
            if self.gang_id is None:
                raise DemandError("gang_min needs a gang_id")
            if not 1 <= self.gang_min <= self.count:
                raise DemandError(f"gang_min must be within 1..count ({self.count}), got {self.gang_min}")

    @property
    def total(self) -> Resources:
        return self.shape.flatten() * self.count

    def to_request(self) -> Request:
        gang_min = self.gang_min
        if self.gang_id is not None and gang_min is None:
            gang_min = self.count
        return Request(
            agent_id=AgentID(self.agent_id) if self.agent_id else None,
            resources=self.shape.flatten().to_mesos(),
            count=self.count,
            gang_id=self.gang_id,
            gang_min=gang_min,
            revocable_ok=True if self.revocable_ok else None,
            priority=self.priority,
            role=self.role,
            ports=self.ports or None,
        )

    @classmethod
    def from_request(cls, r: Request) -> Demand:
        return cls(
            shape=Resources.from_mesos(r.resources),
            count=r.count if r.count is not None else 1,
            gang_id=r.gang_id,
            gang_min=r.gang_min,
            revocable_ok=bool(r.revocable_ok),
            priority=r.priority,
            role=r.role,
            agent_id=r.agent_id.value if r.agent_id is not None else None,
            ports=r.ports if isinstance(r.ports, int) and 0 < r.ports <= 65_535 else 0,
        )


def demand(shape: Resources | str, count: int = 1, **kw: object) -> Demand:
    """``demand("cpus:1;mem:256", 10)`` — ``count`` independent units of ``shape``."""
    res = Resources.parse(shape) if isinstance(shape, str) else shape
    return Demand(res, count, **kw)  # type: ignore[arg-type]


def gang(gang_id: str, shape: Resources | str, size: int, min_size: int | None = None, **kw: object) -> Demand:
    """A gang: ``size`` units of ``shape`` of which at least ``min_size`` (default all) must be
    offered together."""
    res = Resources.parse(shape) if isinstance(shape, str) else shape
    return Demand(res, size, gang_id=gang_id, gang_min=size if min_size is None else min_size, **kw)  # type: ignore[arg-type]


class DemandBook:
    """The framework's standing demand, keyed; ``take_changes()`` returns the REQUEST list to send
    (or None when nothing changed since the last call)."""

    def __init__(self) -> None:
        self._demands: dict[str, Demand] = {}
        self._dirty = False

    def set(self, key: str, d: Demand) -> None:
        if self._demands.get(key) != d:
            self._demands[key] = d
            self._dirty = True

    def remove(self, key: str) -> None:
        if self._demands.pop(key, None) is not None:
            self._dirty = True

    def replace(self, items: Iterable[tuple[str, Demand]]) -> None:
        new = dict(items)
        if new != self._demands:
            self._demands = new
            self._dirty = True

    def clear(self) -> None:
        self.replace(())

    def __len__(self) -> int:
        return len(self._demands)

    def get(self, key: str) -> Demand | None:
        return self._demands.get(key)

    def requests(self) -> tuple[Request, ...]:
        return tuple(self._demands[k].to_request() for k in sorted(self._demands))

    def total(self) -> Resources:
        return Resources.sum(d.total for d in self._demands.values())

    def mark_dirty(self) -> None:
        """Send the demand again (after a re-subscription the master has forgotten it)."""
        self._dirty = True

    def take_changes(self) -> tuple[Request, ...] | None:
        if not self._dirty:
            return None
        self._dirty = False
        return self.requests()
