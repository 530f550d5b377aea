"""One schema, two encodings: Mesos v1 JSON and native msgpack for ``@attrs.frozen`` messages.

The schema is the message classes themselves: their resolved type hints say how every field is
encoded. Allowed field types: ``str``, ``int``, ``float``, ``bool``, ``bytes``, an ``Enum``, another
message class, ``tuple[X, ...]``, ``dict[str, X]`` and ``X | None``. A field with a default is
optional (missing or ``null`` → the default); a field without one is required, except a repeated
or map field, which is never required: missing or ``null`` it is empty (protobuf has no required
repeated fields, and the encoder omits empty ones, so ``Frame(messages=())`` must come back).

JSON follows stout's mapping, i.e. what Mesos itself reads and writes:

* exact field names; enums by member name; ``bytes`` as standard padded base64;
* ``None`` fields and empty repeated/map fields are omitted; an empty message is ``{}``;
* ints are accepted where a float is declared, and so are ``"Infinity"``, ``"-Infinity"``,
  ``"NaN"`` and numeric strings (non-finite floats are also written that way); numeric strings
  are accepted for ints (proto3 writes int64 as strings);
* unknown keys are ignored; an unknown enum name is dropped in an optional or repeated field and
  an error in a required one;
* output is ASCII-only, compact, single-line.

msgpack has the same structure, but ``bytes`` stay raw and an unknown key is an error (the
native channel is strict).

Decoding is strict: the size limit is checked before parsing, then nesting depth, list, map and
string lengths, types (a bool is not an int and an int is not a bool) and required fields. Every
failure is a :class:`DecodeError` naming the field path, e.g.
``accept.operations[0].launch.task_infos[1].task_id``.

Only text that round-trips is accepted, so nothing decoded can fail to encode later (in a
registry write, on another framework's stream, on an agent's channel):

* a lone UTF-16 surrogate (``"\\ud800"`` is legal JSON text but no Unicode string, and has no
  UTF-8 form) anywhere -- a value, a key, a field the schema ignores -- is a :class:`ParseError`,
  as Mesos' JSON parser rejects it (msgpack strings are checked UTF-8 by the unpacker);
* an id (a class with ``__codec_id__ = True``: ``TaskID``, ``FrameworkID``, ...) follows Mesos'
  ``validateID`` where it concerns the wire: at most 255 characters and no control character
  (NUL included). Emptiness, ``/`` and the like are left to the semantic checks (Mesos answers
  those with ``TASK_ERROR``, not a 400).

Speed: the encoder/decoder for a type is compiled once into a tree of closures (cached per type,
encoding and limits) so a call never re-inspects type hints.
"""

from __future__ import annotations

import base64
import binascii
import enum
import json
import math
import re
import types
import typing
from collections.abc import Callable
from typing import Any, TypeVar

import attrs
import msgpack

__pure__ = True

__all__ = [
    "DEFAULT_LIMITS",
    "JSON",
    "MSGPACK",
    "DecodeError",
    "EncodeError",
    "Limits",
    "ParseError",
    "SchemaError",
    "UnsupportedMediaType",
    "decode",
    "decode_json",
    "decode_msgpack",
    "encode",
    "encode_json",
    "encode_msgpack",
    "from_builtins",
    "id_problem",
    "loads_json",
    "to_builtins",
    "unpack_msgpack",
]

JSON = "application/json"
MSGPACK = "application/x-msgpack"

T = TypeVar("T")

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


# --- decoders -------------------------------------------------------------------------------

_dec_cache: dict[tuple[Any, bool, Limits], _Decoder] = {}


def _decoder(tp: Any, binary: bool, limits: Limits) -> _Decoder:
    key = (tp, binary, limits)
    dec = _dec_cache.get(key)
    if dec is None:
        if _is_message(tp):
            # Register a trampoline first so that recursive schemas terminate.
            cell: list[_Decoder] = []

            def trampoline(v: Any, depth: int) -> Any:
                # cell is empty only while another thread is still compiling this class
                dec = cell[0] if cell else _compile_message_decoder(tp, binary, limits)
                return dec(v, depth)

            _dec_cache[key] = trampoline
            try:
                real = _compile_message_decoder(tp, binary, limits)
            except BaseException:
                del _dec_cache[key]
                raise
            cell.append(real)
            dec = real
        else:
            dec = _compile_decoder(tp, binary, limits)
        _dec_cache[key] = dec
    return dec


