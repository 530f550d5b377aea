"""The ``TaskInfo`` of a batch task's launch (pure): its command (the gang's hostfile first), its
environment (the job's shared part built once per job, then the task's own), its resources for
the queue's role, the owner's OS account and the kill grace. The parts every task of a job shares
and the resource shapes are kept for ``COMMAND_CACHE`` jobs, so an array of a thousand tasks
builds them once."""

from __future__ import annotations

import attrs

from frameworks.batch.effects import TaskLaunch
from protocol.mesos import (
    CommandInfo,
    DurationInfo,
    Environment,
    KillPolicy,
    Resource,
    TaskInfo,
    Variable,
    VariableType,
)
from protocol.mesos_common import TaskID
from protocol.resources import Resources

__pure__ = True

COMMAND_CACHE = 256  # jobs whose shared TaskInfo parts are kept; resource shapes likewise
# Run first by every task of a gang: AGORA_GANG_HOSTS ("addr:slots,...") written as an MPI /
# DeepSpeed hostfile ("addr slots=N" a line) in the sandbox, its path in AGORA_GANG_HOSTFILE.
HOSTFILE_PRELUDE = (
    'AGORA_GANG_HOSTFILE="${MESOS_SANDBOX:-$PWD}/hostfile"; export AGORA_GANG_HOSTFILE; '
    '( IFS=,; for h in $AGORA_GANG_HOSTS; do printf \'%s slots=%s\\n\' "${h%:*}" "${h##*:}"; done ) '
    '> "$AGORA_GANG_HOSTFILE"'
)


class TaskInfos:
    """Builds launches' ``TaskInfo``s, keeping what a job's tasks share."""

    def __init__(self) -> None:
        self._commands: dict[int, tuple[Variable, ...]] = {}
        self._mesos_resources: dict[tuple[Resources, str], tuple[Resource, ...]] = {}

    def forget(self, job_id: int) -> None:
        """The job changed (an update: its count, its environment): build its shared part again."""
        self._commands.pop(job_id, None)

    def build(self, t: TaskLaunch) -> tuple[CommandInfo, TaskInfo]:
        """The launch's command and its ``TaskInfo``."""
        spec = t.spec
        shared = self._commands.get(t.job_id)
        if shared is None:
            # What every task of the job shares, built once per job (not once per task).
            env = dict(spec.env)
            env.update(AGORA_JOB_ID=str(t.job_id), AGORA_TASK_INDEX="", AGORA_ARRAY_SIZE=str(spec.count))
            variables = Environment.of(env).variables
            shared = tuple(v for v in variables if v.name != "AGORA_TASK_INDEX")
            if len(self._commands) >= COMMAND_CACHE:
                del self._commands[next(iter(self._commands))]
            self._commands[t.job_id] = shared
        own = [Variable(name="AGORA_TASK_INDEX", value=str(t.index), type=VariableType.VALUE)]
        own += [Variable(name=k, value=v, type=VariableType.VALUE) for k, v in t.env]
        env_info = Environment((*shared, *own))
        if spec.gang > 0:
            # The gang's hostfile (MPI, DeepSpeed) in the sandbox, then the command itself.
            if spec.shell is not None:
                command = CommandInfo(value=f"{HOSTFILE_PRELUDE}\n{spec.shell}", shell=True, environment=env_info)
            else:
                argv = ("/bin/sh", "-c", f'{HOSTFILE_PRELUDE}\nexec "$@"', spec.name or "agora-gang", *spec.argv)
                command = CommandInfo(value="/bin/sh", arguments=argv, shell=False, environment=env_info)
        elif spec.shell is not None:
            command = CommandInfo(value=spec.shell, shell=True, environment=env_info)
        else:
            command = CommandInfo(value=spec.argv[0], arguments=spec.argv, shell=False, environment=env_info)
        key = (t.resources, spec.queue)
        resources = self._mesos_resources.get(key)
        if resources is None:
            resources = t.resources.to_mesos(allocation_role=spec.queue)
            if len(self._mesos_resources) >= COMMAND_CACHE:
                del self._mesos_resources[next(iter(self._mesos_resources))]
            self._mesos_resources[key] = resources
        if t.run_as is not None:  # the owner's OS account (the agent switches to it)
            command = attrs.evolve(command, user=t.run_as)
        kill_policy = None
        if spec.grace is not None:  # SIGTERM, then SIGKILL this long after (a kill, a preemption)
            kill_policy = KillPolicy(grace_period=DurationInfo(int(spec.grace * 1e9)))
        info = TaskInfo(
            name=t.name, task_id=TaskID(t.task_id), resources=resources, command=command, kill_policy=kill_policy
        )
        return command, info
