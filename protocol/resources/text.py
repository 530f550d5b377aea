"""The Mesos resource string (``cpus:4;mem:4096;ports:[31000-32000];cpus(ml){REV}:2``): parsing one
``;``-separated token into an entry, formatting an entry back, and the interning of entry keys by
their string form (``_head``/``_KEY_OF``), which ``Resources`` uses as its dict keys.
"""

from __future__ import annotations

import re
import sys

from protocol.resources.values import (
    _MAX_MILLI,
    UNRESERVED_ROLE,
    RangesValue,
    Reservation,
    ResourceError,
    ResourceKey,
    Value,
    _check_kind,
    _check_reservations,
    _fmt_milli,
    _fmt_ranges,
    _labels_tuple,
    _normalize_ranges,
    _scalar_milli,
    check_role,
)

__pure__ = True


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
