"""Resources: the immutable, exact resource algebra every Agora component shares.

Model
-----
A ``Resources`` value is a mapping from an *entry key* to a *quantity*:

- The key (:class:`ResourceKey`) is ``(name, reservations, revocable)``. ``reservations`` is the
  Mesos reservation stack (:class:`Reservation`: role, static/dynamic, principal, labels); the
  last element is the effective role, an empty stack means unreserved (role ``"*"``).
- The quantity depends on the kind of resource:
  scalars (``cpus``, ``mem``, ``disk``, ``gpus``, any custom name) are stored as **integer
  thousandths** (Mesos rounds scalars to 3 decimal places), so sums and differences are exact:
  ``Resources.of(cpus=0.1) * 3 == Resources.of(cpus=0.3)``;
  ranges (``ports``) are normalized tuples of inclusive ``(begin, end)`` pairs, sorted, merged
  and coalesced; sets (``zones:{a,b}``) are frozensets of strings.
- Only finite, non-negative quantities exist. Bad input (NaN, inf, negative, > 1e15, wrong type)
  raises :class:`ResourceError` naming the resource. Zero-valued entries vanish, so an empty
  ``Resources`` is falsy and equality is structural.

Arithmetic is per entry key: ``+`` adds scalars and unites ranges/sets; ``-`` **saturates**: it
subtracts what is there and never goes negative (ranges/sets subtract set-wise). ``a.contains(b)``
(``b <= a``) holds iff every entry of ``b`` fits in the entry of ``a`` with the same key, which is
exactly when ``(a - b) + b == a``. Reserved resources never satisfy an unreserved demand (and vice
versa): filter first with :meth:`Resources.allocatable_to`, :meth:`Resources.unreserved`, ...

Mesos interop: :meth:`Resources.from_mesos` / :meth:`Resources.to_mesos` convert the
``protocol.mesos_common.Resource`` list (both the ``reservations`` stack and the legacy ``role`` +
``reservation`` form are read); :meth:`Resources.parse` reads the Mesos resource string
(``cpus:4;mem:4096;ports:[31000-32000];cpus(ml):2;zones:{a,b}``) and ``str(r)`` writes one back
(dynamic reservations and revocable entries use Mesos' own stringification,
``cpus(reservations: [(DYNAMIC,eng,alice)]){REV}:2``). Persistent volumes, shared resources and
resource providers are not modelled and are refused with a ResourceError.

The representation is a plain dict from an interned key string (the key's Mesos string form, e.g.
``cpus(ml){REV}``) to the quantity, plus a flag telling whether every quantity is a scalar, so the
allocator's hot paths (``+``, ``-``, ``contains`` on scalar-only values) are a few dict operations.
"""

from __future__ import annotations

import math
import re
import sys
from collections.abc import Callable, Iterable, Mapping
from typing import Any, NamedTuple

from protocol.mesos_common import (
    AllocationInfo,
    Attribute,
    Label,
    Labels,
    Range,
    Ranges,
    ReservationInfo,
    ReservationType,
    Resource,
    RevocableInfo,
    Scalar,
    Text,
    ValueSet,
    ValueType,
)

__pure__ = True

__all__ = [
    "MAX_SCALAR",
    "UNRESERVED_ROLE",
    "RangesValue",
    "Reservation",
    "ResourceError",
    "ResourceKey",
    "Resources",
    "Value",
    "attributes_from_mesos",
    "attributes_to_mesos",
    "check_role",
    "is_subrole",
    "parse_attributes",
    "role_ancestors",
]

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


def _mismatch(key: str, a: Value, b: Value) -> ResourceError:
    return ResourceError(f"resource {_KEY_OF[key].name!r}: cannot combine {_kind(a)} with {_kind(b)}")


def _add_value(key: str, a: Value, b: Value) -> Value:
    if isinstance(a, int):
        if isinstance(b, int):
            return a + b
        raise _mismatch(key, a, b)
    if isinstance(a, frozenset):
        if isinstance(b, frozenset):
            return a | b
        raise _mismatch(key, a, b)
    if isinstance(b, tuple):
        return _ranges_union(a, b)
    raise _mismatch(key, a, b)


def _sub_value(key: str, a: Value, b: Value) -> Value:
    if isinstance(a, int):
        if isinstance(b, int):
            return a - b if a > b else 0
        raise _mismatch(key, a, b)
    if isinstance(a, frozenset):
        if isinstance(b, frozenset):
            return a - b
        raise _mismatch(key, a, b)
    if isinstance(b, tuple):
        return _ranges_diff(a, b)
    raise _mismatch(key, a, b)


def _contains_value(key: str, a: Value, b: Value) -> bool:
    if isinstance(a, int):
        if isinstance(b, int):
            return a >= b
        raise _mismatch(key, a, b)
    if isinstance(a, frozenset):
        if isinstance(b, frozenset):
            return b <= a
        raise _mismatch(key, a, b)
    if isinstance(b, tuple):
        return _ranges_subset(b, a)
    raise _mismatch(key, a, b)


