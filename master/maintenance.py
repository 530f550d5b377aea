"""Maintenance schedules, machine modes and inverse offers: Mesos' maintenance primitives (pure).

A *schedule* is a list of *windows*, each a set of machines with an *unavailability* (start,
optional duration). A machine is identified by its hostname (case-insensitive) and/or IP address.
Machines move between three modes, always on the operator's word:

* **UP**: not in the schedule (the default).
* **DRAINING**: in the schedule. Offers of its agents carry the window's ``unavailability``, and
  every framework using resources on them is sent *inverse offers* it answers with
  ``ACCEPT_INVERSE_OFFERS`` / ``DECLINE_INVERSE_OFFERS`` (a hint for the operator; nothing else
  changes).
* **DOWN**: after ``START_MAINTENANCE`` (``/machine/down``) of a DRAINING machine: its agents are
  shut down and removed, and refused while it stays DOWN. ``STOP_MAINTENANCE`` (``/machine/up``)
  of a DOWN machine brings it UP and takes it out of the schedule.

Rules (Mesos' ``master/maintenance.cpp`` and ``master/http.cpp``): every window has at least one
machine and an unavailability whose duration is not negative; a machine has a hostname or an IP
(a valid IPv4 address when given) and appears in the schedule once; a schedule update may not drop
a DOWN machine; only a scheduled DRAINING machine can be brought down, only a DOWN one up.

An agent is on a scheduled machine when the machine's hostname (if given) equals the agent's
hostname and its IP (if given) equals the agent's address; Mesos requires both to be given and
equal, which is the same thing for a schedule that names both.

``MaintenanceBook`` is the schedule and the DOWN set (persisted as one registry value, ``encode``/
``decode``); ``InverseOfferBook`` the outstanding inverse offers, the frameworks' answers
(``InverseOfferStatus``) and the refusal filters they set.
"""

from __future__ import annotations

import enum
import ipaddress
import json
from collections.abc import Iterable, Sequence

import attrs

from protocol import mesos

__pure__ = True

IO = mesos.InverseOfferStatusValue


class Mode(enum.Enum):
    UP = "UP"
    DRAINING = "DRAINING"
    DOWN = "DOWN"


class MaintenanceError(ValueError):
    """A schedule or machine list the master refuses (answered 400 with this message)."""


@attrs.frozen(order=True)
class Machine:
    """A ``MachineID``, normalised: hostname lower-cased, empty fields ``""``."""

    hostname: str = ""
    ip: str = ""

    @classmethod
    def of(cls, mid: mesos.MachineID) -> Machine:
        return cls((mid.hostname or "").lower(), mid.ip or "")

    def to_mesos(self) -> mesos.MachineID:
        return mesos.MachineID(hostname=self.hostname or None, ip=self.ip or None)

    def label(self) -> str:
        """As Mesos names a machine in its messages (its JSON)."""
        fields = {k: v for k, v in (("hostname", self.hostname), ("ip", self.ip)) if v}
        return json.dumps(fields, separators=(",", ":"))

    def matches(self, hostname: str, ip: str) -> bool:
        """Whether an agent with this hostname and address is on this machine."""
        if self.hostname and self.hostname != hostname.lower():
            return False
        return not self.ip or self.ip == ip


@attrs.frozen
class Window:
    machines: tuple[Machine, ...]
    start_ns: int
    duration_ns: int | None = None

    def unavailability(self) -> mesos.Unavailability:
        return mesos.Unavailability(
            start=mesos.TimeInfo(self.start_ns),
            duration=mesos.DurationInfo(self.duration_ns) if self.duration_ns is not None else None,
        )

    def to_mesos(self) -> mesos.MaintenanceWindow:
        return mesos.MaintenanceWindow(
            machine_ids=tuple(m.to_mesos() for m in self.machines), unavailability=self.unavailability()
        )


@attrs.frozen
class Schedule:
    windows: tuple[Window, ...] = ()

    def windows_by_machine(self) -> dict[Machine, Window]:
        return {m: w for w in self.windows for m in w.machines}

    def to_mesos(self) -> mesos.MaintenanceSchedule:
        return mesos.MaintenanceSchedule(windows=tuple(w.to_mesos() for w in self.windows))

    def without(self, machines: Iterable[Machine]) -> Schedule:
        """The schedule with ``machines`` taken out (a window left empty goes too)."""
        gone = set(machines)
        out = []
        for w in self.windows:
            kept = tuple(m for m in w.machines if m not in gone)
            if kept:
                out.append(attrs.evolve(w, machines=kept))
        return Schedule(tuple(out))


# --- validation ---------------------------------------------------------------------------------


def machine_error(mid: mesos.MachineID) -> str | None:
    if not mid.hostname and not mid.ip:
        return "Both 'hostname' and 'ip' for a machine are empty"
    if mid.ip:
        try:
            ipaddress.IPv4Address(mid.ip)
        except ValueError:
            return f"Failed to parse IP address '{mid.ip}' of a machine: not an IPv4 address"
    return None


