"""Recovery after an agent restart, decided (pure): checkpoint facts in, a list of effects out.

The shell (``agent/recovery.py``) reads the checkpoint and runs three steps of this module:

1. ``start(recovery, boot)``: the agent as a whole. A corrupt checkpoint or changed resources
   stop a ``--strict`` agent (``Start.refuse``); otherwise changed resources discard the old tasks
   (``Start.discard``: their processes are killed, the agent registers as a new one). It tells
   whether the machine rebooted since the checkpoint (its boot id changed).
2. ``probes(recovery, start, boot)``: which processes to look for. A task whose pid record is of
   this boot is adopted by pid and create time (``AdoptTask``); one spawned but not yet
   pid-checkpointed is looked for by its wrapper's marker (``FindTask``); a custom executor of a
   framework that checkpoints is looked for to be re-attached (``FindExecutor``). After a reboot
   nothing is looked for: nothing of before lives.
3. ``plan(recovery, start, boot, found)``: with what the shell found (``Found``: the processes
   adopted, the executors re-attached, the exit codes read once the wrapper is known gone), every
   effect in order, per task: a corrupt task is reported LOST and its process killed if it can be
   told for sure to be ours (``ReportBroken``); a task finished and acknowledged before the restart
   is only removed (``DropFinished``); any other has its update stream restored
   (``RestoreStream``), its GPU devices kept (``RestoreGpus``), its live process re-attached to
   isolation and logs (``Reattach``), and is told to the tracker (``Track``: a
   ``tasks.RecoveredTask``, whose rules decide its state). Then what nothing accounts for is
   killed: the process groups of tasks whose wrapper is gone (``KillLeftovers``), custom
   executors not re-attached (``KillOrphanExecutors``, unless rebooted); re-attached executors
   get ``--executor-reregister-timeout`` to SUBSCRIBE (``AwaitReregistration``); then stale
   cgroups and sandboxes go (``Cleanup``).
"""

from __future__ import annotations

import attrs

from agent import status_updates as su
from agent.checkpoint_records import PidRecord, RecoveredTaskFiles, Recovery
from agent.task_events import KillReason, RecoveredTask, TaskKey
from agent.taskspec import SpecError, TaskSpec, task_spec
from protocol.mesos import ExecutorInfo, TaskStatus
from protocol.task_states import TaskState, is_terminal

__pure__ = True

ExecutorKey = tuple[str, str]


@attrs.frozen
class Boot:
    """This agent, now: its boot id, its resources' identity (``AgentService.resources_identity``)
    and ``--strict``."""

    boot_id: str
    resources: str
    strict: bool = False


# --- step 1: the agent as a whole -------------------------------------------------------------


@attrs.frozen
class Start:
    agent_id: str | None  # None: register as a new agent
    rebooted: bool  # the machine rebooted since the checkpoint: nothing of before lives
    refuse: str | None = None  # the agent must not start (``--strict``): why
    discard: str | None = None  # resources changed: the old tasks are killed (why)
    discard_pids: tuple[PidRecord, ...] = ()  # ... these processes, if still the same ones


def start(rec: Recovery, boot: Boot) -> Start:
    meta = rec.agent
    rebooted = meta is not None and meta.boot_id != boot.boot_id
    if rec.broken and boot.strict:
        names = ", ".join(f"{b.path} ({b.reason})" for b in rec.broken)
        return Start(None, rebooted, refuse=f"corrupt checkpoint: {names}")
    if meta is not None and meta.resources != boot.resources:
        msg = f"resources changed from {meta.resources!r} to {boot.resources!r}"
        if boot.strict:
            return Start(None, rebooted, refuse=f"{msg}; refusing to recover in strict mode")
        pids = () if rebooted else tuple(
            t.pid for t in rec.tasks if t.pid is not None and t.pid.boot_id == boot.boot_id
        )
        return Start(None, rebooted, discard=msg, discard_pids=pids)
    return Start(meta.agent_id if meta is not None else None, rebooted)


# --- step 2: what to look for -------------------------------------------------------------------


