"""The ``Resources`` type: an immutable bag of entries with its constructors, exact arithmetic
(``+``, saturating ``-``, ``*``, ``contains``, per entry by ``_add_value``, ``_sub_value``,
``_contains_value``), views (``unreserved``, ``allocatable_to``, ...) and reservation changes; see
the package docstring for the model.
"""

from __future__ import annotations

from collections.abc import (
    Callable,
    Iterable,
    Mapping,
)
from typing import (
    Any,
)

from protocol.mesos_common import (
    AllocationInfo,
    Label,
    Labels,
    Range,
    Ranges,
    ReservationInfo,
    ReservationType,
    Resource,
    RevocableInfo,
    Scalar,
    ValueSet,
    ValueType,
)
from protocol.resources.conversion import (
    _from_mesos_one,
)
from protocol.resources.text import (
    _HEAD_OF,
    _KEY_OF,
    _fmt_entry,
    _head,
    _parse_token,
)
from protocol.resources.values import (
    _MAX_MILLI,
    UNRESERVED_ROLE,
    RangesValue,
    Reservation,
    ResourceError,
    ResourceKey,
    Value,
    _check_items,
    _check_kind,
    _check_name,
    _check_reservations,
    _fmt_ranges,
    _kind,
    _labels_tuple,
    _normalize_ranges,
    _ranges_diff,
    _ranges_subset,
    _ranges_union,
    _scalar_milli,
    check_role,
    is_subrole,
)

__pure__ = True


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


def _put(d: dict[str, Value], key: ResourceKey, v: Value) -> None:
    """Add ``v`` into builder dict ``d`` (zero quantities are skipped)."""
    _check_kind(key.name, v)
    if not v:
        return
    h = _head(key)
    cur = d.get(h)
    d[h] = v if cur is None else _add_value(h, cur, v)


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
        if self._no_head_has("{REV}"):  # (the usual case: nothing revocable)
            return EMPTY
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
        if not self._d:
            return self
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
