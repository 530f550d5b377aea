"""Resource estimators: how much of this agent may be offered as *revocable* (oversubscribed).

An estimator is a small policy object the agent's shell calls periodically with what it knows:

- ``total``: the agent's capacity (non-revocable),
- ``allocated``: what the tasks on the agent hold right now (revocable entries are ignored),
- ``usage``: measured usage of the **non-revocable** tasks, by resource name (``{"cpus": 1.3}``),
  e.g. summed psutil cpu rates of their process trees,
- ``now``: seconds (time is an argument).

``estimate`` returns the agent's current revocable resources — the *total* the master may hand out
as revocable on this agent, including what revocable tasks already hold (the value Mesos' agent
forwards: allocated revocable + the estimator's oversubscribable) — tagged revocable and
unreserved, or ``None`` when it has not changed since the last reported value, so the agent
sends ``SlackEstimate`` only on change. The first call always returns a value (possibly empty);
``reset()`` forgets the last report so the next call reports again (after re-registration).

Plug-ins, in one explicit name → factory map (``ESTIMATORS``):

- ``noop``: no revocable resources, ever.
- ``fixed``: a fixed amount, ``oversubscribed="cpus:4"`` (``--oversubscribed``).
- ``usage``: usage slack of compressible resources (cpus only by default): allocated minus
  measured usage, smoothed (an estimate drops at once when usage rises and climbs back with a
  half-life), minus a safety margin (a fraction of the allocation), rounded *down* to a
  granularity so tiny jitter does not cause reports, never negative and never above the
  allocation. Memory, disk and GPUs are not compressible and are refused.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from protocol.resources import ResourceError, Resources

__pure__ = True

__all__ = [
    "COMPRESSIBLE",
    "ESTIMATORS",
    "EstimatorError",
    "FixedEstimator",
    "NoopEstimator",
    "ResourceEstimator",
    "UsageEstimator",
    "make_estimator",
]

# Resources whose over-use only slows tasks down (throttling) rather than killing them.
COMPRESSIBLE = frozenset({"cpus"})


class EstimatorError(ValueError):
    """Unknown estimator name or bad options."""


class ResourceEstimator(Protocol):
    name: str

    def estimate(
        self, total: Resources, allocated: Resources, usage: Mapping[str, float], now: float
    ) -> Resources | None:
        """The current revocable resources, or None when unchanged since the last report."""
        ...

    def reset(self) -> None:
        """Forget the last report: the next ``estimate`` returns a value even if unchanged."""
        ...


class _ChangeReporter:
    """Remembers the last reported estimate and turns repeats into ``None``."""

    def __init__(self) -> None:
        self._last: Resources | None = None

    def _report(self, value: Resources) -> Resources | None:
        if self._last is not None and value == self._last:
            return None
        self._last = value
        return value

    def reset(self) -> None:
        self._last = None


class NoopEstimator(_ChangeReporter):
    name = "noop"

    def estimate(
        self, total: Resources, allocated: Resources, usage: Mapping[str, float], now: float
    ) -> Resources | None:
        return self._report(Resources.empty())


class FixedEstimator(_ChangeReporter):
    """Always the same revocable amount (Mesos' fixed resource estimator)."""

    name = "fixed"

    def __init__(self, oversubscribed: Resources) -> None:
        super().__init__()
        self.oversubscribed = oversubscribed.unreserve().as_revocable()

    def estimate(
        self, total: Resources, allocated: Resources, usage: Mapping[str, float], now: float
    ) -> Resources | None:
        return self._report(self.oversubscribed)


class UsageEstimator(_ChangeReporter):
    """Usage slack: allocated minus measured usage of compressible resources, smoothed."""

    name = "usage"

    def __init__(
        self,
        *,
        resources: tuple[str, ...] = ("cpus",),
        half_life: float = 30.0,
        safety_margin: float = 0.1,
        granularity: float = 0.1,
    ) -> None:
        super().__init__()
        for r in resources:
            if r not in COMPRESSIBLE:
                raise EstimatorError(
                    f"usage estimator: {r!r} is not compressible (allowed: {sorted(COMPRESSIBLE)})"
                )
        if not resources:
            raise EstimatorError("usage estimator: no resources to estimate")
        if not (math.isfinite(half_life) and half_life > 0):
            raise EstimatorError(f"usage estimator: half_life must be > 0 seconds, got {half_life!r}")
        if not (math.isfinite(safety_margin) and 0 <= safety_margin < 1):
            raise EstimatorError(f"usage estimator: safety_margin must be in [0, 1), got {safety_margin!r}")
        if not (math.isfinite(granularity) and granularity >= 0.001):
            raise EstimatorError(f"usage estimator: granularity must be >= 0.001, got {granularity!r}")
        self.resources = tuple(resources)
        self.half_life = float(half_life)
        self.safety_margin = float(safety_margin)
        self.granularity = float(granularity)
        self._smoothed: dict[str, float] = {}
        self._last_now: float | None = None

    def estimate(
        self, total: Resources, allocated: Resources, usage: Mapping[str, float], now: float
    ) -> Resources | None:
        dt = 0.0 if self._last_now is None else max(0.0, now - self._last_now)
        self._last_now = now
        held = allocated.non_revocable()
        slack = Resources.empty()
        for name in self.resources:
            alloc = held.scalar(name)
            used = usage.get(name, 0.0)
            if not math.isfinite(used) or used < 0:
                used = alloc  # a broken measurement must never create slack
            raw = max(0.0, alloc - used)
            prev = self._smoothed.get(name, 0.0)
            if raw <= prev:
                smoothed = raw  # usage went up: shrink at once
            else:
                smoothed = prev + (raw - prev) * (1.0 - 0.5 ** (dt / self.half_life))
            self._smoothed[name] = smoothed
            value = min(alloc, max(0.0, smoothed - self.safety_margin * alloc))
            steps = math.floor(value / self.granularity + 1e-9)
            value = round(steps * self.granularity, 3)
            if value > 0:
                slack = slack + Resources.scalar_entry(name, value, revocable=True)
        return self._report(slack)


def _fixed(**opts: Any) -> ResourceEstimator:
    unknown = set(opts) - {"oversubscribed"}
    if unknown:
        raise EstimatorError(f"fixed estimator: unknown options {sorted(unknown)}")
    spec = opts.get("oversubscribed")
    if isinstance(spec, Resources):
        res = spec
    elif isinstance(spec, str) and spec.strip():
        try:
            res = Resources.parse(spec)
        except ResourceError as e:
            raise EstimatorError(f"fixed estimator: bad --oversubscribed {spec!r}: {e}") from e
    else:
        raise EstimatorError('fixed estimator needs --oversubscribed, e.g. "cpus:4"')
    if not res:
        raise EstimatorError(f"fixed estimator: --oversubscribed {spec!r} is empty")
    return FixedEstimator(res)


def _noop(**opts: Any) -> ResourceEstimator:
    if opts:
        raise EstimatorError(f"noop estimator takes no options, got {sorted(opts)}")
    return NoopEstimator()


def _usage(**opts: Any) -> ResourceEstimator:
    allowed = {"resources", "half_life", "safety_margin", "granularity"}
    unknown = set(opts) - allowed
    if unknown:
        raise EstimatorError(f"usage estimator: unknown options {sorted(unknown)}")
    if isinstance(opts.get("resources"), str):
        opts["resources"] = tuple(s.strip() for s in opts["resources"].split(",") if s.strip())
    try:
        return UsageEstimator(**opts)
    except TypeError as e:
        raise EstimatorError(f"usage estimator: {e}") from e


ESTIMATORS: Mapping[str, Callable[..., ResourceEstimator]] = {
    "noop": _noop,
    "fixed": _fixed,
    "usage": _usage,
}


def make_estimator(name: str, **opts: Any) -> ResourceEstimator:
    """Build the estimator ``name`` (``--resource-estimator``); options are its keyword settings.

    Options that are None are dropped, so a CLI can pass every flag through unconditionally.
    """
    factory = ESTIMATORS.get(name)
    if factory is None:
        raise EstimatorError(f"unknown resource estimator {name!r} (choose from {sorted(ESTIMATORS)})")
    return factory(**{k: v for k, v in opts.items() if v is not None})
