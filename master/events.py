"""Inputs (facts) and outputs (commands) of the master's pure core ``master.state``.

Connections are named by opaque ids the shells choose: a scheduler event stream by its
``stream_id`` (the ``Mesos-Stream-Id``), an agent WebSocket by an integer ``conn_id``. The core
never touches a socket; it says where to send what.
"""

from __future__ import annotations

import attrs

from master.maintenance import Machine, Schedule
from master.registry_ops import RegistryOp
from protocol import agent_channel as ac
from protocol import mesos
from protocol.acls import Acls
from protocol.resources import Resources

__pure__ = True

# --- inputs ---------------------------------------------------------------------------------


@attrs.frozen
class SubscribeReceived:
    """A SUBSCRIBE passed the transport checks; the shell opened ``stream_id`` for it."""

    stream_id: str
    subscribe: mesos.Subscribe
    principal: str | None = None
    authenticated: str | None = None  # the principal the request proved (frameworks must authenticate)


@attrs.frozen
class CallReceived:
    """Any other scheduler call, from the stream ``stream_id`` (header ``Mesos-Stream-Id``)."""

    framework_id: str
    stream_id: str
    call: mesos.Call


@attrs.frozen
class StreamClosed:
    """The framework's event stream ended (client went away or the shell closed it)."""

    stream_id: str


@attrs.frozen
class AgentConnected:
    """An agent's REGISTER arrived on connection ``conn_id``."""

    conn_id: int
    register: ac.Register
    principal: str | None = None  # the principal the connection proved (agents must authenticate)
    ip: str | None = None  # the address the connection came from (its machine, for maintenance)


@attrs.frozen
class AgentMessageReceived:
    """One message from an agent (its body; the channel's envelope is not kept)."""

    conn_id: int
    body: ac.Body


@attrs.frozen
class AgentMessagesReceived:
    """The messages of one agent frame after its first, handled in order as one fact (their
    offer updates coalesce: a lease changed by several of them is sent once, in its latest form)."""

    conn_id: int
    bodies: tuple[ac.Body, ...]


@attrs.frozen
class AgentConnectionLost:
    conn_id: int


@attrs.frozen
class Tick:
    """Time passed: timers whose deadline is due fire (pings, failover, re-registration window,
    allocation). ``seen`` carries, per agent connection, when the shell last received a frame on
    it: liveness measured at the socket, so a slow registry write that delays event handling
    never makes an agent look silent."""

    seen: tuple[tuple[int, float], ...] = ()


@attrs.frozen
class QuotaUpdated:
    role: str
    guarantee: Resources
    limit: Resources | None = None


@attrs.frozen
class WeightUpdated:
    role: str
    weight: float


@attrs.frozen
class AgentDrainRequested:
    """Operator: stop (``draining=True``) or resume offering an agent's resources (maintenance).
    DRAIN_AGENT (``kill``): its tasks are killed, each with at most ``max_grace`` seconds (None:
    the task's own kill policy), and it is marked gone once drained if ``mark_gone``;
    DEACTIVATE_AGENT (``kill=False``): no new offers, tasks run on; REACTIVATE_AGENT
    (``draining=False``) ends either."""

    agent_id: str
    draining: bool
    reason: str | None = None  # the operator's words, shown with the agent (not persisted)
    kill: bool = False
    max_grace: float | None = None
    mark_gone: bool = False


@attrs.frozen
class ReservationRequested:
    """Operator RESERVE_RESOURCES / UNRESERVE_RESOURCES on an agent: ``resources`` in reserved
    form (e.g. ``cpus(reservations: [(DYNAMIC,eng,p)]):2``), taken from / returned to its free
    unreserved resources."""

    agent_id: str
    resources: Resources
    reserve: bool


@attrs.frozen
class TeardownRequested:
    """Operator TEARDOWN of a framework."""

    framework_id: str


@attrs.frozen
class OperatorStreamOpened:
    """An operator opened an event stream (``SUBSCRIBE`` on ``/api/v1``); ``stream_id`` is the
    shell's name for it. While any is open the core publishes operator events."""

    stream_id: str


@attrs.frozen
class OperatorStreamClosed:
    stream_id: str


@attrs.frozen
class MaintenanceScheduleUpdated:
    """Operator UPDATE_MAINTENANCE_SCHEDULE (``POST /maintenance/schedule``), validated by the
    shell's parse; the core checks it against the machine modes again."""

    schedule: Schedule


@attrs.frozen
class MaintenanceStarted:
    """Operator START_MAINTENANCE (``/machine/down``): these DRAINING machines go DOWN."""

    machines: tuple[Machine, ...]


@attrs.frozen
class MaintenanceStopped:
    """Operator STOP_MAINTENANCE (``/machine/up``): these DOWN machines come back UP."""

    machines: tuple[Machine, ...]


@attrs.frozen
class AclsReplaced:
    """The operator re-read ``--acls`` (SIGHUP): the core decides with these from now on."""

    acls: Acls


MasterEvent = (
    SubscribeReceived
    | CallReceived
    | StreamClosed
    | AgentConnected
    | AgentMessageReceived
    | AgentMessagesReceived
    | AgentConnectionLost
    | Tick
    | QuotaUpdated
    | WeightUpdated
    | AgentDrainRequested
    | ReservationRequested
    | TeardownRequested
    | OperatorStreamOpened
    | OperatorStreamClosed
    | AclsReplaced
    | MaintenanceScheduleUpdated
    | MaintenanceStarted
    | MaintenanceStopped
)

# --- outputs --------------------------------------------------------------------------------


@attrs.frozen
class Persist:
    """Apply these registry operations (one transaction) before running the effects after it."""

    ops: tuple[RegistryOp, ...]


@attrs.frozen
class SendEvent:
    stream_id: str
    event: mesos.Event


@attrs.frozen
class CloseStream:
    stream_id: str
    reason: str = ""


@attrs.frozen
class SendToAgent:
    conn_id: int
    body: ac.Body


@attrs.frozen
class CloseAgent:
    conn_id: int
    reason: str = ""


@attrs.frozen
class PublishOperatorEvent:
    """Fan ``event`` out to the open operator streams; ``seq`` numbers the core's operator events
    (a stream whose snapshot was taken at seq N gets only those after N)."""

    seq: int
    event: mesos.OperatorEvent


Effect = Persist | SendEvent | CloseStream | SendToAgent | CloseAgent | PublishOperatorEvent
