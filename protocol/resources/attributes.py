"""Agent attributes: the Mesos attribute string (``rack:r1;zone:a``) and ``Attribute`` messages.
"""

from __future__ import annotations

import math
import re
from collections.abc import (
    Iterable,
    Mapping,
)

from protocol.mesos_common import (
    Attribute,
    Range,
    Ranges,
    Scalar,
    Text,
    ValueSet,
    ValueType,
)
from protocol.resources.text import (
    _parse_ranges_text,
    _parse_set_text,
)
from protocol.resources.values import (
    _NAME_RE,
    ResourceError,
    _check_items,
    _fmt_ranges,
    _normalize_ranges,
)

__pure__ = True


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
