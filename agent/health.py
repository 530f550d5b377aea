"""Health checks and general checks of command tasks, as Mesos' command executor runs them (pure).

``TaskInfo.health_check`` (Mesos' ``HealthCheck``): COMMAND (a command in the task's sandbox and
environment, as its user; healthy on exit 0), HTTP (``GET scheme://127.0.0.1:port/path``; healthy
on a status in 200-399, or in ``statuses`` when the framework lists them) or TCP (a connection to
``127.0.0.1:port`` opens). Mesos' defaults: first check ``delay_seconds`` (15) after the task
runs, then every ``interval_seconds`` (10); a check not done in ``timeout_seconds`` (20) failed;
failures within ``grace_period_seconds`` (10) of the start are ignored until the first success;
after ``consecutive_failures`` (3) failures in a row the task is killed (``TASK_KILLED``,
``healthy: false``). A ``TASK_RUNNING`` with ``healthy`` and ``REASON_TASK_HEALTH_CHECK_STATUS_UPDATED``
goes out on the first success, on every failure counted, and on the first success after failures.

``TaskInfo.check`` (Mesos' general ``CheckInfo``): the same three kinds, results only (never a
kill): a ``TASK_RUNNING`` with ``check_status`` and ``REASON_TASK_CHECK_STATUS_UPDATED`` when the
task starts (the check's type, no result yet) and whenever the result changes (exit code, HTTP
status code, TCP success).

``health_policy``/``check_policy`` validate and flatten; ``HealthState.result`` decides.
"""

from __future__ import annotations

import math

import attrs

from protocol.mesos import CheckInfo, CheckType, CommandInfo, HealthCheck, HealthCheckType

__pure__ = True

HEALTH_DEFAULTS = {"delay": 15.0, "interval": 10.0, "timeout": 20.0, "grace": 10.0, "failures": 3}
CHECK_DEFAULTS = {"delay": 15.0, "interval": 10.0, "timeout": 20.0}
HEALTH_REASON = "REASON_TASK_HEALTH_CHECK_STATUS_UPDATED"
CHECK_REASON = "REASON_TASK_CHECK_STATUS_UPDATED"


class CheckError(ValueError):
    """A health check or check the agent cannot run as asked (the task is answered TASK_ERROR)."""


@attrs.frozen
class Probe:
    """What one check does. ``kind``: COMMAND, HTTP or TCP."""

    kind: str
    command: CommandInfo | None = None
    scheme: str = "http"
    port: int = 0
    path: str = "/"
    statuses: tuple[int, ...] = ()  # HTTP: the healthy status codes (empty: 200-399)

    def describe(self) -> str:
        if self.kind == "COMMAND":
            assert self.command is not None
            return f"command '{self.command.value}'"
        if self.kind == "HTTP":
            return f"HTTP GET {self.scheme}://127.0.0.1:{self.port}{self.path}"
        return f"TCP connection to 127.0.0.1:{self.port}"

    def http_ok(self, code: int) -> bool:
        return code in self.statuses if self.statuses else 200 <= code < 400


@attrs.frozen
class Policy:
    probe: Probe
    delay: float
    interval: float
    timeout: float  # 0: no timeout
    grace: float = 0.0
    consecutive_failures: int = 0  # 0: never killed (a general check)
    health: bool = True  # False: a general check (results only)


def _duration(value: float | None, default: float, what: str) -> float:
    if value is None:
        return default
    if not math.isfinite(value) or value < 0:
        raise CheckError(f"{what} must be a non-negative number of seconds, not {value!r}")
    return float(value)


def _port(port: int | None, what: str) -> int:
    if port is None or not 0 < port < 65536:
        raise CheckError(f"{what} needs a port in 1-65535, not {port!r}")
    return port


def _path(path: str | None, what: str) -> str:
    if path is None or path == "":
        return "/"
    if not path.startswith("/") or any(c in path for c in "\x00\r\n "):
        raise CheckError(f"{what}: path {path!r} must start with '/' and contain no spaces or line breaks")
    return path


def _command(cmd: CommandInfo | None, what: str) -> CommandInfo:
    if cmd is None or not cmd.value:
        raise CheckError(f"{what} of type COMMAND needs a command with a value")
    if cmd.uris:
        raise CheckError(f"{what}: a check command cannot fetch URIs")
    return cmd


