"""The narrow, typed dependencies the agent's shell modules receive instead of the service.

``AgentService`` (``agent/service.py``) is only the composition root: it builds the parts and
hands each module what it uses. The shared, changing facts of the agent are one small record
(``Identity``: its id once registered, its port once listening, its resources once probed); the
master connection is seen through ``Link``; work for the cores goes through a ``Submit``; the
read-only views (``/state``, ``/flags``, the v1 operator API) get an ``AgentView``.

The satellites that drive the cores get small holders of typed protocols, each naming only what
its users call: ``StatusPort`` (the task tracker and status-update manager as ``TaskBook`` and
``UpdateBook``, the work queue, the master link, the clock, the identity: custom executors,
recovery and the master link's side, ``agent/master_link.py``), ``ExecutorSpawnPort`` (how an executor process is fetched for, started and signalled:
``agent/executors.py``), ``RecoveryProcesses`` (what a restarted agent re-attaches and cleans
up: ``agent/recovery.py``), ``ProcessPort`` (what a command task's process is made, isolated,
piped and measured with: ``agent/processes.py``) and ``MonitorPort`` (what the monitor loop
samples, measures, collects and reports: ``agent/monitor.py``).
"""

from __future__ import annotations

import concurrent.futures
import time
from collections.abc import Callable, Coroutine, Hashable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import attrs
from prometheus_client import CollectorRegistry, Counter, Gauge

from agent import status_updates as su
from agent import tasks as tk
from agent.completed import CompletedBook
from agent.config import AgentConfig
from agent.fetcher import Fetched, FetchFailed
from agent.gpus import GpuBook
from agent.isolation import Breach, Usage
from agent.launcher import Proc
from agent.taskspec import TaskSpec
from agent.usage import TaskUsage
from protocol.clock import Clock
from protocol.mesos import URI, ExecutorInfo, FrameworkInfo
from protocol.resources import Resources
from protocol.version import AGORA_VERSION

Submit = Callable[[list[Any]], None]  # effects for the work queue (agent/effects.py)
Spawn = Callable[[Coroutine[Any, Any, Any], str], Any]  # a task owned by the service (cancelled on stop)


@attrs.define
class Identity:
    """Who this agent is; set while it starts and when the master (re)registers it."""

    boot_id: str
    agent_id: str | None = None
    port: int = 0
    resources: Resources = attrs.field(factory=Resources.empty)
    attributes: dict[str, str | float] = attrs.field(factory=dict)
    https: bool = False  # serves its endpoints with TLS (--tls-cert)
    version: str = AGORA_VERSION
    start_time: float = attrs.field(factory=time.time)  # /state's start_time
    recovery_report: list[str] = attrs.field(factory=list)  # /state's recovery


class Link(Protocol):
    """The master connection (``agent/channel.py``) as the modules use it."""

    master: str
    registered: bool
    stale_frames: int

    def send(self, body: Any) -> bool: ...


LinkRef = Callable[[], Link | None]  # the connection, once the agent started one


class Metrics:
    """The agent's Prometheus metrics, one registry per agent."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.launched = Counter("agora_agent_tasks_launched_total", "Tasks launched", registry=r)
        self.terminal = Counter("agora_agent_tasks_terminal_total", "Tasks ended, by state", ["state"], registry=r)
        self.updates = Counter("agora_agent_status_updates_sent_total", "Status update sends (including resends)",
                               registry=r)
        self.running = Gauge("agora_agent_tasks_active", "Non-terminal tasks", registry=r)
        self.registered = Gauge("agora_agent_registered", "1 while registered with a master", registry=r)
        self.limit = Counter("agora_agent_limit_kills_total", "Tasks killed past their memory limit", registry=r)


class TaskReads(Protocol):
    """The task tracker as the views read it: live and completed tasks, frameworks."""

    @property
    def tasks(self) -> Mapping[tk.TaskKey, tk.TaskRecord]: ...

    @property
    def frameworks(self) -> Mapping[str, FrameworkInfo]: ...

    @property
    def completed(self) -> CompletedBook[tk.TaskRecord, ExecutorInfo | None]: ...

    def active(self) -> list[tk.TaskRecord]: ...


class UpdateReads(Protocol):
    """The status-update manager as the views read it: a task's unacknowledged updates."""

    def pending(self, framework_id: str, task_id: str) -> tuple[su.Update, ...]: ...


