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

This module is the API; the work is split by concern: ``protocol.codec_base`` (errors, limits,
type forms), ``protocol.codec_decode`` (the decoders, the id table and message memos) and
``protocol.codec_encode`` (the encoders).
"""

from __future__ import annotations

import json
import re
import typing
from typing import Any, TypeVar

import msgpack
import msgspec

from protocol.codec_base import (
    _DROP,
    DEFAULT_LIMITS,
    JSON,
    MSGPACK,
    DecodeError,
    EncodeError,
    Limits,
    ParseError,
    SchemaError,
    UnsupportedMediaType,
    _Decoder,
    _Encoder,
    _Fail,
    _is_message,
    _path,
)
from protocol.codec_decode import (
    ID_CACHE_SIZE as ID_CACHE_SIZE,
)
from protocol.codec_decode import (
    ID_MAX_LEN as ID_MAX_LEN,
)
from protocol.codec_decode import (
    MEMO_DEPTH as MEMO_DEPTH,
)
from protocol.codec_decode import (
    MEMO_SIZE as MEMO_SIZE,
)
from protocol.codec_decode import (
    _decoder,
    id_problem,
)
from protocol.codec_encode import (
    _encoder,
)

__pure__ = True

__all__ = [
    "DEFAULT_LIMITS",
    "JSON",
    "MSGPACK",
    "UNPACK_FAILED",
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
    "unpack_fast",
    "unpack_msgpack",
]


T = TypeVar("T")



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


# msgpack bytes are written and read by msgspec's C encoder and decoder (with a cache of the
# short map keys that recur in every message, about twice as fast as ``msgpack``'s on the
# master's messages), under the rules of ``msgpack``'s strict unpacker, which stays the reference:
#
# * ``packb`` only ever gets what ``to_builtins`` makes (dicts, lists, str, bytes, int, float,
#   bool, None), for which the two write the same bytes (ints in their shortest form, floats as
#   64-bit, str as str, bytes as bin); an int out of range is an ``OverflowError`` and text
#   with a lone surrogate a ``UnicodeEncodeError`` (a ``ValueError``) from either.
# * On decoding, msgspec is used only where the size alone keeps the value within ``limits``
#   (a string, bin or array of N needs more than N bytes, a map of N entries more than 2N), and
#   any error it raises (truncated or malformed data, an extension type) sends the data to
#   ``msgpack.unpackb`` for its verdict in its words. What msgspec accepts and the strict unpacker
#   refuses (a map key that is not a string, the timestamp extension) turns into a value no
#   message decoder takes, so ``decode_msgpack`` (and ``agent_channel.decode_frame``) decode such
#   data again the strict way: the caller gets the same value or the same error as before.


def _no_extension(code: int, data: memoryview) -> Any:
    raise ValueError(f"msgpack extension type {code}")


_encode_fast = msgspec.msgpack.Encoder().encode
_decode_fast = msgspec.msgpack.Decoder(ext_hook=_no_extension).decode
_UNPACK_FAILED: Any = object()


def packb(value: Any) -> bytes:
    """``msgpack.packb(value, use_bin_type=True)`` of builtins (what ``to_builtins`` returns)."""
    return _encode_fast(value)


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
    value = unpack_fast(data, limits)
    if value is not _UNPACK_FAILED:
        try:
            return from_builtins(cls, value, True, limits)
        except DecodeError:
            pass  # decided again from the strict unpacker's value: the same error, or its own
    return from_builtins(cls, unpack_msgpack(data, limits), True, limits)


def unpack_fast(data: bytes | bytearray | memoryview, limits: Limits = DEFAULT_LIMITS) -> Any:
    """msgpack to builtins by the fast decoder, or ``UNPACK_FAILED`` where only
    :func:`unpack_msgpack` can say (too large to be within ``limits`` by its size, or refused).
    A value that no message decoder takes is decoded again by :func:`unpack_msgpack` (see above)."""
    n = len(data)
    if n <= limits.max_list_len and n <= limits.max_str_len and n <= 2 * limits.max_map_len and n <= limits.max_bytes:
        try:
            return _decode_fast(data)
        except Exception:  # msgspec's DecodeError, the extension hook's ValueError, RecursionError
            pass
    return _UNPACK_FAILED


UNPACK_FAILED = _UNPACK_FAILED


def unpack_msgpack(data: bytes | bytearray | memoryview, limits: Limits = DEFAULT_LIMITS) -> Any:
    """The first half of :func:`decode_msgpack`: msgpack to builtins, within ``limits``, by the
    strict unpacker (the reference: its errors are the codec's ``ParseError``)."""
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