def _check_name(name: object) -> str:
    if not isinstance(name, str) or not _NAME_RE.fullmatch(name):
        raise ResourceError(f"invalid resource name {name!r}")
    return sys.intern(name)


def _check_kind(name: str, v: Value) -> None:
    if name in _SCALAR_NAMES and type(v) is not int:
        raise ResourceError(f"resource {name!r} must be a scalar")
    if name in _RANGES_NAMES and not (isinstance(v, tuple)):
        raise ResourceError(f"resource {name!r} must be ranges")


def _put(d: dict[str, Value], key: ResourceKey, v: Value) -> None:
    """Add ``v`` into builder dict ``d`` (zero quantities are skipped)."""
    _check_kind(key.name, v)
    if not v:
        return
    h = _head(key)
    cur = d.get(h)
    d[h] = v if cur is None else _add_value(h, cur, v)


# Keys are interned: internally a Resources maps the canonical string form of its ResourceKey
# (the part of the Mesos resource string before ':', e.g. "cpus(ml){REV}") to the quantity. An
# interned str caches its hash and compares by identity, which makes the dict operations of the
# hot paths cheap. The memo grows with the number of distinct keys ever seen (names x
# reservation stacks x revocable), which is small in a cluster.
_KEY_OF: dict[str, ResourceKey] = {}
_HEAD_OF: dict[ResourceKey, str] = {}


def _head(key: ResourceKey) -> str:
    h = _HEAD_OF.get(key)
    if h is None:
        h = sys.intern(_fmt_head(key))
        _HEAD_OF[key] = h
        _KEY_OF[h] = key
    return h


# --- the Resources type -----------------------------------------------------------------------