def _compile_decoder(tp: Any, binary: bool, limits: Limits) -> _Decoder:
    inner, optional = _split_optional(tp)
    if optional:
        return _decoder(inner, binary, limits)
    max_str = limits.max_str_len
    max_list = limits.max_list_len
    max_map = limits.max_map_len
    max_depth = limits.max_depth

    if tp is str:

        def dec_str(v: Any, depth: int) -> Any:
            if v.__class__ is not str:
                raise _Fail(f"expected string, got {_typename(v)}")
            if len(v) > max_str:
                raise _Fail(f"string of {len(v)} characters exceeds the limit of {max_str}")
            return v

        return dec_str

    if tp is bool:

        def dec_bool(v: Any, depth: int) -> Any:
            if v.__class__ is not bool:
                raise _Fail(f"expected bool, got {_typename(v)}")
            return v

        return dec_bool

    if tp is int:

        def dec_int(v: Any, depth: int) -> Any:
            cls = v.__class__
            out: Any = None
            if cls is int:
                out = v
            elif not binary:
                if cls is float and v.is_integer():
                    out = int(v)
                elif cls is str and 0 < len(v) <= 24:
                    try:
                        out = int(v.strip(), 10)
                    except ValueError:
                        pass
            if out is None:
                raise _Fail(f"expected integer, got {_typename(v)}")
            if not _INT_MIN <= out <= _INT_MAX:
                raise _Fail("integer out of the 64-bit range")
            return out

        return dec_int

    if tp is float:

        def dec_float(v: Any, depth: int) -> Any:
            cls = v.__class__
            if cls is float:
                return v
            if cls is int:
                try:
                    return float(v)
                except OverflowError:
                    raise _Fail("integer too large for a double") from None
            if not binary and cls is str and 0 < len(v) <= 64:
                special = _NONFINITE.get(v)
                if special is not None:
                    return special
                try:
                    return float(v)
                except ValueError:
                    pass
            raise _Fail(f"expected number, got {_typename(v)}")

        return dec_float

    if tp is bytes:
        if binary:

            def dec_bin(v: Any, depth: int) -> Any:
                if v.__class__ is not bytes:
                    raise _Fail(f"expected bytes, got {_typename(v)}")
                if len(v) > max_str:
                    raise _Fail(f"{len(v)} bytes exceed the limit of {max_str}")
                return v

            return dec_bin

        b64decode = base64.b64decode

        def dec_b64(v: Any, depth: int) -> Any:
            if v.__class__ is not str:
                raise _Fail(f"expected base64 string, got {_typename(v)}")
            if len(v) > max_str:
                raise _Fail(f"string of {len(v)} characters exceeds the limit of {max_str}")
            try:
                return b64decode(v, validate=True)
            except (binascii.Error, ValueError):
                raise _Fail("invalid base64") from None

        return dec_b64

    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        members = dict(tp.__members__)
        enum_name = tp.__name__

        def dec_enum(v: Any, depth: int) -> Any:
            if v.__class__ is not str:
                raise _Fail(f"expected {enum_name} name, got {_typename(v)}")
            m = members.get(v)
            if m is None:
                return _DROP
            return m

        return dec_enum

    origin = typing.get_origin(tp)
    args = typing.get_args(tp)

    if origin is tuple:
        if len(args) != 2 or args[1] is not Ellipsis:
            raise SchemaError(f"unsupported tuple form {tp!r}: use tuple[X, ...]")
        item = _decoder(args[0], binary, limits)
        # only an enum item can be dropped (an unknown name); other items decode or fail
        item_type, _ = _split_optional(args[0])
        drops = isinstance(item_type, type) and issubclass(item_type, enum.Enum)

        def dec_tuple(v: Any, depth: int) -> Any:
            if v.__class__ is not list:
                raise _Fail(f"expected array, got {_typename(v)}")
            if len(v) > max_list:
                raise _Fail(f"array of {len(v)} items exceeds the limit of {max_list}")
            if depth >= max_depth:
                raise _Fail(f"nesting deeper than {max_depth}")
            depth += 1
            out: list[Any]
            if not drops:
                out = []
                append = out.append
                try:
                    for x in v:
                        append(item(x, depth))
                    return tuple(out)
                except _Fail:
                    pass  # decoded again below, one by one, to name the failing item
            out = []
            i = 0
            try:
                for i, x in enumerate(v):  # noqa: B007 - i is read in the handler
                    y = item(x, depth)
                    if y is not _DROP:
                        out.append(y)
            except _Fail as e:
                e.parts.append(f"[{i}]")
                raise
            return tuple(out)

        return dec_tuple

    if origin is dict:
        if len(args) != 2 or args[0] is not str:
            raise SchemaError(f"unsupported dict form {tp!r}: use dict[str, X]")
        value = _decoder(args[1], binary, limits)

        def dec_dict(v: Any, depth: int) -> Any:
            if v.__class__ is not dict:
                raise _Fail(f"expected object, got {_typename(v)}")
            if len(v) > max_map:
                raise _Fail(f"object of {len(v)} entries exceeds the limit of {max_map}")
            if depth >= max_depth:
                raise _Fail(f"nesting deeper than {max_depth}")
            depth += 1
            out = {}
            for k, x in v.items():
                if k.__class__ is not str:
                    raise _Fail(f"expected string keys, got {_typename(k)}")
                try:
                    y = value(x, depth)
                except _Fail as e:
                    e.parts.append(k)
                    raise
                if y is not _DROP:
                    out[k] = y
            return out

        return dec_dict

    raise SchemaError(f"unsupported field type {tp!r}")


