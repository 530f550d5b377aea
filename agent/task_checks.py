"""Health checks and checks of running command tasks (shell glue): ``agent/health_checker.py``
runs the probes (in the task's sandbox, with its environment, as its user); the verdicts of
``agent/health.py`` (grace period, consecutive failures, a check result that changed) become
tracker events."""

from __future__ import annotations

import logging
from collections.abc import Callable

from agent import tasks as tk
from agent.checkpoint import Checkpoint
from agent.health import HEALTH_REASON, Outcome, Policy
from agent.health_checker import Checkers
from agent.ports import Submit
from agent.taskspec import TaskSpec
from protocol.clock import Clock

log = logging.getLogger(__name__)

Environment = Callable[..., dict[str, str]]  # TaskProcesses.environment: the task's, in its sandbox


class TaskChecks:
    def __init__(self, checkpoint: Checkpoint, tracker: tk.TaskTracker, environment: Environment, setpriv: str | None,
                 clock: Clock, submit: Submit) -> None:
        self.checkpoint, self.tracker, self.environment, self.setpriv = checkpoint, tracker, environment, setpriv
        self.clock, self.submit = clock, submit
        self.checkers = Checkers(self.outcome)

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

        for policy in (spec.health, spec.check):
            if policy is None:
                continue
            self.checkers.start(fid, tid, policy, env, sandbox, wrap if run_as is not None and setpriv else None)

    def stop(self, fid: str, tid: str) -> None:
        self.checkers.stop(fid, tid)

    def outcome(self, fid: str, tid: str, policy: Policy, outcome: Outcome) -> None:
        """Event loop: one probe's outcome -> the tracker, which keeps the task's checking state
        and decides (a health verdict, a changed check)."""
        effects = self.tracker.handle(tk.CheckOutcome(fid, tid, policy.health, outcome), self.clock.now())
        for e in effects:
            if isinstance(e, tk.EmitStatus) and e.reason == HEALTH_REASON:
                log.info("task %s/%s: %s", fid, tid, e.message or "healthy")
        self.submit(effects)
