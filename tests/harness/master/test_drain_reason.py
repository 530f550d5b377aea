"""The operator's drain reason (``DRAIN_AGENT`` with Agora's ``reason``) is kept with the agent
while it drains, shown in ``/state``, and cleared by ``REACTIVATE_AGENT``."""

from __future__ import annotations

from master import registry_ops as ops
from master.events import AgentDrainRequested
from master.testing import Harness, persisted
from protocol import codec, mesos


def test_drain_keeps_the_reason_until_reactivated() -> None:
    h = Harness()
    aid, _ = h.agent()
    fx = h.feed(AgentDrainRequested(aid, True, reason="disk swap, ticket 42"))
    assert persisted(fx) == [ops.AgentDrainSet(aid, True)]
    assert h.state.agents[aid].drain_reason == "disk swap, ticket 42"
    h.feed(AgentDrainRequested(aid, False))
    assert h.state.agents[aid].drain_reason is None


def test_drain_agent_call_carries_the_reason() -> None:
    call = codec.from_builtins(
        mesos.OperatorCall,
        {"type": "DRAIN_AGENT", "drain_agent": {"agent_id": {"value": "a"}, "reason": "bad fan"}},
    )
    assert call.drain_agent is not None and call.drain_agent.reason == "bad fan"
    plain = codec.from_builtins(mesos.OperatorCall, {"type": "DRAIN_AGENT", "drain_agent": {"agent_id": {"value": "a"}}})
    assert plain.drain_agent is not None and plain.drain_agent.reason is None
