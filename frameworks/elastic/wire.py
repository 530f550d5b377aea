"""The one place the elastic coordinator and its workers turn messages into bytes and back.
Uses ``protocol.codec`` (msgpack, strict); swap the encoding here and nowhere else."""

from __future__ import annotations

from typing import Any, TypeVar

from protocol import codec

__pure__ = True

T = TypeVar("T")
MEDIA_TYPE = codec.MSGPACK
DecodeError = codec.DecodeError
# parameters and checkpoints can be larger than a control message
LIMITS = codec.Limits(max_bytes=256 * 1024 * 1024, max_str_len=256 * 1024 * 1024)


def encode(obj: Any) -> bytes:
    return codec.encode_msgpack(obj)


def decode(cls: type[T], data: bytes) -> T:
    """Raises ``DecodeError`` (a ``ValueError`` naming the field) on bad input."""
    return codec.decode_msgpack(cls, data, LIMITS)