class Resources:
    """An immutable bag of resources; see the module docstring for the model."""

    __slots__ = ("_d", "_h", "_simple")

    _d: dict[str, Value]
    _simple: bool
    _h: int  # set lazily by __hash__

    def __init__(self) -> None:
        _SET_D(self, {})
        _SET_SIMPLE(self, True)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("Resources is immutable")

    def __delattr__(self, name: str) -> None:
        raise AttributeError("Resources is immutable")

    def __reduce__(self) -> tuple[Any, ...]:
        return (_from_entries, (tuple((_KEY_OF[k], v) for k, v in self._d.items()),))

    # --- construction -------------------------------------------------------------------------

    @classmethod
    def empty(cls) -> Resources:
        return EMPTY

    @classmethod
    def of(
        cls,
        *,
        cpus: float = 0,
        mem: float = 0,
        disk: float = 0,
        gpus: float = 0,
        ports: Iterable[tuple[int, int]] = (),
        role: str = UNRESERVED_ROLE,
        revocable: bool = False,
        **scalars: float,
    ) -> Resources:
        """Build from keyword quantities; ``role`` other than ``"*"`` is a static reservation."""
        check_role(role)
        res: tuple[Reservation, ...] = () if role == UNRESERVED_ROLE else (Reservation(role),)
        rev = bool(revocable)
        d: dict[str, Value] = {}
        for name, value in (("cpus", cpus), ("mem", mem), ("disk", disk), ("gpus", gpus), *scalars.items()):
            _put(d, ResourceKey(_check_name(name), res, rev), _scalar_milli(name, value))
        _put(d, ResourceKey("ports", res, rev), _normalize_ranges("ports", ports))
        return _make_checked(d)

    @classmethod
    def scalar_entry(
        cls, name: str, value: float, *, reservations: tuple[Reservation, ...] = (), revocable: bool = False
    ) -> Resources:
        name = _check_name(name)
        d: dict[str, Value] = {}
        _put(
            d,
            ResourceKey(name, _check_reservations(name, reservations), bool(revocable)),
            _scalar_milli(name, value),
        )
        return _make_checked(d)

    @classmethod
    def ranges_entry(
        cls,
        name: str,
        ranges: Iterable[tuple[int, int]],
        *,
        reservations: tuple[Reservation, ...] = (),
        revocable: bool = False,
    ) -> Resources:
        name = _check_name(name)
        d: dict[str, Value] = {}
        key = ResourceKey(name, _check_reservations(name, reservations), bool(revocable))
        _put(d, key, _normalize_ranges(name, ranges))
        return _make_checked(d)

    @classmethod
    def set_entry(
        cls,
        name: str,
        items: Iterable[str],
        *,
        reservations: tuple[Reservation, ...] = (),
        revocable: bool = False,
    ) -> Resources:
        name = _check_name(name)
        d: dict[str, Value] = {}
        key = ResourceKey(name, _check_reservations(name, reservations), bool(revocable))
        _put(d, key, _check_items(name, items))
        return _make_checked(d)

    @classmethod
    def sum(cls, items: Iterable[Resources]) -> Resources:
        """Sum many values with one accumulator (faster than repeated ``+``)."""
        d: dict[str, Value] = {}
        simple = True
        for r in items:
            if not r._simple:
                simple = False
            if simple:
                get = d.get
                for k, v in r._d.items():
                    d[k] = get(k, 0) + v  # type: ignore[operator]
            else:
                for k, v in r._d.items():
                    cur = d.get(k)
                    d[k] = v if cur is None else _add_value(k, cur, v)
        return _make(d, simple) if d else EMPTY

    @classmethod
    def parse(cls, text: str) -> Resources:
        """Parse a Mesos resource string, e.g. ``cpus:4;mem:4096;ports:[31000-32000];cpus(ml):2``."""
        if not isinstance(text, str):
            raise ResourceError(f"resource string must be a str, got {type(text).__name__}")
        d: dict[str, Value] = {}
        for raw in text.split(";"):
            token = raw.strip()
            if not token:
                continue
            key, value = _parse_token(token)
            _put(d, key, value)
        return _make_checked(d)

    @classmethod
    def from_mesos(cls, resources: Iterable[Resource]) -> Resources:
        """Read a Mesos ``Resource`` list (refined ``reservations`` or legacy ``role``/``reservation``)."""
        d: dict[str, Value] = {}
        for res in resources:
            key, value = _from_mesos_one(res)
            _put(d, key, value)
        return _make_checked(d)

    # --- conversion ---------------------------------------------------------------------------

    def to_mesos(self, allocation_role: str | None = None) -> tuple[Resource, ...]:
        """Mesos ``Resource`` list: ``role`` + ``reservations`` always, ``allocation_info`` if asked."""
        alloc = None
        if allocation_role is not None:
            alloc = AllocationInfo(role=check_role(allocation_role))
        out: list[Resource] = []
        for key, v in self._sorted_items():
            reservations = tuple(
                ReservationInfo(
                    type=ReservationType.DYNAMIC if r.dynamic else ReservationType.STATIC,
                    role=r.role,
                    principal=r.principal,
                    labels=Labels(tuple(Label(k, lv) for k, lv in r.labels)) if r.labels else None,
                )
                for r in key.reservations
            )
            common: dict[str, Any] = {
                "name": key.name,
                "role": key.role,
                "reservations": reservations,
                "revocable": RevocableInfo() if key.revocable else None,
                "allocation_info": alloc,
            }
            if type(v) is int:
                out.append(Resource(type=ValueType.SCALAR, scalar=Scalar(v / 1000), **common))
            elif isinstance(v, frozenset):
                out.append(Resource(type=ValueType.SET, set=ValueSet(tuple(sorted(v))), **common))
            else:
                assert isinstance(v, tuple)
                rng = Ranges(tuple(Range(b, e) for b, e in v))
                out.append(Resource(type=ValueType.RANGES, ranges=rng, **common))
        return tuple(out)

    def to_legacy_dict(self) -> dict[str, float | str]:
        """Flattened view as in Mesos ``/state``: ``{"cpus": 4.0, ..., "ports": "[31000-32000]"}``."""
        out: dict[str, float | str] = {"cpus": 0.0, "mem": 0.0, "disk": 0.0, "gpus": 0.0}
        for key, v in self.flatten()._sorted_items():
            if type(v) is int:
                out[key.name] = v / 1000
            elif isinstance(v, frozenset):
                out[key.name] = "{" + ", ".join(sorted(v)) + "}"
            else:
                assert isinstance(v, tuple)
                out[key.name] = _fmt_ranges(v)
        return out

    def __str__(self) -> str:
        return "; ".join(_fmt_entry(_HEAD_OF[k], v) for k, v in self._sorted_items())

    def __repr__(self) -> str:
        return f"Resources({str(self)!r})"

    # --- algebra ------------------------------------------------------------------------------

    def __add__(self, other: object) -> Resources:
        if not isinstance(other, Resources):
            return NotImplemented
        od = other._d
        if not od:
            return self
        sd = self._d
        if not sd:
            return other
        d = sd.copy()
        if self._simple and other._simple:
            get = d.get
            for k, v in od.items():
                d[k] = get(k, 0) + v  # type: ignore[operator]
            r = _new(Resources)
            _SET_D(r, d)
            _SET_SIMPLE(r, True)
            return r
        for k, v in od.items():
            cur = d.get(k)
            if cur is None:
                d[k] = v
            elif type(cur) is int and type(v) is int:
                d[k] = cur + v
            else:
                d[k] = _add_value(k, cur, v)
        return _make(d, False)

    def __sub__(self, other: object) -> Resources:
        if not isinstance(other, Resources):
            return NotImplemented
        od = other._d
        sd = self._d
        if not od or not sd:
            return self
        d = sd.copy()
        if self._simple and other._simple:
            get = d.get
            for k, v in od.items():
                cur = get(k)
                if cur is not None:
                    if cur > v:  # type: ignore[operator]
                        d[k] = cur - v  # type: ignore[operator]
                    else:
                        del d[k]
            if not d:
                return EMPTY
            r = _new(Resources)
            _SET_D(r, d)
            _SET_SIMPLE(r, True)
            return r
        removed_non_scalar = False
        for k, v in od.items():
            cur = d.get(k)
            if cur is None:
                continue
            if type(cur) is int and type(v) is int:
                if cur > v:
                    d[k] = cur - v
                else:
                    del d[k]
                continue
            rem = _sub_value(k, cur, v)
            if rem:
                d[k] = rem
            else:
                del d[k]
                removed_non_scalar = True
        return _make_checked(d) if (removed_non_scalar or not d) else _make(d, self._simple)

    def __mul__(self, factor: object) -> Resources:
        """``r * k`` == ``r + r + ... + r`` (k times): scalars scale, ranges/sets stay."""
        if isinstance(factor, bool) or not isinstance(factor, int):
            return NotImplemented
        if factor < 0:
            raise ResourceError(f"cannot multiply resources by a negative number ({factor})")
        if factor == 0:
            return EMPTY
        d = {k: (v * factor if type(v) is int else v) for k, v in self._d.items()}
        for k, v in d.items():
            if type(v) is int and v > _MAX_MILLI:
                raise ResourceError(
                    f"resource {_KEY_OF[k].name!r}: scalar is absurdly large after multiplication"
                )
        return _make(d, self._simple)

    __rmul__ = __mul__

    def contains(self, other: Resources) -> bool:
        """True if every entry of ``other`` fits in the same-keyed entry of ``self``."""
        sd = self._d
        od = other._d
        if len(od) > len(sd):
            return False
        if self._simple and other._simple:
            get = sd.get
            for k, v in od.items():  # noqa: SIM110 (a plain loop is faster than all())
                if get(k, 0) < v:  # type: ignore[operator]
                    return False
            return True
        for k, v in od.items():
            cur = sd.get(k)
            if cur is None:
                return False
            if type(cur) is int and type(v) is int:
                if cur < v:
                    return False
            elif not _contains_value(k, cur, v):
                return False
        return True

    def __le__(self, other: object) -> bool:
        if not isinstance(other, Resources):
            return NotImplemented
        return other.contains(self)

    def __ge__(self, other: object) -> bool:
        if not isinstance(other, Resources):
            return NotImplemented
        return self.contains(other)

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, Resources):
            return NotImplemented
        return self._d != other._d and other.contains(self)

    def __gt__(self, other: object) -> bool:
        if not isinstance(other, Resources):
            return NotImplemented
        return self._d != other._d and self.contains(other)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Resources):
            return NotImplemented
        return self._d == other._d

    def __ne__(self, other: object) -> bool:
        if not isinstance(other, Resources):
            return NotImplemented
        return self._d != other._d

    def __hash__(self) -> int:
        try:
            return self._h
        except AttributeError:
            h = hash(frozenset(self._d.items()))
            _SET_H(self, h)
            return h

    def __bool__(self) -> bool:
        return bool(self._d)

    def is_empty(self) -> bool:
        return not self._d

    # --- queries ------------------------------------------------------------------------------

    def scalar(self, name: str) -> float:
        """Total of scalar ``name`` over all roles and revocability."""
        return self.milli(name) / 1000

    def milli(self, name: str) -> int:
        """Exact total of scalar ``name`` in thousandths."""
        total = 0
        ko = _KEY_OF
        for k, v in self._d.items():
            if type(v) is int and ko[k][0] == name:
                total += v
        return total

    def scalars(self) -> dict[str, float]:
        """Scalar totals per name, flattened over roles and revocability."""
        acc: dict[str, int] = {}
        ko = _KEY_OF
        for k, v in self._d.items():
            if type(v) is int:
                n = ko[k][0]
                acc[n] = acc.get(n, 0) + v
        return {n: m / 1000 for n, m in acc.items()}

    def names(self) -> frozenset[str]:
        return frozenset(_KEY_OF[k][0] for k in self._d)

    def ranges(self, name: str) -> RangesValue:
        """Union of the ranges named ``name`` over all roles and revocability."""
        out: RangesValue = ()
        ko = _KEY_OF
        for k, v in self._d.items():
            if isinstance(v, tuple) and ko[k][0] == name:
                out = _ranges_union(out, v)
        return out

    def ports(self) -> RangesValue:
        return self.ranges("ports")

    def set_items(self, name: str) -> frozenset[str]:
        out: frozenset[str] = frozenset()
        ko = _KEY_OF
        for k, v in self._d.items():
            if isinstance(v, frozenset) and ko[k][0] == name:
                out |= v
        return out

    def entries(self) -> tuple[tuple[ResourceKey, Value], ...]:
        """All ``(key, quantity)`` pairs in a stable order (scalars in thousandths)."""
        return tuple(self._sorted_items())

    def roles(self) -> frozenset[str]:
        """Effective roles present (``"*"`` for unreserved entries)."""
        return frozenset(_KEY_OF[k].role for k in self._d)

    # --- filters ------------------------------------------------------------------------------

    def filter(self, pred: Callable[[ResourceKey], bool]) -> Resources:
        ko = _KEY_OF
        d = {k: v for k, v in self._d.items() if pred(ko[k])}
        if len(d) == len(self._d):
            return self
        return _make_checked(d)

    def _no_head_has(self, ch: str) -> bool:
        # Heads of reserved entries contain "(", heads of revocable ones "{REV}".
        return all(ch not in k for k in self._d)

    def unreserved(self) -> Resources:
        if self._no_head_has("("):
            return self
        return self.filter(lambda k: not k[1])

    def reserved(self, role: str | None = None) -> Resources:
        """Reserved entries; with ``role``, those whose effective role is exactly ``role``."""
        if role is None:
            return self.filter(lambda k: bool(k[1]))
        return self.filter(lambda k: bool(k[1]) and k[1][-1][0] == role)

    def allocatable_to(self, role: str) -> Resources:
        """Unreserved entries plus those reserved to ``role`` or one of its ancestors."""
        if self._no_head_has("("):
            return self

        def ok(k: ResourceKey) -> bool:
            res = k[1]
            if not res:
                return True
            r = res[-1][0]
            return r == role or is_subrole(role, r)

        return self.filter(ok)

    def revocable(self) -> Resources:
        return self.filter(lambda k: k[2])

    def non_revocable(self) -> Resources:
        if self._no_head_has("{REV}"):
            return self
        return self.filter(lambda k: not k[2])

    def only(self, *names: str) -> Resources:
        wanted = frozenset(names)
        return self.filter(lambda k: k[0] in wanted)

    def without(self, *names: str) -> Resources:
        unwanted = frozenset(names)
        return self.filter(lambda k: k[0] not in unwanted)

    # --- transformations ----------------------------------------------------------------------

    def _rekey(self, f: Callable[[ResourceKey], ResourceKey]) -> Resources:
        d: dict[str, Value] = {}
        ko = _KEY_OF
        for k, v in self._d.items():
            nk = _head(f(ko[k]))
            cur = d.get(nk)
            d[nk] = v if cur is None else _add_value(nk, cur, v)
        return _make_checked(d)

    def as_revocable(self) -> Resources:
        return self._rekey(lambda k: k._replace(revocable=True))

    def flatten(self) -> Resources:
        """Drop reservations and revocability (merging entries)."""
        return self._rekey(lambda k: ResourceKey(k[0]) if (k[1] or k[2]) else k)

    def reserve(
        self,
        role: str,
        principal: str | None = None,
        *,
        dynamic: bool = True,
        labels: Mapping[str, str | None] | None = None,
    ) -> Resources:
        """Push a reservation to ``role`` onto every entry (refining existing reservations)."""
        check_role(role, allow_unreserved=False)
        new = Reservation(role, bool(dynamic), principal or None, _labels_tuple(labels or {}))

        def push(k: ResourceKey) -> ResourceKey:
            if k[1] and not is_subrole(role, k[1][-1][0]):
                raise ResourceError(
                    f"resource {k.name!r}: cannot refine reservation of role {k.role!r} to {role!r}"
                    " (must be a strict subrole)"
                )
            return k._replace(reservations=(*k[1], new))

        return self._rekey(push)

    def unreserve(self) -> Resources:
        """Pop the last reservation of every reserved entry."""
        return self._rekey(lambda k: k._replace(reservations=k[1][:-1]) if k[1] else k)

    # --- internals ----------------------------------------------------------------------------

    def _sorted_items(self) -> list[tuple[ResourceKey, Value]]:
        ko = _KEY_OF
        return sorted(((ko[k], v) for k, v in self._d.items()), key=lambda kv: _sort_key(kv[0]))


