"""agent/health.py: Mesos' health check and check semantics, exact outcomes."""

from __future__ import annotations

import pytest

from agent.health import (
    CheckError,
    CheckState,
    HealthState,
    Outcome,
    Policy,
    Probe,
    Verdict,
    check_policy,
    health_policy,
)
from agent.taskspec import SpecError, task_spec
from protocol.mesos import (
    URI,
    CheckInfo,
    CheckType,
    CommandCheck,
    CommandInfo,
    HealthCheck,
    HealthCheckType,
    HttpCheck,
    HTTPCheckInfo,
    TaskInfo,
    TCPCheckInfo,
)
from protocol.mesos_common import TaskID

OK, BAD = Outcome(True, 0), Outcome(False, 1, "exit 1")


def test_defaults_are_mesos() -> None:
    p = health_policy(HealthCheck(type=HealthCheckType.TCP, tcp=TCPCheckInfo(8080)))
    assert p == Policy(Probe("TCP", port=8080), delay=15.0, interval=10.0, timeout=20.0, grace=10.0,
                       consecutive_failures=3)
    c = check_policy(CheckInfo(type=CheckType.HTTP, http=HttpCheck(80, "/ready")))
    assert c == Policy(Probe("HTTP", port=80, path="/ready"), delay=15.0, interval=10.0, timeout=20.0, health=False)


def test_untyped_command_health_check_is_command() -> None:
    p = health_policy(HealthCheck(command=CommandInfo(value="true"), interval_seconds=1, consecutive_failures=1))
    assert p.probe.kind == "COMMAND" and p.interval == 1.0 and p.consecutive_failures == 1


@pytest.mark.parametrize(
    ("hc", "why"),
    [
        (HealthCheck(), "health check has no type (COMMAND, HTTP or TCP)"),
        (HealthCheck(type=HealthCheckType.HTTP), "health check of type HTTP needs 'http'"),
        (HealthCheck(type=HealthCheckType.TCP, tcp=TCPCheckInfo(0)), "health check needs a port in 1-65535, not 0"),
        (HealthCheck(type=HealthCheckType.HTTP, http=HTTPCheckInfo(80, scheme="ftp")),
         "health check: HTTP scheme must be http or https, not 'ftp'"),
        (HealthCheck(type=HealthCheckType.HTTP, http=HTTPCheckInfo(80, path="health")),
         "health check: path 'health' must start with '/' and contain no spaces or line breaks"),
        (HealthCheck(type=HealthCheckType.COMMAND), "health check of type COMMAND needs a command with a value"),
        (HealthCheck(type=HealthCheckType.COMMAND, command=CommandInfo(value="x", uris=(URI("http://h/f"),))),
         "health check: a check command cannot fetch URIs"),
        (HealthCheck(type=HealthCheckType.TCP, tcp=TCPCheckInfo(1), consecutive_failures=0),
         "health check: consecutive_failures must be at least 1, not 0"),
        (HealthCheck(type=HealthCheckType.TCP, tcp=TCPCheckInfo(1), interval_seconds=-1),
         "health check interval_seconds must be a non-negative number of seconds, not -1"),
    ],
)
def test_refused_health_checks(hc: HealthCheck, why: str) -> None:
    with pytest.raises(CheckError) as e:
        health_policy(hc)
    assert str(e.value) == why


def test_refused_check() -> None:
    with pytest.raises(CheckError, match=r"^check has no type"):
        check_policy(CheckInfo())
    with pytest.raises(CheckError, match=r"^check of type COMMAND needs 'command'$"):
        check_policy(CheckInfo(type=CheckType.COMMAND))


def test_a_bad_health_check_is_task_error() -> None:
    task = TaskInfo(name="t", task_id=TaskID("t"), command=CommandInfo(value="sleep 1"),
                    health_check=HealthCheck(type=HealthCheckType.HTTP))
    with pytest.raises(SpecError, match="needs 'http'"):
        task_spec("fw", task)
    ok = TaskInfo(name="t", task_id=TaskID("t"), command=CommandInfo(value="sleep 1"),
                  health_check=HealthCheck(type=HealthCheckType.TCP, tcp=TCPCheckInfo(5)),
                  check=CheckInfo(type=CheckType.COMMAND, command=CommandCheck(CommandInfo(value="true"))))
    spec = task_spec("fw", ok)
    assert spec.health is not None and spec.health.probe.port == 5
    assert spec.check is not None and not spec.check.health


def policy(grace: float = 10.0, failures: int = 3) -> Policy:
    return Policy(Probe("TCP", port=1), delay=0, interval=1, timeout=1, grace=grace, consecutive_failures=failures)


def test_failures_in_the_grace_period_are_ignored_until_the_first_success() -> None:
    h = HealthState(policy(grace=10), started=100.0)
    assert h.result(BAD, 105.0) is None  # in the grace period, not healthy yet
    assert h.failures == 0
    assert h.result(OK, 106.0) == Verdict(True, 0, False)  # first success: reported
    assert h.result(OK, 107.0) is None  # repeated success: nothing new
    # after the first success the grace period no longer shields failures
    assert h.result(BAD, 108.0) == Verdict(False, 1, False, "Health check failed (1 of 3): exit 1")


def test_consecutive_failures_kill_and_a_success_resets() -> None:
    h = HealthState(policy(grace=0, failures=2), started=0.0)
    assert h.result(BAD, 1.0) == Verdict(False, 1, False, "Health check failed (1 of 2): exit 1")
    assert h.result(OK, 2.0) == Verdict(True, 0, False)  # recovered: reported
    assert h.result(BAD, 3.0) == Verdict(False, 1, False, "Health check failed (1 of 2): exit 1")
    assert h.result(Outcome(False, None, "timed out"), 4.0) == Verdict(
        False, 2, True, "Task killed after 2 consecutive failed health checks: timed out"
    )


def test_failures_after_the_grace_period_count_without_a_success() -> None:
    h = HealthState(policy(grace=5, failures=1), started=0.0)
    assert h.result(BAD, 5.0) is None
    assert h.result(BAD, 5.5) == Verdict(False, 1, True, "Task killed after 1 consecutive failed health checks: exit 1")


def test_check_reports_changes_only() -> None:
    c = CheckState(check_policy(CheckInfo(type=CheckType.COMMAND, command=CommandCheck(CommandInfo(value="x")))))
    assert c.result(Outcome(True, 0)) and c.last == 0
    assert not c.result(Outcome(True, 0))
    assert c.result(Outcome(False, 3)) and c.last == 3
    assert c.result(Outcome(False, None)) and c.last is None
    assert not c.result(Outcome(False, None))

