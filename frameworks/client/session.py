"""The scheduler session: one framework's side of the scheduler API as a state machine, without I/O.

In the manner of h11 (and of Agora's own cores, ``master/state.py``, ``agent/tasks.py``), the
session is fed facts and answers with what to do; it never reads a socket, a clock or a random
number. ``frameworks/client/driver.py`` (``SchedulerDriver``) is the I/O loop around it.

Facts in:

* ``subscribe_call()`` — a connection is about to be opened: the SUBSCRIBE to send (framework id
  once known: failover; suppressed roles kept);
* ``stream_opened(stream_id)`` — the master answered the SUBSCRIBE with an event stream;
* ``receive(event, now)`` — an event arrived (``EventFrames.feed`` turns the stream's bytes into
  events; a bad frame raises ``BadFrame``, which is a lost connection);
* ``refused(message)`` — the SUBSCRIBE was answered 4xx: the framework cannot subscribe;
* ``connection_lost(reason)`` — the stream ended, broke or stayed silent past ``deadline()``;
* the framework's own calls (``launch``, ``decline``, ``kill``, ...) each return the ``Call`` to
  send and update what the session holds (offer claims, known tasks).

Outputs (a list, executed in order by the driver):

* ``Deliver(item, callback, args)`` — hand ``item`` (an ``Event`` or ``Disconnected``; None:
  nothing) to the ``events()`` iterators, then run the ``Scheduler`` callback ``callback`` (if any) with ``args``;
* ``Acknowledge(status)`` — acknowledge this reliable update (once the framework has seen it);
* ``Resync(reconcile)`` — after a (re)subscription: reconcile the known tasks explicitly, then all
  implicitly (``reconcile_calls()``), then re-send the standing demand (``demand_call()``);
* ``Reconnect(delay, reason)`` — subscribe again after ``delay`` seconds (jittered backoff);
* ``GiveUp(message)`` — stop: ``max_reconnects`` failed attempts in a row.

Where each decision lives: subscription and failover (``subscribe_call``, ``_subscribed``), the
silence deadline (``silence_limit``, ``deadline``), reconnect and backoff (``connection_lost``),
acknowledgements and their batching (``receive`` -> ``Acknowledge``, ``acknowledgements``,
``acknowledge_many_refused``), offers (``receive`` OFFERS/RESCIND into ``OfferCache``), known
tasks (``_track``, ``_commit``), suppression (``suppressed``, ``revived``), the standing demand
(``demand_call``, ``demand_unsent``), the end (``terminal``: ERROR, refusal, teardown).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any, NamedTuple, Protocol

import attrs

from frameworks.client.demand import Demand, DemandBook
from frameworks.client.errors import MasterUnavailable, NotConnected
from frameworks.client.offers import CachedOffer, Claim, InsufficientResources, OfferCache, UnknownOffer
from protocol import codec
from protocol.evolve import evolve
from protocol.mesos import (
    AcceptInverseOffers,
    Call,
    CallType,
    CapabilityType,
    DeclineInverseOffers,
    Event,
    EventType,
    ExecutorInfo,
    Filters,
    FrameworkInfo,
    MasterCapabilityType,
    MasterInfo,
    Operation,
    Reason,
    ReconcileTask,
    Request,
    TaskInfo,
    TaskStatus,
)
from protocol.mesos_common import AgentID, ExecutorID, FrameworkID, OfferID, TaskID
from protocol.recordio import RecordIODecoder, RecordIOError
from protocol.resources import Resources
from protocol.task_states import TaskState, is_terminal

__pure__ = True

# acknowledgements per ACKNOWLEDGE_MANY call (the protocol allows MAX_ACKNOWLEDGEMENTS): a
# few hundred already make the per-call cost negligible, and a call of thousands would hold the
# master's loop (and the ACCEPTs queued behind it) for tens of milliseconds
ACKS_PER_CALL = 500

SILENT_MASTER = "no heartbeat from the master"
STREAM_ENDED = "stream ended"


class BackoffPolicy(Protocol):
    """Reconnect delays (``protocol.backoff.Backoff``: capped exponential with jitter; the
    jitter's randomness stays in the shell's object)."""

    def next(self) -> float: ...

    def reset(self) -> None: ...


class BadFrame(MasterUnavailable):
    """The event stream carried something that is not a scheduler event (bad RecordIO framing or
    a record that does not decode): the stream is unusable, the driver reconnects."""


class EventFrames:
    """The event stream's bytes -> ``Event`` values (RecordIO records, each one encoded event in
    ``media_type``); a bad frame raises ``BadFrame``."""

    def __init__(self, media_type: str = codec.MSGPACK, max_record: int = 64 * 1024 * 1024) -> None:
        self.media_type = media_type
        self._decoder = RecordIODecoder(max_record=max_record)

    def feed(self, chunk: bytes) -> Iterator[Event]:
        """The events ``chunk`` completes, one at a time: those before a bad record still come out."""
        try:
            records = self._decoder.feed(chunk)
        except RecordIOError as exc:
            raise BadFrame(f"bad event from the master: {exc}") from exc
        for record in records:
            try:
                event = codec.decode(Event, record, self.media_type)
            except codec.DecodeError as exc:
                raise BadFrame(f"bad event from the master: {exc}") from exc
            yield event


@attrs.frozen
class Disconnected:
    """Marker in ``events()``: the subscription ended (the driver reconnects unless stopped)."""

    reason: str


DriverEvent = Event | Disconnected


@attrs.define
class KnownTask:
    task_id: str
    agent_id: str | None
    state: TaskState
    offer_id: str | None = None
    ticket: int | None = None  # the lease deduction of the ACCEPT that launched it


# --- outputs ----------------------------------------------------------------------------------


# The two outputs of every event are named tuples: immutable like the others, and built in a
# third of the time of a frozen attrs class (one or two per event, thousands of events a second).


class Deliver(NamedTuple):
    """Hand ``item`` to the ``events()`` iterators, then call ``Scheduler.<callback>(driver, *args)``."""

    item: DriverEvent | None
    callback: str | None = None
    args: tuple[Any, ...] = ()


class Acknowledge(NamedTuple):
    """Acknowledge this reliable update (the framework has seen it)."""

    status: TaskStatus


@attrs.frozen
class Resync:
    """After a (re)subscription: ``reconcile_calls()`` (when ``reconcile``), then the demand."""

    reconcile: bool


@attrs.frozen
class Reconnect:
    delay: float
    reason: str


@attrs.frozen
class GiveUp:
    message: str


Output = Deliver | Acknowledge | Resync | Reconnect | GiveUp


def has_capability(info: FrameworkInfo, cap: CapabilityType) -> bool:
    return any(c.type is cap for c in info.capabilities)


def master_supports_acknowledge_many(info: MasterInfo | None) -> bool:
    """Whether a master advertised Agora's ACKNOWLEDGE_MANY call in its ``MasterInfo``."""
    return info is not None and any(c.type is MasterCapabilityType.ACKNOWLEDGE_MANY for c in info.capabilities)


