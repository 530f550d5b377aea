"""The codec's errors, limits and type forms (``protocol.codec`` re-exports the public ones)."""

from __future__ import annotations

import math
import types
import typing
from collections.abc import Callable
from typing import Any

import attrs

__pure__ = True


JSON = "application/json"
MSGPACK = "application/x-msgpack"
_Decoder = Callable[[Any, int], Any]
_Encoder = Callable[[Any], Any]


# --- errors and limits ----------------------------------------------------------------------


class DecodeError(ValueError):
    """Input that does not fit the schema. ``path`` names the field (``""`` = the whole message)."""

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"{path}: {reason}" if path else reason)

    def __reduce__(self) -> tuple[Any, ...]:
        return (DecodeError, (self.path, self.reason))


class ParseError(DecodeError):
    """The data is not JSON (or msgpack) text at all: syntax, encoding, a lone surrogate, size.
    Mesos answers these "Failed to parse body into JSON"; the other DecodeErrors are schema
    errors ("Failed to convert JSON into ... protobuf")."""

    def __reduce__(self) -> tuple[Any, ...]:
        return (ParseError, (self.path, self.reason))


class EncodeError(ValueError):
    """An object that does not fit its own schema (a bug in the caller, reported clearly)."""


class SchemaError(TypeError):
    """A message class uses a field type the codec does not support (a programming error)."""


class UnsupportedMediaType(ValueError):
    """A media type other than :data:`JSON` or :data:`MSGPACK`."""


@attrs.frozen
class Limits:
    """Decoding limits. ``max_bytes`` is checked before anything is parsed."""

    max_bytes: int = 4 * 1024 * 1024
    max_depth: int = 64
    max_list_len: int = 100_000
    max_map_len: int = 100_000
    max_str_len: int = 1024 * 1024


DEFAULT_LIMITS = Limits()


class _Fail(Exception):
    """Internal: carries the reason and collects the path (innermost first) while unwinding."""

    __slots__ = ("parts", "reason")

    def __init__(self, reason: str) -> None:
        self.reason = reason
        self.parts: list[str] = []


def _path(parts: list[str]) -> str:
    out = ""
    for part in reversed(parts):
        if part.startswith("["):
            out += part
        else:
            out = f"{out}.{part}" if out else part
    return out


_DROP: Any = object()  # an unknown enum name in an optional position: leave the field out
_MISSING: Any = object()
_INT_MIN = -(2**63)  # int64 .. uint64: what protobuf and msgpack can carry
_INT_MAX = 2**64 - 1
_NONFINITE = {"Infinity": math.inf, "-Infinity": -math.inf, "NaN": math.nan}


def _typename(v: Any) -> str:
    if v is None:
        return "null"
    return {
        dict: "object",
        list: "array",
        str: "string",
        bool: "bool",
        int: "integer",
        float: "number",
        bytes: "bytes",
    }.get(type(v), type(v).__name__)


# --- type forms -----------------------------------------------------------------------------


def _is_message(tp: Any) -> bool:
    return isinstance(tp, type) and attrs.has(tp)


def _split_optional(tp: Any) -> tuple[Any, bool]:
    """``X | None`` → (X, True); anything else → (tp, False)."""
    origin = typing.get_origin(tp)
    if origin is typing.Union or origin is types.UnionType:
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) != 1:
            raise SchemaError(f"unsupported union {tp!r}: only `X | None` is allowed")
        return args[0], True
    return tp, False


_hints_cache: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    hints = _hints_cache.get(cls)
    if hints is None:
        try:
            hints = typing.get_type_hints(cls)
        except Exception as e:  # NameError etc.: the class is not a usable schema
            raise SchemaError(f"cannot resolve type hints of {cls.__qualname__}: {e}") from e
        _hints_cache[cls] = hints
    return hints
