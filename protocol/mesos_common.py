"""Mesos v1 value types shared by every message: ids, labels, values, resources, attributes.

Field names are exactly the proto field names (snake_case). An optional field defaults to
``None`` and is omitted on the wire; a repeated field is a tuple, omitted when empty. The codec
(``protocol.codec``) walks these classes by their type hints; nothing here does I/O.
"""

from __future__ import annotations

import enum

import attrs

# --- ids (value objects: {"value": "..."}) -----------------------------------------------------


@attrs.frozen
class FrameworkID:
    value: str


@attrs.frozen
class AgentID:
    value: str


@attrs.frozen
class OfferID:
    value: str


@attrs.frozen
class TaskID:
    value: str


@attrs.frozen
class ExecutorID:
    value: str


@attrs.frozen
class ContainerID:
    value: str


@attrs.frozen
class OperationID:
    value: str


@attrs.frozen
class ResourceProviderID:
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


@attrs.frozen
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


@attrs.frozen
class Attribute:
    name: str
    type: ValueType
    scalar: Scalar | None = None
    ranges: Ranges | None = None
    set: ValueSet | None = None
    text: Text | None = None