def _fail_at(name: str, reason: str) -> _Fail:
    f = _Fail(reason)
    f.parts.append(name)
    return f


def _field_default(a: Any) -> tuple[bool, Any]:
    """(is_factory, value) of an attrs field's default."""
    d = a.default
    if isinstance(d, attrs.Factory):  # type: ignore[arg-type]
        if d.takes_self:
            raise SchemaError(f"field {a.name}: a default factory taking self is not supported")
        return True, d.factory
    return False, d


def _unknown_fields(v: dict[Any, Any], names: frozenset[str], cls_name: str, max_map: int) -> _Fail:
    """The error for a binary object with keys that are not fields of its class."""
    if len(v) > max_map:
        return _Fail(f"object of {len(v)} entries exceeds the limit of {max_map}")
    unknown = sorted(repr(k) for k in v if k not in names)
    return _Fail(f"unknown field(s) {', '.join(unknown[:5])} in {cls_name}")


def _compile_message_decoder(cls: type, binary: bool, limits: Limits) -> _Decoder:
    """Generate a decoder function for ``cls`` (primitive fields inlined, others called).

    JSON: one ``get`` per field (unknown keys are ignored). msgpack (strict): one pass over the
    keys that are present -- messages are sparse (a TaskStatus sets 6-8 of its 16 fields, an
    agent envelope 2 of 17), so absent fields cost nothing but their default."""
    hints = _hints(cls)
    cls_name = cls.__qualname__
    ns: dict[str, Any] = {
        "_Fail": _Fail,
        "_MISSING": _MISSING,
        "_DROP": _DROP,
        "_typename": _typename,
        "_fail_at": _fail_at,
        "_unknown_fields": _unknown_fields,
        "CLS": cls,
        "MAX_STR": limits.max_str_len,
        "MAX_DEPTH": limits.max_depth,
        "MAX_MAP": limits.max_map_len,
    }
    names: list[str] = []
    head = [
        "def dec_message(v, depth):",
        "    if v.__class__ is not dict:",
        f"        raise _Fail({('expected ' + cls_name + ' object, got ')!r} + _typename(v))",
        "    if depth >= MAX_DEPTH:",
        f"        raise _Fail({('nesting deeper than ' + str(limits.max_depth))!r})",
        "    depth += 1",
    ]
    # per field: (name, local, required, is_factory, missing-lines, body-lines decoding x into local)
    specs: list[tuple[str, str, bool, bool, list[str], list[str]]] = []
    positional: list[str] = []
    keywords: list[str] = []
    for i, a in enumerate(attrs.fields(cls)):
        if not a.init:
            continue
        tp = hints.get(a.name)
        if tp is None:
            raise SchemaError(f"{cls_name}.{a.name} has no type hint")
        name = a.name
        names.append(name)
        inner, _ = _split_optional(tp)
        origin = typing.get_origin(inner)
        # A repeated or map field is never required: absent (as the encoder writes it when
        # empty, like stout) or null, it is empty -- also when the class gives it no default.
        required = a.default is attrs.NOTHING and origin is not tuple and origin is not dict
        f = f"f{i}"
        is_factory = False
        if required:
            missing = [f"        raise _Fail({('missing required field ' + repr(name))!r})"]
        else:
            if a.default is attrs.NOTHING:
                is_factory, default = (False, ()) if origin is tuple else (True, dict)
            else:
                is_factory, default = _field_default(a)
            ns[f"DEFAULT{i}"] = default
            missing = [f"        {f} = DEFAULT{i}()" if is_factory else f"        {f} = DEFAULT{i}"]
        body: list[str] = []
        generic = [
            "        try:",
            f"            {f} = D{i}(x, depth)",
            "        except _Fail as e:",
            f"            e.parts.append({name!r})",
            "            raise",
        ]
        if inner is str:
            body += [
                "        if x.__class__ is not str:",
                f"            raise _fail_at({name!r}, 'expected string, got ' + _typename(x))",
                "        if len(x) > MAX_STR:",
                f"            raise _fail_at({name!r}, 'string of %d characters exceeds the limit of %d' % (len(x), MAX_STR))",
                f"        {f} = x",
            ]
        elif inner is bool:
            body += [
                "        if x.__class__ is not bool:",
                f"            raise _fail_at({name!r}, 'expected bool, got ' + _typename(x))",
                f"        {f} = x",
            ]
        elif inner is int or inner is float:
            ns[f"D{i}"] = _decoder(inner, binary, limits)
            fast = "x.__class__ is float" if inner is float else "x.__class__ is int and -0x8000000000000000 <= x <= 0xFFFFFFFFFFFFFFFF"
            body += [f"        if {fast}:", f"            {f} = x", "        else:"]
            body += ["    " + line for line in generic]
        elif (id_cache := getattr(_decoder(inner, binary, limits), "id_cache", None)) is not None:
            # an id ({"value": str}, most of the messages decoded): one already seen is taken
            # from its decoder's table here; anything else goes through that decoder
            ns[f"D{i}"] = _decoder(inner, binary, limits)
            ns[f"IDC{i}"] = id_cache.get
            body += [
                "        if (",
                "            x.__class__ is dict and len(x) == 1 and depth < MAX_DEPTH",
                f"            and (s := x.get('value')).__class__ is str and (o := IDC{i}(s)) is not None",
                "        ):",
                f"            {f} = o",
                "        else:",
            ]
            body += ["    " + line for line in generic]
        else:
            ns[f"D{i}"] = _decoder(inner, binary, limits)
            body += generic
            if isinstance(inner, type) and issubclass(inner, enum.Enum):
                body.append(f"        if {f} is _DROP:")
                if required:
                    body.append(f"            raise _fail_at({name!r}, 'unknown enum name %r' % (x,))")
                else:
                    body.append("    " + missing[0])
        specs.append((name, f, required, is_factory, missing, body))
        if a.kw_only:
            keywords.append(f"{getattr(a, 'alias', None) or name}={f}")
        else:
            positional.append(f)
    lines = list(head)
    if binary:
        ns["NAMES"] = frozenset(names)
        for _name, f, required, is_factory, missing, _ in specs:
            lines.append(f"    {f} = _MISSING" if required or is_factory else missing[0][4:])
        lines.append("    for k, x in v.items():")
        for n, (name, _f, _, _, _, body) in enumerate(specs):
            lines.append(f"        {'if' if n == 0 else 'elif'} k == {name!r}:")
            lines.append("            if x is not None:")
            lines += ["        " + line for line in body]
        if specs:
            lines.append("        else:")
            lines.append(f"            raise _unknown_fields(v, NAMES, {cls_name!r}, MAX_MAP)")
        else:
            lines.append(f"        raise _unknown_fields(v, NAMES, {cls_name!r}, MAX_MAP)")
        for _name, f, required, is_factory, missing, _ in specs:
            if required or is_factory:
                lines.append(f"    if {f} is _MISSING:")
                lines += missing
    else:
        lines.append("    get = v.get")
        for name, _f, _, _, missing, body in specs:
            lines += [f"    x = get({name!r})", "    if x is None:", *missing, "    else:", *body]
    lines += [
        "    try:",
        f"        return CLS({', '.join(positional + keywords)})",
        "    except (TypeError, ValueError) as e:",
        f"        raise _Fail('invalid {cls_name}: %s' % (e,)) from None",
    ]
    exec(compile("\n".join(lines), f"<codec decoder {cls_name}>", "exec"), ns)
    dec = typing.cast(_Decoder, ns["dec_message"])
    if names == ["value"] and specs[0][2] and _split_optional(hints["value"])[0] is str:
        return _id_decoder(cls, dec, limits)
    memo_key = getattr(cls, "__codec_memo_key__", None)
    if memo_key is not None:
        return _memo_decoder(memo_key, dec, limits)
    return dec


