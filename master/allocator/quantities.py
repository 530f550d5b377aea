"""Small helpers over ``Resources`` that the allocator needs: taking scalar quantities out of an
exact bag (reserved entries first), shrinking to a room, counting how many units of a shape fit,
and the minimum-allocatable test. Quantities are plain ``dict[str, float]``."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from protocol.resources import Resources

__pure__ = True

Scalars = dict[str, float]
EMPTY = Resources()
_EPS = 1e-9


def take(exact: Resources, need: Mapping[str, float]) -> Resources:
    """The part of ``exact`` holding up to ``need`` of each scalar name (reserved entries are
    used before unreserved ones); non-scalar entries are never taken."""
    left = {name: round(value * 1000) for name, value in need.items() if value > _EPS}
    if not left:
        return EMPTY
    pieces: list[Resources] = []
    entries = sorted(exact.entries(), key=lambda kv: (not kv[0].reservations, kv[0].revocable))
    for key, value in entries:
        want = left.get(key.name)
        if not want or type(value) is not int:
            continue
        got = value if value <= want else want
        left[key.name] = want - got
        pieces.append(
            Resources.scalar_entry(key.name, got / 1000, reservations=key.reservations, revocable=key.revocable)
        )
    return Resources.sum(pieces)


def shrink(exact: Resources, room: Mapping[str, float]) -> Resources:
    """``exact`` reduced so that each scalar named in ``room`` is at most ``room[name]``."""
    excess: Scalars = {}
    for name, limit in room.items():
        have = exact.scalar(name)
        if have > limit + _EPS:
            excess[name] = have - max(limit, 0.0)
    if not excess:
        return exact
    return exact - take(exact, excess)


def intersect(a: Resources, b: Resources) -> Resources:
    """Entry-wise minimum (``a - (a - b)``)."""
    return a - (a - b)


def units_that_fit(available: Mapping[str, float], shape: Mapping[str, float], cap: int) -> int:
    """How many copies of ``shape`` fit in ``available`` (scalars only), at most ``cap``."""
    n = cap
    for name, need in shape.items():
        if need <= _EPS:
            continue
        fit = int((available.get(name, 0.0) + _EPS) // need)
        if fit < n:
            n = fit
            if n <= 0:
                return 0
    return max(n, 0)


def meets_minimum(scalars: Mapping[str, float], alternatives: Iterable[Mapping[str, float]]) -> bool:
    """True if ``scalars`` hold all quantities of at least one alternative (or none are set)."""
    any_alt = False
    for alt in alternatives:
        any_alt = True
        ok = True
        for name, need in alt.items():
            if scalars.get(name, 0.0) + _EPS < need:
                ok = False
                break
        if ok:
            return True
    return not any_alt


def add_into(acc: Scalars, scalars: Mapping[str, float], sign: float = 1.0) -> None:
    for name, value in scalars.items():
        new = acc.get(name, 0.0) + sign * value
        if abs(new) > _EPS:
            acc[name] = new
        else:
            acc.pop(name, None)


def flat_scalars(r: Resources, names: Iterable[str]) -> Resources:
    """Plain (unreserved, non-revocable) scalar quantities of ``names`` in ``r``."""
    return r.flatten().only(*names)


def port_count(r: Resources) -> int:
    """How many ports ``r`` holds in its regular (non-revocable) ``ports`` ranges."""
    n = 0
    for key, value in r.entries():
        if key.name == "ports" and not key.revocable and isinstance(value, tuple):
            n += sum(e - b + 1 for b, e in value)
    return n


def take_ports(r: Resources, n: int) -> Resources:
    """The ``n`` lowest regular ports of ``r`` (reserved entries first), or as many as it has."""
    pieces: list[Resources] = []
    left = n
    entries = sorted(r.entries(), key=lambda kv: not kv[0].reservations)
    for key, value in entries:
        if left <= 0:
            break
        if key.name != "ports" or key.revocable or not isinstance(value, tuple):
            continue
        chosen: list[tuple[int, int]] = []
        for b, e in value:
            if left <= 0:
                break
            k = min(left, e - b + 1)
            chosen.append((b, b + k - 1))
            left -= k
        if chosen:
            pieces.append(Resources.ranges_entry("ports", chosen, reservations=key.reservations))
    return Resources.sum(pieces)
