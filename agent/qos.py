"""QoS controllers: decide which revocable tasks to evict when the machine is overloaded.

The agent's shell calls ``corrections(load, revocable_tasks, now)`` periodically with:

- ``load``: machine load figures by name, e.g. ``{"load1_per_core": 1.4, "cpu_percent": 97.0}``
  (1-minute load average divided by the core count; psutil ``cpu_percent``),
- ``revocable_tasks``: the revocable tasks running on the agent right now,
- ``now``: seconds (time is an argument).

It returns the evictions to carry out now (``Eviction``: framework id, task id, reason); the agent
kills those tasks with the usual grace period and reports them as TASK_KILLED with
``REASON_CONTAINER_PREEMPTED``.

Plug-ins, in one explicit name → factory map (``QOS_CONTROLLERS``):

- ``noop``: never evicts.
- ``load``: when ``load[metric]`` has stayed above ``threshold`` for ``window`` seconds, evicts
  one revocable task — the newest (latest ``started_at``, ties by framework and task id) — and
  then at most one more per ``cooldown`` seconds while the overload lasts. A task already evicted
  is not chosen again while it is still reported (its kill is in progress). A missing or
  non-finite figure counts as "not overloaded" (no data is no reason to kill).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

import attrs

from protocol.resources import Resources

__pure__ = True

__all__ = [
    "QOS_CONTROLLERS",
    "Eviction",
    "LoadQoSController",
    "NoopQoSController",
    "QoSController",
    "QoSError",
    "RevocableTask",
    "make_qos",
]


class QoSError(ValueError):
    """Unknown controller name or bad options."""


@attrs.frozen
class RevocableTask:
    task_id: str
    framework_id: str
    started_at: float
    resources: Resources = attrs.field(factory=Resources.empty)


@attrs.frozen
class Eviction:
    framework_id: str
    task_id: str
    reason: str


class QoSController(Protocol):
    name: str

    def corrections(
        self, load: Mapping[str, float], revocable_tasks: Sequence[RevocableTask], now: float
    ) -> list[Eviction]: ...


class NoopQoSController:
    name = "noop"

    def corrections(
        self, load: Mapping[str, float], revocable_tasks: Sequence[RevocableTask], now: float
    ) -> list[Eviction]:
        return []


class LoadQoSController:
    """Evict the newest revocable task after a sustained overload, one per cooldown."""

    name = "load"

    def __init__(
        self,
        *,
        metric: str = "load1_per_core",
        threshold: float = 1.0,
        window: float = 30.0,
        cooldown: float = 15.0,
    ) -> None:
        if not isinstance(metric, str) or not metric:
            raise QoSError(f"load QoS: metric must be a non-empty name, got {metric!r}")
        for label, v, lo in (
            ("threshold", threshold, 0.0),
            ("window", window, 0.0),
            ("cooldown", cooldown, 0.0),
        ):
            if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v < lo:
                raise QoSError(f"load QoS: {label} must be a finite number >= {lo}, got {v!r}")
        self.metric = metric
        self.threshold = float(threshold)
        self.window = float(window)
        self.cooldown = float(cooldown)
        self._above_since: float | None = None
        self._last_eviction: float | None = None
        self._evicted: set[tuple[str, str]] = set()

    def corrections(
        self, load: Mapping[str, float], revocable_tasks: Sequence[RevocableTask], now: float
    ) -> list[Eviction]:
        present = {(t.framework_id, t.task_id) for t in revocable_tasks}
        self._evicted &= present  # forget tasks that are gone
        value = load.get(self.metric)
        if value is None or not math.isfinite(value) or value <= self.threshold:
            self._above_since = None
            return []
        if self._above_since is None:
            self._above_since = now
        sustained = now - self._above_since
        if sustained < self.window:
            return []
        if self._last_eviction is not None and now - self._last_eviction < self.cooldown:
            return []
        candidates = [t for t in revocable_tasks if (t.framework_id, t.task_id) not in self._evicted]
        if not candidates:
            return []
        victim = max(candidates, key=lambda t: (t.started_at, t.framework_id, t.task_id))
        self._evicted.add((victim.framework_id, victim.task_id))
        self._last_eviction = now
        reason = (
            f"QoS load controller: {self.metric}={value:.2f} above {self.threshold:g} "
            f"for {sustained:.0f}s; evicting the newest revocable task"
        )
        return [Eviction(victim.framework_id, victim.task_id, reason)]


def _noop(**opts: Any) -> QoSController:
    if opts:
        raise QoSError(f"noop QoS controller takes no options, got {sorted(opts)}")
    return NoopQoSController()


def _load(**opts: Any) -> QoSController:
    unknown = set(opts) - {"metric", "threshold", "window", "cooldown"}
    if unknown:
        raise QoSError(f"load QoS controller: unknown options {sorted(unknown)}")
    return LoadQoSController(**opts)


QOS_CONTROLLERS: Mapping[str, Callable[..., QoSController]] = {
    "noop": _noop,
    "load": _load,
}


def make_qos(name: str, **opts: Any) -> QoSController:
    """Build the QoS controller ``name`` (``--qos-controller``); None-valued options are dropped."""
    factory = QOS_CONTROLLERS.get(name)
    if factory is None:
        raise QoSError(f"unknown QoS controller {name!r} (choose from {sorted(QOS_CONTROLLERS)})")
    return factory(**{k: v for k, v in opts.items() if v is not None})