_SET_D: Callable[[Resources, dict[str, Value]], None] = Resources.__dict__["_d"].__set__
_SET_SIMPLE: Callable[[Resources, bool], None] = Resources.__dict__["_simple"].__set__
_SET_H: Callable[[Resources, int], None] = Resources.__dict__["_h"].__set__
_new = object.__new__


def _make(d: dict[str, Value], simple: bool) -> Resources:
    r: Resources = _new(Resources)
    _SET_D(r, d)
    _SET_SIMPLE(r, simple)
    return r


def _make_checked(d: dict[str, Value]) -> Resources:
    if not d:
        return EMPTY
    simple = True
    for v in d.values():
        if type(v) is not int:
            simple = False
            break
    return _make(d, simple)


def _from_entries(items: tuple[tuple[ResourceKey, Value], ...]) -> Resources:
    d: dict[str, Value] = {}
    for key, v in items:
        _put(d, key, v)
    return _make_checked(d)


EMPTY = Resources()


def _sort_key(k: ResourceKey) -> tuple[Any, ...]:
    return (
        k.name,
        k.revocable,
        tuple(
            (r.role, r.dynamic, r.principal or "", tuple((a, b or "") for a, b in r.labels))
            for r in k.reservations
        ),
    )


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


# --- Mesos Resource conversion ----------------------------------------------------------------


