"""The codec's encoders: compiled once per (type, encoding) into closures (``protocol.codec`` is
the API)."""

from __future__ import annotations

import base64
import enum
import math
import typing
from typing import Any

import attrs

from protocol.codec_base import (
    SchemaError,
    _Encoder,
    _hints,
    _is_message,
    _split_optional,
)

__pure__ = True


# --- encoders -------------------------------------------------------------------------------

_enc_cache: dict[tuple[Any, bool], _Encoder] = {}


def _identity(v: Any) -> Any:
    return v


def _encoder(tp: Any, binary: bool) -> _Encoder:
    key = (tp, binary)
    enc = _enc_cache.get(key)
    if enc is None:
        if _is_message(tp):
            cell: list[_Encoder] = []

            def trampoline(v: Any) -> Any:
                enc = cell[0] if cell else _compile_message_encoder(tp, binary)
                return enc(v)

            _enc_cache[key] = trampoline
            try:
                real = _compile_message_encoder(tp, binary)
            except BaseException:
                del _enc_cache[key]
                raise
            cell.append(real)
            enc = real
        else:
            enc = _compile_encoder(tp, binary)
        _enc_cache[key] = enc
    return enc


def _enc_float_json(v: Any) -> Any:
    v = float(v)
    if math.isfinite(v):
        return v
    return "NaN" if v != v else ("Infinity" if v > 0 else "-Infinity")


def _enc_b64(v: Any) -> Any:
    return base64.b64encode(v).decode("ascii")


def _enc_enum(v: Any) -> Any:
    return v._name_  # (``name`` is a Python-level property; ``_name_`` the attribute behind it)


def _compile_encoder(tp: Any, binary: bool) -> _Encoder:
    inner, optional = _split_optional(tp)
    if optional:
        return _encoder(inner, binary)
    if tp is str or tp is int or tp is bool:
        return _identity
    if tp is float:
        return float if binary else _enc_float_json
    if tp is bytes:
        return _identity if binary else _enc_b64
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return _enc_enum
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is tuple:
        if len(args) != 2 or args[1] is not Ellipsis:
            raise SchemaError(f"unsupported tuple form {tp!r}: use tuple[X, ...]")
        item = _encoder(args[0], binary)
        if item is _identity:
            return list
        return lambda v: [item(x) for x in v]
    if origin is dict:
        if len(args) != 2 or args[0] is not str:
            raise SchemaError(f"unsupported dict form {tp!r}: use dict[str, X]")
        value = _encoder(args[1], binary)
        if value is _identity:
            return dict
        return lambda v: {k: value(x) for k, x in v.items()}
    raise SchemaError(f"unsupported field type {tp!r}")


def _is_id_message(tp: Any) -> bool:
    """A message class whose one field is ``value: str`` (ids: ``TaskID``, ``AgentID``, ...)."""
    if not _is_message(tp):
        return False
    fields = attrs.fields(tp)
    return len(fields) == 1 and fields[0].name == "value" and _hints(tp).get("value") is str


def _compile_message_encoder(cls: type, binary: bool) -> _Encoder:
    """Generate an encoder function for ``cls``: None and empty repeated/map fields are left out."""
    hints = _hints(cls)
    cls_name = cls.__qualname__
    ns: dict[str, Any] = {"F": _enc_float_json, "B64": base64.b64encode}
    lines = ["def enc_message(o):", "    out = {}"]
    for i, a in enumerate(attrs.fields(cls)):
        tp = hints.get(a.name)
        if tp is None:
            raise SchemaError(f"{cls_name}.{a.name} has no type hint")
        name = a.name
        inner, _ = _split_optional(tp)
        origin = typing.get_origin(inner)
        if inner is str or inner is int or inner is bool:
            value = "x"
        elif inner is float:
            # x - x == 0.0 only for finite floats; ints and non-finite values take the slow path
            value = "float(x)" if binary else "x if x.__class__ is float and x - x == 0.0 else F(x)"
        elif inner is bytes:
            value = "x" if binary else "B64(x).decode('ascii')"
        elif isinstance(inner, type) and issubclass(inner, enum.Enum):
            value = "x._name_"  # the member's name (``.name`` is a Python-level property)
        elif origin is tuple:
            item = _encoder(typing.get_args(inner)[0], binary)
            if item is _identity:
                value = "list(x)"
            else:
                ns[f"E{i}"] = item
                value = f"[E{i}(y) for y in x]"
        elif _is_id_message(inner):
            # an id ({"value": str}: TaskID, AgentID, ...), the most frequent message: inlined
            value = "{'value': x.value} if x.value is not None else {}"
        else:
            ns[f"E{i}"] = _encoder(inner, binary)
            value = f"E{i}(x)"
        test = "if x:" if origin in (tuple, dict) else "if x is not None:"
        lines += [f"    x = o.{name}", f"    {test}", f"        out[{name!r}] = {value}"]
    lines.append("    return out")
    exec(compile("\n".join(lines), f"<codec encoder {cls_name}>", "exec"), ns)
    return typing.cast(_Encoder, ns["enc_message"])
