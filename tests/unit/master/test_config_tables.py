from __future__ import annotations

from pathlib import Path

import pytest

from master.config import ConfigError, load
from master.lifecycles import (
    AGENT_TRANSITIONS,
    FRAMEWORK_TRANSITIONS,
    AgentPhase,
    FrameworkPhase,
    IllegalPhase,
    check_agent,
    check_framework,
)
from master.ratelimit import RateLimiter, TokenBucket


def test_flags_override_toml(tmp_path: Path) -> None:
    f = tmp_path / "m.toml"
    f.write_text('[master]\nport = 6000\nheartbeat-interval = 2\nip = "127.0.0.2"\n')
    cfg = load(f, port=0, ip=None)
    assert cfg.port == 0 and cfg.ip == "127.0.0.2" and cfg.heartbeat_interval == 2.0


def test_bad_config(tmp_path: Path) -> None:
    f = tmp_path / "m.toml"
    f.write_text("nonsense = 1\n")
    with pytest.raises(ConfigError, match="unknown config key"):
        load(f)
    with pytest.raises(ConfigError, match="bad value"):
        load(None, port="x")
    with pytest.raises(ConfigError, match="must be > 0"):
        load(None, ping_timeout=0)
    with pytest.raises(ConfigError, match="cannot read"):
        load(tmp_path / "missing.toml")


def test_framework_table() -> None:
    F = FrameworkPhase
    check_framework(F.SUBSCRIBED, F.DISCONNECTED)
    check_framework(F.DISCONNECTED, F.SUBSCRIBED)
    check_framework(F.RECOVERED, F.REMOVED)
    with pytest.raises(IllegalPhase):
        check_framework(F.REMOVED, F.SUBSCRIBED)
    with pytest.raises(IllegalPhase):
        check_framework(F.SUBSCRIBED, F.RECOVERED)
    assert set(FRAMEWORK_TRANSITIONS) == set(F)
    assert FRAMEWORK_TRANSITIONS[F.REMOVED] == frozenset()


def test_agent_table() -> None:
    A = AgentPhase
    check_agent(A.REGISTERED, A.UNREACHABLE)
    check_agent(A.UNREACHABLE, A.REGISTERED)
    check_agent(A.RECOVERED, A.UNREACHABLE)
    with pytest.raises(IllegalPhase):
        check_agent(A.REMOVED, A.REGISTERED)
    with pytest.raises(IllegalPhase):
        check_agent(A.UNREACHABLE, A.RECOVERED)
    assert set(AGENT_TRANSITIONS) == set(A)


def test_token_bucket() -> None:
    b = TokenBucket(rate=1.0, capacity=2.0)
    assert b.take(0.0) and b.take(0.0) and not b.take(0.0)
    assert b.next_available(0.0) == 1.0
    assert b.take(1.0) and not b.take(1.5)
    rl = RateLimiter(rate=10, capacity=1)
    assert rl.allow("p", 0.0) and not rl.allow("p", 0.0) and rl.allow("q", 0.0)
    assert rl.allow("p", 0.2)


def test_cli_rejects_a_bad_config(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from master.main import main

    f = tmp_path / "m.toml"
    f.write_text("[master]\nport = 'not a port'\n")
    res = CliRunner().invoke(main, ["--config", str(f), "--work-dir", str(tmp_path)])
    assert res.exit_code == 2 and "bad value for port" in res.output
    res = CliRunner().invoke(main, ["--help"])
    assert res.exit_code == 0 and "--work-dir" in res.output


def test_call_cost_of_batched_acknowledgements() -> None:
    from master.ratelimit import ACKS_PER_TOKEN, call_cost
    from protocol import mesos
    from protocol.mesos_common import AgentID, FrameworkID, TaskID

    fid = FrameworkID("f")

    def many(n: int) -> mesos.Call:
        ack = mesos.Acknowledge(AgentID("a"), TaskID("t"), b"u" * 16)
        return mesos.Call(
            type=mesos.CallType.ACKNOWLEDGE_MANY, framework_id=fid, acknowledge_many=mesos.AcknowledgeMany((ack,) * n)
        )

    assert call_cost(mesos.Call.make_revive(fid)) == 1.0
    assert [call_cost(many(n)) for n in (1, ACKS_PER_TOKEN, ACKS_PER_TOKEN + 1, 2 * ACKS_PER_TOKEN + 1)] == [1, 1, 2, 3]
    limiter = RateLimiter(rate=1.0, capacity=3.0)
    assert limiter.allow("p", 0.0, call_cost(many(250)))  # 3 tokens
    assert not limiter.allow("p", 0.0)