def parse_schedule(schedule: mesos.MaintenanceSchedule) -> Schedule:
    """The schedule's structural rules (each window has machines and a valid unavailability, each
    machine a hostname or a valid IP and one window at most); raises ``MaintenanceError``."""
    seen: set[Machine] = set()
    windows = []
    for w in schedule.windows:
        if not w.machine_ids:
            raise MaintenanceError("List of machines in the maintenance window is empty")
        u = w.unavailability
        if u is None:
            raise MaintenanceError("Expecting 'unavailability' to be present in a maintenance window")
        if u.duration is not None and u.duration.nanoseconds < 0:
            raise MaintenanceError("Unavailability 'duration' is negative")
        machines = []
        for mid in w.machine_ids:
            err = machine_error(mid)
            if err:
                raise MaintenanceError(err)
            m = Machine.of(mid)
            if m in seen:
                raise MaintenanceError(f"Machine '{m.label()}' appears more than once in the schedule")
            seen.add(m)
            machines.append(m)
        windows.append(Window(tuple(machines), u.start.nanoseconds, u.duration.nanoseconds if u.duration else None))
    return Schedule(tuple(windows))


def parse_machines(ids: Sequence[mesos.MachineID]) -> tuple[Machine, ...]:
    """A machine list of START/STOP_MAINTENANCE: not empty, each valid and listed once."""
    if not ids:
        raise MaintenanceError("List of machines is empty")
    out: list[Machine] = []
    for mid in ids:
        err = machine_error(mid)
        if err:
            raise MaintenanceError(err)
        m = Machine.of(mid)
        if m in out:
            raise MaintenanceError(f"Machine '{m.label()}' appears more than once in the schedule")
        out.append(m)
    return tuple(out)


# --- the schedule and the modes -------------------------------------------------------------------


@attrs.define
class MaintenanceBook:
    schedule: Schedule = Schedule()
    down: set[Machine] = attrs.field(factory=set)

    def mode(self, m: Machine) -> Mode:
        if m in self.down:
            return Mode.DOWN
        return Mode.DRAINING if m in self.schedule.windows_by_machine() else Mode.UP

    def empty(self) -> bool:
        return not self.schedule.windows and not self.down

    def machine_of(self, hostname: str, ip: str) -> tuple[Machine, Window] | None:
        """The scheduled machine an agent is on (a DOWN one first, else the first in schedule
        order), with its window; None when it is on no scheduled machine."""
        found = None
        for w in self.schedule.windows:
            for m in w.machines:
                if m.matches(hostname, ip):
                    if m in self.down:
                        return m, w
                    if found is None:
                        found = (m, w)
        return found

    def is_down(self, hostname: str, ip: str) -> Machine | None:
        hit = self.machine_of(hostname, ip)
        return hit[0] if hit is not None and hit[0] in self.down else None

    def update_problem(self, schedule: Schedule) -> str | None:
        """Why ``schedule`` cannot replace the current one: it drops a DOWN machine."""
        kept = schedule.windows_by_machine()
        for m in sorted(self.down):
            if m not in kept:
                return f"Machine '{m.label()}' is deactivated and cannot be removed from the schedule"
        return None

    def down_problem(self, machines: Iterable[Machine]) -> str | None:
        scheduled = self.schedule.windows_by_machine()
        for m in machines:
            if m not in scheduled:
                return f"Machine '{m.label()}' is not part of a maintenance schedule"
            if m in self.down:
                return f"Machine '{m.label()}' is not in DRAINING mode and cannot be brought down"
        return None

    def up_problem(self, machines: Iterable[Machine]) -> str | None:
        for m in machines:
            if m not in self.down:
                return f"Machine '{m.label()}' is not in DOWN mode and cannot be brought up"
        return None

    def start(self, machines: Iterable[Machine]) -> None:
        self.down |= set(machines)

    def stop(self, machines: Iterable[Machine]) -> None:
        """Back UP: out of the DOWN set and out of the schedule (Mesos' StopMaintenance)."""
        ms = set(machines)
        self.down -= ms
        self.schedule = self.schedule.without(ms)

    def status(self, statuses: Sequence[tuple[Machine, Sequence[mesos.InverseOfferStatus]]]) -> mesos.ClusterStatus:
        """Mesos' ``ClusterStatus`` (the caller gathers each draining machine's answers)."""
        by_machine = dict(statuses)
        draining = [m for w in self.schedule.windows for m in w.machines if m not in self.down]
        return mesos.ClusterStatus(
            draining_machines=tuple(
                mesos.DrainingMachine(id=m.to_mesos(), statuses=tuple(by_machine.get(m, ()))) for m in draining
            ),
            down_machines=tuple(m.to_mesos() for m in sorted(self.down)),
        )

    # registry value: the whole book as one JSON text
    def encode(self) -> str:
        return json.dumps(
            {
                "windows": [
                    {"machines": [[m.hostname, m.ip] for m in w.machines], "start_ns": w.start_ns, "duration_ns": w.duration_ns}
                    for w in self.schedule.windows
                ],
                "down": [[m.hostname, m.ip] for m in sorted(self.down)],
            },
            separators=(",", ":"),
            sort_keys=True,
        )

    @classmethod
    def decode(cls, text: str) -> MaintenanceBook:
        if not text:
            return cls()
        raw = json.loads(text)
        windows = tuple(
            Window(
                tuple(Machine(str(h), str(i)) for h, i in w["machines"]),
                int(w["start_ns"]),
                None if w.get("duration_ns") is None else int(w["duration_ns"]),
            )
            for w in raw.get("windows", ())
        )
        return cls(Schedule(windows), {Machine(str(h), str(i)) for h, i in raw.get("down", ())})


