"""Mesos v1 value types shared by every message: ids, labels, values, resources, attributes.

Field names are exactly the proto field names (snake_case). An optional field defaults to
``None`` and is omitted on the wire; a repeated field is a tuple, omitted when empty. The codec
(``protocol.codec``) walks these classes by their type hints; nothing here does I/O.
"""

from __future__ import annotations

import enum
import typing

import attrs

# --- ids (value objects: {"value": "..."}) -----------------------------------------------------
# A decoded id has at most 255 characters and no control character (``protocol.codec``).


@attrs.frozen
class FrameworkID:
    __codec_id__ = True  # validated on decode (protocol.codec.id_problem)
    value: str


@attrs.frozen
class AgentID:
    __codec_id__ = True  # validated on decode (protocol.codec.id_problem)
    value: str


@attrs.frozen
class OfferID:
    __codec_id__ = True  # validated on decode (protocol.codec.id_problem)
    value: str


@attrs.frozen
class TaskID:
    __codec_id__ = True  # validated on decode (protocol.codec.id_problem)
    value: str


@attrs.frozen
class ExecutorID:
    __codec_id__ = True  # validated on decode (protocol.codec.id_problem)
    value: str


@attrs.frozen
class ContainerID:
    __codec_id__ = True  # validated on decode (protocol.codec.id_problem)
    value: str


@attrs.frozen
class OperationID:
    __codec_id__ = True  # validated on decode (protocol.codec.id_problem)
    value: str


@attrs.frozen
class ResourceProviderID:
    __codec_id__ = True  # validated on decode (protocol.codec.id_problem)
    value: str


# --- labels, time ---------------------------------------------------------------------------


@attrs.frozen
class Label:
    key: str
    value: str | None = None


@attrs.frozen
class Labels:
    labels: tuple[Label, ...] = ()


@attrs.frozen
class TimeInfo:
    nanoseconds: int


@attrs.frozen
class DurationInfo:
    nanoseconds: int


# --- values ---------------------------------------------------------------------------------


class ValueType(enum.Enum):
    SCALAR = "SCALAR"
    RANGES = "RANGES"
    SET = "SET"
    TEXT = "TEXT"

    __hash__ = object.__hash__  # members are singletons (Enum's own hash is a Python call)


@attrs.frozen
class Scalar:
    value: float


@attrs.frozen
class Range:
    begin: int
    end: int


@attrs.frozen
class Ranges:
    range: tuple[Range, ...] = ()


@attrs.frozen
class ValueSet:
    """Mesos ``Value.Set`` (named to avoid shadowing the builtin)."""

    item: tuple[str, ...] = ()


@attrs.frozen
class Text:
    value: str


# --- resources ------------------------------------------------------------------------------


class ReservationType(enum.Enum):
    UNKNOWN = "UNKNOWN"
    STATIC = "STATIC"
    DYNAMIC = "DYNAMIC"


@attrs.frozen
class ReservationInfo:
    type: ReservationType | None = None
    role: str | None = None
    principal: str | None = None
    labels: Labels | None = None


@attrs.frozen
class AllocationInfo:
    role: str | None = None


@attrs.frozen
class RevocableInfo:
    """Presence marks a resource revocable; encodes as ``{}``."""


@attrs.frozen
class SharedInfo:
    """Presence marks a resource shared; encodes as ``{}``."""


@attrs.frozen
class Persistence:
    id: str
    principal: str | None = None


class VolumeMode(enum.Enum):
    RW = "RW"
    RO = "RO"


@attrs.frozen
class Volume:
    container_path: str
    mode: VolumeMode
    host_path: str | None = None


@attrs.frozen
class DiskInfo:
    persistence: Persistence | None = None
    volume: Volume | None = None


# The codec shares one decoded object per resource form (``__codec_memo_key__`` below) and the
# master looks tasks' resource lists up in memos: the hash is kept once computed.
@attrs.frozen(cache_hash=True)
class Resource:
    name: str
    type: ValueType
    scalar: Scalar | None = None
    ranges: Ranges | None = None
    set: ValueSet | None = None
    role: str | None = None
    allocation_info: AllocationInfo | None = None
    reservation: ReservationInfo | None = None
    reservations: tuple[ReservationInfo, ...] = ()
    revocable: RevocableInfo | None = None
    disk: DiskInfo | None = None
    shared: SharedInfo | None = None
    provider_id: ResourceProviderID | None = None


def _resource_memo_key(v: object) -> tuple[str, str, float, str | None] | None:
    """The codec's memo key of a plain scalar resource -- ``{"name": str, "type": str,
    "scalar": {"value": float}}`` plus an optional ``"role": str`` and nothing else -- the form
    of nearly every resource in an ACCEPT or an offer. Anything else: None (decoded as usual)."""
    if v.__class__ is not dict:
        return None
    d = typing.cast("dict[str, object]", v)
    n = len(d)
    if n != 3 and n != 4:
        return None
    name, kind, scalar = d.get("name"), d.get("type"), d.get("scalar")
    if name.__class__ is not str or kind.__class__ is not str or scalar.__class__ is not dict:
        return None
    sd = typing.cast("dict[str, object]", scalar)
    value = sd.get("value")
    if len(sd) != 1 or value.__class__ is not float:
        return None
    if n == 3:
        return (name, kind, value, None)
    role = d.get("role")
    if role.__class__ is not str:
        return None
    return (name, kind, value, role)


Resource.__codec_memo_key__ = staticmethod(_resource_memo_key)  # type: ignore[attr-defined]


@attrs.frozen
class Attribute:
    name: str
    type: ValueType
    scalar: Scalar | None = None
    ranges: Ranges | None = None
    set: ValueSet | None = None
    text: Text | None = None
