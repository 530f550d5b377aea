"""The scheduler driver: an asyncio shell around one framework's subscription.

It subscribes through a ``Transport``, keeps the subscription alive (reconnect with jittered
backoff, failover under the same framework id), keeps the ``OfferCache`` and the table of known
tasks up to date, acknowledges reliable updates (those carrying a ``uuid``) after the framework
has seen them, reconciles after every (re)subscription (explicitly for the tasks it knows, then
implicitly for all), re-sends the standing demand, and hands events to the framework both ways:

* a ``Scheduler`` object with callbacks (sync or async methods, all optional), and
* ``async for ev in driver.events(): ...`` (``protocol.mesos.Event`` values, plus
  ``Disconnected`` markers).

Calls (accept, launch, decline, kill, reconcile, revive, suppress, request, message,
acknowledge, teardown) raise ``NotConnected`` while no subscription is live and ``CallRejected``
when the master answers 4xx.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import attrs

from frameworks.client.demand import Demand, DemandBook
from frameworks.client.offers import CachedOffer, Claim, InsufficientResources, OfferCache, UnknownOffer
from frameworks.client.transport import (
    CallRejected,
    EventStream,
    MasterUnavailable,
    NotConnected,
    Transport,
    TransportError,
)
from protocol.backoff import Backoff
from protocol.clock import Clock, SystemClock
from protocol.lifecycle import Service
from protocol.mesos import (
    Call,
    CapabilityType,
    Event,
    EventType,
    ExecutorInfo,
    Filters,
    FrameworkInfo,
    MasterCapabilityType,
    MasterInfo,
    Offer,
    Operation,
    Reason,
    ReconcileTask,
    Request,
    TaskInfo,
    TaskStatus,
)
from protocol.mesos_common import AgentID, ExecutorID, FrameworkID, OfferID, TaskID
from protocol.resources import Resources
from protocol.task_states import TaskState, is_terminal

log = logging.getLogger(__name__)

# acknowledgements per ACKNOWLEDGE_MANY call (the protocol allows MAX_ACKNOWLEDGEMENTS): a
# few hundred already make the per-call cost negligible, and a call of thousands would hold the
# master's loop (and the ACCEPTs queued behind it) for tens of milliseconds
ACKS_PER_CALL = 500


class Scheduler:
    """Callbacks a framework may override (each may be a plain or an ``async`` method)."""

    def subscribed(self, driver: SchedulerDriver, framework_id: str, master_info: MasterInfo | None) -> Any:
        return None

    def offers(self, driver: SchedulerDriver, offers: list[Offer]) -> Any:
        return None

    def offer_rescinded(self, driver: SchedulerDriver, offer_id: str) -> Any:
        return None

    def update(self, driver: SchedulerDriver, status: TaskStatus) -> Any:
        return None

    def message(self, driver: SchedulerDriver, agent_id: str, executor_id: str, data: bytes) -> Any:
        return None

    def failure(
        self, driver: SchedulerDriver, agent_id: str | None, executor_id: str | None, status: int | None
    ) -> Any:
        return None

    def error(self, driver: SchedulerDriver, message: str) -> Any:
        return None

    def disconnected(self, driver: SchedulerDriver) -> Any:
        return None


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


_END = object()


class EventIterator:
    """``async for ev in driver.events()``: protocol Events and Disconnected markers."""

    def __init__(self, registry: list[asyncio.Queue[object]], q: asyncio.Queue[object]) -> None:
        self._registry = registry
        self._q = q
        self._closed = False

    def __aiter__(self) -> EventIterator:
        return self

    async def __anext__(self) -> DriverEvent:
        if self._closed:
            raise StopAsyncIteration
        item = await self._q.get()
        if item is _END:
            await self.aclose()
            raise StopAsyncIteration
        assert isinstance(item, (Event, Disconnected))
        return item

    async def aclose(self) -> None:
        """Stop receiving events (the queue is dropped)."""
        if not self._closed:
            self._closed = True
            with contextlib.suppress(ValueError):
                self._registry.remove(self._q)


def has_capability(info: FrameworkInfo, cap: CapabilityType) -> bool:
    return any(c.type is cap for c in info.capabilities)


class SchedulerDriver(Service):
    name = "scheduler-driver"

    def __init__(
        self,
        framework: FrameworkInfo,
        transport: Transport,
        scheduler: Scheduler | None = None,
        *,
        clock: Clock | None = None,
        backoff: Backoff | None = None,
        auto_acknowledge: bool = True,
        ack_concurrency: int = 4,
        reconcile_on_subscribe: bool = True,
        heartbeat_misses: float = 3.0,
        first_event_timeout: float = 30.0,
        max_reconnects: int | None = None,
        default_failover_timeout: float | None = 60.0,
    ) -> None:
        super().__init__()
        if framework.failover_timeout is None and default_failover_timeout is not None:
            # like pymesos: without a failover timeout the master forgets the framework (and kills
            # its tasks) the moment the stream drops, so failover under the same id could not work
            framework = attrs.evolve(framework, failover_timeout=default_failover_timeout)
        self.framework = framework
        self.transport = transport
        self.scheduler = scheduler or Scheduler()
        self.clock: Clock = clock or SystemClock()
        self.backoff = backoff or Backoff(initial=0.05, maximum=5.0)
        self.auto_acknowledge = auto_acknowledge
        self.ack_concurrency = max(1, ack_concurrency)
        self._acks: asyncio.Queue[TaskStatus] = asyncio.Queue()
        # ACKNOWLEDGE_MANY: advertised by the master in SUBSCRIBED (MasterInfo.capabilities) and
        # not refused since; a 400 for it turns it off for the rest of the subscription
        self.acknowledge_many_supported = False
        self.ack_calls = 0  # acknowledgement calls sent (single or batched)
        self.acks_sent = 0  # acknowledgements those calls carried
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
        self.subscriptions = 0
        self.error_message: str | None = None
        self._stream: EventStream | None = None
        self._heartbeat: float | None = None
        self._subscribed = asyncio.Event()
        self._done = asyncio.Event()
        self._terminal = False
        self._queues: list[asyncio.Queue[object]] = []
        self._run_task: asyncio.Task[Any] | None = None
        self._waiters: list[asyncio.Future[None]] = []

    # --- lifecycle ----------------------------------------------------------------------------

    async def _start(self) -> None:
        for i in range(self.ack_concurrency if self.auto_acknowledge else 0):
            self.spawn(self._ack_worker(), name=f"{self.name}:ack-{i}")
        self._run_task = self.spawn(self._run(), name=f"{self.name}:{self.framework.name}")

    async def _stop(self) -> None:
        self._mark_disconnected()
        if self._stream is not None:
            with contextlib.suppress(Exception):
                await self._stream.close()
            self._stream = None
        await self.transport.close()
        self._finish()

    def role_of(self, offer: CachedOffer) -> str:
        """The role an offer is allocated to: its ``allocation_info``, else the framework's role."""
        if offer.role:
            return offer.role
        roles = self.framework.effective_roles()
        return roles[0] if roles else "*"

    @property
    def connected(self) -> bool:
        return self._subscribed.is_set()

    async def wait_subscribed(self, within: float | None = None) -> str:
        """Wait (at most ``within`` seconds) for a live subscription; returns the framework id."""
        async with asyncio.timeout(within):
            while not self._subscribed.is_set():
                if self._done.is_set():
                    raise NotConnected(self.error_message or "driver stopped")
                waiter = asyncio.ensure_future(self._subscribed.wait())
                done = asyncio.ensure_future(self._done.wait())
                try:
                    await asyncio.wait({waiter, done}, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    waiter.cancel()
                    done.cancel()
        assert self.framework_id is not None
        return self.framework_id

    async def wait_for(self, predicate: Callable[[], Any], within: float | None = 30.0) -> Any:
        """Wait until ``predicate()`` is truthy, re-checked after every event the driver handles
        and every call it sends (for tests and simple frameworks); returns its value."""
        async with asyncio.timeout(within):
            while True:
                value = predicate()
                if value:
                    return value
                if self._done.is_set():
                    raise NotConnected(self.error_message or "driver stopped")
                fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
                self._waiters.append(fut)
                await fut

    def _wake(self) -> None:
        waiters, self._waiters = self._waiters, []
        for w in waiters:
            if not w.done():
                w.set_result(None)

    async def join(self) -> None:
        """Wait until the driver has finished (stopped, torn down or aborted by an ERROR)."""
        await self._done.wait()

    def events(self, maxsize: int = 0) -> EventIterator:
        """Every event from now on (and ``Disconnected`` markers) until the driver finishes.

        The events are queued from this call on, so iterate what you ask for or ``aclose()`` it;
        ``maxsize`` bounds the queue (the oldest events are dropped when it is full)."""
        q: asyncio.Queue[object] = asyncio.Queue(maxsize)
        if self._done.is_set():
            q.put_nowait(_END)
        else:
            self._queues.append(q)
        return EventIterator(self._queues, q)

    def _publish(self, item: DriverEvent) -> None:
        for q in self._queues:
            if q.full():  # a bounded iterator that is not keeping up loses its oldest events
                q.get_nowait()
                log.warning("%s: events() consumer is behind; dropped an event", self.framework.name)
            q.put_nowait(item)

    def _finish(self) -> None:
        self._wake()
        if not self._done.is_set():
            self._done.set()
            for q in self._queues:
                if q.full():
                    q.get_nowait()
                q.put_nowait(_END)

    # --- the subscription loop ---------------------------------------------------------------------

    def _subscribe_call(self) -> Call:
        info = self.framework
        if self.framework_id is not None:
            info = attrs.evolve(info, id=FrameworkID(self.framework_id))
        # a re-subscription keeps the roles the framework had suppressed
        return Call.make_subscribe(info, tuple(sorted(self.suppressed_roles)))

    def framework_roles(self) -> tuple[str, ...]:
        info = self.framework
        return tuple(info.roles) or ((info.role,) if info.role else ("*",))

    async def _run(self) -> None:
        attempts = 0
        try:
            while not self._terminal:
                reason = "stream ended"
                try:
                    self._stream = await self.transport.subscribe(self._subscribe_call())
                    await self._consume(self._stream)
                except CallRejected as exc:
                    self.error_message = f"subscription refused: {exc}"
                    log.error("%s: %s", self.framework.name, self.error_message)
                    await self._call(self.scheduler.error, self, self.error_message)
                    return
                except (TransportError, TimeoutError) as exc:
                    reason = str(exc) or type(exc).__name__
                finally:
                    if self._stream is not None:
                        with contextlib.suppress(Exception):
                            await self._stream.close()
                        self._stream = None
                was_connected = self.connected
                self._mark_disconnected()
                if was_connected:
                    attempts = 0  # max_reconnects counts failures since the last live subscription
                    self._publish(Disconnected(reason))
                    await self._call(self.scheduler.disconnected, self)
                if self._terminal:
                    return
                attempts += 1
                if self.max_reconnects is not None and attempts > self.max_reconnects:
                    self.error_message = f"gave up after {attempts - 1} reconnects: {reason}"
                    return
                delay = self.backoff.next()
                log.info("%s: disconnected (%s); resubscribing in %.3fs", self.framework.name, reason, delay)
                await self.clock.sleep(delay)
        finally:
            self._finish()

    async def _consume(self, stream: EventStream) -> None:
        """Handle the stream's events; a silence of ``heartbeat_misses`` heartbeats (or
        ``first_event_timeout`` before the first event) while waiting for the next one is a
        disconnect. A watchdog task keeps that deadline (an ``asyncio.timeout`` per event cost
        ~5% of the driver at thousands of events per second); it closes the stream when it
        passes."""
        it = aiter(stream)
        loop = asyncio.get_running_loop()
        watch = _Watch(self.first_event_timeout)
        dog = loop.create_task(watch.run(stream), name=f"{self.name}:heartbeat-watch")
        try:
            while True:
                watch.waiting_since = loop.time()
                try:
                    event = await anext(it)
                except StopAsyncIteration:
                    if watch.fired:
                        raise MasterUnavailable("no heartbeat from the master") from None
                    return
                except TransportError:
                    if watch.fired:
                        raise MasterUnavailable("no heartbeat from the master") from None
                    raise
                watch.waiting_since = None
                if event.type is EventType.SUBSCRIBED:
                    self.stream_id = stream.stream_id
                await self._handle(event)
                watch.set_limit(self._heartbeat * self.heartbeat_misses if self._heartbeat else None)
                if self._terminal:
                    return
        finally:
            dog.cancel()
            await asyncio.gather(dog, return_exceptions=True)

    def _mark_disconnected(self) -> None:
        self._subscribed.clear()
        self.stream_id = None
        self.offers.clear()

    async def _handle(self, ev: Event) -> None:
        try:
            await self._dispatch(ev)
        finally:
            self._wake()

    async def _dispatch(self, ev: Event) -> None:
        t = ev.type
        if t is EventType.SUBSCRIBED and ev.subscribed is not None:
            sub = ev.subscribed
            self.framework_id = sub.framework_id.value
            self.master_info = sub.master_info
            self.acknowledge_many_supported = master_supports_acknowledge_many(sub.master_info)
            self._heartbeat = sub.heartbeat_interval_seconds
            self.subscriptions += 1
            self.offers.clear()
            self.demands.mark_dirty()
            self.backoff.reset()
            self._subscribed.set()
            self._publish(ev)
            await self._call(self.scheduler.subscribed, self, sub.framework_id.value, sub.master_info)
            await self._after_subscribe()
            return
        if t is EventType.OFFERS and ev.offers is not None:
            self.offers.add_offers(ev.offers.offers, self.clock.now())
            self._publish(ev)
            live = [o for o in ev.offers.offers if o.id.value in self.offers]  # not ended ones
            if live:
                await self._call(self.scheduler.offers, self, live)
        elif t is EventType.RESCIND and ev.rescind is not None:
            oid = ev.rescind.offer_id.value
            self.offers.rescind(oid)
            self._publish(ev)
            await self._call(self.scheduler.offer_rescinded, self, oid)
        elif t is EventType.UPDATE and ev.update is not None:
            status = ev.update.status
            self._track(status)
            self._publish(ev)
            await self._call(self.scheduler.update, self, status)
            if self.auto_acknowledge and status.uuid is not None and status.agent_id is not None:
                # acknowledged once the framework has seen it, by the ack workers, so the next
                # event is handled without waiting for this round trip
                self._acks.put_nowait(status)
        elif t is EventType.MESSAGE and ev.message is not None:
            m = ev.message
            self._publish(ev)
            await self._call(self.scheduler.message, self, m.agent_id.value, m.executor_id.value, m.data)
        elif t is EventType.FAILURE and ev.failure is not None:
            f = ev.failure
            self._publish(ev)
            await self._call(
                self.scheduler.failure,
                self,
                f.agent_id.value if f.agent_id else None,
                f.executor_id.value if f.executor_id else None,
                f.status,
            )
        elif t is EventType.ERROR and ev.error is not None:
            # Mesos closes the stream after ERROR: the framework is gone (e.g. removed); no retry.
            self.error_message = ev.error.message
            self._terminal = True
            self._publish(ev)
            await self._call(self.scheduler.error, self, ev.error.message)
        else:
            self._publish(ev)  # HEARTBEAT and events the driver has no special handling for

    async def _after_subscribe(self) -> None:
        try:
            if self.reconcile_on_subscribe:
                known = [(k, v.agent_id) for k, v in self.tasks.items()]
                if known:
                    await self.reconcile(known)
                await self.reconcile()
            await self.send_demand()
        except TransportError as exc:
            log.warning("%s: post-subscribe calls failed: %s", self.framework.name, exc)

    async def _ack_worker(self) -> None:
        """Acknowledge what the framework has seen: everything queued when a worker wakes goes
        in one ACKNOWLEDGE_MANY call if the master takes it (no timer: a lone update is sent at
        once, as one ACKNOWLEDGE); while a call is in flight the next updates queue up for the
        next worker."""
        while True:
            first = await self._acks.get()
            batch = [first]
            while len(batch) < ACKS_PER_CALL and not self._acks.empty():
                batch.append(self._acks.get_nowait())
            try:
                if self.connected and not self._terminal:
                    await self.acknowledge_many(batch)
            except TransportError as exc:  # the agent resends unacknowledged updates
                log.warning("%s: acknowledge failed: %s", self.framework.name, exc)
            finally:
                for _ in batch:
                    self._acks.task_done()

    @property
    def pending_acks(self) -> int:
        return self._acks.qsize()

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
                self.offers.accept_failed(known.offer_id, known.ticket)
            return
        cur = self.tasks.get(tid)
        agent = status.agent_id.value if status.agent_id is not None else (cur.agent_id if cur else None)
        if cur is None:
            self.tasks[tid] = KnownTask(tid, agent, status.state)
        else:
            cur.state = status.state
            cur.agent_id = agent

    async def _call(self, fn: Any, *args: Any) -> None:
        try:
            result = fn(*args)
            if inspect.isawaitable(result):
                await result
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("%s: scheduler callback %s failed", self.framework.name, getattr(fn, "__name__", fn))

    # --- calls ---------------------------------------------------------------------------------------

    def _fid(self) -> FrameworkID:
        if self.framework_id is None or not self.connected:
            raise NotConnected("not subscribed")
        return FrameworkID(self.framework_id)

    async def send(self, call: Call) -> None:
        """Send any call on the live subscription."""
        if not self.connected:
            raise NotConnected("not subscribed")
        try:
            await self.transport.send(call, self.stream_id)
        finally:
            self._wake()

    async def accept(
        self, offer_ids: Sequence[str], operations: Sequence[Operation], filters: Filters | None = None
    ) -> None:
        await self.send(
            Call.make_accept(self._fid(), tuple(OfferID(o) for o in offer_ids), tuple(operations), filters)
        )

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

    async def launch(
        self,
        offer_id: str,
        tasks: Sequence[TaskInfo],
        filters: Filters | None = None,
        claims: Sequence[Claim] | None = None,
    ) -> None:
        """LAUNCH ``tasks`` on one offer. Without ``claims`` the tasks' resources are claimed from
        the offer cache here (raising ``InsufficientResources`` if they do not fit); the claims
        are committed as the call is sent (a reusable offer keeps the remainder).

        Raises ``UnknownOffer`` (nothing sent) when ``offer_id`` is not in the offer cache: it was
        rescinded, declined, consumed or never offered, and the master would answer every task
        with TASK_LOST/DROPPED (REASON_INVALID_OFFERS)."""
        fid = self._fid()
        offer = self._cached_offer(offer_id, claims)
        if claims is None:
            claims = self._claim_tasks(offer_id, [_task_resources(t) for t in tasks])
        tasks = [t if t.agent_id is not None else attrs.evolve(t, agent_id=AgentID(offer.agent_id)) for t in tasks]
        self._commit(claims, offer_id, tasks)
        await self.send(Call.make_accept(fid, (OfferID(offer_id),), (Operation.make_launch(*tasks),), filters))

    async def launch_group(
        self,
        offer_id: str,
        executor: ExecutorInfo,
        tasks: Sequence[TaskInfo],
        filters: Filters | None = None,
        claims: Sequence[Claim] | None = None,
    ) -> None:
        fid = self._fid()
        offer = self._cached_offer(offer_id, claims)
        if claims is None:
            res = [_task_resources(t) for t in tasks]
            res.append(Resources.from_mesos(executor.resources))
            claims = self._claim_tasks(offer_id, [r for r in res if r])
        tasks = [t if t.agent_id is not None else attrs.evolve(t, agent_id=AgentID(offer.agent_id)) for t in tasks]
        if executor.framework_id is None:
            executor = attrs.evolve(executor, framework_id=fid)
        self._commit(claims, offer_id, tasks)
        await self.send(
            Call.make_accept(fid, (OfferID(offer_id),), (Operation.make_launch_group(executor, *tasks),), filters)
        )

    def _cached_offer(self, offer_id: str, claims: Sequence[Claim] | None) -> CachedOffer:
        if offer_id not in self.offers:
            for c in claims or ():
                self.offers.release(c)
            raise UnknownOffer(
                f"offer {offer_id} is not in the offer cache (rescinded, declined, consumed or never offered);"
                " the launch was not sent"
            )
        return self.offers.get(offer_id)

    def _commit(self, claims: Sequence[Claim], offer_id: str, tasks: Sequence[TaskInfo]) -> None:
        ticket = None
        if claims:
            self.offers.commit(claims, self.clock.now())
            ticket = self.offers.last_tickets.pop(offer_id, None)
        for t in tasks:
            self.tasks[t.task_id.value] = KnownTask(
                t.task_id.value, t.agent_id.value if t.agent_id else None, TaskState.TASK_STAGING, offer_id, ticket
            )

    async def reserve(self, offer_id: str, resources: Resources, filters: Filters | None = None) -> None:
        await self.accept([offer_id], [Operation.make_reserve(*resources.to_mesos())], filters)

    async def unreserve(self, offer_id: str, resources: Resources, filters: Filters | None = None) -> None:
        await self.accept([offer_id], [Operation.make_unreserve(*resources.to_mesos())], filters)

    async def decline(self, offer_ids: Iterable[str], refuse_seconds: float | None = None) -> None:
        ids = list(offer_ids)
        fid = self._fid()
        for oid in ids:
            self.offers.rescind(oid)
        filters = Filters(refuse_seconds=refuse_seconds) if refuse_seconds is not None else None
        await self.send(Call.make_decline(fid, tuple(OfferID(o) for o in ids), filters))

    async def decline_idle(self, older_than: float, refuse_seconds: float | None = None) -> list[str]:
        """Give back offers nothing is claimed from and that have not changed for ``older_than``
        seconds (a framework with no work left should not sit on leases); returns their ids."""
        ids = [o.offer_id for o in self.offers.idle(self.clock.now(), older_than)]
        if ids:
            await self.decline(ids, refuse_seconds)
        return ids

    async def kill(self, task_id: str, agent_id: str | None = None) -> None:
        if agent_id is None and task_id in self.tasks:
            agent_id = self.tasks[task_id].agent_id
        await self.send(
            Call.make_kill(self._fid(), TaskID(task_id), AgentID(agent_id) if agent_id else None)
        )

    async def reconcile(self, tasks: Iterable[tuple[str, str | None]] | None = None) -> None:
        """Explicit reconciliation of ``(task_id, agent_id)`` pairs, or implicit (all tasks)."""
        items = tuple(
            ReconcileTask(TaskID(t), AgentID(a) if a else None) for t, a in (tasks or ())
        )
        await self.send(Call.make_reconcile(self._fid(), items))

    async def revive(self, roles: Sequence[str] = ()) -> None:
        """Clear filters and un-suppress ``roles`` (all of the framework's roles by default)."""
        await self.send(Call.make_revive(self._fid(), tuple(roles)))
        self.suppressed_roles -= set(roles or self.framework_roles())

    async def suppress(self, roles: Sequence[str] = ()) -> None:
        """Stop offers for ``roles`` (all by default); remembered across re-subscriptions."""
        await self.send(Call.make_suppress(self._fid(), tuple(roles)))
        self.suppressed_roles |= set(roles or self.framework_roles())

    async def request(self, requests: Iterable[Request | Demand]) -> None:
        """Send a REQUEST (the standing demand); ``Demand`` values are converted."""
        reqs = tuple(r.to_request() if isinstance(r, Demand) else r for r in requests)
        await self.send(Call.make_request(self._fid(), reqs))

    async def send_demand(self) -> bool:
        """Send the ``demands`` book if it changed since the last send; True if sent."""
        if not self.connected:
            return False
        reqs = self.demands.take_changes()
        if reqs is None:
            return False
        try:
            await self.request(reqs)
        except TransportError:
            self.demands.mark_dirty()
            raise
        return True

    async def message(self, agent_id: str, executor_id: str, data: bytes) -> None:
        await self.send(Call.make_message(self._fid(), AgentID(agent_id), ExecutorID(executor_id), data))

    async def acknowledge(self, status: TaskStatus) -> None:
        self.ack_calls += 1
        self.acks_sent += 1
        await self.send(Call.make_acknowledge(self._fid(), status))

    async def acknowledge_many(self, statuses: Sequence[TaskStatus]) -> None:
        """Acknowledge several reliable updates: one ACKNOWLEDGE_MANY call when the master
        advertised it (Agora), else one ACKNOWLEDGE each (a Mesos master). A 400 for the batched
        call (a master that does not know it after all) turns batching off for this
        subscription and sends the acknowledgements one by one."""
        if len(statuses) > 1 and self.acknowledge_many_supported:
            fid = self._fid()
            for i in range(0, len(statuses), ACKS_PER_CALL):
                chunk = statuses[i : i + ACKS_PER_CALL]
                try:
                    self.ack_calls += 1
                    self.acks_sent += len(chunk)
                    await self.send(Call.make_acknowledge_many(fid, chunk))
                except CallRejected as exc:
                    if exc.status != 400:
                        raise
                    log.warning(
                        "%s: ACKNOWLEDGE_MANY refused (%s); acknowledging one by one", self.framework.name, exc
                    )
                    self.acknowledge_many_supported = False
                    self.acks_sent -= len(chunk)
                    for status in statuses[i:]:
                        await self.acknowledge(status)
                    return
            return
        for status in statuses:
            await self.acknowledge(status)

    async def teardown(self) -> None:
        """Tell the master the framework is done (kills its tasks), then stop the driver."""
        fid = self._fid()
        self._terminal = True  # no more acknowledgements: the master forgets the framework
        try:
            await self.send(Call.make_teardown(fid))
        finally:
            if self._run_task is not None and asyncio.current_task() is self._run_task:
                # called from a callback: end the stream; the loop then finishes the driver
                if self._stream is not None:
                    await self._stream.close()
            else:
                await self.stop()


class _Watch:
    """The event stream's silence deadline: ``limit`` seconds after the driver started waiting
    for the next event (no deadline while it handles one, or when ``limit`` is None)."""

    def __init__(self, limit: float | None) -> None:
        self.limit = limit
        self.waiting_since: float | None = None
        self.fired = False
        self._changed = asyncio.Event()

    def set_limit(self, limit: float | None) -> None:
        if limit != self.limit:
            self.limit = limit
            self._changed.set()  # the watchdog may be asleep towards the old deadline

    async def _nap(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await self._changed.wait()
        self._changed.clear()

    async def run(self, stream: EventStream) -> None:
        loop = asyncio.get_running_loop()
        while True:
            since, limit = self.waiting_since, self.limit
            if since is None or limit is None:
                await self._nap(limit if limit is not None else 1.0)
                continue
            left = since + limit - loop.time()
            if left > 0:
                await self._nap(left)
                continue
            self.fired = True
            await stream.close()  # ends the driver's read of the stream
            return


def master_supports_acknowledge_many(info: MasterInfo | None) -> bool:
    """Whether a master advertised Agora's ACKNOWLEDGE_MANY call in its ``MasterInfo``."""
    return info is not None and any(c.type is MasterCapabilityType.ACKNOWLEDGE_MANY for c in info.capabilities)


def _task_resources(t: TaskInfo) -> Resources:
    r = Resources.from_mesos(t.resources)
    if t.executor is not None:
        r = r + Resources.from_mesos(t.executor.resources)
    return r
