"""Reading Mesos ``Resource`` messages (``protocol.mesos_common.Resource``) into entries, both the
``reservations`` stack and the legacy ``role`` + ``reservation`` form (``Resources.to_mesos`` writes
them back).
"""

from __future__ import annotations

from protocol.mesos_common import (
    ReservationInfo,
    ReservationType,
    Resource,
    ValueType,
)
from protocol.resources.values import (
    UNRESERVED_ROLE,
    Reservation,
    ResourceError,
    ResourceKey,
    Value,
    _check_items,
    _check_name,
    _check_reservations,
    _labels_tuple,
    _normalize_ranges,
    _scalar_milli,
    check_role,
)

__pure__ = True


# --- Mesos Resource conversion ----------------------------------------------------------------


def _reservation_from_mesos(
    name: str, info: ReservationInfo, *, legacy_role: str | None = None
) -> Reservation:
    role = info.role if legacy_role is None else legacy_role
    if role is None:
        raise ResourceError(f"resource {name!r}: reservation without a role")
    check_role(role, allow_unreserved=False)
    if legacy_role is not None:
        dynamic = True  # legacy: presence of `reservation` means dynamically reserved
    elif info.type is ReservationType.DYNAMIC:
        dynamic = True
    elif info.type is ReservationType.STATIC:
        dynamic = False
    else:
        raise ResourceError(f"resource {name!r}: reservation type must be STATIC or DYNAMIC, got {info.type}")
    labels: tuple[tuple[str, str | None], ...] = ()
    if info.labels is not None and info.labels.labels:
        labels = _labels_tuple({lb.key: lb.value for lb in info.labels.labels})
    return Reservation(role, dynamic, info.principal or None, labels)


def _from_mesos_one(res: Resource) -> tuple[ResourceKey, Value]:
    if not isinstance(res, Resource):
        raise ResourceError(f"expected a mesos Resource, got {type(res).__name__}")
    name = _check_name(res.name)
    if res.shared is not None or res.provider_id is not None:
        raise ResourceError(f"resource {name!r}: shared and resource-provider resources are not supported")
    if res.disk is not None and (res.disk.persistence is not None or res.disk.volume is not None):
        raise ResourceError(f"resource {name!r}: persistent volumes are not supported")

    value: Value
    if res.type is ValueType.SCALAR and res.scalar is not None:
        value = _scalar_milli(name, res.scalar.value)
    elif res.type is ValueType.RANGES and res.ranges is not None:
        value = _normalize_ranges(name, ((r.begin, r.end) for r in res.ranges.range))
    elif res.type is ValueType.SET and res.set is not None:
        value = _check_items(name, res.set.item)
    else:
        raise ResourceError(f"resource {name!r}: type {res.type} without a matching value")

    if res.reservations:
        if res.reservation is not None:
            raise ResourceError(f"resource {name!r}: both 'reservation' and 'reservations' are set")
        stack = _check_reservations(name, tuple(_reservation_from_mesos(name, r) for r in res.reservations))
        # proto2 defaults `role` to "*", so a serializer may send it alongside the stack.
        if res.role not in (None, UNRESERVED_ROLE, stack[-1].role):
            raise ResourceError(
                f"resource {name!r}: role {res.role!r} disagrees with reservations (effective {stack[-1].role!r})"
            )
    else:
        role = UNRESERVED_ROLE if res.role is None else check_role(res.role)
        if role == UNRESERVED_ROLE:
            if res.reservation is not None:
                raise ResourceError(f"resource {name!r}: 'reservation' set on an unreserved resource")
            stack = ()
        elif res.reservation is not None:
            stack = (_reservation_from_mesos(name, res.reservation, legacy_role=role),)
        else:
            stack = (Reservation(role),)
    return ResourceKey(name, stack, res.revocable is not None), value