class IsolatorReads(Protocol):
    """The isolator as the views read it: its name and what it does (``/state``)."""

    @property
    def name(self) -> str: ...

    def describe(self) -> dict[str, Any]: ...


class UsageReads(Protocol):
    """The usage book: a task's latest CPU, memory and disk figures."""

    def get(self, key: tk.TaskKey) -> TaskUsage | None: ...


@attrs.frozen
class AgentView:
    """What the read-only views read (``agent/http_api.py``, ``agent/mesos_views.py``,
    ``agent/operator_api.py``): the cores' records and books through read-only protocols, never
    to change them."""

    config: AgentConfig
    me: Identity
    tracker: TaskReads
    updates: UpdateReads
    usage: UsageReads
    gpus: Callable[[], GpuBook]  # built while the agent starts
    sandboxes: Path  # the sandboxes' root (``Checkpoint.sandboxes``)
    isolator: IsolatorReads
    metrics: Metrics
    link: LinkRef


# --- the cores and the work queue, as the satellites drive them ------------------------------------


class TaskBook(Protocol):
    """The task tracker (``agent/tasks.py``) as a satellite uses it: facts in, effects out, and
    the books it keeps of frameworks, tasks and executors' status updates."""

    def active(self) -> list[tk.TaskRecord]: ...

    @property
    def frameworks(self) -> dict[str, FrameworkInfo]: ...

    @property
    def tasks(self) -> Mapping[tk.TaskKey, tk.TaskRecord]: ...

    @property
    def executor_uuids(self) -> dict[bytes, str]: ...

    @property
    def ephemeral(self) -> set[tk.TaskKey]: ...

    def get(self, framework_id: str, task_id: str) -> tk.TaskRecord | None: ...

    def handle(self, event: tk.Event, now: float) -> list[tk.Effect]: ...

    def recovered_broken(self, spec: TaskSpec, message: str) -> list[tk.Effect]: ...


class UpdateBook(Protocol):
    """The status-update manager (``agent/status_updates.py``): an update in, effects out, and a
    task's unacknowledged updates."""

    def handle(self, event: su.Event, now: float) -> list[su.Effect]: ...

    def pending(self, framework_id: str, task_id: str) -> tuple[su.Update, ...]: ...

    def latest(self, framework_id: str, task_id: str) -> su.Update | None: ...


@attrs.frozen
class StatusPort:
    """Where what a satellite learns goes: the two pure cores, the work queue that runs their
    effects (``submit``), the master connection, the agent's clock and identity."""

    tracker: TaskBook
    updates: UpdateBook
    submit: Submit
    link: LinkRef
    clock: Clock
    me: Identity


# --- custom executors (agent/executors.py) ---------------------------------------------------------


class ProcessLauncher(Protocol):
    """The launcher (``agent/launcher.py``) as the executor glue and recovery use it."""

    def __contains__(self, key: str) -> bool: ...

    def launch(self, key: str, argv: Sequence[str], env: Mapping[str, str], sandbox: Path,
               exit_status: Path) -> Proc: ...

    def adopt(self, key: str, pid: int, create_time: float, exit_status: Path) -> bool: ...

    def signal(self, key: str, name: str) -> bool: ...


class UriFetcher(Protocol):
    """The fetcher (``agent/fetcher.py``): URIs into a sandbox, off the event loop."""

    async def fetch(self, key: str, task_id: str, uris: Sequence[URI], sandbox: Path,
                    owner: tuple[int, int] | None, on_progress: Callable[[str], None]) -> Fetched | FetchFailed | None: ...


