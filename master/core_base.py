"""What the books of the master's pure core share (see ``master.state``): the settings
(``StateConfig``) and the records (``CoreData``: frameworks, agents, connections, counters,
deadlines, the maintenance modes), which ``MasterState`` holds and each book reaches through its
port. No rule lives here."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

import attrs

from master.alloc_port import AllocatorPort
from master.maintenance import InverseOfferBook, MaintenanceBook
from master.ratelimit import TokenBucket
from master.records import AgentRec, FrameworkRec
from protocol import agent_channel as ac
from protocol import mesos
from protocol.acls import Acls
from protocol.resources import Resources, parse_attributes
from protocol.task_states import TaskState

__pure__ = True

TS = TaskState
S = mesos.Source
R = mesos.Reason
CT = mesos.CallType
MT = ac.MessageType
EMPTY = Resources()


@attrs.frozen
class StateConfig:
    heartbeat_interval: float = 15.0
    ping_interval: float = 5.0
    ping_timeout: float = 15.0
    agent_reregister_timeout: float = 60.0
    agent_removal_rate: float = 1.0
    agent_removal_burst: int = 5
    allocation_batch: float = 0.005
    completed_tasks_per_framework: int = 1000
    awaiting_ack_per_framework: int = 100_000
    completed_frameworks: int = 50
    # disconnected frameworks that never ran a task, kept per principal for their failover
    # timeout; beyond this the oldest is removed (abandoned subscriptions)
    abandoned_frameworks_per_principal: int = 16
    unreachable_gc: float = 14 * 24 * 3600.0  # an unreachable agent is removed for good after this
    # authorization (protocol/acls.py): the ACLs, and whether frameworks / agents must authenticate
    acls: Acls = attrs.field(factory=Acls.allow_all)
    authenticate_frameworks: bool = False
    authenticate_agents: bool = False


def _attr_dict(attrs_: Iterable[mesos.Attribute]) -> dict[str, str | float]:
    out: dict[str, str | float] = {}
    for a in attrs_:
        if a.scalar is not None:
            out[a.name] = float(a.scalar.value)
        elif a.text is not None:
            out[a.name] = a.text.value
        elif a.set is not None:
            out[a.name] = "{" + ",".join(a.set.item) + "}"
        elif a.ranges is not None:
            out[a.name] = "[" + ",".join(f"{r.begin}-{r.end}" for r in a.ranges.range) + "]"
    return out


def _attrs_string(attrs_: Iterable[mesos.Attribute]) -> str:
    return ";".join(f"{k}:{v}" for k, v in _attr_dict(attrs_).items())


def _attrs_from_string(text: str) -> tuple[mesos.Attribute, ...]:
    if not text:
        return ()
    try:
        parsed = parse_attributes(text)
    except (ValueError, TypeError):
        return ()
    out: list[mesos.Attribute] = []
    for k, v in parsed.items():
        if isinstance(v, float):
            out.append(mesos.Attribute(name=k, type=mesos.ValueType.SCALAR, scalar=mesos.Scalar(v)))
        else:
            out.append(mesos.Attribute(name=k, type=mesos.ValueType.TEXT, text=mesos.Text(str(v))))
    return tuple(out)



class CoreData:
    """The core's shared records: plain data, no rules. ``MasterState`` is one (the edges read
    these through ``master.read_model.CoreView``); each book reaches the ones it needs through
    its port (the ``...Host`` protocol of its module)."""

    def __init__(
        self,
        *,
        master_id: str,
        epoch: int,
        master_info: mesos.MasterInfo,
        allocator: AllocatorPort,
        config: StateConfig | None = None,
        now: float = 0.0,
    ) -> None:
        self.master_id = master_id
        self.epoch = epoch
        self.master_info = master_info
        self.alloc = allocator
        self.cfg = config or StateConfig()
        self.start_time = now
        self.frameworks: dict[str, FrameworkRec] = {}
        self.completed_frameworks: deque[FrameworkRec] = deque(maxlen=self.cfg.completed_frameworks)
        self.removed_framework_ids: set[str] = set()
        self.removed_agent_ids: set[str] = set()  # removed for good; their tasks were reported GONE
        self.agents: dict[str, AgentRec] = {}
        self.conns: dict[int, str] = {}  # agent connection -> agent id
        self.streams: dict[str, str] = {}  # stream id -> framework id
        self.framework_seq = 0
        self.agent_seq = 0
        self.recovery_deadline: float | None = None
        self.removal_bucket = TokenBucket(self.cfg.agent_removal_rate, float(self.cfg.agent_removal_burst))
        self.allocation_due: float | None = now
        self.housekeeping_at: float | None = None  # next ping/timeout/failover/GC check
        self.quotas: dict[str, tuple[Resources, Resources | None]] = {}
        self.weights: dict[str, float] = {}
        self.counters: dict[str, int] = {
            "valid_status_updates": 0,
            "invalid_status_updates": 0,
            "slave_registrations": 0,
            "slave_reregistrations": 0,
            "slave_removals": 0,
            "slave_unreachable_scheduled": 0,
            "dropped_messages": 0,
            "tasks_error": 0,
            "tasks_dropped": 0,
            "tasks_lost": 0,
            "frameworks_removed": 0,
            "invalid_offers": 0,
        }
        self.calls: dict[str, int] = {}
        self.agent_principals: dict[str, str] = {}  # agent id -> the principal that first registered it
        self.unauthorized = 0  # refusals by the ACLs or an agent id's bound principal
        self.allocator_errors: list[str] = []
        self.finished_counts: dict[TaskState, int] = {}
        # maintenance (master.maintenance, master.maintenance_rules): the schedule and DOWN
        # machines, the inverse offers, and the unavailability of each agent on a DRAINING machine
        # (carried by its offers; the agents inverse offers are made for)
        self.maintenance = MaintenanceBook()
        self.inverse = InverseOfferBook(prefix=f"{master_id}-io")
        self.agent_unavailability: dict[str, mesos.Unavailability] = {}
        self.inverse_due: float | None = None  # when to look for inverse offers to make
        self.maintenance_refused = 0  # registrations refused because the agent's machine is DOWN


def roles_of(info: mesos.FrameworkInfo) -> tuple[str, ...]:
    """The roles a framework subscribes with: ``roles`` (MULTI_ROLE), else its one ``role``."""
    multi = any(c.type is mesos.CapabilityType.MULTI_ROLE for c in info.capabilities)
    if multi:
        return tuple(dict.fromkeys(info.roles)) or ("*",)
    return (info.role or "*",)
