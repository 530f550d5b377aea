"""Agent configuration: the host the agent advertises to the master."""

from __future__ import annotations

from agent.config import AgentConfig


def cfg(**kw: object) -> AgentConfig:
    return AgentConfig("127.0.0.1:5050", "/tmp/agora-agent-test", **kw)  # type: ignore[arg-type]


def test_the_bind_address_is_advertised_by_default() -> None:
    assert cfg().advertised_host == "127.0.0.1"
    assert cfg(host="10.1.2.3").advertised_host == "10.1.2.3"


def test_a_wildcard_bind_advertises_the_hostname_not_an_unreachable_address() -> None:
    assert cfg(host="0.0.0.0", hostname="node7").advertised_host == "node7"
    assert cfg(host="::", hostname="node7").advertised_host == "node7"


def test_an_explicit_advertise_host_wins() -> None:
    assert cfg(host="0.0.0.0", hostname="node7", advertise_host="10.0.0.7").advertised_host == "10.0.0.7"
    assert cfg(advertise_host="agent-7.example").advertised_host == "agent-7.example"