def _reservation_from_mesos(
    name: str, info: ReservationInfo, *, legacy_role: str | None = None
) -> Reservation:
    role = info.role if legacy_role is None else legacy_role
    if role is None:
        raise ResourceError(f"resource {name!r}: reservation without a role")
    check_role(role, allow_unreserved=False)
    if legacy_role is not None:
        dynamic = True  # legacy: presence of `reservation` means dynamically reserved
    elif info.type is ReservationType.DYNAMIC:
        dynamic = True
    elif info.type is ReservationType.STATIC:
        dynamic = False
    else:
        raise ResourceError(f"resource {name!r}: reservation type must be STATIC or DYNAMIC, got {info.type}")
    labels: tuple[tuple[str, str | None], ...] = ()
    if info.labels is not None and info.labels.labels:
        labels = _labels_tuple({lb.key: lb.value for lb in info.labels.labels})
    return Reservation(role, dynamic, info.principal or None, labels)


def _from_mesos_one(res: Resource) -> tuple[ResourceKey, Value]:
    if not isinstance(res, Resource):
        raise ResourceError(f"expected a mesos Resource, got {type(res).__name__}")
    name = _check_name(res.name)
    if res.shared is not None or res.provider_id is not None:
        raise ResourceError(f"resource {name!r}: shared and resource-provider resources are not supported")
    if res.disk is not None and (res.disk.persistence is not None or res.disk.volume is not None):
        raise ResourceError(f"resource {name!r}: persistent volumes are not supported")

    value: Value
    if res.type is ValueType.SCALAR and res.scalar is not None:
        value = _scalar_milli(name, res.scalar.value)
    elif res.type is ValueType.RANGES and res.ranges is not None:
        value = _normalize_ranges(name, ((r.begin, r.end) for r in res.ranges.range))
    elif res.type is ValueType.SET and res.set is not None:
        value = _check_items(name, res.set.item)
    else:
        raise ResourceError(f"resource {name!r}: type {res.type} without a matching value")

    if res.reservations:
        if res.reservation is not None:
            raise ResourceError(f"resource {name!r}: both 'reservation' and 'reservations' are set")
        stack = _check_reservations(name, tuple(_reservation_from_mesos(name, r) for r in res.reservations))
        # proto2 defaults `role` to "*", so a serializer may send it alongside the stack.
        if res.role not in (None, UNRESERVED_ROLE, stack[-1].role):
            raise ResourceError(
                f"resource {name!r}: role {res.role!r} disagrees with reservations (effective {stack[-1].role!r})"
            )
    else:
        role = UNRESERVED_ROLE if res.role is None else check_role(res.role)
        if role == UNRESERVED_ROLE:
            if res.reservation is not None:
                raise ResourceError(f"resource {name!r}: 'reservation' set on an unreserved resource")
            stack = ()
        elif res.reservation is not None:
            stack = (_reservation_from_mesos(name, res.reservation, legacy_role=role),)
        else:
            stack = (Reservation(role),)
    return ResourceKey(name, stack, res.revocable is not None), value


