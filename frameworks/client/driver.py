"""The scheduler driver: the asyncio I/O loop around one framework's ``SchedulerSession``.

Every protocol decision (subscription and failover under the same framework id, the stream's
silence deadline, reconnect with jittered backoff, the offer cache and the known tasks, which
updates to acknowledge and how to batch them, reconciliation and the standing demand after a
(re)subscription, suppressed roles, the end of the framework) lives in the pure
``frameworks/client/session.py``. The driver only does what the session asks: it opens the stream
through a ``Transport``, feeds the session each event, runs the framework's callbacks, sends the
calls, sleeps the backoff delay, keeps the silence watchdog and the acknowledgement workers, and
hands events to the framework both ways:

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

from frameworks.client.demand import Demand, DemandBook
from frameworks.client.offers import CachedOffer, Claim, OfferCache
from frameworks.client.session import (
    ACKS_PER_CALL,
    SILENT_MASTER,
    STREAM_ENDED,
    Acknowledge,
    Deliver,
    Disconnected,
    DriverEvent,
    GiveUp,
    KnownTask,
    Output,
    Reconnect,
    Resync,
    SchedulerSession,
    has_capability,
    master_supports_acknowledge_many,
)
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
    CallType,
    Event,
    ExecutorInfo,
    Filters,
    FrameworkInfo,
    InverseOffer,
    MasterInfo,
    Offer,
    Operation,
    Request,
    TaskInfo,
    TaskStatus,
)
from protocol.resources import Resources

__all__ = [
    "ACKS_PER_CALL",
    "Disconnected",
    "DriverEvent",
    "EventIterator",
    "KnownTask",
    "Scheduler",
    "SchedulerDriver",
    "has_capability",
    "master_supports_acknowledge_many",
]

log = logging.getLogger(__name__)


class Scheduler:
    """Callbacks a framework may override (each may be a plain or an ``async`` method)."""

    def subscribed(self, driver: SchedulerDriver, framework_id: str, master_info: MasterInfo | None) -> Any:
        return None

    def offers(self, driver: SchedulerDriver, offers: list[Offer]) -> Any:
        return None

    def offer_rescinded(self, driver: SchedulerDriver, offer_id: str) -> Any:
        return None

    def inverse_offers(self, driver: SchedulerDriver, inverse_offers: list[InverseOffer]) -> Any:
        """The master asks for agents back (maintenance: each names an agent and its
        ``unavailability``); answer with ``accept_inverse_offers`` / ``decline_inverse_offers``."""
        return None

    def inverse_offer_rescinded(self, driver: SchedulerDriver, inverse_offer_id: str) -> Any:
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
        self.backoff = backoff or Backoff(initial=0.05, maximum=5.0)
        self.session = SchedulerSession(
            framework,
            self.backoff,
            auto_acknowledge=auto_acknowledge,
            reconcile_on_subscribe=reconcile_on_subscribe,
            heartbeat_misses=heartbeat_misses,
            first_event_timeout=first_event_timeout,
            max_reconnects=max_reconnects,
            default_failover_timeout=default_failover_timeout,
        )
        self.transport = transport
        self.scheduler = scheduler or Scheduler()
        self.clock: Clock = clock or SystemClock()
        self.auto_acknowledge = auto_acknowledge
        self.ack_concurrency = max(1, ack_concurrency)
        self._acks: asyncio.Queue[TaskStatus] = asyncio.Queue()
        self._stream: EventStream | None = None
        self._subscribed = asyncio.Event()
        self._done = asyncio.Event()
        self._queues: list[asyncio.Queue[object]] = []
        self._run_task: asyncio.Task[Any] | None = None
        self._waiters: list[asyncio.Future[None]] = []

    # --- what the session holds, read through the driver ------------------------------------------

    @property
    def framework(self) -> FrameworkInfo:
        return self.session.framework

    @property
    def offers(self) -> OfferCache:
        return self.session.offers

    @property
    def demands(self) -> DemandBook:
        return self.session.demands

    @property
    def tasks(self) -> dict[str, KnownTask]:
        return self.session.tasks

    @property
    def suppressed_roles(self) -> set[str]:
        return self.session.suppressed_roles

    @property
    def framework_id(self) -> str | None:
        return self.session.framework_id

    @property
    def stream_id(self) -> str | None:
        return self.session.stream_id

    @property
    def master_info(self) -> MasterInfo | None:
        return self.session.master_info

    @property
    def subscriptions(self) -> int:
        return self.session.subscriptions

    @property
    def error_message(self) -> str | None:
        return self.session.error_message

    @property
    def acknowledge_many_supported(self) -> bool:
        return self.session.acknowledge_many_supported

    @property
    def ack_calls(self) -> int:
        return self.session.ack_calls

    @property
    def acks_sent(self) -> int:
        return self.session.acks_sent

    @property
    def reconcile_on_subscribe(self) -> bool:
        return self.session.reconcile_on_subscribe

    @property
    def heartbeat_misses(self) -> float:
        return self.session.heartbeat_misses

    @property
    def first_event_timeout(self) -> float | None:
        return self.session.first_event_timeout

    @property
    def max_reconnects(self) -> int | None:
        return self.session.max_reconnects

    @property
    def connected(self) -> bool:
        return self._subscribed.is_set()

    @property
    def pending_acks(self) -> int:
        return self._acks.qsize()

    def role_of(self, offer: CachedOffer) -> str:
        """The role an offer is allocated to: its ``allocation_info``, else the framework's role."""
        return self.session.role_of(offer)

    def framework_roles(self) -> tuple[str, ...]:
        return self.session.framework_roles()

    # --- lifecycle ----------------------------------------------------------------------------

    async def _start(self) -> None:
        for i in range(self.ack_concurrency if self.auto_acknowledge else 0):
            self.spawn(self._ack_worker(), name=f"{self.name}:ack-{i}")
        self._run_task = self.spawn(self._run(), name=f"{self.name}:{self.framework.name}")

    async def _stop(self) -> None:
        self.session.close()
        self._subscribed.clear()
        if self._stream is not None:
            with contextlib.suppress(Exception):
                await self._stream.close()
            self._stream = None
        await self.transport.close()
        self._finish()

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
        fid = self.framework_id
        assert fid is not None
        return fid

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

    # --- the I/O loop ------------------------------------------------------------------------------

    async def _run(self) -> None:
        session = self.session
        try:
            while not session.terminal:
                reason = STREAM_ENDED
                try:
                    self._stream = await self.transport.subscribe(session.subscribe_call())
                    session.stream_opened(self._stream.stream_id)
                    await self._consume(self._stream)
                except CallRejected as exc:
                    outputs = session.refused(str(exc))
                    log.error("%s: %s", self.framework.name, self.error_message)
                    await self._execute(outputs)
                    return
                except (TransportError, TimeoutError) as exc:
                    reason = str(exc) or type(exc).__name__
                finally:
                    if self._stream is not None:
                        with contextlib.suppress(Exception):
                            await self._stream.close()
                        self._stream = None
                outputs = session.connection_lost(reason)
                self._subscribed.clear()
                await self._execute(outputs)
        finally:
            self._finish()

    async def _consume(self, stream: EventStream) -> None:
        """Feed the stream's events to the session and do what it answers. The session's silence
        deadline (``heartbeat_misses`` heartbeats, ``first_event_timeout`` before SUBSCRIBED) is
        kept by a watchdog task that closes the stream when it passes (an ``asyncio.timeout`` per
        event cost ~5% of the driver at thousands of events per second); the loop itself only
        notes when it starts waiting."""
        session = self.session
        it = aiter(stream)
        loop = asyncio.get_running_loop()
        watch = _Watch(session)
        dog = loop.create_task(watch.run(stream), name=f"{self.name}:heartbeat-watch")
        try:
            while True:
                watch.waiting_since = loop.time()
                try:
                    event = await anext(it)
                except StopAsyncIteration:
                    if watch.fired:
                        raise MasterUnavailable(SILENT_MASTER) from None
                    return
                except TransportError:
                    if watch.fired:
                        raise MasterUnavailable(SILENT_MASTER) from None
                    raise
                watch.waiting_since = None
                try:
                    outputs = session.receive(event, self.clock.now())
                    if session.connected is not self._subscribed.is_set():  # SUBSCRIBED
                        if session.connected:
                            self._subscribed.set()
                        else:
                            self._subscribed.clear()
                        watch.limit_changed()
                    for out in outputs:  # the two outputs of every event inline, the rest in _execute
                        if type(out) is Deliver:
                            if out.item is not None:
                                self._publish(out.item)
                            if out.callback is not None:
                                await self._call(getattr(self.scheduler, out.callback), self, *out.args)
                        elif type(out) is Acknowledge:
                            self._acks.put_nowait(out.status)
                        else:
                            await self._execute([out])
                finally:
                    self._wake()
                if session.terminal:
                    return
        finally:
            dog.cancel()
            await asyncio.gather(dog, return_exceptions=True)

    async def _execute(self, outputs: list[Output]) -> None:
        """Do what the session decided, in order."""
        for out in outputs:
            if type(out) is Deliver:
                if out.item is not None:
                    self._publish(out.item)
                if out.callback is not None:
                    await self._call(getattr(self.scheduler, out.callback), self, *out.args)
            elif type(out) is Acknowledge:
                # by the ack workers, so the next event is handled without waiting for this round trip
                self._acks.put_nowait(out.status)
            elif type(out) is Resync:
                await self._resync(out.reconcile)
            elif type(out) is Reconnect:
                log.info(
                    "%s: disconnected (%s); resubscribing in %.3fs", self.framework.name, out.reason, out.delay
                )
                await self.clock.sleep(out.delay)
            elif type(out) is GiveUp:
                log.warning("%s: %s", self.framework.name, out.message)

    async def _resync(self, reconcile: bool) -> None:
        try:
            if reconcile:
                for call in self.session.reconcile_calls():
                    await self.send(call)
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
                if self.connected and not self.session.terminal:
                    await self.acknowledge_many(batch)
            except TransportError as exc:  # the agent resends unacknowledged updates
                log.warning("%s: acknowledge failed: %s", self.framework.name, exc)
            finally:
                for _ in batch:
                    self._acks.task_done()

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

    async def send(self, call: Call) -> None:
        """Send any call on the live subscription."""
        if not self.connected:
            raise NotConnected("not subscribed")
        try:
            await self.transport.send(call, self.session.stream_id)
        finally:
            self._wake()

    async def accept(
        self, offer_ids: Sequence[str], operations: Sequence[Operation], filters: Filters | None = None
    ) -> None:
        await self.send(self.session.accept(offer_ids, operations, filters))

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
        await self.send(self.session.launch(offer_id, tasks, self.clock.now(), filters, claims))

    async def launch_group(
        self,
        offer_id: str,
        executor: ExecutorInfo,
        tasks: Sequence[TaskInfo],
        filters: Filters | None = None,
        claims: Sequence[Claim] | None = None,
    ) -> None:
        await self.send(self.session.launch_group(offer_id, executor, tasks, self.clock.now(), filters, claims))

    async def reserve(self, offer_id: str, resources: Resources, filters: Filters | None = None) -> None:
        await self.send(self.session.reserve(offer_id, resources, filters))

    async def unreserve(self, offer_id: str, resources: Resources, filters: Filters | None = None) -> None:
        await self.send(self.session.unreserve(offer_id, resources, filters))

    async def decline(self, offer_ids: Iterable[str], refuse_seconds: float | None = None) -> None:
        await self.send(self.session.decline(offer_ids, refuse_seconds))

    async def accept_inverse_offers(self, inverse_offer_ids: Iterable[str], refuse_seconds: float | None = None) -> None:
        """Tell the master the agents of these inverse offers can be taken by the start of their
        unavailability (recorded for the operator in ``/maintenance/status``)."""
        await self.send(self.session.answer_inverse_offers(inverse_offer_ids, True, refuse_seconds))

    async def decline_inverse_offers(self, inverse_offer_ids: Iterable[str], refuse_seconds: float | None = None) -> None:
        await self.send(self.session.answer_inverse_offers(inverse_offer_ids, False, refuse_seconds))

    async def decline_idle(self, older_than: float, refuse_seconds: float | None = None) -> list[str]:
        """Give back offers nothing is claimed from and that have not changed for ``older_than``
        seconds (a framework with no work left should not sit on leases); returns their ids."""
        ids = self.session.idle_offers(self.clock.now(), older_than)
        if ids:
            await self.decline(ids, refuse_seconds)
        return ids

    async def kill(self, task_id: str, agent_id: str | None = None) -> None:
        await self.send(self.session.kill(task_id, agent_id))

    async def reconcile(self, tasks: Iterable[tuple[str, str | None]] | None = None) -> None:
        """Explicit reconciliation of ``(task_id, agent_id)`` pairs, or implicit (all tasks)."""
        await self.send(self.session.reconcile(tasks))

    async def revive(self, roles: Sequence[str] = ()) -> None:
        """Clear filters and un-suppress ``roles`` (all of the framework's roles by default)."""
        await self.send(self.session.revive(roles))
        self.session.revived(roles)

    async def suppress(self, roles: Sequence[str] = ()) -> None:
        """Stop offers for ``roles`` (all by default); remembered across re-subscriptions."""
        await self.send(self.session.suppress(roles))
        self.session.suppressed(roles)

    async def request(self, requests: Iterable[Request | Demand]) -> None:
        """Send a REQUEST (the standing demand); ``Demand`` values are converted."""
        await self.send(self.session.request(requests))

    async def send_demand(self) -> bool:
        """Send the ``demands`` book if it changed since the last send; True if sent."""
        call = self.session.demand_call()
        if call is None:
            return False
        try:
            await self.send(call)
        except TransportError:
            self.session.demand_unsent()
            raise
        return True

    async def message(self, agent_id: str, executor_id: str, data: bytes) -> None:
        await self.send(self.session.message(agent_id, executor_id, data))

    async def acknowledge(self, status: TaskStatus) -> None:
        await self.send(self.session.acknowledge(status))

    async def acknowledge_many(self, statuses: Sequence[TaskStatus]) -> None:
        """Acknowledge several reliable updates: one ACKNOWLEDGE_MANY call when the master
        advertised it (Agora), else one ACKNOWLEDGE each (a Mesos master). A 400 for the batched
        call (a master that does not know it after all) turns batching off for this
        subscription and sends the acknowledgements one by one."""
        calls = self.session.acknowledgements(statuses)
        for i, call in enumerate(calls):
            try:
                await self.send(call)
            except CallRejected as exc:
                if exc.status != 400 or call.type is not CallType.ACKNOWLEDGE_MANY:
                    raise
                log.warning("%s: ACKNOWLEDGE_MANY refused (%s); acknowledging one by one", self.framework.name, exc)
                for single in self.session.acknowledge_many_refused(calls[i:]):
                    await self.send(single)
                return

    async def teardown(self) -> None:
        """Tell the master the framework is done (kills its tasks), then stop the driver."""
        call = self.session.teardown()  # no more acknowledgements: the master forgets the framework
        try:
            await self.send(call)
        finally:
            if self._run_task is not None and asyncio.current_task() is self._run_task:
                # called from a callback: end the stream; the loop then finishes the driver
                if self._stream is not None:
                    await self._stream.close()
            else:
                await self.stop()


class _Watch:
    """Keeps the session's silence deadline (``SchedulerSession.deadline``) as a timer: the
    stream is closed once the driver has waited that long for the next event (no deadline while
    it handles one, or when the session sets no limit)."""

    def __init__(self, session: SchedulerSession) -> None:
        self.session = session
        self.limit = session.silence_limit
        self.waiting_since: float | None = None
        self.fired = False
        self._changed = asyncio.Event()

    def limit_changed(self) -> None:
        limit = self.session.silence_limit
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
            since = self.waiting_since
            deadline = None if since is None else self.session.deadline(since)
            if deadline is None:
                await self._nap(self.limit if self.limit is not None else 1.0)
                continue
            left = deadline - loop.time()
            if left > 0:
                await self._nap(left)
                continue
            self.fired = True
            await stream.close()  # ends the driver's read of the stream
            return
