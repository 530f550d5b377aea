"""Coordinator <-> worker messages (msgpack over HTTP, through ``frameworks.elastic.wire``) and the
checkpoint record. Frozen attrs classes following the protocol convention: optional fields default
to ``None``, repeated fields are tuples. Numpy arrays travel as ``Array`` (raw bytes + dtype + shape);
``to_array``/``from_array`` convert and validate.
"""

from __future__ import annotations

import enum
import math

import attrs
import numpy as np

__pure__ = True

# dtypes a parameter or gradient may have (no object arrays, nothing exotic)
ALLOWED_DTYPES = frozenset({"float16", "float32", "float64", "int32", "int64", "uint8", "int8", "bool"})


class ArrayError(ValueError):
    """An ``Array`` whose dtype, shape and byte length disagree."""


@attrs.frozen
class Array:
    name: str
    dtype: str
    shape: tuple[int, ...]
    data: bytes


def to_array(name: str, value: np.ndarray) -> Array:
    arr = np.ascontiguousarray(value)
    if arr.dtype.name not in ALLOWED_DTYPES:
        raise ArrayError(f"{name}: dtype {arr.dtype.name} is not allowed")
    return Array(name, arr.dtype.name, tuple(int(d) for d in arr.shape), arr.tobytes())


def from_array(a: Array) -> np.ndarray:
    if a.dtype not in ALLOWED_DTYPES:
        raise ArrayError(f"{a.name}: dtype {a.dtype!r} is not allowed")
    if any(d < 0 for d in a.shape):
        raise ArrayError(f"{a.name}: negative dimension in shape {a.shape}")
    dt = np.dtype(a.dtype)
    expected = math.prod(a.shape) * dt.itemsize
    if expected != len(a.data):
        raise ArrayError(f"{a.name}: shape {a.shape} of {a.dtype} needs {expected} bytes, got {len(a.data)}")
    return np.frombuffer(a.data, dtype=dt).reshape(a.shape).copy()


def to_arrays(values: dict[str, np.ndarray]) -> tuple[Array, ...]:
    return tuple(to_array(k, v) for k, v in sorted(values.items()))


def from_arrays(arrays: tuple[Array, ...]) -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {}
    for a in arrays:
        if a.name in out:
            raise ArrayError(f"duplicate array name {a.name!r}")
        out[a.name] = from_array(a)
    return out


# --- membership ------------------------------------------------------------------------------


@attrs.frozen
class PeerInfo:
    worker_id: str
    address: str
    rank: int


@attrs.frozen
class JoinRequest:
    worker_id: str
    address: str = ""


@attrs.frozen
class AssignmentReply:
    worker_id: str
    generation: int
    rank: int
    world_size: int
    peers: tuple[PeerInfo, ...] = ()
    heartbeat_interval: float = 1.0
    finished: bool = False


@attrs.frozen
class WorkerRequest:
    """leave / heartbeat / lease: just who is asking (and, for heartbeat, the generation it knows)."""

    worker_id: str
    generation: int | None = None


@attrs.frozen
class HeartbeatReply:
    known: bool  # False: the worker expired or the coordinator restarted; it must rejoin
    assignment: AssignmentReply | None = None
    finished: bool = False


# --- shards ----------------------------------------------------------------------------------


class LeaseStatus(enum.Enum):
    GRANTED = "GRANTED"
    WAIT = "WAIT"  # nothing to lease right now (the epoch's last shards are out); retry later
    FINISHED = "FINISHED"  # every epoch is done
    REJOIN = "REJOIN"  # not a member: join first


@attrs.frozen
class LeaseReply:
    status: LeaseStatus
    lease_id: int | None = None
    shard: int | None = None
    epoch: int | None = None
    num_shards: int = 0
    epochs: int = 0
    expires_in: float | None = None
    retry_after: float | None = None


@attrs.frozen
class LeaseDone:
    """complete / fail / release of one lease."""

    worker_id: str
    lease_id: int
    reason: str = ""
    samples: int = 0


@attrs.frozen
class AckReply:
    accepted: bool
    detail: str = ""


# --- parameter server ------------------------------------------------------------------------


@attrs.frozen
class PullRequest:
    worker_id: str
    have_version: int | None = None  # skip the payload when unchanged


@attrs.frozen
class Parameters:
    version: int
    initialized: bool
    arrays: tuple[Array, ...] = ()
    unchanged: bool = False


@attrs.frozen
class InitRequest:
    """Offer initial parameters; the first initializer wins, later ones get the current values."""

    worker_id: str
    arrays: tuple[Array, ...]


@attrs.frozen
class PushRequest:
    worker_id: str
    gradients: tuple[Array, ...]
    samples: int = 0
    loss: float | None = None
    accuracy: float | None = None
    base_version: int | None = None
    return_parameters: bool = True
    # the lease of the shard these gradients come from: refused (not applied) when it is no longer
    # the worker's (expired and re-leased, returned): that shard is redone elsewhere
    lease_id: int | None = None


@attrs.frozen
class PushReply:
    version: int
    staleness: int = 0
    parameters: Parameters | None = None
    applied: bool = True  # False: refused for a lease the worker no longer holds
    detail: str = ""


@attrs.frozen
class ReportRequest:
    """Free-form job metrics from a worker (e.g. test accuracy), shown in the status."""

    worker_id: str
    metrics: dict[str, float] = attrs.field(factory=dict)


@attrs.frozen
class ErrorReply:
    code: str
    reason: str


# --- checkpoint ------------------------------------------------------------------------------


@attrs.frozen
class SetAsideInfo:
    shard: int
    failures: int
    reason: str


@attrs.frozen
class ShardsSnapshot:
    num_shards: int
    epochs: int
    epoch: int
    next_lease_id: int
    completed_total: int
    done: tuple[int, ...] = ()
    failures: dict[str, int] = attrs.field(factory=dict)
    set_aside: tuple[SetAsideInfo, ...] = ()
    deaths: dict[str, int] = attrs.field(factory=dict)  # shard -> holders that died in a row


@attrs.frozen
class Checkpoint:
    job: str
    saved_at: float
    generation: int
    param_version: int
    shards: ShardsSnapshot
    samples_total: int = 0
    parameters: tuple[Array, ...] = ()
    optimizer_state: tuple[Array, ...] = ()
    reports: dict[str, float] = attrs.field(factory=dict)