@attrs.frozen
class AdoptTask:
    """Adopt the task's wrapper by its pid record (pid and create time must match)."""

    framework_id: str
    task_id: str
    pid: int
    create_time: float


@attrs.frozen
class FindTask:
    """The agent died between the spawn and the pid record: find the wrapper by its marker."""

    framework_id: str
    task_id: str


@attrs.frozen
class FindExecutor:
    """Find the custom executor's wrapper by its marker, adopt it and register it with the
    executor API again, so it can SUBSCRIBE."""

    framework_id: str
    executor_id: str
    info: ExecutorInfo


Probe = AdoptTask | FindTask | FindExecutor


@attrs.frozen
class Alive:
    """A task's wrapper, adopted; ``found``: by its marker (its pid record is still to write)."""

    pid: int
    create_time: float
    found: bool = False


@attrs.frozen
class Found:
    """What the shell found for the probes: the tasks adopted, the executors re-attached (their
    wrapper's pid), and the exit code each wrapper not adopted recorded (read once it is known
    gone: it may have ended after the checkpoint was read)."""

    tasks: dict[TaskKey, Alive] = attrs.field(factory=dict)
    executors: dict[ExecutorKey, int] = attrs.field(factory=dict)
    exit_codes: dict[TaskKey, int] = attrs.field(factory=dict)


@attrs.frozen
class _Task:
    """One checkpointed task, read for planning."""

    files: RecoveredTaskFiles
    spec: TaskSpec
    updates: tuple[su.Update, ...]
    acked: frozenset[bytes]

    @property
    def key(self) -> TaskKey:
        return (self.files.framework_id, self.files.task_id)

    @property
    def last(self) -> TaskState | None:
        return self.updates[-1].state if self.updates else None

    @property
    def done(self) -> bool:
        """Finished and acknowledged before the restart: only its removal was pending."""
        return any(is_terminal(u.state) and u.uuid in self.acked for u in self.updates)

    @property
    def custom(self) -> bool:
        return self.spec.command is None and self.spec.executor_id is not None


def _update(fid: str, status: TaskStatus) -> su.Update:
    return su.Update(fid, status.task_id.value, status.uuid or b"", status.state, status)


def _read(rec: Recovery) -> list[_Task | tuple[RecoveredTaskFiles, str]]:
    """Every task of the checkpoint: readable (``_Task``), or broken with why."""
    # task groups of records written before the group was checkpointed: the tasks of one executor
    old_groups: dict[ExecutorKey, list[str]] = {}
    for t in rec.tasks:
        if t.record is not None and t.record.executor is not None and not t.record.group:
            old_groups.setdefault((t.framework_id, t.record.executor.executor_id.value), []).append(t.task_id)
    out: list[_Task | tuple[RecoveredTaskFiles, str]] = []
    for t in rec.tasks:
        if t.broken is not None or t.record is None:
            why = f"corrupt checkpoint {t.broken.path}: {t.broken.reason}" if t.broken else "corrupt checkpoint"
            out.append((t, why))
            continue
        rf = t.record
        group = rf.group or tuple(
            old_groups.get((t.framework_id, rf.executor.executor_id.value), ()) if rf.executor is not None else ()
        )
        try:
            # the group's shared fate (one task failing kills the rest) holds across the restart
            spec = task_spec(t.framework_id, rf.task, rf.executor, killing_state=rf.killing_state, group=group)
        except SpecError as e:
            out.append((t, f"corrupt checkpoint {t.task_id}: {e}"))
            continue
        if rf.gpus:
            spec = attrs.evolve(spec, gpu_devices=rf.gpus)
        updates = tuple(_update(t.framework_id, s) for s in (t.log.updates if t.log else ()))
        out.append(_Task(t, spec, updates, t.log.acked if t.log else frozenset()))
    return out


def _executor_info(t: _Task) -> ExecutorInfo | None:
    """The custom executor's ``ExecutorInfo``: the task's own, else its group's."""
    info = t.spec.info
    if info is not None and info.executor is not None:
        return info.executor
    return t.files.record.executor if t.files.record is not None else None


