"""The vocabulary of ``protocol.resources``: ``ResourceError``, the entry key (``Reservation``,
``ResourceKey``), role names (``check_role``, ``is_subrole``, ``role_ancestors``), and quantities
(scalars as integer thousandths, normalized ranges and their set operations, sets) with the checks
every constructor and parser shares.
"""

from __future__ import annotations

import math
import re
import sys
from collections.abc import (
    Iterable,
    Mapping,
)
from typing import (
    NamedTuple,
)

__pure__ = True


UNRESERVED_ROLE = "*"
MAX_SCALAR = 1e15
_MAX_MILLI = 10**18
_MAX_RANGE = 2**64 - 1

RangesValue = tuple[tuple[int, int], ...]
# A quantity: scalar thousandths, normalized ranges, or a set of items.
Value = int | RangesValue | frozenset[str]

# Resource names that Mesos gives a fixed kind.
_SCALAR_NAMES = frozenset({"cpus", "mem", "disk", "gpus"})
_RANGES_NAMES = frozenset({"ports"})


class ResourceError(ValueError):
    """Invalid resource input or an impossible operation; the message names the resource."""


class Reservation(NamedTuple):
    """One level of a reservation stack (Mesos ``ReservationInfo``)."""

    role: str
    dynamic: bool = False
    principal: str | None = None
    labels: tuple[tuple[str, str | None], ...] = ()


class ResourceKey(NamedTuple):
    """What makes two resource entries the same resource (and therefore addable)."""

    name: str
    reservations: tuple[Reservation, ...] = ()
    revocable: bool = False

    @property
    def role(self) -> str:
        """The effective role: the last reservation's role, ``"*"`` when unreserved."""
        return self.reservations[-1].role if self.reservations else UNRESERVED_ROLE


# --- roles ------------------------------------------------------------------------------------

_ROLE_FORBIDDEN = frozenset(" \t\n\v\f\r\x00()[]{},;:=%*")


def check_role(role: object, *, allow_unreserved: bool = True) -> str:
    """Validate a role name (Mesos rules plus no string-syntax characters); return it."""
    if not isinstance(role, str):
        raise ResourceError(f"role must be a string, got {type(role).__name__}")
    if role == UNRESERVED_ROLE:
        if allow_unreserved:
            return role
        raise ResourceError("role '*' cannot be reserved to")
    if not role:
        raise ResourceError("role must not be empty")
    if any(c in _ROLE_FORBIDDEN for c in role):
        raise ResourceError(f"invalid role {role!r}: contains a forbidden character")
    for part in role.split("/"):
        if not part or part in (".", "..") or part.startswith("-"):
            raise ResourceError(f"invalid role {role!r}")
    return role


def is_subrole(child: str, parent: str) -> bool:
    """True if ``child`` is strictly below ``parent`` in the role tree (``eng/ml`` under ``eng``)."""
    return child.startswith(parent) and len(child) > len(parent) and child[len(parent)] == "/"


def role_ancestors(role: str) -> tuple[str, ...]:
    """Strict ancestors of ``role``, nearest last: ``a/b/c`` -> ``("a", "a/b")``."""
    parts = role.split("/")
    return tuple("/".join(parts[:i]) for i in range(1, len(parts)))


# --- quantities -------------------------------------------------------------------------------