# --- the Mesos resource string ----------------------------------------------------------------

_NAME_RE = re.compile(r"[A-Za-z0-9_.\-/]+")
_TOKEN_NAME_RE = re.compile(r"([A-Za-z0-9_.\-/]+)\s*(?:\((.*)\))?\s*(\{REV\})?", re.S)
_DECIMAL_RE = re.compile(r"(\d*)(?:\.(\d*))?")
_RANGE_RE = re.compile(r"\s*(\d+)\s*-\s*(\d+)\s*")
_RES_LIST_RE = re.compile(r"reservations\s*:\s*\[(.*)\]", re.S)
_RES_ITEM_RE = re.compile(r"\s*\(([^()]*)\)\s*(?:,|$)")
_SPECIAL = frozenset("%;,(){}[]=: \t\n\r\v\f")


def _quote(s: str) -> str:
    if not any(c in _SPECIAL for c in s):
        return s
    return "".join(f"%{ord(c):02X}" if c in _SPECIAL else c for c in s)


_PCT_RE = re.compile(r"%([0-9A-Fa-f]{2})")


def _unquote(s: str) -> str:
    if "%" not in s:
        return s
    return _PCT_RE.sub(lambda m: chr(int(m.group(1), 16)), s)


def _split_value(token: str) -> tuple[str, str]:
    depth = 0
    for i, c in enumerate(token):
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == ":" and depth == 0:
            return token[:i].strip(), token[i + 1 :].strip()
    raise ResourceError(f"bad resource token {token!r}: expected 'name:value'")


def _parse_scalar_text(token: str, name: str, text: str) -> int:
    m = _DECIMAL_RE.fullmatch(text)
    if m and (m.group(1) or m.group(2)):
        whole = int(m.group(1) or "0")
        frac = (m.group(2) or "") + "0000"
        milli = whole * 1000 + int(frac[:3]) + (1 if frac[3] >= "5" else 0)
        if milli > _MAX_MILLI:
            raise ResourceError(f"bad resource token {token!r}: scalar is absurdly large")
        return milli
    try:
        f = float(text)
    except ValueError:
        raise ResourceError(f"bad resource token {token!r}: {text!r} is not a number") from None
    try:
        return _scalar_milli(name, f)
    except ResourceError as e:
        raise ResourceError(f"bad resource token {token!r}: {e}") from None