def probes(rec: Recovery, st: Start, boot: Boot) -> list[Probe]:
    """What the shell looks for before ``plan`` (in checkpoint order, each executor once)."""
    out: list[Probe] = []
    if st.rebooted:
        return out
    executors: set[ExecutorKey] = set()
    for t in _read(rec):
        if not isinstance(t, _Task) or t.done or (t.last is not None and is_terminal(t.last)):
            continue
        fid, tid = t.key
        if t.custom:
            assert t.spec.executor_id is not None
            ekey = (fid, t.spec.executor_id)
            fi = rec.frameworks.get(fid)
            info = _executor_info(t)
            if ekey in executors:
                continue
            executors.add(ekey)
            # only executors of frameworks that checkpoint reconnect (the others exit with the agent)
            if fi is not None and fi.checkpoint and info is not None:
                out.append(FindExecutor(fid, t.spec.executor_id, info))
        elif t.spec.command is not None or t.spec.executor_id is None:
            pid = t.files.pid
            if pid is not None and pid.boot_id == boot.boot_id:
                out.append(AdoptTask(fid, tid, pid.pid, pid.create_time))
            elif pid is None:
                out.append(FindTask(fid, tid))
    return out


def exit_codes_wanted(rec: Recovery, found: Found) -> list[TaskKey]:
    """The tasks whose wrapper was not adopted: the shell reads their exit code again for
    ``Found.exit_codes`` (the wrapper may have recorded it after the checkpoint was read)."""
    out: list[TaskKey] = []
    for t in _read(rec):
        if not isinstance(t, _Task) or t.done or t.key in found.tasks:
            continue
        if t.custom and t.spec.executor_id is not None and (t.key[0], t.spec.executor_id) in found.executors:
            continue
        out.append(t.key)
    return out


# --- step 3: the plan ---------------------------------------------------------------------------


@attrs.frozen
class ReportBroken:
    """A task whose checkpoint is corrupt: killed if it is ours for sure (``pid`` of this boot
    with the same create time, or its wrapper's marker), its log moved aside, reported LOST."""

    framework_id: str
    task_id: str
    why: str
    pid: PidRecord | None  # only when of this boot


@attrs.frozen
class DropFinished:
    """Finished and acknowledged before the restart: remove its checkpoint."""

    framework_id: str
    task_id: str


@attrs.frozen
class RestoreStream:
    """Its status updates, to the status-update manager (``su.Recovered``)."""

    framework_id: str
    task_id: str
    updates: tuple[su.Update, ...]
    acked: frozenset[bytes]


@attrs.frozen
class RestoreGpus:
    """It keeps its GPU devices (no new task gets them)."""

    framework_id: str
    task_id: str
    devices: tuple[int, ...]
    amount: float


@attrs.frozen
class AcksToExecutor:
    """The acknowledgements of these updates go back to the re-attached executor."""

    executor_id: str
    uuids: tuple[bytes, ...]


@attrs.frozen
class WritePid:
    """The wrapper found by its marker: its pid record, now."""

    framework_id: str
    task_id: str
    record: PidRecord


@attrs.frozen
class Reattach:
    """Its live process: back under its isolator (limits, OOM watch) and its log writer."""

    framework_id: str
    task_id: str
    pid: int
    spec: TaskSpec


@attrs.frozen
class Track:
    """Tell the tracker (``tasks.RecoveredTask``: its rules decide the task's state)."""

    event: RecoveredTask


@attrs.frozen
class Report:
    """A line of ``/state``'s ``recovery``."""

    line: str


@attrs.frozen
class Warn:
    """A line of the agent's log only."""

    message: str


@attrs.frozen
class KillLeftovers:
    """Whatever is left of the process groups of tasks whose wrapper is gone: (pid, create time,
    framework, task, the DEFAULT executor whose sandbox holds the task's)."""

    groups: tuple[tuple[int, float, str, str, str | None], ...]


@attrs.frozen
class KillOrphanExecutors:
    """Custom executors not re-attached must not live on (``keep``: the re-attached ones)."""

    keep: frozenset[int]