MEMO_SIZE = 4096
MEMO_DEPTH = 4  # levels a memoized message may span below itself


def _memo_decoder(key_of: Callable[[Any], Any], generic: _Decoder, limits: Limits) -> _Decoder:
    """A class may name a ``__codec_memo_key__(raw) -> key | None``: the raw forms it keys decode
    once and the frozen result is shared (a bounded table). The key function must key only
    shapes whose decoding depends on nothing but the key (exact types included); others get
    ``None`` and the generic decoder. Only successful decodings are kept."""
    cache: dict[Any, Any] = {}
    max_depth = limits.max_depth - MEMO_DEPTH

    def dec_memo(v: Any, depth: int) -> Any:
        if depth <= max_depth:
            k = key_of(v)
            if k is not None:
                o = cache.get(k)
                if o is None:
                    o = generic(v, depth)
                    if len(cache) >= MEMO_SIZE:
                        cache.clear()
                    cache[k] = o
                return o
        return generic(v, depth)

    return dec_memo


ID_CACHE_SIZE = 4096
ID_MAX_LEN = 255  # Mesos' NAME_MAX: an id names a directory
_ID_BAD_CHAR = re.compile("[\x00-\x1f\x7f]")  # iscntrl(), NUL included


def id_problem(value: str) -> str | None:
    """Why ``value`` cannot be an id on the wire (Mesos' ``validateID`` wording), or None."""
    if len(value) > ID_MAX_LEN:
        return f"ID must not be greater than {ID_MAX_LEN} characters"
    if _ID_BAD_CHAR.search(value) is not None:
        shown = value[:64].encode("ascii", "backslashreplace").decode("ascii")
        shown = _ID_BAD_CHAR.sub(lambda m: f"\\x{ord(m.group()):02x}", shown)
        return f"'{shown}' contains invalid characters"
    return None


