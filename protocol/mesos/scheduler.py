"""The Mesos v1 scheduler API: ``Call`` with its bodies and ``make_*`` builders
(including Agora's ``ACKNOWLEDGE_MANY``: ``AcknowledgeMany``, ``MAX_ACKNOWLEDGEMENTS``), and
``Event`` with its bodies.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable

import attrs

from protocol.mesos.common import Filters, FrameworkInfo, InverseOffer, MasterInfo, Offer, Request
from protocol.mesos.operations import Operation, OperationStatus
from protocol.mesos.tasks import KillPolicy, TaskStatus
from protocol.mesos_common import (
    AgentID,
    ExecutorID,
    FrameworkID,
    OfferID,
    OperationID,
    ResourceProviderID,
    TaskID,
)

__pure__ = True


# --- scheduler calls ------------------------------------------------------------------------


class CallType(enum.Enum):
    UNKNOWN = "UNKNOWN"
    SUBSCRIBE = "SUBSCRIBE"
    TEARDOWN = "TEARDOWN"
    ACCEPT = "ACCEPT"
    DECLINE = "DECLINE"
    ACCEPT_INVERSE_OFFERS = "ACCEPT_INVERSE_OFFERS"
    DECLINE_INVERSE_OFFERS = "DECLINE_INVERSE_OFFERS"
    REVIVE = "REVIVE"
    KILL = "KILL"
    SHUTDOWN = "SHUTDOWN"
    ACKNOWLEDGE = "ACKNOWLEDGE"
    ACKNOWLEDGE_OPERATION_STATUS = "ACKNOWLEDGE_OPERATION_STATUS"
    RECONCILE = "RECONCILE"
    RECONCILE_OPERATIONS = "RECONCILE_OPERATIONS"
    MESSAGE = "MESSAGE"
    REQUEST = "REQUEST"
    SUPPRESS = "SUPPRESS"
    UPDATE_FRAMEWORK = "UPDATE_FRAMEWORK"
    # Agora extension: many ACKNOWLEDGEs in one call (advertised by the master in
    # ``MasterInfo.capabilities`` as ``ACKNOWLEDGE_MANY``; a Mesos master answers 400)
    ACKNOWLEDGE_MANY = "ACKNOWLEDGE_MANY"


class PseudoattributeType(enum.Enum):
    UNKNOWN = "UNKNOWN"
    HOSTNAME = "HOSTNAME"
    REGION = "REGION"
    ZONE = "ZONE"


@attrs.frozen
class AttributeConstraintSelector:
    """Mesos' ``AttributeConstraint.Selector`` (a oneof: exactly one is set)."""

    pseudoattribute_type: PseudoattributeType | None = None
    attribute_name: str | None = None


@attrs.frozen
class PredicateExists:
    pass


@attrs.frozen
class PredicateTextValue:
    """``TextEquals`` / ``TextNotEquals``."""

    value: str | None = None


@attrs.frozen
class PredicateTextRegex:
    """``TextMatches`` / ``TextNotMatches``."""

    regex: str | None = None


@attrs.frozen
class AttributeConstraintPredicate:
    """Mesos' ``AttributeConstraint.Predicate`` (a oneof: exactly one is set)."""

    exists: PredicateExists | None = None
    not_exists: PredicateExists | None = None
    text_equals: PredicateTextValue | None = None
    text_not_equals: PredicateTextValue | None = None
    text_matches: PredicateTextRegex | None = None
    text_not_matches: PredicateTextRegex | None = None


@attrs.frozen
class AttributeConstraint:
    selector: AttributeConstraintSelector | None = None
    predicate: AttributeConstraintPredicate | None = None


@attrs.frozen
class OfferConstraintsGroup:
    attribute_constraints: tuple[AttributeConstraint, ...] = ()


@attrs.frozen
class RoleOfferConstraints:
    """One role's entry of Mesos' ``OfferConstraints``: an agent must satisfy one of the groups."""

    groups: tuple[OfferConstraintsGroup, ...] = ()


@attrs.frozen
class OfferConstraints:
    """Mesos 1.11's ``scheduler.OfferConstraints`` (SUBSCRIBE and UPDATE_FRAMEWORK), applied by
    the allocator (``master/allocator/constraints.py``)."""

    role_constraints: dict[str, RoleOfferConstraints] = attrs.field(factory=dict)


@attrs.frozen
class Subscribe:
    """SUBSCRIBE body (mesoshttp's ``credentials`` are ignored)."""

    framework_info: FrameworkInfo
    suppressed_roles: tuple[str, ...] = ()
    force: bool | None = None
    offer_constraints: OfferConstraints | None = None