def _parse_ranges_text(token: str, name: str, text: str) -> RangesValue:
    inner = text[1:-1].strip()
    if not inner:
        return ()
    pairs: list[tuple[int, int]] = []
    for part in inner.split(","):
        m = _RANGE_RE.fullmatch(part)
        if not m:
            raise ResourceError(f"bad resource token {token!r}: bad range {part.strip()!r}")
        pairs.append((int(m.group(1)), int(m.group(2))))
    try:
        return _normalize_ranges(name, pairs)
    except ResourceError as e:
        raise ResourceError(f"bad resource token {token!r}: {e}") from None


def _parse_set_text(token: str, text: str) -> frozenset[str]:
    inner = text[1:-1].strip()
    if not inner:
        return frozenset()
    items = [it.strip() for it in inner.split(",")]
    if any(not it for it in items):
        raise ResourceError(f"bad resource token {token!r}: empty set item")
    return frozenset(_unquote(it) for it in items)


def _parse_value_text(token: str, name: str, text: str) -> Value:
    if not text:
        raise ResourceError(f"bad resource token {token!r}: missing value")
    if text[0] == "[":
        if text[-1] != "]":
            raise ResourceError(f"bad resource token {token!r}: unterminated ranges")
        return _parse_ranges_text(token, name, text)
    if text[0] == "{":
        if text[-1] != "}":
            raise ResourceError(f"bad resource token {token!r}: unterminated set")
        return _parse_set_text(token, text)
    return _parse_scalar_text(token, name, text)


def _parse_reservation_item(token: str, text: str) -> Reservation:
    parts = [p.strip() for p in text.split(",", 3)]
    if len(parts) < 2:
        raise ResourceError(f"bad resource token {token!r}: reservation needs (TYPE,role)")
    rtype = parts[0].upper()
    if rtype not in ("STATIC", "DYNAMIC"):
        raise ResourceError(f"bad resource token {token!r}: reservation type {parts[0]!r}")
    role = check_role(parts[1], allow_unreserved=False)
    principal = _unquote(parts[2]) if len(parts) > 2 and parts[2] else None
    labels: tuple[tuple[str, str | None], ...] = ()
    if len(parts) > 3:
        lt = parts[3]
        if not (lt.startswith("{") and lt.endswith("}")):
            raise ResourceError(f"bad resource token {token!r}: labels must be {{k=v,...}}")
        lm: dict[str, str | None] = {}
        for item in lt[1:-1].split(","):
            item = item.strip()
            if not item:
                continue
            k, eq, v = item.partition("=")
            lm[_unquote(k)] = _unquote(v) if eq else None
        labels = _labels_tuple(lm)
    return Reservation(role, rtype == "DYNAMIC", principal, labels)


def _parse_token(token: str) -> tuple[ResourceKey, Value]:
    head, text = _split_value(token)
    m = _TOKEN_NAME_RE.fullmatch(head)
    if not m:
        raise ResourceError(f"bad resource token {token!r}: bad name part {head!r}")
    name = sys.intern(m.group(1))
    inner = m.group(2)
    reservations: tuple[Reservation, ...] = ()
    if inner is not None:
        inner = inner.strip()
        lm = _RES_LIST_RE.fullmatch(inner)
        try:
            if lm:
                body = lm.group(1).strip()
                items: list[Reservation] = []
                pos = 0
                while pos < len(body):
                    im = _RES_ITEM_RE.match(body, pos)
                    if not im:
                        raise ResourceError(f"bad resource token {token!r}: bad reservation list")
                    items.append(_parse_reservation_item(token, im.group(1)))
                    pos = im.end()
                reservations = _check_reservations(name, tuple(items))
            elif check_role(inner) != UNRESERVED_ROLE:
                reservations = (Reservation(inner),)
        except ResourceError as e:
            if token in str(e):
                raise
            raise ResourceError(f"bad resource token {token!r}: {e}") from None
    value = _parse_value_text(token, name, text)
    try:
        _check_kind(name, value)
    except ResourceError as e:
        raise ResourceError(f"bad resource token {token!r}: {e}") from None
    return ResourceKey(name, reservations, m.group(3) is not None), value


def _fmt_reservation(r: Reservation) -> str:
    parts = ["DYNAMIC" if r.dynamic else "STATIC", r.role]
    if r.principal is not None or r.labels:
        parts.append(_quote(r.principal or ""))
    if r.labels:
        parts.append(
            "{" + ",".join(_quote(k) + ("" if v is None else "=" + _quote(v)) for k, v in r.labels) + "}"
        )
    return "(" + ",".join(parts) + ")"


def _fmt_head(key: ResourceKey) -> str:
    out = key.name
    res = key.reservations
    if len(res) == 1 and not res[0].dynamic and res[0].principal is None and not res[0].labels:
        out += f"({res[0].role})"
    elif res:
        out += "(reservations: [" + ",".join(_fmt_reservation(r) for r in res) + "])"
    if key.revocable:
        out += "{REV}"
    return out