def _id_decoder(cls: type, generic: _Decoder, limits: Limits) -> _Decoder:
    """Ids (``{"value": str}``: TaskID, AgentID, FrameworkID, ...) are most of the messages a
    master decodes and the same few agent and framework ids recur in every update: a short path
    for the plain form, and a bounded table of recent ids (they are frozen, so sharing one
    object is safe). Anything else goes through the generic decoder (same result, same error).
    A class marked ``__codec_id__`` is an id proper: its value must pass :func:`id_problem`."""
    cache: dict[str, Any] = {}
    max_str = limits.max_str_len
    max_depth = limits.max_depth
    checked = bool(getattr(cls, "__codec_id__", False))

    def dec_id(v: Any, depth: int) -> Any:
        if v.__class__ is dict and len(v) == 1 and depth < max_depth:
            s = v.get("value")
            if s.__class__ is str and len(s) <= max_str:
                o = cache.get(s)
                if o is None:
                    # (short printable ASCII, the usual id, has no problem: no regex for it)
                    if (
                        checked
                        and (len(s) > ID_MAX_LEN or not (s.isascii() and s.isprintable()))
                        and (problem := id_problem(s)) is not None
                    ):
                        raise _fail_at("value", problem)
                    if len(cache) >= ID_CACHE_SIZE:
                        cache.clear()
                    o = cache[s] = cls(s)
                return o
        o = generic(v, depth)
        if checked and (problem := id_problem(o.value)) is not None:
            raise _fail_at("value", problem)
        return o

    dec_id.id_cache = cache  # type: ignore[attr-defined]  # read by the message decoders
    return dec_id


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


# --- public API -----------------------------------------------------------------------------


# message class -> its compiled encoder, per encoding (a lookup without building a key tuple)
_enc_of_class: tuple[dict[type, _Encoder], dict[type, _Encoder]] = ({}, {})