@attrs.frozen
class Accept:
    offer_ids: tuple[OfferID, ...] = ()
    operations: tuple[Operation, ...] = ()
    filters: Filters | None = None


@attrs.frozen
class Decline:
    offer_ids: tuple[OfferID, ...] = ()
    filters: Filters | None = None


@attrs.frozen
class AcceptInverseOffers:
    inverse_offer_ids: tuple[OfferID, ...] = ()
    filters: Filters | None = None


@attrs.frozen
class DeclineInverseOffers:
    inverse_offer_ids: tuple[OfferID, ...] = ()
    filters: Filters | None = None


@attrs.frozen
class Revive:
    """Empty ``roles`` = all the framework's roles."""

    roles: tuple[str, ...] = ()


@attrs.frozen
class Suppress:
    """Empty ``roles`` = all the framework's roles."""

    roles: tuple[str, ...] = ()


@attrs.frozen
class Kill:
    task_id: TaskID
    agent_id: AgentID | None = None
    kill_policy: KillPolicy | None = None


@attrs.frozen
class Shutdown:
    executor_id: ExecutorID
    agent_id: AgentID


@attrs.frozen
class Acknowledge:
    """``uuid`` must be the 16 bytes of the acknowledged update."""

    agent_id: AgentID
    task_id: TaskID
    uuid: bytes


# the most acknowledgements one ACKNOWLEDGE_MANY call may carry
MAX_ACKNOWLEDGEMENTS = 10_000


@attrs.frozen
class AcknowledgeMany:
    """Agora: the body of ``ACKNOWLEDGE_MANY``, each entry exactly a Mesos ``Acknowledge``."""

    acknowledgements: tuple[Acknowledge, ...] = ()


@attrs.frozen
class AcknowledgeOperationStatus:
    uuid: bytes
    operation_id: OperationID
    agent_id: AgentID | None = None
    resource_provider_id: ResourceProviderID | None = None


@attrs.frozen
class ReconcileTask:
    task_id: TaskID
    agent_id: AgentID | None = None


@attrs.frozen
class Reconcile:
    """Empty ``tasks`` = implicit reconciliation (all the framework's tasks)."""

    tasks: tuple[ReconcileTask, ...] = ()


@attrs.frozen
class ReconcileOperation:
    operation_id: OperationID
    agent_id: AgentID | None = None
    resource_provider_id: ResourceProviderID | None = None


@attrs.frozen
class ReconcileOperations:
    operations: tuple[ReconcileOperation, ...] = ()


@attrs.frozen
class Message:
    """Framework → executor message (``data`` base64 in JSON)."""

    agent_id: AgentID
    executor_id: ExecutorID
    data: bytes


@attrs.frozen
class RequestCall:
    """REQUEST body (Mesos ``Call.Request``)."""

    requests: tuple[Request, ...] = ()


@attrs.frozen
class UpdateFramework:
    framework_info: FrameworkInfo
    suppressed_roles: tuple[str, ...] = ()
    offer_constraints: OfferConstraints | None = None


