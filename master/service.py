"""``MasterService``: the master process as one ``Service``.

It opens the registry, builds the allocator and ``MasterState``, serves HTTP (scheduler API,
agent channel, operator endpoints) behind a connection cap and read timeouts, and runs two loops:
the timer loop that delivers ``Tick`` at ``MasterState.next_deadline()``, and the effects loop.
Every fact goes through ``dispatch``: the core handles it at once (facts in arrival order), its
effects join one FIFO pipeline whose registry operations are written (one transaction for all
that is queued) before any of those effects act: registry first, then act.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import resource
import socket
import struct
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any

from aiohttp import web

from master.agent_channel import AgentChannelServer
from master.allocator import Allocator
from master.auth import MasterAuth, load_auth, principal_of
from master.auth import middleware as auth_middleware
from master.config import ConfigError, MasterConfig, advertised_address, allocator_config
from master.events import (
    CloseAgent,
    CloseStream,
    Effect,
    MasterEvent,
    Persist,
    PublishOperatorEvent,
    SendEvent,
    SendToAgent,
    Tick,
)
from master.ha import LeaderElection, LeaderRedirect
from master.http_api import VERSION, SchedulerApi
from master.operator import OperatorApi
from master.operator_stream import OperatorStreams
from master.ratelimit import RateLimiter
from master.registry import Registry, RegistryError, RegistryStore
from master.registry_zk import ZkRegistry
from master.state import MasterState, StateConfig
from master.transport import GuardedServer
from master.webui import add_webui
from protocol import codec, mesos, requestlog
from protocol.agent_channel import PATH as AGENT_CHANNEL_PATH
from protocol.clock import Clock, SystemClock
from protocol.ids import new_uuid
from protocol.lifecycle import Service
from protocol.tls import TlsError, require_client_cert, server_context

log = logging.getLogger("agora.master")


def ip_to_int(ip: str) -> int:
    """Mesos' ``MasterInfo.ip``: the IPv4 address in network order read as a little-endian int
    (127.0.0.1 -> 16777343)."""
    try:
        packed = socket.inet_aton(ip)
    except OSError:
        return 0
    return int(struct.unpack("<I", packed)[0])


def raise_open_file_limit() -> int:
    """Raise the soft open-file limit to the hard one (as far as allowed); the soft limit after."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard > soft:
        want = 1 << 20 if hard == resource.RLIM_INFINITY else hard
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
            soft = want
    return int(soft)


def trusted_connection(request: web.Request, response: web.StreamResponse) -> bool:
    """A connection a client has shown to be a real one (``protocol.admission``): it carried a
    scheduler call the master accepted (a framework's stream or call connection) or a request
    with valid credentials."""
    if principal_of(request) is not None:
        return True
    return request.path == "/api/v1/scheduler" and response.status in (200, 202)