def to_builtins(obj: Any, binary: bool = False) -> Any:
    """A message (or a tuple/list of messages) as dicts, lists and scalars for JSON/msgpack."""
    enc = _enc_of_class[binary].get(obj.__class__)
    if enc is not None:
        try:
            return enc(obj)
        except (AttributeError, TypeError, ValueError, OverflowError) as e:
            raise EncodeError(f"cannot encode {type(obj).__name__}: {e}") from e
    try:
        if isinstance(obj, (tuple, list)):
            return [_encoder(type(x), binary)(x) for x in obj]
        enc = _encoder(type(obj), binary)
        if _is_message(type(obj)):
            _enc_of_class[binary][type(obj)] = enc
        return enc(obj)
    except SchemaError:
        raise
    except (AttributeError, TypeError, ValueError, OverflowError) as e:
        raise EncodeError(f"cannot encode {type(obj).__name__}: {e}") from e


# the decoders of the default limits by class, per encoding (no Limits hash per call)
_dec_default: tuple[dict[Any, _Decoder], dict[Any, _Decoder]] = ({}, {})


def from_builtins(
    cls: type[T], value: Any, binary: bool = False, limits: Limits = DEFAULT_LIMITS, *, depth: int = 0
) -> T:
    """Build ``cls`` (a message class or a form like ``tuple[X, ...]``) from parsed data.
    ``depth``: how deep ``value`` sits in an enclosing message (for the nesting limit)."""
    dec = _dec_default[binary].get(cls) if limits is DEFAULT_LIMITS else None
    if dec is None:
        dec = _decoder(cls, binary, limits)
        if limits is DEFAULT_LIMITS:
            _dec_default[binary][cls] = dec
    try:
        out = dec(value, depth)
    except _Fail as e:
        raise DecodeError(_path(e.parts), e.reason) from None
    except RecursionError:
        raise DecodeError("", "nesting too deep") from None
    if out is _DROP:
        raise DecodeError("", f"unknown enum name {value!r}")
    return typing.cast(T, out)


# a \uD800-\uDFFF escape in JSON text (json.loads pairs a high and a low one into one code
# point, so only a lone one survives into the parsed value; a false hit -- an escaped backslash
# before "ud800" -- only costs the walk below)
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def _lone_surrogate(value: Any, parts: list[str]) -> str | None:
    """The first string (value or key) in parsed JSON holding a lone surrogate, as a display
    form; ``parts`` collects its path innermost first."""
    if value.__class__ is str:
        m = _SURROGATE.search(value)
        return None if m is None else f"\\u{ord(m.group()):04x}"
    if value.__class__ is list:
        for i, x in enumerate(value):
            found = _lone_surrogate(x, parts)
            if found is not None:
                parts.append(f"[{i}]")
                return found
    elif value.__class__ is dict:
        for k, x in value.items():
            found = _lone_surrogate(k, parts)
            if found is None:
                found = _lone_surrogate(x, parts)
            if found is not None:
                parts.append(k.encode("ascii", "backslashreplace").decode("ascii"))
                return found
    return None


def loads_json(data: bytes | bytearray | memoryview | str, limits: Limits = DEFAULT_LIMITS) -> Any:
    """JSON text to builtins, strictly: within ``limits.max_bytes``, UTF-8, no ``NaN``-style
    literals and no lone surrogate anywhere (every string it gives encodes as UTF-8). Raises only
    :class:`ParseError`. For endpoints that take free-form JSON rather than a message class."""
    if len(data) > limits.max_bytes:
        raise ParseError("", f"message of {len(data)} bytes exceeds the limit of {limits.max_bytes}")
    try:
        text = data if isinstance(data, str) else bytes(data).decode("utf-8")
        value = _JSON_DECODER.decode(text)
    except RecursionError:
        raise ParseError("", "JSON nested too deeply") from None
    except UnicodeDecodeError as e:
        raise ParseError("", f"body is not UTF-8: {e.reason} at byte {e.start}") from None
    except ValueError as e:  # JSONDecodeError, int digit limits
        raise ParseError("", f"invalid JSON: {e}") from None
    except Exception as e:
        raise ParseError("", f"invalid JSON: {type(e).__name__}") from None
    if _SURROGATE_ESCAPE.search(text) is not None or (isinstance(data, str) and _SURROGATE.search(text)):
        parts: list[str] = []
        try:
            found = _lone_surrogate(value, parts)
        except RecursionError:
            raise ParseError("", "JSON nested too deeply") from None
        if found is not None:
            raise ParseError(_path(parts), f"lone UTF-16 surrogate {found} in a string (not Unicode text)")
    return value


def _reject_constant(name: str) -> Any:
    raise ValueError(f"invalid JSON literal {name}")