# --- inverse offers -------------------------------------------------------------------------------


@attrs.frozen
class InverseOfferRec:
    offer_id: str
    framework_id: str
    agent_id: str
    unavailability: mesos.Unavailability


@attrs.define
class InverseOfferBook:
    """Outstanding inverse offers (one per agent and framework at a time), the frameworks' last
    answers per agent and the refusal filters of those answers."""

    prefix: str = "io"
    seq: int = 0
    outstanding: dict[str, InverseOfferRec] = attrs.field(factory=dict)
    by_pair: dict[tuple[str, str], str] = attrs.field(factory=dict)  # (agent, framework) -> id
    filters: dict[tuple[str, str], float] = attrs.field(factory=dict)  # (agent, framework) -> until
    statuses: dict[str, dict[str, tuple[mesos.InverseOfferStatusValue, float]]] = attrs.field(factory=dict)

    def make(self, wanted: Iterable[tuple[str, str, mesos.Unavailability]], now: float) -> list[InverseOfferRec]:
        """New inverse offers for the (agent, framework, unavailability) triples that have none
        outstanding and no unexpired filter; the first one to a framework records UNKNOWN."""
        out = []
        for agent_id, fid, unavailability in wanted:
            pair = (agent_id, fid)
            if pair in self.by_pair:
                continue
            until = self.filters.get(pair)
            if until is not None:
                if until > now:
                    continue
                del self.filters[pair]
            self.seq += 1
            rec = InverseOfferRec(f"{self.prefix}-{self.seq}", fid, agent_id, unavailability)
            self.outstanding[rec.offer_id] = rec
            self.by_pair[pair] = rec.offer_id
            self.statuses.setdefault(agent_id, {}).setdefault(fid, (IO.UNKNOWN, now))
            out.append(rec)
        return out

    def answer(
        self, framework_id: str, offer_ids: Iterable[str], status: mesos.InverseOfferStatusValue,
        refuse_seconds: float | None, now: float,
    ) -> list[InverseOfferRec]:
        """The framework accepted or declined these (its own, outstanding ones; others are
        ignored): recorded, and no new inverse offer for that agent for ``refuse_seconds``."""
        done = []
        for oid in offer_ids:
            rec = self.outstanding.get(oid)
            if rec is None or rec.framework_id != framework_id:
                continue
            self._remove(rec)
            self.statuses.setdefault(rec.agent_id, {})[framework_id] = (status, now)
            if refuse_seconds is not None and refuse_seconds > 0:
                self.filters[(rec.agent_id, framework_id)] = now + refuse_seconds
            done.append(rec)
        return done

    def _remove(self, rec: InverseOfferRec) -> None:
        del self.outstanding[rec.offer_id]
        self.by_pair.pop((rec.agent_id, rec.framework_id), None)

    def drop_agent(self, agent_id: str) -> list[InverseOfferRec]:
        """The agent left maintenance, changed window or is gone: its inverse offers are
        withdrawn and its answers and filters forgotten (a new window asks again)."""
        recs = [r for r in self.outstanding.values() if r.agent_id == agent_id]
        for r in recs:
            self._remove(r)
        self.statuses.pop(agent_id, None)
        for pair in [p for p in self.filters if p[0] == agent_id]:
            del self.filters[pair]
        return recs

    def drop_framework(self, framework_id: str, forget: bool = False) -> list[InverseOfferRec]:
        """The framework disconnected (its inverse offers are void) or is gone (``forget``: its
        answers and filters too)."""
        recs = [r for r in self.outstanding.values() if r.framework_id == framework_id]
        for r in recs:
            self._remove(r)
        if forget:
            for per_agent in self.statuses.values():
                per_agent.pop(framework_id, None)
            for pair in [p for p in self.filters if p[1] == framework_id]:
                del self.filters[pair]
        return recs

    def drop_pair(self, agent_id: str, framework_id: str) -> InverseOfferRec | None:
        oid = self.by_pair.get((agent_id, framework_id))
        if oid is None:
            return None
        rec = self.outstanding[oid]
        self._remove(rec)
        return rec

    def next_deadline(self, now: float) -> float | None:
        """When the earliest filter that still holds expires."""
        ahead = [u for u in self.filters.values() if u > now]
        return min(ahead) if ahead else None

    def agent_statuses(self, agent_id: str) -> list[mesos.InverseOfferStatus]:
        return [
            mesos.InverseOfferStatus(status=s, framework_id=mesos.FrameworkID(fid), timestamp=mesos.TimeInfo(int(at * 1e9)))
            for fid, (s, at) in sorted(self.statuses.get(agent_id, {}).items())
        ]