def task_resources(t: TaskInfo) -> Resources:
    r = Resources.from_mesos(t.resources)
    if t.executor is not None:
        r = r + Resources.from_mesos(t.executor.resources)
    return r


class SchedulerSession:
    """One framework's subscription, offers, tasks and acknowledgements (see the module doc)."""

    def __init__(
        self,
        framework: FrameworkInfo,
        backoff: BackoffPolicy,
        *,
        auto_acknowledge: bool = True,
        reconcile_on_subscribe: bool = True,
        heartbeat_misses: float = 3.0,
        first_event_timeout: float | None = 30.0,
        max_reconnects: int | None = None,
        default_failover_timeout: float | None = 60.0,
    ) -> None:
        if framework.failover_timeout is None and default_failover_timeout is not None:
            # like pymesos: without a failover timeout the master forgets the framework (and kills
            # its tasks) the moment the stream drops, so failover under the same id could not work
            framework = attrs.evolve(framework, failover_timeout=default_failover_timeout)
        self.framework = framework
        self.backoff = backoff
        self.auto_acknowledge = auto_acknowledge
        self.reconcile_on_subscribe = reconcile_on_subscribe
        self.heartbeat_misses = heartbeat_misses
        self.first_event_timeout = first_event_timeout
        self.max_reconnects = max_reconnects
        self.offers = OfferCache(reusable=has_capability(framework, CapabilityType.REUSABLE_OFFERS))
        self.demands = DemandBook()
        self.tasks: dict[str, KnownTask] = {}
        self.suppressed_roles: set[str] = set()
        self.framework_id: str | None = framework.id.value if framework.id is not None else None
        self.stream_id: str | None = None
        self.master_info: MasterInfo | None = None
        self.heartbeat_interval: float | None = None
        self.subscriptions = 0
        self.error_message: str | None = None
        # ACKNOWLEDGE_MANY: advertised by the master in SUBSCRIBED (MasterInfo.capabilities) and
        # not refused since; a 400 for it turns it off for the rest of the subscription
        self.acknowledge_many_supported = False
        self.ack_calls = 0  # acknowledgement calls made (single or batched)
        self.acks_sent = 0  # acknowledgements those calls carried
        self.connected = False  # a SUBSCRIBED arrived on the current stream
        self.terminal = False  # ERROR, a refused SUBSCRIBE, TEARDOWN or given up: no reconnect
        self._opened_stream: str | None = None
        self._failures = 0  # connection attempts that failed since the last live subscription

    # --- the connection ---------------------------------------------------------------------------

    def subscribe_call(self) -> Call:
        """The SUBSCRIBE to open the next connection with: under the framework id once the master
        gave one (failover keeps the id, hence the tasks), with the roles still suppressed."""
        info = self.framework
        if self.framework_id is not None:
            info = attrs.evolve(info, id=FrameworkID(self.framework_id))
        return Call.make_subscribe(info, tuple(sorted(self.suppressed_roles)))

    def stream_opened(self, stream_id: str) -> None:
        self._opened_stream = stream_id

    @property
    def silence_limit(self) -> float | None:
        """How long the stream may stay silent while the driver waits for an event:
        ``first_event_timeout`` until SUBSCRIBED, then ``heartbeat_misses`` heartbeat intervals
        (no limit when the master sends no heartbeat interval)."""
        if not self.connected:
            return self.first_event_timeout
        hb = self.heartbeat_interval
        return hb * self.heartbeat_misses if hb else None

    def deadline(self, waiting_since: float) -> float | None:
        """When a wait for the next event that began at ``waiting_since`` becomes a disconnect
        (``connection_lost(SILENT_MASTER)``), in the time base of ``waiting_since`` (the driver's
        watchdog uses its event loop's monotonic clock); None: no deadline."""
        limit = self.silence_limit
        return None if limit is None else waiting_since + limit

    def refused(self, message: str) -> list[Output]:
        """The master answered the SUBSCRIBE 4xx: the framework is not allowed in; no retry."""
        self.error_message = f"subscription refused: {message}"
        self.terminal = True
        return [Deliver(None, "error", (self.error_message,))]

    def connection_lost(self, reason: str = STREAM_ENDED) -> list[Output]:
        """The stream ended (or never opened). Offers do not survive it; the framework hears of it
        if it was subscribed; then reconnect after a backoff delay, unless the session is over or
        ``max_reconnects`` attempts in a row have failed."""
        was_connected = self.connected
        self._disconnect()
        out: list[Output] = []
        if was_connected:
            self._failures = 0  # max_reconnects counts failures since the last live subscription
            out.append(Deliver(Disconnected(reason), "disconnected"))
        if self.terminal:
            return out
        self._failures += 1
        if self.max_reconnects is not None and self._failures > self.max_reconnects:
            self.error_message = f"gave up after {self._failures - 1} reconnects: {reason}"
            self.terminal = True
            out.append(GiveUp(self.error_message))
            return out
        out.append(Reconnect(self.backoff.next(), reason))
        return out

    def close(self) -> None:
        """The driver stops: no live subscription, no offers, nothing more to do."""
        self._disconnect()
        self.terminal = True

    def _disconnect(self) -> None:
        self.connected = False
        self.stream_id = None
        self._opened_stream = None
        self.offers.clear()

    # --- events -----------------------------------------------------------------------------------

    def receive(self, ev: Event, now: float) -> list[Output]:
        """One event from the master: update what the session holds and say what to deliver."""
        t = ev.type
        if t is EventType.UPDATE and ev.update is not None:
            status = ev.update.status
            self._track(status)
            if self.auto_acknowledge and status.uuid is not None and status.agent_id is not None:
                # acknowledged once the framework has seen it (after its callback)
                return [Deliver(ev, "update", (status,)), Acknowledge(status)]
            return [Deliver(ev, "update", (status,))]
        if t is EventType.OFFERS and ev.offers is not None:
            self.offers.add_offers(ev.offers.offers, now)
            live = [o for o in ev.offers.offers if o.id.value in self.offers]  # not ended ones
            return [Deliver(ev, "offers", (live,)) if live else Deliver(ev)]
        if t is EventType.SUBSCRIBED and ev.subscribed is not None:
            return self._subscribed(ev)
        if t is EventType.RESCIND and ev.rescind is not None:
            oid = ev.rescind.offer_id.value
            self.offers.rescind(oid)
            return [Deliver(ev, "offer_rescinded", (oid,))]
        if t is EventType.INVERSE_OFFERS and ev.inverse_offers is not None:
            return [Deliver(ev, "inverse_offers", (list(ev.inverse_offers.inverse_offers),))]
        if t is EventType.RESCIND_INVERSE_OFFER and ev.rescind_inverse_offer is not None:
            return [Deliver(ev, "inverse_offer_rescinded", (ev.rescind_inverse_offer.inverse_offer_id.value,))]
        if t is EventType.MESSAGE and ev.message is not None:
            m = ev.message
            return [Deliver(ev, "message", (m.agent_id.value, m.executor_id.value, m.data))]
        if t is EventType.FAILURE and ev.failure is not None:
            f = ev.failure
            return [
                Deliver(
                    ev,
                    "failure",
                    (f.agent_id.value if f.agent_id else None, f.executor_id.value if f.executor_id else None, f.status),
                )
            ]
        if t is EventType.ERROR and ev.error is not None:
            # Mesos closes the stream after ERROR: the framework is gone (e.g. removed); no retry
            self.error_message = ev.error.message
            self.terminal = True
            return [Deliver(ev, "error", (ev.error.message,))]
        return [Deliver(ev)]  # HEARTBEAT and events with no handling of their own

    def _subscribed(self, ev: Event) -> list[Output]:
        sub = ev.subscribed
        assert sub is not None
        self.framework_id = sub.framework_id.value
        self.stream_id = self._opened_stream
        self.master_info = sub.master_info
        self.acknowledge_many_supported = master_supports_acknowledge_many(sub.master_info)
        self.heartbeat_interval = sub.heartbeat_interval_seconds
        self.subscriptions += 1
        self.connected = True
        self.offers.clear()
        self.demands.mark_dirty()  # the master's copy of the demand may be gone: send it again
        self.backoff.reset()
        return [
            Deliver(ev, "subscribed", (sub.framework_id.value, sub.master_info)),
            Resync(self.reconcile_on_subscribe),
        ]

    def _track(self, status: TaskStatus) -> None:
        tid = status.task_id.value
        if is_terminal(status.state):
            known = self.tasks.pop(tid, None)
            if (
                known is not None
                and known.ticket is not None
                and known.offer_id is not None
                and status.reason is Reason.REASON_INVALID_OFFERS
            ):
                # the master refused the ACCEPT: what it took out of the lease comes back
                self.offers.accept_failed(known.offer_id, known.ticket)
            return
        cur = self.tasks.get(tid)
        agent = status.agent_id.value if status.agent_id is not None else (cur.agent_id if cur else None)
        if cur is None:
            self.tasks[tid] = KnownTask(tid, agent, status.state)
        else:
            cur.state = status.state
            cur.agent_id = agent

    # --- the framework's calls --------------------------------------------------------------------

    def _fid(self) -> FrameworkID:
        if self.framework_id is None or not self.connected:
            raise NotConnected("not subscribed")
        return FrameworkID(self.framework_id)

    def check_connected(self) -> None:
        if not self.connected:
            raise NotConnected("not subscribed")

    def framework_roles(self) -> tuple[str, ...]:
        info = self.framework
        return tuple(info.roles) or ((info.role,) if info.role else ("*",))

    def role_of(self, offer: CachedOffer) -> str:
        """The role an offer is allocated to: its ``allocation_info``, else the framework's role."""
        if offer.role:
            return offer.role
        roles = self.framework.effective_roles()
        return roles[0] if roles else "*"

    def accept(self, offer_ids: Sequence[str], operations: Sequence[Operation], filters: Filters | None = None) -> Call:
        return Call.make_accept(self._fid(), tuple(OfferID(o) for o in offer_ids), tuple(operations), filters)

    def launch(
        self,
        offer_id: str,
        tasks: Sequence[TaskInfo],
        now: float,
        filters: Filters | None = None,
        claims: Sequence[Claim] | None = None,
    ) -> Call:
        """LAUNCH on one cached offer: claims the tasks' resources (unless ``claims`` are given),
        commits them and records the tasks. ``UnknownOffer`` when the offer is not cached,
        ``InsufficientResources`` when the tasks do not fit (nothing claimed then)."""
        fid = self._fid()
        offer = self._cached_offer(offer_id, claims)
        if claims is None:
            claims = self._claim_tasks(offer_id, [task_resources(t) for t in tasks])
        tasks = [t if t.agent_id is not None else evolve(t, agent_id=AgentID(offer.agent_id)) for t in tasks]
        self._commit(claims, offer_id, tasks, now)
        return Call.make_accept(fid, (OfferID(offer_id),), (Operation.make_launch(*tasks),), filters)

    def launch_group(
        self,
        offer_id: str,
        executor: ExecutorInfo,
        tasks: Sequence[TaskInfo],
        now: float,
        filters: Filters | None = None,
        claims: Sequence[Claim] | None = None,
    ) -> Call:
        fid = self._fid()
        offer = self._cached_offer(offer_id, claims)
        if claims is None:
            res = [task_resources(t) for t in tasks]
            res.append(Resources.from_mesos(executor.resources))
            claims = self._claim_tasks(offer_id, [r for r in res if r])
        tasks = [t if t.agent_id is not None else evolve(t, agent_id=AgentID(offer.agent_id)) for t in tasks]
        if executor.framework_id is None:
            executor = attrs.evolve(executor, framework_id=fid)
        self._commit(claims, offer_id, tasks, now)
        return Call.make_accept(fid, (OfferID(offer_id),), (Operation.make_launch_group(executor, *tasks),), filters)

    def _claim_tasks(self, offer_id: str, resources: Sequence[Resources]) -> list[Claim]:
        claims: list[Claim] = []
        if offer_id not in self.offers:
            return claims
        try:
            for r in resources:
                claims.append(self.offers.take(offer_id, r))
        except InsufficientResources:
            for c in claims:
                self.offers.release(c)
            raise
        return claims

    def _cached_offer(self, offer_id: str, claims: Sequence[Claim] | None) -> CachedOffer:
        if offer_id not in self.offers:
            for c in claims or ():
                self.offers.release(c)
            raise UnknownOffer(
                f"offer {offer_id} is not in the offer cache (rescinded, declined, consumed or never offered);"
                " the launch was not sent"
            )
        return self.offers.get(offer_id)

    def _commit(self, claims: Sequence[Claim], offer_id: str, tasks: Sequence[TaskInfo], now: float) -> None:
        ticket = None
        if claims:
            self.offers.commit(claims, now)
            ticket = self.offers.last_tickets.pop(offer_id, None)
        for t in tasks:
            self.tasks[t.task_id.value] = KnownTask(
                t.task_id.value, t.agent_id.value if t.agent_id else None, TaskState.TASK_STAGING, offer_id, ticket
            )

    def reserve(self, offer_id: str, resources: Resources, filters: Filters | None = None) -> Call:
        return self.accept([offer_id], [Operation.make_reserve(*resources.to_mesos())], filters)

    def unreserve(self, offer_id: str, resources: Resources, filters: Filters | None = None) -> Call:
        return self.accept([offer_id], [Operation.make_unreserve(*resources.to_mesos())], filters)

    def decline(self, offer_ids: Iterable[str], refuse_seconds: float | None = None) -> Call:
        """DECLINE: the offers leave the cache now (an update crossing the call cannot revive them)."""
        ids = list(offer_ids)
        fid = self._fid()
        for oid in ids:
            self.offers.rescind(oid)
        filters = Filters(refuse_seconds=refuse_seconds) if refuse_seconds is not None else None
        return Call.make_decline(fid, tuple(OfferID(o) for o in ids), filters)

    def answer_inverse_offers(
        self, inverse_offer_ids: Iterable[str], accept: bool, refuse_seconds: float | None = None
    ) -> Call:
        """ACCEPT_INVERSE_OFFERS (the framework can give the agent's resources back by the start
        of the unavailability) or DECLINE_INVERSE_OFFERS; ``refuse_seconds``: not asked again
        for that agent for so long (the master's default: 5 s)."""
        ids = tuple(OfferID(o) for o in inverse_offer_ids)
        filters = Filters(refuse_seconds=refuse_seconds) if refuse_seconds is not None else None
        if accept:
            return Call(type=CallType.ACCEPT_INVERSE_OFFERS, framework_id=self._fid(),
                        accept_inverse_offers=AcceptInverseOffers(ids, filters))
        return Call(type=CallType.DECLINE_INVERSE_OFFERS, framework_id=self._fid(),
                    decline_inverse_offers=DeclineInverseOffers(ids, filters))

    def idle_offers(self, now: float, older_than: float) -> list[str]:
        """Offers nothing is claimed from that have not changed for ``older_than`` seconds."""
        return [o.offer_id for o in self.offers.idle(now, older_than)]

    def kill(self, task_id: str, agent_id: str | None = None) -> Call:
        if agent_id is None and task_id in self.tasks:
            agent_id = self.tasks[task_id].agent_id
        return Call.make_kill(self._fid(), TaskID(task_id), AgentID(agent_id) if agent_id else None)

    def reconcile(self, tasks: Iterable[tuple[str, str | None]] | None = None) -> Call:
        """Explicit reconciliation of ``(task_id, agent_id)`` pairs, or implicit (all tasks)."""
        items = tuple(ReconcileTask(TaskID(t), AgentID(a) if a else None) for t, a in (tasks or ()))
        return Call.make_reconcile(self._fid(), items)

    def reconcile_calls(self) -> list[Call]:
        """After a (re)subscription: the tasks the session knows explicitly (if any), then all."""
        known = [(k, v.agent_id) for k, v in self.tasks.items()]
        return [self.reconcile(known), self.reconcile()] if known else [self.reconcile()]

    def revive(self, roles: Sequence[str] = ()) -> Call:
        return Call.make_revive(self._fid(), tuple(roles))

    def revived(self, roles: Sequence[str] = ()) -> None:
        """A REVIVE went out: ``roles`` (all of the framework's by default) are no longer suppressed."""
        self.suppressed_roles -= set(roles or self.framework_roles())

    def suppress(self, roles: Sequence[str] = ()) -> Call:
        return Call.make_suppress(self._fid(), tuple(roles))

    def suppressed(self, roles: Sequence[str] = ()) -> None:
        """A SUPPRESS went out: ``roles`` stay suppressed, across re-subscriptions too."""
        self.suppressed_roles |= set(roles or self.framework_roles())

    def request(self, requests: Iterable[Request | Demand]) -> Call:
        reqs = tuple(r.to_request() if isinstance(r, Demand) else r for r in requests)
        return Call.make_request(self._fid(), reqs)

    def demand_call(self) -> Call | None:
        """The REQUEST carrying the standing demand if it changed since it was last sent (the
        change is taken: ``demand_unsent()`` if the call then fails)."""
        if not self.connected:
            return None
        reqs = self.demands.take_changes()
        if reqs is None:
            return None
        return self.request(reqs)

    def demand_unsent(self) -> None:
        self.demands.mark_dirty()

    def message(self, agent_id: str, executor_id: str, data: bytes) -> Call:
        return Call.make_message(self._fid(), AgentID(agent_id), ExecutorID(executor_id), data)

    def acknowledge(self, status: TaskStatus) -> Call:
        call = Call.make_acknowledge(self._fid(), status)
        self.ack_calls += 1
        self.acks_sent += 1
        return call

    def acknowledgements(self, statuses: Sequence[TaskStatus]) -> list[Call]:
        """The calls acknowledging ``statuses``: ACKNOWLEDGE_MANY of up to ``ACKS_PER_CALL`` each
        when the master advertised it (Agora), else one ACKNOWLEDGE each (a Mesos master)."""
        if len(statuses) > 1 and self.acknowledge_many_supported:
            fid = self._fid()
            calls = []
            for i in range(0, len(statuses), ACKS_PER_CALL):
                chunk = statuses[i : i + ACKS_PER_CALL]
                calls.append(Call.make_acknowledge_many(fid, chunk))
                self.ack_calls += 1
                self.acks_sent += len(chunk)
            return calls
        return [self.acknowledge(s) for s in statuses]

    def acknowledge_many_refused(self, unsent: Sequence[Call]) -> list[Call]:
        """The master answered 400 to ``unsent[0]`` (an ACKNOWLEDGE_MANY; the rest were not sent):
        batching is off until the next subscription; the one-by-one calls that replace them."""
        self.acknowledge_many_supported = False
        fid = self._fid()
        self.ack_calls -= len(unsent) - 1  # the refused call was made; the others never were
        out: list[Call] = []
        for call in unsent:
            acks = call.acknowledge_many.acknowledgements if call.acknowledge_many is not None else ()
            self.acks_sent -= len(acks)
            for ack in acks:
                out.append(Call(type=CallType.ACKNOWLEDGE, framework_id=fid, acknowledge=ack))
        self.ack_calls += len(out)
        self.acks_sent += len(out)
        return out

    def teardown(self) -> Call:
        """TEARDOWN: the session is over (no more acknowledgements: the master forgets the framework)."""
        fid = self._fid()
        self.terminal = True
        return Call.make_teardown(fid)