@attrs.frozen
class AwaitReregistration:
    """After ``--executor-reregister-timeout``, the re-attached executors that did not SUBSCRIBE
    are killed and their tasks reported LOST."""

    executors: tuple[ExecutorKey, ...]


@attrs.frozen
class Cleanup:
    """Remove the cgroups of tasks that are gone and the sandboxes nothing tracks."""


Effect = (
    ReportBroken | DropFinished | RestoreStream | RestoreGpus | AcksToExecutor | WritePid | Reattach | Track
    | Report | Warn | KillLeftovers | KillOrphanExecutors | AwaitReregistration | Cleanup
)


def _kill_reason(raw: str | None) -> KillReason | None:
    try:
        return KillReason(raw) if raw else None
    except ValueError:
        return None


def plan(rec: Recovery, st: Start, boot: Boot, found: Found) -> list[Effect]:
    out: list[Effect] = []
    leftovers: list[tuple[int, float, str, str, str | None]] = []
    executors_seen: set[ExecutorKey] = set()
    for t in _read(rec):
        if not isinstance(t, _Task):
            files, why = t
            same = files.pid if files.pid is not None and files.pid.boot_id == boot.boot_id else None
            out.append(ReportBroken(files.framework_id, files.task_id, why, same))
            continue
        fid, tid = t.key
        if t.done:
            out.append(DropFinished(fid, tid))
            continue
        spec, files, last = t.spec, t.files, t.last
        running = last is None or not is_terminal(last)
        out.append(RestoreStream(fid, tid, t.updates, t.acked))
        if spec.gpu_devices and running:
            out.append(RestoreGpus(fid, tid, spec.gpu_devices, spec.gpus))
        alive, spawned = False, files.pid is not None
        pid = files.pid.pid if files.pid is not None else None
        same_boot = files.pid is not None and not st.rebooted and files.pid.boot_id == boot.boot_id
        if t.custom:
            assert spec.executor_id is not None
            if running:
                epid = found.executors.get((fid, spec.executor_id))
                pid, alive, spawned = epid, epid is not None, epid is not None
                if alive:
                    if (fid, spec.executor_id) not in executors_seen:
                        executors_seen.add((fid, spec.executor_id))
                        out.append(Report(f"executor {fid}/{spec.executor_id}: re-attached pid {epid}"))
                    uuids = tuple(u.uuid for u in t.updates if u.uuid and u.uuid not in t.acked)
                    if uuids:
                        out.append(AcksToExecutor(spec.executor_id, uuids))
        elif running and (a := found.tasks.get(t.key)) is not None:
            alive, spawned, pid = True, True, a.pid
            if a.found:
                out.append(WritePid(fid, tid, PidRecord(a.pid, a.create_time, boot.boot_id)))
            out.append(Reattach(fid, tid, a.pid, spec))
        exit_code = None
        if not alive:
            exit_code = found.exit_codes.get(t.key, files.exit_code)
            if same_boot and files.pid is not None:
                # the wrapper is gone (the task ended, or it was killed while the agent was down):
                # nothing of the task's process group may live on
                leftovers.append((files.pid.pid, files.pid.create_time, fid, tid, spec.pod_executor))
        if spec.executor_id is not None and fid not in rec.frameworks:
            out.append(Warn(f"executor task {tid} without framework info"))
        out.append(Track(RecoveredTask(
            spec, last, spawned, alive, exit_code, pid, _kill_reason(files.kill_reason), files.kill_deadline,
        )))
        out.append(Report(f"task {fid}/{tid}: {'re-attached pid ' + str(pid) if alive else 'not running'}"))
    for b in rec.broken:
        if b.path.endswith("framework.json"):
            out.append(Warn(f"corrupt framework checkpoint {b.path}: {b.reason}"))
    if leftovers:
        out.append(KillLeftovers(tuple(leftovers)))
    keep = frozenset(found.executors.values())
    if not st.rebooted:
        out.append(KillOrphanExecutors(keep))
    if found.executors:
        out.append(AwaitReregistration(tuple(found.executors)))
    out.append(Cleanup())
    return out