class ExecutorSandboxes(Protocol):
    """Where an executor's sandbox and its exit-status file are (``agent/checkpoint.py``)."""

    def sandbox(self, fid: str, tid: str) -> Path: ...

    def executor_exit_path(self, fid: str, eid: str) -> Path: ...


Environment = Callable[..., dict[str, str]]  # TaskProcesses.environment: a task's (or executor's) environment


@attrs.frozen
class ExecutorSpawnPort:
    """How the executor glue makes an executor process: its URIs fetched into its sandbox, its
    environment (with the agent's executor API address), its user, the launcher that starts and
    signals it, and the service's task owner for the background work."""

    launcher: ProcessLauncher
    fetcher: UriFetcher
    sandboxes: ExecutorSandboxes
    environment: Environment
    setpriv: str  # the setpriv binary that switches to the task's user
    allow_root: bool  # --allow-root-tasks
    switch_user: bool  # --switch-user
    api_address: Callable[[], str]  # host:port of the agent's executor API
    shutdown_grace: float  # --executor-shutdown-grace
    spawn: Spawn
    running: Callable[[], bool]  # the agent is running (not stopping)


# --- restart recovery (agent/recovery.py) ----------------------------------------------------------


class ExecutorRegistry(Protocol):
    """The executor API as recovery uses it: executors that outlived the agent are registered
    again (and may SUBSCRIBE while ``recovering``)."""

    recovering: bool

    def register_executor(self, framework: FrameworkInfo, info: ExecutorInfo) -> None: ...


class Recovering(Protocol):
    """The isolator (``agent/isolation.py``) as recovery uses it."""

    def recover(self, key: str, pid: int, mem_limit: int | None, cpus: float | None) -> None: ...

    def cleanup(self, keep: set[str]) -> int: ...


class LogPipes(Protocol):
    """The log writer (``agent/logs.py``): a re-attached task's output pipes."""

    def track(self, key: str, sandbox: str, pid: int) -> None: ...


class GpuRestore(Protocol):
    """The GPU book (``agent/gpus.py``): a re-attached task's devices held again."""

    def restore(self, key: Hashable, indices: Iterable[int], amount: float) -> str | None: ...


@attrs.frozen
class RecoveryProcesses:
    """What a restarted agent re-attaches to and cleans up: the launcher (wrappers adopted), the
    isolator (cgroups), the log writer, the GPUs, the executor API, the sandboxes."""

    launcher: ProcessLauncher
    isolator: Recovering
    logs: LogPipes | None
    gpus: GpuRestore
    executor_registry: ExecutorRegistry | None
    watch_oom: Callable[[str], None]
    sweep_sandboxes: Callable[[Callable[[str, str], bool]], int]


# --- command tasks' processes (agent/processes.py) -------------------------------------------------


class TaskSandboxes(Protocol):
    """Where a task's sandbox and its exit-status file are (``agent/checkpoint.py``)."""

    def task_sandbox(self, fid: str, tid: str, executor_id: str | None = None) -> Path: ...

    def exit_status_path(self, fid: str, tid: str) -> Path: ...


class TaskIsolation(Protocol):
    """The isolator (``agent/isolation.py``) as a task's process uses it: its cgroup prepared,
    joined, killed and freed, its OOM kills and final figures."""

    def prepare(self, key: str, mem_limit: int | None, cpus: float | None) -> tuple[str, ...]: ...

    def attach(self, key: str, pid: int) -> None: ...

    def kill(self, key: str) -> int: ...

    def release(self, key: str) -> None: ...

    def usage(self, key: str) -> Usage | None: ...

    def oom_fd(self, key: str) -> int | None: ...

    def oom_event(self, key: str) -> str | None: ...

    def oom_killed(self, key: str) -> str | None: ...


Pipes = tuple[tuple[int, int], tuple[int, int]]  # a task's (stdout, stderr) pipes: the task's ends, the writer's


