"""The framework host: the shell an Agora framework service runs on (batch and elastic).

A framework service is a pure core (its decisions, as effects: ``frameworks.kit.effects``) and a
shell. The host is the part of the shell every service has the same way, held by the service
(``self.host``), which gives it its logic through one small protocol, ``FrameworkLogic``:

- the **connection** (``ServiceConnection``: the master's address, TLS, the principal and its
  credential, the agents' HTTP credential) and an HTTP session for the agents (``agent_http``,
  ``agent_headers``: sandbox reads, ``read_sandbox``);
- the **HTTP API**: an aiohttp server whose routes the framework gives (``serve``), behind the
  ``--credentials``/``--acls`` middleware (``client/api_auth.py``; ``reload`` on SIGHUP), with
  its address published as ``FrameworkInfo.webui_url``, where the CLI finds it;
- the **driver** (``connect``): ``FrameworkInfo`` from the service's name, roles, failover
  timeout and capabilities; the host is the driver's ``Scheduler`` and hands the callbacks to the
  logic (``on_subscribed``, ``on_offers``, ``on_rescinded``, ``on_update``); a refused
  subscription stops the service (``error``);
- the **store's group commit** (``flush``): the jobs marked changed (``dirty``, a ``Persist``
  effect's ids) written together, one writer at a time, by the logic's ``write_jobs``;
- the **effect loop** (``run_rounds``): one loop, woken by ``poke`` (offers, updates, requests)
  or by the logic's ``next_round_in``, runs the logic's ``on_round`` and logs, never raises;
  ``call_master`` carries out the effects that are calls to the master (``Kill``, ``Decline``,
  ``Suppress``, ``Revive``, ``DeclareDemand``).

The service keeps its core, its store, its routes and its ``Launch`` (a task per launch of its
own kind); it starts and stops the host's parts in its own order (``serve``, ``connect``,
``run_rounds``; ``stop_listening``, ``close_api``).
"""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import logging
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

import aiohttp
import attrs
from aiohttp import web

from frameworks.client import api_auth
from frameworks.client.api_auth import ApiAuth, ApiAuthError, principal_of
from frameworks.client.driver import Scheduler, SchedulerDriver
from frameworks.client.options import ServiceConnection, advertised_host, stop_refused
from frameworks.client.transport import Transport, TransportError, base_url
from frameworks.kit.effects import DeclareDemand, Decline, Kill, Revive, Suppress
from protocol.acls import Action, job_problem
from protocol.lifecycle import Service
from protocol.mesos import Capability, CapabilityType, FrameworkInfo, MasterInfo, Offer, TaskStatus
from protocol.mesos_common import FrameworkID

log = logging.getLogger(__name__)

MAX_BODY = 1024 * 1024  # the largest request body the API reads

# what every Agora framework service declares to the master
BASE_CAPABILITIES = (
    CapabilityType.MULTI_ROLE,
    CapabilityType.REUSABLE_OFFERS,
    CapabilityType.REVOCABLE_RESOURCES,
    CapabilityType.GPU_RESOURCES,
    CapabilityType.TASK_KILLING_STATE,
)

MasterCall = Kill | Decline | Suppress | Revive | DeclareDemand  # the effects ``call_master`` carries out


class FrameworkLogic(Protocol):
    """What the host asks of the framework running on it: its answers to the master's events,
    one round of its effect loop, and how it writes its jobs."""

    def on_subscribed(self, driver: SchedulerDriver, framework_id: str) -> None:
        """Subscribed (again) under ``framework_id``: keep it, re-send what may be lost."""

    def on_offers(self, offers: list[Offer]) -> None:
        """New offers (the driver's offer cache holds them)."""

    def on_rescinded(self, offer_id: str) -> None:
        """An offer is gone (the cache dropped it)."""

    def on_update(self, status: TaskStatus) -> None:
        """A task's status update (acknowledged once this returns)."""

    async def on_round(self) -> None:
        """One round of the effect loop: the core's decisions, carried out in order."""

    def next_round_in(self) -> float | None:
        """Seconds until the core wants a round without a ``poke`` (None: not before one)."""

    async def write_jobs(self, job_ids: list[int]) -> None:
        """Write these jobs (those the core still has) in one transaction."""

    def jobs_written(self, job_ids: list[int]) -> None:
        """These jobs are durable now."""


