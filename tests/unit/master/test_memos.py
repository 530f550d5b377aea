"""The core's memos (parsed task resources, offered resources in Mesos form) give exactly what
the uncached computation gives."""

from __future__ import annotations

import pytest

from master import validation
from master.testing import Harness, framework_info, offers
from protocol import mesos
from protocol.mesos_common import Resource, Scalar, ValueType
from protocol.resources import ResourceError, Resources


def test_parse_resources_equals_from_mesos_and_is_shared() -> None:
    ms = Resources.parse("cpus:0.5;mem:64;ports:[31000-31001]").to_mesos()
    a = validation.parse_resources(ms)
    assert a == Resources.from_mesos(ms)
    # an equal (not identical) list hits the memo
    assert validation.parse_resources(tuple(ms)) is a


def test_parse_resources_failures_are_not_remembered() -> None:
    bad = (Resource(name="cpus", type=ValueType.RANGES),)
    for _ in range(2):
        with pytest.raises((ResourceError, TypeError, ValueError)):
            validation.parse_resources(bad)
    assert bad not in validation._PARSED


def test_parse_resources_is_bounded() -> None:
    for i in range(validation._PARSED_MAX + 10):
        validation.parse_resources((Resource(name="cpus", type=ValueType.SCALAR, scalar=Scalar(1 + i / 1000)),))
    assert len(validation._PARSED) <= validation._PARSED_MAX


def test_offered_resources_match_to_mesos() -> None:
    h = Harness(ping_interval=1e9, ping_timeout=1e9)
    h.agent("cpus:4;mem:1024;ports:[31000-31010]", hostname="h1")
    _fid, sid = h.subscribe(framework_info("f"))
    (o,) = offers(h.allocate(), sid)
    expected = Resources.parse("cpus:4;mem:1024;ports:[31000-31010]").to_mesos(allocation_role="*")
    assert Resources.from_mesos(o.resources) == Resources.from_mesos(expected)
    assert o.resources == expected
    assert isinstance(o, mesos.Offer)
