"""Health checks and checks of running command tasks (shell glue): ``agent/health_checker.py``
runs the probes (in the task's sandbox, with its environment, as its user); the verdicts of
``agent/health.py`` (grace period, consecutive failures, a check result that changed) become
tracker events."""

from __future__ import annotations

import logging
from collections.abc import Callable

from agent import tasks as tk
from agent.checkpoint import Checkpoint
from agent.health import CheckState, HealthState, Outcome, Policy
from agent.health_checker import Checkers
from agent.ports import Submit
from agent.taskspec import TaskSpec
from protocol.clock import Clock
from protocol.mesos import CheckStatusCommand, CheckStatusHttp, CheckStatusInfo, CheckStatusTcp, CheckType

log = logging.getLogger(__name__)

Environment = Callable[..., dict[str, str]]  # TaskProcesses.environment: the task's, in its sandbox


class TaskChecks:
    def __init__(self, checkpoint: Checkpoint, tracker: tk.TaskTracker, environment: Environment, setpriv: str | None,
                 clock: Clock, submit: Submit) -> None:
        self.checkpoint, self.tracker, self.environment, self.setpriv = checkpoint, tracker, environment, setpriv
        self.clock, self.submit = clock, submit
        self.checkers = Checkers(self.outcome)
        self.health: dict[tuple[str, str], HealthState] = {}
        self.check_states: dict[tuple[str, str], CheckState] = {}

    def start(self, spec: TaskSpec) -> None:
        fid, tid = spec.framework_id, spec.task_id
        if self.checkers.running(fid, tid):
            return
        sandbox = self.checkpoint.task_sandbox(fid, tid, spec.pod_executor)
        env = self.environment(spec, str(sandbox), extra=spec.command.environment if spec.command else ())
        run_as = spec.run_as
        setpriv = self.setpriv

        def wrap(argv: tuple[str, ...]) -> tuple[str, ...]:
            assert run_as is not None and setpriv is not None
            return run_as.wrap(argv, setpriv)

        now = self.clock.now()
        for policy in (spec.health, spec.check):
            if policy is None:
                continue
            if policy.health:
                self.health[(fid, tid)] = HealthState(policy, now)
            else:
                self.check_states[(fid, tid)] = CheckState(policy)
            self.checkers.start(fid, tid, policy, env, sandbox, wrap if run_as is not None and setpriv else None)

    def stop(self, fid: str, tid: str) -> None:
        self.checkers.stop(fid, tid)
        self.health.pop((fid, tid), None)
        self.check_states.pop((fid, tid), None)

    def outcome(self, fid: str, tid: str, policy: Policy, outcome: Outcome) -> None:
        """Event loop: one check's outcome -> the tracker (a health verdict, or a changed check)."""
        now = self.clock.now()
        if policy.health:
            hs = self.health.get((fid, tid))
            verdict = hs.result(outcome, now) if hs is not None else None
            if verdict is not None:
                log.info("task %s/%s: %s", fid, tid, verdict.message or "healthy")
                self.submit(self.tracker.handle(tk.HealthChecked(fid, tid, verdict), now))
            return
        cs = self.check_states.get((fid, tid))
        if cs is None or not cs.result(outcome):
            return
        kind = policy.probe.kind
        status = CheckStatusInfo(
            type=CheckType(kind),
            command=CheckStatusCommand(outcome.value) if kind == "COMMAND" else None,
            http=CheckStatusHttp(outcome.value) if kind == "HTTP" else None,
            tcp=CheckStatusTcp(None if outcome.value is None else bool(outcome.value)) if kind == "TCP" else None,
        )
        self.submit(self.tracker.handle(tk.CheckChanged(fid, tid, status), now))