def _scalar_milli(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ResourceError(f"resource {name!r}: scalar must be a number, got {type(value).__name__}")
    if isinstance(value, float) and not math.isfinite(value):
        raise ResourceError(f"resource {name!r}: scalar must be finite, got {value}")
    if value < 0:
        raise ResourceError(f"resource {name!r}: scalar must not be negative, got {value}")
    if value > MAX_SCALAR:
        raise ResourceError(f"resource {name!r}: scalar {value} is absurdly large (> {MAX_SCALAR:g})")
    if isinstance(value, int):
        return value * 1000
    return math.floor(value * 1000.0 + 0.5)


def _fmt_milli(m: int) -> str:
    whole, frac = divmod(m, 1000)
    if not frac:
        return str(whole)
    return f"{whole}.{frac:03d}".rstrip("0")


def _normalize_ranges(name: str, pairs: Iterable[tuple[object, object]]) -> RangesValue:
    items: list[tuple[int, int]] = []
    for pair in pairs:
        b, e = pair
        for v in (b, e):
            if isinstance(v, bool) or not isinstance(v, int):
                raise ResourceError(f"resource {name!r}: range bounds must be integers, got {v!r}")
            if v < 0 or v > _MAX_RANGE:
                raise ResourceError(f"resource {name!r}: range bound {v} out of [0, 2^64-1]")
        assert isinstance(b, int) and isinstance(e, int)
        if b > e:
            raise ResourceError(f"resource {name!r}: range [{b}-{e}] has begin > end")
        items.append((b, e))
    return _merge_sorted(sorted(items))


def _merge_sorted(items: list[tuple[int, int]]) -> RangesValue:
    if len(items) < 2:
        return tuple(items)
    out: list[tuple[int, int]] = [items[0]]
    for b, e in items[1:]:
        pb, pe = out[-1]
        if b <= pe + 1:
            if e > pe:
                out[-1] = (pb, e)
        else:
            out.append((b, e))
    return tuple(out)


def _ranges_union(a: RangesValue, b: RangesValue) -> RangesValue:
    if not a:
        return b
    if not b:
        return a
    return _merge_sorted(sorted(a + b))


def _ranges_diff(a: RangesValue, b: RangesValue) -> RangesValue:
    if not a or not b:
        return a
    out: list[tuple[int, int]] = []
    j = 0
    nb = len(b)
    for s, e in a:
        cur = s
        while j < nb and b[j][1] < cur:
            j += 1
        k = j
        while k < nb and b[k][0] <= e:
            bs, be = b[k]
            if bs > cur:
                out.append((cur, bs - 1))
            if be + 1 > cur:
                cur = be + 1
            if cur > e:
                break
            k += 1
        if cur <= e:
            out.append((cur, e))
    return tuple(out)


def _ranges_subset(small: RangesValue, big: RangesValue) -> bool:
    j = 0
    nb = len(big)
    for s, e in small:
        while j < nb and big[j][1] < s:
            j += 1
        if j == nb or big[j][0] > s or big[j][1] < e:
            return False
    return True


def _fmt_ranges(r: RangesValue) -> str:
    return "[" + ", ".join(f"{b}-{e}" for b, e in r) + "]"


def _kind(v: Value) -> str:
    if type(v) is int:
        return "scalar"
    return "set" if isinstance(v, frozenset) else "ranges"


def _check_name(name: object) -> str:
    if not isinstance(name, str) or not _NAME_RE.fullmatch(name):
        raise ResourceError(f"invalid resource name {name!r}")
    return sys.intern(name)


def _check_kind(name: str, v: Value) -> None:
    if name in _SCALAR_NAMES and type(v) is not int:
        raise ResourceError(f"resource {name!r} must be a scalar")
    if name in _RANGES_NAMES and not (isinstance(v, tuple)):
        raise ResourceError(f"resource {name!r} must be ranges")


def _labels_tuple(labels: Mapping[str, str | None]) -> tuple[tuple[str, str | None], ...]:
    for k, v in labels.items():
        if not isinstance(k, str) or not (v is None or isinstance(v, str)):
            raise ResourceError(f"reservation label {k!r}: keys and values must be strings")
    return tuple(sorted(labels.items()))


def _check_reservations(name: str, reservations: tuple[Reservation, ...]) -> tuple[Reservation, ...]:
    prev: str | None = None
    for r in reservations:
        if not isinstance(r, Reservation):
            raise ResourceError(f"resource {name!r}: reservations must be Reservation tuples")
        check_role(r.role, allow_unreserved=False)
        if prev is not None and not is_subrole(r.role, prev):
            raise ResourceError(f"resource {name!r}: reservation {r.role!r} does not refine {prev!r}")
        prev = r.role
    return tuple(r if r.principal != "" else r._replace(principal=None) for r in reservations)


def _check_items(name: str, items: Iterable[str]) -> frozenset[str]:
    out = frozenset(items)
    for it in out:
        if not isinstance(it, str) or not it:
            raise ResourceError(f"resource {name!r}: set items must be non-empty strings, got {it!r}")
    return out


# --- the Mesos resource string ----------------------------------------------------------------

_NAME_RE = re.compile(r"[A-Za-z0-9_.\-/]+")