@attrs.frozen
class SandboxRead:
    """What ``read_sandbox`` got: the agent's ``/files/read`` answer (``data``), or why not:
    ``reached`` False with ``status`` 503 when the agent is not known here (``error`` empty: the
    caller words it) or did not answer (``error`` says why); else the agent's own status and words."""

    data: dict[str, Any] | None = None
    status: int = 200
    error: str = ""
    reached: bool = True


@attrs.frozen
class Connection:
    """The host's view of the master, for ``/api/v1/framework`` and ``/metrics``."""

    framework_id: str | None
    connected: bool
    master: str
    offers: int


class FrameworkHost(Scheduler):
    """The shared shell, held by the service it runs (``owner``) with the service's ``logic``.
    ``capabilities`` is the framework's ``FrameworkInfo.capabilities``."""

    def __init__(
        self,
        logic: FrameworkLogic,
        owner: Service,
        master: str,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        roles: tuple[str, ...] = ("*",),
        framework_name: str,
        capabilities: tuple[CapabilityType, ...] = BASE_CAPABILITIES,
        failover_timeout: float = 7 * 24 * 3600.0,
        now: Callable[[], float] = time.time,
        ca: str | Path | None = None,
        tls_cert: str | Path | None = None,
        tls_key: str | Path | None = None,
        principal: str | None = None,
        secret: str | None = None,
        token: str | None = None,
        agent_http_credential: str | Path | None = None,
        advertise_host: str | None = None,
        credentials: str | Path | None = None,
        acls: str | Path | None = None,
    ) -> None:
        self.logic = logic
        self.owner = owner  # the service: a refused subscription stops it
        self.master = master
        # how the service reaches the master and agents (frameworks/client/options.py): TLS
        # (``ca`` pins the cluster CA; the certificate and key make the API and its webui_url
        # https), the principal with its secret or token, the agents' --authenticate-http credential
        self.conn = ServiceConnection.of(
            master, ca=ca, tls_cert=tls_cert, tls_key=tls_key, principal=principal, secret=secret, token=token,
            agent_http_credential=agent_http_credential, credentials=credentials, acls=acls,
        )  # fmt: skip
        self.auth = ApiAuth()  # who may call the API (--credentials/--acls), read at start
        self.auth_failures: dict[str, int] = {}
        self.principal = principal
        self.host = host
        # the address the API is published at (webui_url) and workers are told: never 0.0.0.0
        self.advertise_host = advertised_host(host, advertise_host)
        self.port = port
        self.roles = roles
        self.framework_name = framework_name
        self.capabilities = capabilities
        self.failover_timeout = failover_timeout
        self.now = now
        self.driver: SchedulerDriver | None = None
        self.url = ""  # the API's base URL, once serving
        self.dirty: set[int] = set()  # jobs changed since the store last wrote them
        self.agent_http: aiohttp.ClientSession | None = None  # to the agents (sandbox reads, webhooks)
        self.agent_headers: dict[str, str] = {}
        self._wake = asyncio.Event()
        self._runner: web.AppRunner | None = None
        self._client_ssl: Any = None
        self._refused: asyncio.Task[None] | None = None
        self._flush_lock = asyncio.Lock()

    # --- the HTTP API ------------------------------------------------------------------------------

    async def serve(self, routes: Sequence[web.RouteDef]) -> None:
        """Read the API's credentials and ACLs, open the agents' session, and serve ``routes``
        (every one behind the authentication middleware) on ``host:port``; sets ``port`` (the
        one bound) and ``url``."""
        self.auth = self.conn.api_auth()
        self._client_ssl, server_ssl = self.conn.client_ssl(), self.conn.server_ssl()
        self.agent_http = self.conn.agent_session(self._client_ssl)
        self.agent_headers = self.conn.agent_headers()  # sandbox reads from agents (--authenticate-http)
        app = web.Application(
            client_max_size=MAX_BODY, middlewares=[api_auth.middleware(lambda: self.auth, self.now, self.auth_failures)]
        )
        app.add_routes(routes)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, self.host, self.port, ssl_context=server_ssl).start()
        self.port = int(self._runner.addresses[0][1])
        self.url = f"{'https' if server_ssl is not None else 'http'}://{self.advertise_host}:{self.port}"

    async def stop_listening(self) -> None:
        """Accept no new connection (the ones open go on until ``close_api``)."""
        if self._runner is not None:
            for site in list(self._runner.sites):
                await site.stop()

    async def close_api(self) -> None:
        """Stop the API and close the agents' session."""
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        if self.agent_http is not None:
            await self.agent_http.close()
            self.agent_http = None

    def reload(self) -> bool:
        """SIGHUP: read ``--credentials`` and ``--acls`` again; a file that fails keeps the old set."""
        try:
            self.auth = self.auth.reloaded()
        except ApiAuthError as exc:
            log.error("reload: keeping the previous credentials and ACLs: %s", exc)
            return False
        log.info("reload: credentials and ACLs re-read")
        return True

    def master_ui(self) -> str | None:
        """The master's web UI, linked from every page (None for a ZooKeeper address)."""
        try:
            return None if self.master.startswith("zk://") else base_url(self.master, "https" if self.conn.ca else "http")
        except ValueError:
            return None

    def forbidden(self, request: web.Request, owner: str | None, action: Action, what: str) -> str | None:
        """Why the request's principal may not do ``action`` on a job of ``owner`` (it is not the
        owner and no ACL lets it), or None."""
        return job_problem(self.auth.acls, action, principal_of(request), owner, what)

    def connection(self) -> Connection:
        driver = self.driver
        return Connection(
            framework_id=driver.framework_id if driver else None,
            connected=bool(driver and driver.connected),
            master=self.master,
            offers=len(driver.offers) if driver else 0,
        )

    # --- the agents ---------------------------------------------------------------------------------

    def agent_url(self, agent_id: str | None) -> str | None:
        """The agent's HTTP endpoint, as its offers named it (None: not known here)."""
        driver = self.driver
        return driver.offers.agent_urls.get(agent_id) if driver is not None and agent_id is not None else None

    async def read_sandbox(self, agent_id: str | None, task_id: str, stream: str, offset: int, length: int) -> SandboxRead:
        """Read ``stream`` of ``task_id``'s sandbox on its agent (``/files/read``)."""
        driver, http = self.driver, self.agent_http
        agent = self.agent_url(agent_id)
        if agent is None or driver is None or driver.framework_id is None or http is None:
            return SandboxRead(status=503, reached=False)
        path = f"{driver.framework_id}/{task_id}/{stream}"
        params = {"path": path, "offset": str(offset), "length": str(length)}
        try:
            async with http.get(f"{agent}/files/read", params=params, headers=self.agent_headers) as resp:
                if resp.status != 200:
                    return SandboxRead(status=resp.status, error=await resp.text())
                return SandboxRead(data=await resp.json())
        except (aiohttp.ClientError, TimeoutError) as exc:
            return SandboxRead(status=503, error=f"agent {agent_id}: {exc}", reached=False)

    # --- the master ---------------------------------------------------------------------------------

    def framework_info(self, framework_id: str | None) -> FrameworkInfo:
        """What the service subscribes as: its API's address rides in ``webui_url``, so the CLI
        finds it through the master."""
        return FrameworkInfo(
            user=getpass.getuser(),
            name=self.framework_name,
            principal=self.principal,
            id=FrameworkID(framework_id) if framework_id else None,
            failover_timeout=self.failover_timeout,
            webui_url=self.url,
            roles=self.roles,
            capabilities=tuple(Capability(c) for c in self.capabilities),
        )

    def connect(self, framework_id: str | None, transport: Transport | None = None) -> SchedulerDriver:
        """The driver for this service (not started): ``transport`` or HTTP to the master."""
        transport = transport or self.conn.transport(self._client_ssl)
        self.driver = SchedulerDriver(self.framework_info(framework_id), transport, scheduler=self)
        return self.driver

    # the driver's callbacks, handed to the logic

    def subscribed(self, driver: SchedulerDriver, framework_id: str, master_info: MasterInfo | None) -> None:
        self.logic.on_subscribed(driver, framework_id)

    def offers(self, driver: SchedulerDriver, offers: list[Offer]) -> None:
        self.logic.on_offers(offers)

    def offer_rescinded(self, driver: SchedulerDriver, offer_id: str) -> None:
        self.logic.on_rescinded(offer_id)

    def update(self, driver: SchedulerDriver, status: TaskStatus) -> None:
        self.logic.on_update(status)

    def error(self, driver: SchedulerDriver, message: str) -> None:
        """The master refused the subscription (401/403...): not transient, the service exits."""
        self._refused = stop_refused(self.owner, message)

    async def call_master(self, e: object) -> bool:
        """Carry out ``e`` if it is an effect that calls the master (``MasterCall``); whether it was."""
        driver = self.driver
        assert driver is not None
        if isinstance(e, Kill):
            await driver.kill(e.task_id, e.agent_id)
        elif isinstance(e, Decline):
            await driver.decline(e.offer_ids, e.refuse_seconds)
        elif isinstance(e, Suppress):
            await driver.suppress()
        elif isinstance(e, Revive):
            await driver.revive()
        elif isinstance(e, DeclareDemand):
            driver.demands.replace(e.demands)
            await driver.send_demand()
        else:
            return False
        return True

    # --- the store ----------------------------------------------------------------------------------

    async def flush(self) -> None:
        """Write the jobs marked changed, one writer at a time (the loop and HTTP requests both
        flush). A write interrupted by a stop still completes on its thread, and a failed or
        interrupted write leaves its ids dirty, so the final flush writes them again: nothing is
        lost."""
        async with self._flush_lock:
            if not self.dirty:
                return
            ids = sorted(self.dirty)
            self.dirty.clear()
            try:
                await asyncio.shield(self.logic.write_jobs(ids))
            except BaseException:
                self.dirty.update(ids)
                raise
            self.logic.jobs_written(ids)

    # --- the effect loop ---------------------------------------------------------------------------

    def poke(self) -> None:
        """Something changed: run a round soon."""
        self._wake.set()

    async def run_rounds(self) -> None:
        """The service's one loop: wait for a ``poke`` or the logic's ``next_round_in()`` seconds
        (None: no deadline), then run its ``on_round``. A failed master call is logged (the
        round's effects are decided again next round); any other error is a bug, logged with its
        traceback, and the loop goes on."""
        label = self.framework_name
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.logic.next_round_in()):
                    await self._wake.wait()
            self._wake.clear()
            try:
                await self.logic.on_round()
            except TransportError as exc:
                log.warning("%s: master call failed: %s", label, exc)
            except Exception:
                log.exception("%s: scheduling round failed", label)


class HostedService(Service):
    """A framework service that runs on a ``FrameworkHost`` it holds (``self.host``): what the
    host holds, read as the service's own by tests, ``run_service`` and signal handlers."""

    host: FrameworkHost

    @property
    def driver(self) -> SchedulerDriver | None:
        return self.host.driver

    @property
    def url(self) -> str:
        """The API's base URL, once serving."""
        return self.host.url

    @property
    def port(self) -> int:
        return self.host.port

    def reload(self) -> bool:
        """SIGHUP: read ``--credentials`` and ``--acls`` again (the host's API)."""
        return self.host.reload()

    @property
    def auth_failures(self) -> dict[str, int]:
        return self.host.auth_failures
