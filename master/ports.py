"""The narrow ports the master's edges are given instead of the service (``master/main.py`` wires
``MasterService`` into each; nothing else imports it).

Two directions, as in ``master/alloc_port.py``:

* a **fact sink** (``FactSink``): the one way an edge changes anything, ``dispatch(event)`` of a
  fact to the core (``master/events.py``), in arrival order, awaited until its effects ran;
* a **read model** (``state``: ``master.read_model.CoreView``, plus the shell's own figures): the
  core's records as read-only types. An edge never assigns to a record.

Each edge names the slice it uses (``AgentEdgePort``, ``SchedulerEdgePort``, ``AuthPort``,
``OperatorPort``), so a newcomer reads here what each edge can see and do.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

from master.allocator import decisions as ad
from master.events import MasterEvent
from master.read_model import CoreView
from protocol.clock import Clock

if TYPE_CHECKING:

    from master.auth import MasterAuth
    from master.config import MasterConfig
    from master.operator import OperatorApi
    from master.operator_stream import OperatorStreams
    from master.transport import GuardedServer


class FactSink(Protocol):
    """Facts into the core: handled at once, in arrival order; returns when the fact's effects
    ran (its registry writes durable)."""

    async def dispatch(self, event: MasterEvent) -> None: ...


class Metrics(Protocol):
    """The shell's own counters (``/metrics/snapshot`` ``master/...`` numbers)."""

    def metrics_inc(self, name: str, n: int = 1) -> None: ...


class OfferBook(Protocol):
    """The allocator's outstanding offers, and why a framework gets none (read)."""

    def outstanding_offers(self) -> Sequence[ad.Offer]: ...
    def why_not_offered(self, framework_id: str) -> str: ...


class RegistryStats(Protocol):
    @property
    def writes(self) -> int: ...
    @property
    def transactions(self) -> int: ...


class AclReader(Protocol):
    """What the read-ACL filters (``master.auth.visible_state`` and friends) need."""

    @property
    def auth(self) -> MasterAuth: ...
    @property
    def state(self) -> CoreView: ...


class Process(Protocol):
    """The process facts every edge reads."""

    @property
    def config(self) -> MasterConfig: ...
    @property
    def clock(self) -> Clock: ...
    @property
    def running(self) -> bool: ...
    @property
    def ready(self) -> bool: ...


class AgentEdgePort(FactSink, Metrics, Process, Protocol):
    """``master/agent_channel.py``: agent frames in as facts."""

    @property
    def epoch(self) -> int: ...
    @property
    def guard(self) -> GuardedServer | None: ...


class AuthPort(FactSink, Metrics, Process, Protocol):
    """``master/auth.py``: the settings in force (replaced on reload), failures counted, and the
    read model the view filters need."""

    auth: MasterAuth

    @property
    def state(self) -> CoreView: ...
    def auth_failed(self, realm: str) -> None: ...


class SchedulerEdgePort(FactSink, Metrics, Process, Protocol):
    """``master/http_api.py``: scheduler calls in as facts, after the transport checks."""

    @property
    def auth(self) -> MasterAuth: ...
    @property
    def state(self) -> CoreView: ...
    @property
    def port(self) -> int: ...
    @property
    def advertised_host(self) -> str: ...
    def rate_ok(self, principal: str, cost: float = 1.0) -> bool: ...


class OperatorPort(FactSink, Metrics, Process, Protocol):
    """The operator edges (``operator``, ``operator_v1``, ``mesos_endpoints``, ``views``,
    ``operator_stream``, the web UI): operator calls in as facts, everything else read."""

    @property
    def auth(self) -> MasterAuth: ...
    @property
    def auth_failures(self) -> Mapping[str, int]: ...
    @property
    def state(self) -> CoreView: ...
    @property
    def allocator(self) -> OfferBook | None: ...
    @property
    def registry(self) -> RegistryStats | None: ...
    @property
    def counters(self) -> Mapping[str, int]: ...
    @property
    def master_id(self) -> str: ...
    @property
    def epoch(self) -> int: ...
    @property
    def port(self) -> int: ...
    @property
    def start_time(self) -> float: ...
    @property
    def pipeline_depth(self) -> int: ...
    @property
    def operator_streams(self) -> OperatorStreams: ...
    @property
    def operator_api(self) -> OperatorApi: ...