def agent_connection_cap(cfg: MasterConfig) -> int:
    """``max_agent_connections``, or (0) what the open-file limit leaves after 256 spare
    descriptors (registry, logs, listening socket) and the general pool (``max_connections``,
    counted as at most a tenth of the limit, so a config that lifts that cap far above the file
    limit does not starve the agents), at least 100."""
    if cfg.max_agent_connections > 0:
        return cfg.max_agent_connections
    soft = raise_open_file_limit()
    return max(100, soft - 256 - min(cfg.max_connections, soft // 10))


class MasterService(Service):
    name = "agora-master"

    def __init__(self, config: MasterConfig, clock: Clock | None = None) -> None:
        super().__init__()
        self.config = config
        self.clock: Clock = clock or SystemClock()
        self.port = 0
        self.advertised_ip, self.advertised_host = config.ip, config.ip  # resolved in _start
        self.ready = False
        self.epoch = 0
        self.master_id = ""
        self.state: MasterState = None  # type: ignore[assignment]  # set in _start
        self.registry: RegistryStore | None = None
        self.election: LeaderElection | None = None  # HA (master/ha.py)
        self.allocator: Allocator | None = None
        self.scheduler_api = SchedulerApi(self)
        self.agent_server = AgentChannelServer(self)
        self.operator_api = OperatorApi(self)
        self.operator_streams = OperatorStreams(self)  # operator SUBSCRIBE streams (master/operator_stream.py)
        self.rate = RateLimiter(config.rate_limit_qps, config.rate_limit_burst)
        self.auth: MasterAuth = load_auth(config)  # raises AuthConfigError on unusable files
        self.auth_failures: dict[str, int] = {}  # authentication failures by kind of peer
        self.counters: dict[str, int] = {"invalid_messages_total": 0, "rate_limited_total": 0, "errors_total": 0}
        self._wake = asyncio.Event()
        # the deadline the timer loop sleeps towards (inf: none; None: it is running, not asleep);
        # a fact wakes it only when it brings that deadline forward
        self._timer_at: float | None = None
        self._changed = asyncio.Event()
        self._fatal: asyncio.Task[None] | None = None
        self._pipeline: list[tuple[list[Effect], asyncio.Future[None]]] = []
        self._pipeline_wake = asyncio.Event()
        self._in_flight = False  # a batch is being written/acted on by _effects_loop
        self._runner: web.AppRunner | None = None
        self._server: asyncio.Server | None = None
        self._guard: GuardedServer | None = None
        self.start_time = 0.0

    # --- lifecycle ------------------------------------------------------------------------------

    async def _start(self) -> None:
        cfg = self.config
        try:  # what others connect to, never a wildcard bind (published in MasterInfo, HA's own address)
            self.advertised_ip, self.advertised_host = advertised_address(cfg, socket.gethostname(), socket.gethostbyname)
        except ConfigError as e:
            raise OSError(str(e)) from e
        ssl_ctx = None
        if cfg.tls_cert and cfg.tls_key:  # TLS: only TLS is served (a plaintext client is refused)
            try:
                ssl_ctx = server_context(cfg.tls_cert, cfg.tls_key, cfg.tls_ca)
            except TlsError as e:
                raise OSError(str(e)) from e
        if cfg.zk is None:  # with HA the registry is in ZooKeeper, opened once elected
            self.registry = await Registry.open(Path(cfg.work_dir))
        self.master_id = new_uuid()
        self.start_time = self.clock.now()

        self.request_log = requestlog.install()  # a malformed request: one line, rate limited per client
        self._guard = GuardedServer(
            None,
            max_connections=cfg.max_connections,
            read_timeout=min(cfg.header_timeout, cfg.read_timeout),
            max_agent_connections=agent_connection_cap(cfg),
            handshake_timeout=cfg.read_timeout if ssl_ctx is not None else None,
            per_address=cfg.max_connections_per_address,
            reserved=cfg.reserved_connections,
            trust=trusted_connection,
        )
        middlewares = [self._guard.middleware()]
        if cfg.tls_require_client_cert:  # mTLS for agents: no verified certificate, no channel
            middlewares.append(require_client_cert(
                frozenset({AGENT_CHANNEL_PATH}), lambda: self.metrics_inc("tls_client_cert_required_total")
            ))
        app = web.Application(client_max_size=cfg.max_body_bytes, middlewares=middlewares)
        if cfg.zk is not None:  # a standby answers 307 to the leader, or 503 (master/ha.py)
            app.middlewares.append(LeaderRedirect(self._leading, self._leader_address, self._own_address).middleware())
        app.middlewares.append(auth_middleware(self))  # 401 unless the request's realm is satisfied
        app.add_routes(self.scheduler_api.routes())
        app.add_routes(self.agent_server.routes())
        app.add_routes(self.operator_api.routes())
        add_webui(app, self)
        # keep-alive connections are never closed for idleness (pymesos' call connection would
        # die); GuardedServer evicts idle ones only when the connection cap is reached
        self._runner = web.AppRunner(
            app, access_log=None, handle_signals=False, shutdown_timeout=1.0, keepalive_timeout=365 * 86400.0
        )
        await self._runner.setup()
        assert self._runner.server is not None
        self._guard.handler = self._runner.server
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            self._guard, cfg.ip, cfg.port, reuse_address=True, backlog=1024,
            ssl=ssl_ctx, ssl_handshake_timeout=cfg.read_timeout if ssl_ctx is not None else None,
        )
        self.port = int(self._server.sockets[0].getsockname()[1])

        ip, host = self.advertised_ip, self.advertised_host
        master_info = mesos.MasterInfo(
            id=self.master_id,
            ip=ip_to_int(ip),
            port=self.port,
            pid=f"master@{ip}:{self.port}",
            hostname=host,
            version=VERSION,
            address=mesos.Address(port=self.port, hostname=host, ip=ip),
            # Agora: tells clients they may send ACKNOWLEDGE_MANY (protocol/README.md)
            capabilities=(mesos.MasterCapability(type=mesos.MasterCapabilityType.ACKNOWLEDGE_MANY),),
        )
        if cfg.zk is not None:  # HA: enter the election and stand by (redirecting) until elected
            self.election = LeaderElection(cfg.zk, cfg.zk_session_timeout, self._lost_leadership)
            await self.election.start(codec.encode_json(master_info))
            self.spawn(self._lead_when_elected(master_info), name="master-election")
            log.info("agora-master standing by on %s (election at %s)", self.url, cfg.zk)
            return
        await self._lead(master_info)

    async def _lead(self, master_info: mesos.MasterInfo) -> None:
        """Recover from the registry and serve: at start, or with HA once elected."""
        cfg = self.config
        assert self.registry is not None
        snap = self.registry.snapshot
        self.epoch = snap.master_seq
        self.allocator = Allocator(allocator_config(cfg, self.master_id))
        now = self.clock.now()
        self.state = MasterState(
            master_id=self.master_id,
            epoch=self.epoch,
            master_info=master_info,
            allocator=self.allocator,
            config=StateConfig(
                heartbeat_interval=cfg.heartbeat_interval,
                ping_interval=cfg.ping_interval,
                ping_timeout=cfg.ping_timeout,
                agent_reregister_timeout=cfg.agent_reregister_timeout,
                agent_removal_rate=cfg.agent_removal_rate,
                agent_removal_burst=cfg.agent_removal_burst,
                allocation_batch=cfg.allocation_batch,
                unreachable_gc=cfg.agent_unreachable_gc,
                abandoned_frameworks_per_principal=cfg.abandoned_frameworks_per_principal,
                acls=self.auth.acls,
                authenticate_frameworks=self.auth.frameworks,
                authenticate_agents=self.auth.agents,
            ),
            now=now,
        )
        await self._execute(self.state.recover(snap, now))
        self.ready = True
        self.spawn(self._effects_loop(), name="master-effects")
        self.spawn(self._timer_loop(), name="master-timers")
        self.spawn(self._gpu_watch_loop(), name="master-gpu-watch")
        log.info(
            "agora-master listening on %s (epoch %d, %d agents and %d frameworks recovered)",
            self.url, self.epoch, len(snap.agents), len(snap.frameworks),
        )

    async def _stop(self) -> None:
        self.ready = False
        self.scheduler_api.close_all()
        self.operator_streams.close_all()
        self.agent_server.close_all()
        if self._server is not None:
            self._server.close()
        if self._guard is not None:
            for t in list(self._guard.live):
                t.close()
        if self._runner is not None:
            with contextlib.suppress(Exception):
                await self._runner.cleanup()
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2.0)
        if self.registry is not None:
            await self.registry.close()
        if self.election is not None:
            await self.election.close()

    # --- high availability (master/ha.py) --------------------------------------------------------

    async def _lead_when_elected(self, master_info: mesos.MasterInfo) -> None:
        assert self.election is not None
        await self.election.elected()
        try:
            self.registry = await ZkRegistry.open(self.election.zk, self.election.path)
            await self._lead(master_info)
        except Exception as e:  # never hold leadership half-recovered: exit, a standby takes over
            self._exit(f"cannot recover from the ZooKeeper registry: {e!r}")

    def _lost_leadership(self, why: str) -> None:
        """The ZooKeeper session is gone (or presumed gone): a standby may lead with a higher
        epoch, so this master must not act again. It exits (non-zero)."""
        lead = "leading" if self.election is not None and self.election.leading else "standby"
        self._exit(f"{why}; exiting ({lead} master, epoch {self.epoch})")

    def _exit(self, why: str) -> None:
        log.critical("agora-master: %s", why)
        self.ready = False
        if self.election is not None:
            self.election.leading = False
        self.agent_server.close_all()  # no frame from this master after this point
        self.failed = self.failed or RuntimeError(why)
        if self._fatal is None:
            self._fatal = asyncio.get_running_loop().create_task(self.stop())

    def _leading(self) -> bool:
        """Elected and recovered: serving (before that the edge answers 503, never the core)."""
        return self.election is not None and self.election.leading and self.ready

    def _leader_address(self) -> str | None:
        return None if self.election is None else self.election.detector.current

    def _own_address(self) -> str:
        """``host:port`` as published in ZooKeeper (``MasterInfo.address.ip``, the detector's rule)."""
        return f"{self.advertised_ip}:{self.port}"

    @property
    def url(self) -> str:
        return f"{self.config.scheme}://{self.config.ip}:{self.port}"

    # --- the one way facts enter the core ---------------------------------------------------------

    async def dispatch(self, event: MasterEvent) -> None:
        """Hand one fact to the core and wait until its effects ran (its registry writes durable).

        The core runs synchronously, so facts are handled strictly in arrival order. Their effects
        go through one FIFO pipeline (``_effects_loop``): the registry operations of everything
        queued are written in one transaction *before* any of those effects act, so concurrent
        facts (10,000 agents registering) share an fsync instead of queueing behind each other.
        """
        self.counters["dispatches"] = self.counters.get("dispatches", 0) + 1
        try:
            fx = self.state.handle(event, self.clock.now())
        except Exception:
            self.counters["errors_total"] += 1
            log.exception("master core failed on %s", type(event).__name__, extra={"stimulus": repr(event)[:2000]})
            return
        at = self._timer_at
        if at is not None:
            d = self.state.next_deadline()
            if d is not None and d < at:
                self._timer_at = None
                self._wake.set()
        self._changed.set()
        if not fx:
            return
        if not self._pipeline and not self._in_flight and not any(isinstance(e, Persist) for e in fx):
            self._act(fx)  # nothing to write and nothing queued or in flight ahead: act at once
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if self._stopping:  # the effects loop is cancelled (or about to be): none would ever run
            fut.cancel()
        else:
            self._pipeline.append((fx, fut))
            self._pipeline_wake.set()
        await fut

    async def _effects_loop(self) -> None:
        batch: list[tuple[list[Effect], asyncio.Future[None]]] = []
        try:
            while True:
                await self._pipeline_wake.wait()
                self._pipeline_wake.clear()
                batch, self._pipeline = self._pipeline, []
                self._in_flight = True
                ops = tuple(op for fx, _ in batch for e in fx if isinstance(e, Persist) for op in e.ops)
                if ops:
                    assert self.registry is not None
                    try:
                        await self.registry.apply(ops)
                    except RegistryError as e:
                        # the registry could not record changes the core already made: never act
                        # on them; stop the master (a restart recovers from the registry)
                        log.critical("registry write failed, stopping the master: %s", e)
                        self.failed = self.failed or e
                        for _, f in batch:
                            if not f.done():
                                f.set_exception(e)
                        self._fatal = asyncio.get_running_loop().create_task(self.stop())
                        return
                for fx, f in batch:
                    self._act(fx)
                    if not f.done():
                        f.set_result(None)
                self._in_flight = False
        finally:  # stopped: release every dispatcher, including those of a batch still in flight
            for _, f in (*batch, *self._pipeline):
                if not f.done():
                    f.cancel()
            self._pipeline = []

    def _act(self, fx: list[Effect]) -> None:
        """Run the non-registry effects (all synchronous hand-offs to connections). A failing
        effect is a bug: logged with the effect, the others still run."""
        for e in fx:
            try:
                # the two effects of every task (updates to a framework, messages to an agent)
                # first, without the match below
                cls = e.__class__
                if cls is SendToAgent:
                    to_agent = typing.cast(SendToAgent, e)
                    self.agent_server.send(to_agent.conn_id, to_agent.body)
                elif cls is SendEvent:
                    event = typing.cast(SendEvent, e)
                    self.scheduler_api.send(event.stream_id, event.event)
                else:
                    self._act_one(e)
            except Exception:
                self.counters["errors_total"] += 1
                log.exception("effect failed: %r", e)

    def _act_one(self, e: Effect) -> None:
        match e:
            case SendEvent():
                self.scheduler_api.send(e.stream_id, e.event)
            case CloseStream():
                self.scheduler_api.close(e.stream_id, e.reason)
            case SendToAgent():
                self.agent_server.send(e.conn_id, e.body)
            case CloseAgent():
                self.agent_server.close(e.conn_id, e.reason)
            case PublishOperatorEvent():
                self.operator_streams.publish(e)
            case Persist():
                pass

    async def wait_until(self, pred: Callable[[], bool], within: float = 10.0) -> None:
        """Wait until ``pred()`` holds, re-checking after every fact the core handles."""
        async with asyncio.timeout(within):
            while not pred():
                self._changed.clear()
                await self._changed.wait()

    async def _execute(self, fx: list[Effect]) -> None:
        """Run effects in order, awaiting each registry write (recovery, outside the pipeline)."""
        for e in fx:
            if isinstance(e, Persist):
                assert self.registry is not None
                await self.registry.apply(e.ops)
            else:
                self._act_one(e)

    async def _timer_loop(self) -> None:
        while True:
            deadline = self.state.next_deadline()
            now = self.clock.now()
            if deadline is None or deadline > now:
                timeout = None if deadline is None else deadline - now
                self._timer_at = math.inf if deadline is None else deadline
                try:
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(timeout):
                            await self._wake.wait()
                finally:
                    self._timer_at = None
                self._wake.clear()
                if deadline is None or self.clock.now() < deadline:
                    continue
            seen = self.agent_server.liveness() if self.state.housekeeping_due(self.clock.now()) else ()
            await self.dispatch(Tick(seen=seen))
            self._wake.clear()
            if self.state.next_deadline() == deadline:
                await asyncio.sleep(0.002)  # a deadline that cannot move yet (rate-limited removal)

    gpu_watch_interval = 5.0  # seconds between checks for frameworks excluded from GPU agents

    async def _gpu_watch_loop(self) -> None:
        """Nothing waits in silence for a GPU agent: a framework that gets no offers because every
        agent with room has GPUs and it lacks ``GPU_RESOURCES`` is named in a warning, once each
        time it starts waiting (``/state`` says why too: ``offers_reason``)."""
        warned: set[str] = set()
        while True:
            await self.clock.sleep(self.gpu_watch_interval)
            if self.allocator is None:
                continue
            now = set(self.allocator.gpu_excluded())
            for fid in sorted(now - warned):
                fw = self.state.frameworks.get(fid)
                log.warning(
                    "framework %s (%s) gets no offers: every agent with free resources has GPUs and it "
                    "lacks the GPU_RESOURCES capability (declare it, or keep GPUs out of those agents "
                    "with --resources gpus:0)", fid, fw.info.name if fw is not None else "?",
                )
            warned = now

    # --- helpers for the edges --------------------------------------------------------------------

    @property
    def guard(self) -> GuardedServer | None:
        """The connection guard (None before start)."""
        return self._guard

    @property
    def pipeline_depth(self) -> int:
        """Facts whose effects are queued behind a registry write."""
        return len(self._pipeline)

    def rate_ok(self, principal: str, cost: float = 1.0) -> bool:
        if self.rate.allow(principal, self.clock.now(), cost):
            return True
        self.counters["rate_limited_total"] += 1
        return False

    def metrics_inc(self, name: str, n: int = 1) -> None:
        self.counters[name] = self.counters.get(name, 0) + n

    def auth_failed(self, realm: str) -> None:
        """A request refused for failed authentication in ``realm`` (counted per kind of peer)."""
        self.auth_failures[realm] = self.auth_failures.get(realm, 0) + 1
        self._changed.set()  # a change wait_until may be waiting for

    def info(self) -> dict[str, Any]:
        return {"id": self.master_id, "port": self.port, "epoch": self.epoch}