# Built once: json.dumps/json.loads with non-default options build a new coder on every call.
_JSON_ENCODER = json.JSONEncoder(ensure_ascii=True, separators=(",", ":"), allow_nan=False)
_JSON_DECODER = json.JSONDecoder(parse_constant=_reject_constant)


def encode_json(obj: Any) -> bytes:
    """Mesos v1 JSON: compact, ASCII-only, a single line."""
    try:
        return _JSON_ENCODER.encode(to_builtins(obj, False)).encode("ascii")
    except (TypeError, ValueError) as e:
        if isinstance(e, EncodeError):
            raise
        raise EncodeError(f"cannot encode {type(obj).__name__} as JSON: {e}") from e


def decode_json(
    cls: type[T], data: bytes | bytearray | memoryview | str, limits: Limits = DEFAULT_LIMITS
) -> T:
    """Parse Mesos v1 JSON into ``cls``; unknown keys are ignored. Raises only :class:`DecodeError`
    (a :class:`ParseError` when the data is not JSON text, see :func:`loads_json`)."""
    return from_builtins(cls, loads_json(data, limits), False, limits)


# Idle msgpack packers (``msgpack.packb`` builds a new ``Packer`` per call). ``list.pop`` and
# ``list.append`` are atomic, so a packer is never shared by two threads at once; a packer that
# raised is dropped (a fresh one replaces it).
_packers: list[msgpack.Packer] = []


def packb(value: Any) -> bytes:
    """``msgpack.packb(value, use_bin_type=True)``, with a reused packer."""
    try:
        packer = _packers.pop()
    except IndexError:
        packer = msgpack.Packer(use_bin_type=True)
    out = typing.cast(bytes, packer.pack(value))
    _packers.append(packer)
    return out


def encode_msgpack(obj: Any) -> bytes:
    """Native msgpack: the JSON structure with raw bytes."""
    try:
        return packb(to_builtins(obj, True))
    except (TypeError, ValueError, OverflowError) as e:
        if isinstance(e, EncodeError):
            raise
        raise EncodeError(f"cannot encode {type(obj).__name__} as msgpack: {e}") from e


def decode_msgpack(cls: type[T], data: bytes | bytearray | memoryview, limits: Limits = DEFAULT_LIMITS) -> T:
    """Parse msgpack into ``cls``; unknown keys are an error. Raises only :class:`DecodeError`."""
    return from_builtins(cls, unpack_msgpack(data, limits), True, limits)


def unpack_msgpack(data: bytes | bytearray | memoryview, limits: Limits = DEFAULT_LIMITS) -> Any:
    """The first half of :func:`decode_msgpack`: msgpack to builtins, within ``limits``."""
    if len(data) > limits.max_bytes:
        raise ParseError("", f"message of {len(data)} bytes exceeds the limit of {limits.max_bytes}")
    try:
        value = msgpack.unpackb(
            data,
            raw=False,
            strict_map_key=True,
            use_list=True,
            max_str_len=limits.max_str_len,
            max_bin_len=limits.max_str_len,
            max_array_len=limits.max_list_len,
            max_map_len=limits.max_map_len,
            max_ext_len=0,
        )
    except RecursionError:
        raise ParseError("", "msgpack nested too deeply") from None
    except UnicodeDecodeError as e:
        raise ParseError("", f"invalid UTF-8 in msgpack string: {e.reason}") from None
    except Exception as e:  # msgpack raises ValueError subclasses, TypeError (unhashable keys), ...
        raise ParseError("", f"invalid msgpack: {type(e).__name__}: {e}") from None
    return value


def encode(obj: Any, media_type: str) -> bytes:
    """Encode for ``media_type`` (:data:`JSON` or :data:`MSGPACK`)."""
    if media_type == JSON:
        return encode_json(obj)
    if media_type == MSGPACK:
        return encode_msgpack(obj)
    raise UnsupportedMediaType(media_type)


def decode(
    cls: type[T], data: bytes | bytearray | memoryview, media_type: str, limits: Limits = DEFAULT_LIMITS
) -> T:
    """Decode ``data`` of ``media_type`` (:data:`JSON` or :data:`MSGPACK`) into ``cls``."""
    if media_type == JSON:
        return decode_json(cls, data, limits)
    if media_type == MSGPACK:
        return decode_msgpack(cls, data, limits)
    raise UnsupportedMediaType(media_type)