class TaskLogs(Protocol):
    """The log writer's client (``agent/logs.py``): a task's output pipes, and when its logs are
    complete."""

    @property
    def closed(self) -> set[str]: ...

    def open_many(self, tasks: list[tuple[str, Path]]) -> dict[str, Pipes | None]: ...

    def open_streams(self, key: str, sandbox: Path) -> Pipes | None: ...

    def track(self, key: str, sandbox: str, pid: int) -> None: ...

    def waits_for(self, key: str) -> bool: ...

    def untrack(self, key: str) -> None: ...


class FinalUsage(Protocol):
    """The usage book (``agent/usage.py``): an ended task's final figures."""

    def ended(self, key: tk.TaskKey, cpu_seconds: float | None, peak: int | None, now: float) -> TaskUsage: ...


class GpuEnvironment(Protocol):
    """The GPU book (``agent/gpus.py``): a task's GPU variables."""

    def environment(self, indices: tuple[int, ...]) -> dict[str, str]: ...


@attrs.frozen
class ProcessPort:
    """What a command task's process is made and watched with: its sandbox, its cgroup, its log
    pipes, its GPUs' variables, where its final figures go, the agent's metrics, and the worker
    pool for the blocking isolator work."""

    sandboxes: TaskSandboxes
    isolator: TaskIsolation
    logs: TaskLogs | None
    usage: FinalUsage
    gpus: Callable[[], GpuEnvironment]  # built while the agent starts
    metrics: Metrics
    pool: concurrent.futures.Executor


# --- the monitor loop (agent/monitor.py) -----------------------------------------------------------


class Sampler(Protocol):
    """The isolator as the monitor loop uses it: every task's figures and limit breaches, and its
    spare cgroups topped up."""

    def sample(self) -> tuple[dict[str, Usage], list[Breach]]: ...

    def fill(self) -> int: ...


class UsageFigures(Protocol):
    """The usage book (``agent/usage.py``): samples and disk figures in, what changed out."""

    def sampled(self, key: tk.TaskKey, cpu_seconds: float, rss: int, now: float) -> None: ...

    def disk(self, key: tk.TaskKey, used: int, now: float) -> None: ...

    def report(self, live: Iterable[tk.TaskKey]) -> list[tuple[tk.TaskKey, TaskUsage]]: ...


class Limits(Protocol):
    """The task processes (``agent/processes.py``): a task past a limit is killed."""

    def limit(self, fid: str, tid: str, message: str, kind: tk.KillReason, now: float) -> None: ...


class DropReaper(Protocol):
    """The checkpoint writer (``agent/journal.py``): dropped tasks' files removed off the loop."""

    @property
    def drops_pending(self) -> bool: ...

    def reap_dropped(self) -> None: ...


class Estimating(Protocol):
    """The oversubscription step (``agent/oversubscription.py``): the estimator and QoS run on a sample."""

    def step(self, usage: dict[str, Any], now: float) -> None: ...


class SandboxCollector(Protocol):
    """The sandbox GC (``agent/gc.py``): finished sandboxes due for removal, removed."""

    def due(self, now: float, max_age: float | None = None) -> list[Path]: ...

    def remove(self, paths: list[Path]) -> None: ...


class DiskReserve(Protocol):
    """The work dir's reserve (``agent/diskwatch.py``): space held for the checkpoints."""

    @property
    def size(self) -> int: ...

    @property
    def released(self) -> bool: ...

    def ensure(self) -> None: ...


@attrs.frozen
class MonitorPort:
    """What the monitor loop samples (the isolator, the launcher's live processes), measures
    (sandboxes), records (the usage book), acts on (limits, the estimator, the sandbox GC, the
    reserve, dropped tasks' files) and reports (metrics, the master link's usage report)."""

    sandboxes: TaskSandboxes
    sampler: Sampler
    live: ProcessLauncher  # which processes the launcher watches
    usage: UsageFigures
    limits: Limits
    journal: DropReaper
    estimator: Estimating
    sandbox_gc: SandboxCollector
    reserve: DiskReserve
    metrics: Metrics