def _fmt_entry(out: str, v: Value) -> str:
    if type(v) is int:
        return f"{out}:{_fmt_milli(v)}"
    if isinstance(v, frozenset):
        return f"{out}:{{" + ", ".join(_quote(i) for i in sorted(v)) + "}"
    assert isinstance(v, tuple)
    return f"{out}:{_fmt_ranges(v)}"


# --- attributes -------------------------------------------------------------------------------

_NUMBER_RE = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?")


def _attr_value(name: str, text: str) -> str | float:
    token = f"{name}:{text}"
    if not text:
        raise ResourceError(f"bad attribute {token!r}: missing value")
    if text[0] == "[":
        if text[-1] != "]":
            raise ResourceError(f"bad attribute {token!r}: unterminated ranges")
        return _fmt_ranges(_parse_ranges_text(token, name, text))
    if text[0] == "{":
        if text[-1] != "}":
            raise ResourceError(f"bad attribute {token!r}: unterminated set")
        return "{" + ",".join(sorted(_parse_set_text(token, text))) + "}"
    if _NUMBER_RE.fullmatch(text):
        return float(text)
    return text


def parse_attributes(text: str) -> dict[str, str | float]:
    """Parse a Mesos attribute string ``rack:r1;zone:a;slots:4;ports:[1-3]``.

    Numbers become floats, ranges and sets normalized strings (``"[1-3]"``, ``"{a,b}"``),
    anything else text.
    """
    if not isinstance(text, str):
        raise ResourceError(f"attribute string must be a str, got {type(text).__name__}")
    out: dict[str, str | float] = {}
    for raw in text.split(";"):
        token = raw.strip()
        if not token:
            continue
        name, sep, value = token.partition(":")
        name = name.strip()
        if not sep or not _NAME_RE.fullmatch(name):
            raise ResourceError(f"bad attribute {token!r}: expected 'name:value'")
        if name in out:
            raise ResourceError(f"bad attribute {token!r}: duplicate attribute {name!r}")
        out[name] = _attr_value(name, value.strip())
    return out


def attributes_to_mesos(attributes: Mapping[str, str | float]) -> tuple[Attribute, ...]:
    """Mesos ``Attribute`` list; ``"[a-b]"`` strings become RANGES, ``"{x,y}"`` SET."""
    out: list[Attribute] = []
    for name in sorted(attributes):
        v = attributes[name]
        if not isinstance(name, str) or not _NAME_RE.fullmatch(name):
            raise ResourceError(f"invalid attribute name {name!r}")
        if isinstance(v, bool) or not isinstance(v, (str, int, float)):
            raise ResourceError(f"attribute {name!r}: value must be str or number, got {type(v).__name__}")
        if isinstance(v, (int, float)):
            if not math.isfinite(v):
                raise ResourceError(f"attribute {name!r}: value must be finite")
            out.append(Attribute(name=name, type=ValueType.SCALAR, scalar=Scalar(float(v))))
        elif v.startswith("[") and v.endswith("]"):
            rng = _parse_ranges_text(f"{name}:{v}", name, v)
            out.append(
                Attribute(name=name, type=ValueType.RANGES, ranges=Ranges(tuple(Range(b, e) for b, e in rng)))
            )
        elif v.startswith("{") and v.endswith("}"):
            items = _parse_set_text(f"{name}:{v}", v)
            out.append(Attribute(name=name, type=ValueType.SET, set=ValueSet(tuple(sorted(items)))))
        else:
            out.append(Attribute(name=name, type=ValueType.TEXT, text=Text(v)))
    return tuple(out)


def attributes_from_mesos(attributes: Iterable[Attribute]) -> dict[str, str | float]:
    """Inverse of :func:`attributes_to_mesos`."""
    out: dict[str, str | float] = {}
    for a in attributes:
        if not isinstance(a, Attribute):
            raise ResourceError(f"expected a mesos Attribute, got {type(a).__name__}")
        name = a.name
        if name in out:
            raise ResourceError(f"duplicate attribute {name!r}")
        if a.type is ValueType.SCALAR and a.scalar is not None:
            f = a.scalar.value
            if isinstance(f, bool) or not isinstance(f, (int, float)) or not math.isfinite(f):
                raise ResourceError(f"attribute {name!r}: scalar must be a finite number")
            out[name] = float(f)
        elif a.type is ValueType.RANGES and a.ranges is not None:
            out[name] = _fmt_ranges(_normalize_ranges(name, ((r.begin, r.end) for r in a.ranges.range)))
        elif a.type is ValueType.SET and a.set is not None:
            out[name] = "{" + ",".join(sorted(_check_items(name, a.set.item))) + "}"
        elif a.type is ValueType.TEXT and a.text is not None:
            out[name] = a.text.value
        else:
            raise ResourceError(f"attribute {name!r}: type {a.type} without a matching value")
    return out
