"""The narrow, typed dependencies the agent's shell modules receive instead of the service.

``AgentService`` (``agent/service.py``) is only the composition root: it builds the parts and
hands each module what it uses. The shared, changing facts of the agent are one small record
(``Identity``: its id once registered, its port once listening, its resources once probed); the
master connection is seen through ``Link``; work for the cores goes through a ``Submit``; the
read-only views (``/state``, ``/flags``, the v1 operator API) get an ``AgentView``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Coroutine
from typing import Any, Protocol

import attrs
from prometheus_client import CollectorRegistry, Counter, Gauge

from agent.checkpoint import Checkpoint
from agent.config import AgentConfig
from agent.gpus import GpuBook
from agent.isolation import Isolator
from agent.status_updates import StatusUpdateManager
from agent.tasks import TaskTracker
from agent.usage import UsageBook
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


@attrs.frozen
class AgentView:
    """What the read-only views read (``agent/http_api.py``, ``agent/mesos_views.py``,
    ``agent/operator_api.py``): the cores' records and books, never to change them."""

    config: AgentConfig
    me: Identity
    tracker: TaskTracker
    updates: StatusUpdateManager
    usage: UsageBook
    gpus: Callable[[], GpuBook]  # built while the agent starts
    checkpoint: Checkpoint  # its sandboxes' root
    isolator: Isolator
    metrics: Metrics
    link: LinkRef
