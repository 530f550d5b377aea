"""What this master does not do of Mesos' scheduler API, said to the framework instead of being
accepted and ignored (pure).

``unsupported(call)`` is checked after a call's structural validation: a call, an offer
operation or a field Agora cannot honour answers ``400`` with the reason, and nothing of the call
is applied (a framework gets an explicit error, never a 202 for something that will not happen).
The full table of Mesos calls, fields and endpoints is in ``master/README.md``.
"""

from __future__ import annotations

from protocol import mesos

__pure__ = True

CT = mesos.CallType
OT = mesos.OperationType

# offer operations the allocator and agents do not carry out, and why
UNSUPPORTED_OPERATIONS: dict[OT, str] = {
    OT.CREATE: "persistent volumes are not supported by this master",
    OT.DESTROY: "persistent volumes are not supported by this master",
    OT.GROW_VOLUME: "persistent volumes are not supported by this master",
    OT.SHRINK_VOLUME: "persistent volumes are not supported by this master",
    OT.CREATE_DISK: "resource providers (CSI disks) are not supported by this master",
    OT.DESTROY_DISK: "resource providers (CSI disks) are not supported by this master",
}

UNSUPPORTED_CALLS: dict[CT, str] = {
    CT.RECONCILE_OPERATIONS: "this master keeps no offer operation statuses (operation feedback is not supported)",
    CT.ACKNOWLEDGE_OPERATION_STATUS: "this master sends no operation status updates (operation feedback is not supported)",
}


def unsupported(call: mesos.Call) -> str | None:
    """Why this master refuses ``call`` (structurally valid), or None."""
    t = call.type
    if t in UNSUPPORTED_CALLS:
        assert t is not None
        return f"Call {t.value} is not supported: {UNSUPPORTED_CALLS[t]}"
    if t is CT.ACCEPT and call.accept is not None:
        for i, op in enumerate(call.accept.operations):
            if op.type in UNSUPPORTED_OPERATIONS:
                assert op.type is not None
                return f"ACCEPT: operation {i} ({op.type.value}): {UNSUPPORTED_OPERATIONS[op.type]}"
            if op.id is not None:
                return (f"ACCEPT: operation {i} has an 'id': operation feedback is not supported by this master "
                        "(leave 'id' out)")
    return None
