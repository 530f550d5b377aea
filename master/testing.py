"""Test support: fluent builders for driving ``MasterState`` without a network (used by the
master's unit and harness tests, like ``aiohttp.test_utils``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from master.allocator import Allocator, AllocatorConfig
from master.events import (
    AgentConnected,
    AgentMessageReceived,
    CallReceived,
    CloseStream,
    Effect,
    MasterEvent,
    Persist,
    SendEvent,
    SendToAgent,
    SubscribeReceived,
    Tick,
)
from master.state import MasterState, StateConfig
from protocol import agent_channel as ac
from protocol import mesos
from protocol.resources import Resources
from protocol.task_states import TaskState


def master_info(port: int = 5050) -> mesos.MasterInfo:
    return mesos.MasterInfo(
        id="m1", ip=16777343, port=port, pid=f"master@127.0.0.1:{port}", hostname="localhost", version="1.11.0",
        address=mesos.Address(port=port, hostname="localhost", ip="127.0.0.1"),
    )


def framework_info(name: str = "fw", *caps: str, roles: Sequence[str] = ("*",), fid: str | None = None,
                   failover_timeout: float | None = None, principal: str | None = None) -> mesos.FrameworkInfo:
    capabilities = tuple(mesos.Capability(type=mesos.CapabilityType(c)) for c in ("MULTI_ROLE", *caps))
    return mesos.FrameworkInfo(
        user="nobody", name=name, roles=tuple(roles), capabilities=capabilities,
        id=mesos.FrameworkID(fid) if fid else None, failover_timeout=failover_timeout, principal=principal,
    )


def task(tid: str, cpus: float = 0.1, mem: float = 32, cmd: str | None = "true", **kw: Any) -> mesos.TaskInfo:
    return mesos.TaskInfo(
        name=tid, task_id=mesos.TaskID(tid), resources=Resources.of(cpus=cpus, mem=mem).to_mesos(),
        command=mesos.CommandInfo(value=cmd) if cmd is not None else None, **kw,
    )


class Harness:
    """A MasterState with a real allocator and a virtual clock; records every effect."""

    def __init__(self, allocator: AllocatorConfig | None = None, **cfg: Any) -> None:
        self.now = 1000.0
        self.alloc = Allocator(allocator or AllocatorConfig(offer_id_prefix="o", batch_window=0.005))
        self.state = MasterState(
            master_id="m1", epoch=1, master_info=master_info(), allocator=self.alloc,
            config=StateConfig(**cfg), now=self.now,
        )
        self.effects: list[Effect] = []
        self._stream = 0
        self._conn = 0

    def feed(self, ev: MasterEvent) -> list[Effect]:
        fx = self.state.handle(ev, self.now)
        self.effects.extend(fx)
        return fx

    def advance(self, dt: float) -> list[Effect]:
        """Advance virtual time, delivering a Tick at every deadline on the way."""
        end = self.now + dt
        out: list[Effect] = []
        for _ in range(100_000):
            d = self.state.next_deadline()
            if d is None or d > end:
                break
            self.now = max(self.now, d)
            out += self.feed(Tick())
            if self.state.next_deadline() == d:
                raise AssertionError(f"deadline {d} did not move after a Tick (the shell would spin)")
        self.now = max(self.now, end)
        out += self.feed(Tick())
        return out

    def allocate(self) -> list[Effect]:
        return self.advance(0.01)

    # --- frameworks ---------------------------------------------------------------------------
    def subscribe(self, info: mesos.FrameworkInfo | None = None) -> tuple[str, str]:
        self._stream += 1
        sid = f"s{self._stream}"
        fx = self.feed(SubscribeReceived(sid, mesos.Subscribe(framework_info=info or framework_info())))
        ev = [e.event for e in fx if isinstance(e, SendEvent) and e.event.type is mesos.EventType.SUBSCRIBED]
        assert ev, fx
        assert ev[0].subscribed is not None
        return ev[0].subscribed.framework_id.value, sid

    def call(self, fid: str, sid: str, call: mesos.Call) -> list[Effect]:
        return self.feed(CallReceived(fid, sid, call))

    # --- agents -------------------------------------------------------------------------------
    def agent(self, resources: str = "cpus:4;mem:4096", agent_id: str | None = None,
              tasks: Sequence[ac.RunningTask] = (), hostname: str = "h1") -> tuple[str, int]:
        self._conn += 1
        reg = ac.Register(
            hostname=hostname, port=5051, resources=Resources.parse(resources).to_mesos(),
            agent_id=mesos.AgentID(agent_id) if agent_id else None, tasks=tuple(tasks),
        )
        fx = self.feed(AgentConnected(self._conn, reg))
        regd = [e.body for e in fx if isinstance(e, SendToAgent) and isinstance(e.body, ac.Registered)]
        assert regd, fx
        return regd[0].agent_id.value, self._conn

    def agent_says(self, conn: int, body: ac.Body) -> list[Effect]:
        return self.feed(AgentMessageReceived(conn, body))

    def status(self, conn: int, fid: str, tid: str, state: TaskState, uuid: bytes = b"u" * 16) -> list[Effect]:
        st = mesos.TaskStatus(task_id=mesos.TaskID(tid), state=state, source=mesos.Source.SOURCE_EXECUTOR, uuid=uuid)
        return self.agent_says(conn, ac.StatusUpdateMsg(framework_id=mesos.FrameworkID(fid), status=st))


def events(fx: Sequence[Effect], sid: str | None = None, type_: mesos.EventType | None = None) -> list[mesos.Event]:
    return [
        e.event for e in fx
        if isinstance(e, SendEvent) and (sid is None or e.stream_id == sid) and (type_ is None or e.event.type is type_)
    ]


def offers(fx: Sequence[Effect], sid: str | None = None) -> list[mesos.Offer]:
    return [o for ev in events(fx, sid, mesos.EventType.OFFERS) if ev.offers for o in ev.offers.offers]


def updates(fx: Sequence[Effect], sid: str | None = None) -> list[mesos.TaskStatus]:
    return [ev.update.status for ev in events(fx, sid, mesos.EventType.UPDATE) if ev.update]


def to_agent(fx: Sequence[Effect], kind: type) -> list[Any]:
    return [e.body for e in fx if isinstance(e, SendToAgent) and isinstance(e.body, kind)]


def persisted(fx: Sequence[Effect]) -> list[Any]:
    return [op for e in fx if isinstance(e, Persist) for op in e.ops]


def closed(fx: Sequence[Effect]) -> list[str]:
    return [e.stream_id for e in fx if isinstance(e, CloseStream)]
