"""The codec's decoders: compiled once per (type, encoding, limits) into closures, with the id and
message memos (``protocol.codec`` is the API)."""

from __future__ import annotations

import base64
import binascii
import enum
import re
import typing
from collections.abc import Callable
from typing import Any

import attrs

from protocol.codec_base import (
    _DROP,
    _INT_MAX,
    _INT_MIN,
    _MISSING,
    _NONFINITE,
    Limits,
    SchemaError,
    _Decoder,
    _Fail,
    _hints,
    _is_message,
    _split_optional,
    _typename,
)

__pure__ = True


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