def health_policy(hc: HealthCheck) -> Policy:
    """``TaskInfo.health_check`` -> ``Policy``; ``CheckError`` for what Mesos would refuse."""
    what = "health check"
    kind = hc.type
    if kind is None or kind is HealthCheckType.UNKNOWN:
        # Mesos 0.x health checks had no type: a command alone meant COMMAND
        if hc.command is not None and hc.http is None and hc.tcp is None:
            kind = HealthCheckType.COMMAND
        else:
            raise CheckError("health check has no type (COMMAND, HTTP or TCP)")
    if kind is HealthCheckType.COMMAND:
        probe = Probe("COMMAND", command=_command(hc.command, what))
    elif kind is HealthCheckType.HTTP:
        if hc.http is None:
            raise CheckError("health check of type HTTP needs 'http'")
        scheme = (hc.http.scheme or "http").lower()
        if scheme not in ("http", "https"):
            raise CheckError(f"health check: HTTP scheme must be http or https, not {hc.http.scheme!r}")
        probe = Probe("HTTP", scheme=scheme, port=_port(hc.http.port, what), path=_path(hc.http.path, what),
                      statuses=tuple(hc.http.statuses))
    else:
        if hc.tcp is None:
            raise CheckError("health check of type TCP needs 'tcp'")
        probe = Probe("TCP", port=_port(hc.tcp.port, what))
    failures = HEALTH_DEFAULTS["failures"] if hc.consecutive_failures is None else hc.consecutive_failures
    if failures < 1:
        raise CheckError(f"health check: consecutive_failures must be at least 1, not {failures}")
    return Policy(
        probe,
        delay=_duration(hc.delay_seconds, HEALTH_DEFAULTS["delay"], "health check delay_seconds"),
        interval=_duration(hc.interval_seconds, HEALTH_DEFAULTS["interval"], "health check interval_seconds"),
        timeout=_duration(hc.timeout_seconds, HEALTH_DEFAULTS["timeout"], "health check timeout_seconds"),
        grace=_duration(hc.grace_period_seconds, HEALTH_DEFAULTS["grace"], "health check grace_period_seconds"),
        consecutive_failures=int(failures),
    )


def check_policy(ck: CheckInfo) -> Policy:
    """``TaskInfo.check`` -> ``Policy`` (results only)."""
    what = "check"
    if ck.type is CheckType.COMMAND:
        if ck.command is None:
            raise CheckError("check of type COMMAND needs 'command'")
        probe = Probe("COMMAND", command=_command(ck.command.command, what))
    elif ck.type is CheckType.HTTP:
        if ck.http is None:
            raise CheckError("check of type HTTP needs 'http'")
        probe = Probe("HTTP", port=_port(ck.http.port, what), path=_path(ck.http.path, what))
    elif ck.type is CheckType.TCP:
        if ck.tcp is None:
            raise CheckError("check of type TCP needs 'tcp'")
        probe = Probe("TCP", port=_port(ck.tcp.port, what))
    else:
        raise CheckError("check has no type (COMMAND, HTTP or TCP)")
    return Policy(
        probe,
        delay=_duration(ck.delay_seconds, CHECK_DEFAULTS["delay"], "check delay_seconds"),
        interval=_duration(ck.interval_seconds, CHECK_DEFAULTS["interval"], "check interval_seconds"),
        timeout=_duration(ck.timeout_seconds, CHECK_DEFAULTS["timeout"], "check timeout_seconds"),
        health=False,
    )


@attrs.frozen
class Outcome:
    """One check's result. ``ok``: healthy; ``value``: what a general check reports (exit code,
    HTTP status code, or 1/0 for a TCP connection; None: no result, e.g. timed out);
    ``why``: the failure, in words."""

    ok: bool
    value: int | None = None
    why: str | None = None


@attrs.frozen
class Verdict:
    """What to tell the framework after a health check: a ``TASK_RUNNING`` with ``healthy``
    (and ``message``), and whether to kill the task now."""

    healthy: bool
    consecutive_failures: int
    kill: bool
    message: str | None = None


@attrs.define
class HealthState:
    """One task's health checking. ``started``: when the task started running."""

    policy: Policy
    started: float
    initializing: bool = True  # no success yet
    failures: int = 0

    def result(self, outcome: Outcome, now: float) -> Verdict | None:
        """The verdict to report, or None (nothing to say: a repeated success, or a failure in
        the grace period before the first success)."""
        if outcome.ok:
            first = self.initializing
            self.initializing = False
            had = self.failures
            self.failures = 0
            if first or had:
                return Verdict(True, 0, False)
            return None
        if self.initializing and self.policy.grace > 0 and now - self.started <= self.policy.grace:
            return None  # still starting up: not counted
        self.failures += 1
        kill = self.failures >= self.policy.consecutive_failures
        why = outcome.why or "failed"
        message = f"Health check failed ({self.failures} of {self.policy.consecutive_failures}): {why}"
        if kill:
            message = (f"Task killed after {self.failures} consecutive failed health checks: {why}")
        return Verdict(False, self.failures, kill, message)


@attrs.define
class CheckState:
    """One task's general check: reports a result when it differs from the last one."""

    policy: Policy
    last: int | None = None
    reported: bool = False

    def result(self, outcome: Outcome) -> bool:
        """Whether to report ``outcome.value`` (now ``last``): the first result, or a change."""
        if self.reported and outcome.value == self.last:
            return False
        self.reported, self.last = True, outcome.value
        return True