@attrs.frozen
class Call:
    """A scheduler call: ``{"type": T, "framework_id": ..., "<t lower>": {...}}``.

    ``requests`` is the top-level list mesoshttp sends with REQUEST instead of a ``request``
    object; use :meth:`all_requests` to read either shape.
    """

    type: CallType | None = None
    framework_id: FrameworkID | None = None
    subscribe: Subscribe | None = None
    accept: Accept | None = None
    decline: Decline | None = None
    accept_inverse_offers: AcceptInverseOffers | None = None
    decline_inverse_offers: DeclineInverseOffers | None = None
    revive: Revive | None = None
    suppress: Suppress | None = None
    kill: Kill | None = None
    shutdown: Shutdown | None = None
    acknowledge: Acknowledge | None = None
    acknowledge_operation_status: AcknowledgeOperationStatus | None = None
    reconcile: Reconcile | None = None
    reconcile_operations: ReconcileOperations | None = None
    message: Message | None = None
    request: RequestCall | None = None
    update_framework: UpdateFramework | None = None
    requests: tuple[Request, ...] = ()
    acknowledge_many: AcknowledgeMany | None = None  # Agora extension

    def all_requests(self) -> tuple[Request, ...]:
        """The REQUEST list, from ``request.requests`` or mesoshttp's top-level ``requests``."""
        if self.request is not None and self.request.requests:
            return self.request.requests
        return self.requests

    # builders

    @classmethod
    def make_subscribe(cls, framework_info: FrameworkInfo, suppressed_roles: tuple[str, ...] = ()) -> Call:
        """SUBSCRIBE; carries ``framework_id`` iff ``framework_info.id`` is set (re-subscribe)."""
        return cls(
            type=CallType.SUBSCRIBE,
            framework_id=framework_info.id,
            subscribe=Subscribe(framework_info=framework_info, suppressed_roles=suppressed_roles),
        )

    @classmethod
    def make_teardown(cls, framework_id: FrameworkID) -> Call:
        return cls(type=CallType.TEARDOWN, framework_id=framework_id)

    @classmethod
    def make_accept(
        cls,
        framework_id: FrameworkID,
        offer_ids: tuple[OfferID, ...],
        operations: tuple[Operation, ...],
        filters: Filters | None = None,
    ) -> Call:
        return cls(
            type=CallType.ACCEPT,
            framework_id=framework_id,
            accept=Accept(offer_ids=offer_ids, operations=operations, filters=filters),
        )

    @classmethod
    def make_decline(
        cls, framework_id: FrameworkID, offer_ids: tuple[OfferID, ...], filters: Filters | None = None
    ) -> Call:
        return cls(type=CallType.DECLINE, framework_id=framework_id, decline=Decline(offer_ids, filters))

    @classmethod
    def make_revive(cls, framework_id: FrameworkID, roles: tuple[str, ...] = ()) -> Call:
        return cls(type=CallType.REVIVE, framework_id=framework_id, revive=Revive(roles) if roles else None)

    @classmethod
    def make_suppress(cls, framework_id: FrameworkID, roles: tuple[str, ...] = ()) -> Call:
        return cls(type=CallType.SUPPRESS, framework_id=framework_id, suppress=Suppress(roles) if roles else None)

    @classmethod
    def make_kill(cls, framework_id: FrameworkID, task_id: TaskID, agent_id: AgentID | None = None) -> Call:
        return cls(type=CallType.KILL, framework_id=framework_id, kill=Kill(task_id=task_id, agent_id=agent_id))

    @classmethod
    def make_shutdown(cls, framework_id: FrameworkID, executor_id: ExecutorID, agent_id: AgentID) -> Call:
        return cls(type=CallType.SHUTDOWN, framework_id=framework_id, shutdown=Shutdown(executor_id, agent_id))

    @classmethod
    def make_acknowledge(cls, framework_id: FrameworkID, status: TaskStatus) -> Call:
        """ACKNOWLEDGE for a reliable update (needs ``status.uuid`` and ``status.agent_id``)."""
        if status.uuid is None or status.agent_id is None:
            raise ValueError("only an update with uuid and agent_id can be acknowledged")
        return cls(
            type=CallType.ACKNOWLEDGE,
            framework_id=framework_id,
            acknowledge=Acknowledge(agent_id=status.agent_id, task_id=status.task_id, uuid=status.uuid),
        )

    @classmethod
    def make_acknowledge_many(cls, framework_id: FrameworkID, statuses: Iterable[TaskStatus]) -> Call:
        """ACKNOWLEDGE_MANY (Agora) for reliable updates (each needs ``uuid`` and ``agent_id``)."""
        acks: list[Acknowledge] = []
        for status in statuses:
            if status.uuid is None or status.agent_id is None:
                raise ValueError("only an update with uuid and agent_id can be acknowledged")
            acks.append(Acknowledge(agent_id=status.agent_id, task_id=status.task_id, uuid=status.uuid))
        return cls(
            type=CallType.ACKNOWLEDGE_MANY,
            framework_id=framework_id,
            acknowledge_many=AcknowledgeMany(acknowledgements=tuple(acks)),
        )

    @classmethod
    def make_reconcile(cls, framework_id: FrameworkID, tasks: tuple[ReconcileTask, ...] = ()) -> Call:
        return cls(type=CallType.RECONCILE, framework_id=framework_id, reconcile=Reconcile(tasks))

    @classmethod
    def make_message(cls, framework_id: FrameworkID, agent_id: AgentID, executor_id: ExecutorID, data: bytes) -> Call:
        return cls(type=CallType.MESSAGE, framework_id=framework_id, message=Message(agent_id, executor_id, data))

    @classmethod
    def make_request(cls, framework_id: FrameworkID, requests: tuple[Request, ...]) -> Call:
        return cls(type=CallType.REQUEST, framework_id=framework_id, request=RequestCall(requests))


# --- scheduler events -----------------------------------------------------------------------


