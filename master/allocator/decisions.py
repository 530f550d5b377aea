"""Outputs of the allocator: offer snapshots, decisions (commands) and ACCEPT results.

Each decision carries a human ``reason`` so the master can log why an offer was made, grown,
rescinded or a revocable task evicted.
"""

from __future__ import annotations

import enum
from typing import NamedTuple, TypeVar

import attrs

from protocol.resources import Resources

__pure__ = True


# Offer, OfferCreated and OfferUpdated are made once per offer (10,000 in one pass of the
# benchmark), so they are frozen records built on ``tuple`` (construction is one C call, where a
# frozen attrs class pays one ``object.__setattr__`` per field); they compare equal only to a
# record of the same class with equal fields, like the attrs classes.


def _record_eq(self: tuple[object, ...], other: object) -> bool:
    return other.__class__ is self.__class__ and tuple.__eq__(self, other)


def _record_hash(self: tuple[object, ...]) -> int:
    return hash((self.__class__.__name__, tuple.__hash__(self)))


def _record_ne(self: tuple[object, ...], other: object) -> bool:
    return not _record_eq(self, other)


_R = TypeVar("_R", bound=type)


def _class_strict(cls: _R) -> _R:
    """Equality and hash of a record class: equal only to a record of the same class."""
    setattr(cls, "__eq__", _record_eq)  # noqa: B010 (mypy refuses a method assigned on the class)
    setattr(cls, "__ne__", _record_ne)  # noqa: B010 (mypy refuses a method assigned on the class)
    setattr(cls, "__hash__", _record_hash)  # noqa: B010 (mypy refuses a method assigned on the class)
    return cls


@_class_strict
class Offer(NamedTuple):
    """A snapshot of one offer in the book.

    ``resources`` is everything currently offered (its ``revocable`` part included, tagged
    revocable). ``reusable`` marks a lease (``REUSABLE_OFFERS``): it survives ACCEPT and regrows.
    ``idle_since`` is when the current unused part became idle (None when empty).
    """

    offer_id: str
    framework_id: str
    role: str
    agent_id: str
    hostname: str
    resources: Resources
    created: float
    idle_since: float | None
    revocable: Resources
    reusable: bool


@_class_strict
class OfferCreated(NamedTuple):
    offer: Offer
    reason: str


@_class_strict
class OfferUpdated(NamedTuple):
    """Same offer id, new resources (a lease regrew, kept its remainder, or lost its idle part).
    Send it to the framework as an OFFERS event carrying the same offer id."""

    offer: Offer
    reason: str


@attrs.frozen
class OfferRescinded:
    offer_id: str
    framework_id: str
    agent_id: str
    reason: str


@attrs.frozen
class Revoke:
    """Evict these revocable tasks on this agent after ``grace_seconds`` (the agent kills them,
    the framework sees TASK_KILLED with REASON_CONTAINER_PREEMPTED). Their resources come back
    with ``ResourcesRecovered`` as usual."""

    framework_id: str
    agent_id: str
    task_ids: tuple[str, ...]
    grace_seconds: float
    reason: str


Decision = OfferCreated | OfferUpdated | OfferRescinded | Revoke


class RejectCode(enum.Enum):
    UNKNOWN_FRAMEWORK = "UNKNOWN_FRAMEWORK"
    NO_OFFERS = "NO_OFFERS"
    UNKNOWN_OFFER = "UNKNOWN_OFFER"
    NOT_OWNER = "NOT_OWNER"
    DUPLICATE_OFFER = "DUPLICATE_OFFER"
    DIFFERENT_AGENTS = "DIFFERENT_AGENTS"
    INSUFFICIENT_RESOURCES = "INSUFFICIENT_RESOURCES"
    DUPLICATE_TASK = "DUPLICATE_TASK"
    INVALID_OPERATION = "INVALID_OPERATION"


@attrs.frozen
class LaunchedTask:
    task_id: str
    agent_id: str
    resources: Resources
    offer_id: str | None


@attrs.frozen
class Accepted:
    """The ACCEPT was applied. ``decisions`` holds the lease update (reusable) or nothing;
    ``launched`` the tasks to start; ``reserved``/``unreserved`` the applied reservation
    changes (the master persists them)."""

    agent_id: str
    decisions: tuple[Decision, ...]
    launched: tuple[LaunchedTask, ...]
    reserved: tuple[Resources, ...] = ()
    unreserved: tuple[Resources, ...] = ()


@attrs.frozen
class Rejected:
    """The ACCEPT was refused; nothing was launched. Classic offers named in it that belonged to
    the framework are consumed and their resources returned; reusable offers stay intact."""

    code: RejectCode
    reason: str
    decisions: tuple[Decision, ...] = ()


AcceptResult = Accepted | Rejected
