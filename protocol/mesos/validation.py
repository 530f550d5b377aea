"""Structural validation of calls, as Mesos validates them before any semantics: ``validate_call``,
``validate_executor_call``, ``validate_operator_call``; the semantic rules belong to the master.
"""

from __future__ import annotations

import enum

import attrs

from protocol.mesos.executor import ExecutorCall, ExecutorCallType
from protocol.mesos.operator import OperatorCall, OperatorCallType
from protocol.mesos.scheduler import MAX_ACKNOWLEDGEMENTS, Acknowledge, AcknowledgeMany, Call, CallType

__pure__ = True


def _lower(t: enum.Enum) -> str:
    return t.name.lower()


# --- structural validation ------------------------------------------------------------------

UUID_BYTES = 16

# Call types whose body object may be absent.
_NO_BODY_NEEDED = frozenset({CallType.TEARDOWN, CallType.REVIVE, CallType.SUPPRESS})


def validate_call(call: Call) -> str | None:
    """The structural rules of a scheduler Call; ``None`` if valid, else Mesos' message.

    REQUEST also accepts mesoshttp's top-level ``requests`` instead of a ``request`` object.
    """
    t = call.type
    if t is None:
        return "Expecting 'type' to be present"
    if t is CallType.UNKNOWN:
        return "Unknown call type"
    if t is CallType.SUBSCRIBE:
        if call.subscribe is None:
            return "Expecting 'subscribe' to be present"
        if call.framework_id != call.subscribe.framework_info.id:
            return "'framework_id' differs from 'subscribe.framework_info.id'"
        return None
    if call.framework_id is None:
        return "Expecting 'framework_id' to be present"
    if t in _NO_BODY_NEEDED:
        return None
    key = _lower(t)
    body = getattr(call, key)
    if body is None:
        if t is CallType.REQUEST and call.requests:
            return None
        return f"Expecting '{key}' to be present"
    if isinstance(body, Acknowledge) and len(body.uuid) != UUID_BYTES:
        return "Invalid UUID in 'acknowledge.uuid': expected 16 bytes"
    if isinstance(body, AcknowledgeMany):
        acks = body.acknowledgements
        if not acks:
            return "Expecting 'acknowledge_many.acknowledgements' to be non-empty"
        if len(acks) > MAX_ACKNOWLEDGEMENTS:
            return f"Too many entries in 'acknowledge_many.acknowledgements': {len(acks)} > {MAX_ACKNOWLEDGEMENTS}"
        for i, a in enumerate(acks):
            if len(a.uuid) != UUID_BYTES:
                return f"Invalid UUID in 'acknowledge_many.acknowledgements[{i}].uuid': expected 16 bytes"
    if (
        t is CallType.ACKNOWLEDGE_OPERATION_STATUS
        and len(call.acknowledge_operation_status.uuid) != UUID_BYTES  # type: ignore[union-attr]
    ):
        return "Invalid UUID in 'acknowledge_operation_status.uuid': expected 16 bytes"
    if t is CallType.UPDATE_FRAMEWORK and call.update_framework.framework_info.id != call.framework_id:  # type: ignore[union-attr]
        return "'framework_id' differs from 'update_framework.framework_info.id'"
    return None


_EXECUTOR_BODIES = {
    ExecutorCallType.SUBSCRIBE: "subscribe",
    ExecutorCallType.UPDATE: "update",
    ExecutorCallType.MESSAGE: "message",
}


def validate_executor_call(call: ExecutorCall) -> str | None:
    """Structural rules of an executor Call; ``None`` if valid."""
    t = call.type
    if t is None:
        return "Expecting 'type' to be present"
    if t is ExecutorCallType.UNKNOWN:
        return "Unknown call type"
    key = _EXECUTOR_BODIES.get(t)
    if key is not None and getattr(call, key) is None:
        return f"Expecting '{key}' to be present"
    if t is ExecutorCallType.UPDATE:
        status = call.update.status  # type: ignore[union-attr]
        if status.uuid is not None and len(status.uuid) != UUID_BYTES:
            return "Invalid UUID in 'update.status.uuid': expected 16 bytes"
        if status.executor_id is not None and status.executor_id != call.executor_id:
            return "'update.status.executor_id' differs from 'executor_id'"
    return None


def validate_operator_call(call: OperatorCall) -> str | None:
    """Structural rules of an operator Call: type present, its body present when it has one."""
    t = call.type
    if t is None:
        return "Expecting 'type' to be present"
    if t is OperatorCallType.UNKNOWN:
        return "Unknown call type"
    key = _lower(t)
    if key in _OPERATOR_BODIES and getattr(call, key) is None and t is not OperatorCallType.GET_METRICS:
        return f"Expecting '{key}' to be present"
    return None


_OPERATOR_BODIES = frozenset(a.name for a in attrs.fields(OperatorCall) if a.name != "type")