class EventType(enum.Enum):
    UNKNOWN = "UNKNOWN"
    SUBSCRIBED = "SUBSCRIBED"
    OFFERS = "OFFERS"
    INVERSE_OFFERS = "INVERSE_OFFERS"
    RESCIND = "RESCIND"
    RESCIND_INVERSE_OFFER = "RESCIND_INVERSE_OFFER"
    UPDATE = "UPDATE"
    UPDATE_OPERATION_STATUS = "UPDATE_OPERATION_STATUS"
    MESSAGE = "MESSAGE"
    FAILURE = "FAILURE"
    ERROR = "ERROR"
    HEARTBEAT = "HEARTBEAT"


@attrs.frozen
class Subscribed:
    framework_id: FrameworkID
    heartbeat_interval_seconds: float | None = None
    master_info: MasterInfo | None = None


@attrs.frozen
class Offers:
    offers: tuple[Offer, ...] = ()


@attrs.frozen
class InverseOffers:
    inverse_offers: tuple[InverseOffer, ...] = ()


@attrs.frozen
class Rescind:
    offer_id: OfferID


@attrs.frozen
class RescindInverseOffer:
    inverse_offer_id: OfferID


@attrs.frozen
class Update:
    status: TaskStatus


@attrs.frozen
class UpdateOperationStatus:
    status: OperationStatus


@attrs.frozen
class MessageEvent:
    """Executor → framework message (``Event.Message``)."""

    agent_id: AgentID
    executor_id: ExecutorID
    data: bytes


@attrs.frozen
class Failure:
    """Agent lost (no ``executor_id``) or executor exited (``executor_id`` and ``status``)."""

    agent_id: AgentID | None = None
    executor_id: ExecutorID | None = None
    status: int | None = None


@attrs.frozen
class Error:
    message: str


@attrs.frozen
class Event:
    """A scheduler event: ``{"type": T, "<t lower>": {...}}``; HEARTBEAT has no body."""

    type: EventType | None = None
    subscribed: Subscribed | None = None
    offers: Offers | None = None
    inverse_offers: InverseOffers | None = None
    rescind: Rescind | None = None
    rescind_inverse_offer: RescindInverseOffer | None = None
    update: Update | None = None
    update_operation_status: UpdateOperationStatus | None = None
    message: MessageEvent | None = None
    failure: Failure | None = None
    error: Error | None = None

    HEARTBEAT_INTERVAL_SECONDS = 15.0

    @classmethod
    def make_subscribed(
        cls,
        framework_id: FrameworkID,
        master_info: MasterInfo | None = None,
        heartbeat_interval_seconds: float = HEARTBEAT_INTERVAL_SECONDS,
    ) -> Event:
        return cls(
            type=EventType.SUBSCRIBED,
            subscribed=Subscribed(framework_id, heartbeat_interval_seconds, master_info),
        )

    @classmethod
    def make_offers(cls, offers: tuple[Offer, ...]) -> Event:
        return cls(type=EventType.OFFERS, offers=Offers(offers))

    @classmethod
    def make_inverse_offers(cls, inverse_offers: tuple[InverseOffer, ...]) -> Event:
        return cls(type=EventType.INVERSE_OFFERS, inverse_offers=InverseOffers(inverse_offers))

    @classmethod
    def make_rescind(cls, offer_id: OfferID) -> Event:
        return cls(type=EventType.RESCIND, rescind=Rescind(offer_id))

    @classmethod
    def make_rescind_inverse_offer(cls, inverse_offer_id: OfferID) -> Event:
        return cls(type=EventType.RESCIND_INVERSE_OFFER, rescind_inverse_offer=RescindInverseOffer(inverse_offer_id))

    @classmethod
    def make_update(cls, status: TaskStatus) -> Event:
        return cls(type=EventType.UPDATE, update=Update(status))

    @classmethod
    def make_update_operation_status(cls, status: OperationStatus) -> Event:
        return cls(type=EventType.UPDATE_OPERATION_STATUS, update_operation_status=UpdateOperationStatus(status))

    @classmethod
    def make_message(cls, agent_id: AgentID, executor_id: ExecutorID, data: bytes) -> Event:
        return cls(type=EventType.MESSAGE, message=MessageEvent(agent_id, executor_id, data))

    @classmethod
    def make_failure(cls, agent_id: AgentID, executor_id: ExecutorID | None = None, status: int | None = None) -> Event:
        return cls(type=EventType.FAILURE, failure=Failure(agent_id, executor_id, status))

    @classmethod
    def make_error(cls, message: str) -> Event:
        return cls(type=EventType.ERROR, error=Error(message))

    @classmethod
    def make_heartbeat(cls) -> Event:
        return cls(type=EventType.HEARTBEAT)
