"""The framework host: the shell an Agora framework service runs in (batch and elastic).

A framework service is a pure core (its decisions, as effects: ``frameworks.kit.effects``) in
this shell. The host owns what every service does the same way:

- the **connection** (``ServiceConnection``: the master's address, TLS, the principal and its
  credential, the agents' HTTP credential) and an HTTP session for the agents (sandbox reads);
- the **HTTP API**: an aiohttp server whose routes the framework gives (``serve``), behind the
  ``--credentials``/``--acls`` middleware (``client/api_auth.py``; ``reload`` on SIGHUP), with
  its address published as ``FrameworkInfo.webui_url``, where the CLI finds it;
- the **driver** (``connect``): ``FrameworkInfo`` from the service's name, roles, failover
  timeout and capabilities; a refused subscription stops the service (``error``);
- the **store's group commit** (``_flush``): the jobs marked changed (``_dirty``, a ``Persist``
  effect's ids) written together, one writer at a time, by the framework's ``_write_jobs``;
- the **effect loop** (``run_rounds``): one loop, woken by ``poke`` (offers, updates, requests)
  or by the framework's next deadline, runs a round of the framework's and logs, never raises;
  ``call_master`` carries out the effects that are calls to the master (``Kill``, ``Decline``,
  ``Suppress``, ``Revive``, ``DeclareDemand``).

The framework subclasses the host with its core, its store, its routes, its ``Launch`` (a task
per launch of its own kind) and the Scheduler callbacks that feed its core.
"""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

from frameworks.client import api_auth
from frameworks.client.api_auth import ApiAuth, ApiAuthError, principal_of
from frameworks.client.driver import Scheduler, SchedulerDriver
from frameworks.client.options import ServiceConnection, advertised_host, stop_refused
from frameworks.client.transport import Transport, TransportError, base_url
from frameworks.kit.effects import DeclareDemand, Decline, Kill, Revive, Suppress
from protocol.acls import Action, job_problem
from protocol.lifecycle import Service
from protocol.mesos import Capability, CapabilityType, FrameworkInfo
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


class FrameworkHost(Service, Scheduler):
    """The shared shell. ``capabilities`` is the framework's ``FrameworkInfo.capabilities``."""

    name = "agora-framework"
    capabilities: tuple[CapabilityType, ...] = BASE_CAPABILITIES

    def __init__(
        self,
        master: str,
        work_dir: Path,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        roles: tuple[str, ...] = ("*",),
        framework_name: str,
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
        Service.__init__(self)
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
        self.work_dir = Path(work_dir)
        self.host = host
        # the address the API is published at (webui_url) and workers are told: never 0.0.0.0
        self.advertise_host = advertised_host(host, advertise_host)
        self.port = port
        self.roles = roles
        self.framework_name = framework_name
        self.failover_timeout = failover_timeout
        self.now = now
        self.driver: SchedulerDriver | None = None
        self.url = ""  # the API's base URL, once serving
        self.rounds = 0  # rounds of the effect loop run
        self._wake = asyncio.Event()
        self._runner: web.AppRunner | None = None
        self._http: aiohttp.ClientSession | None = None  # to the agents (sandbox reads, webhooks)
        self._agent_headers: dict[str, str] = {}
        self._client_ssl: Any = None
        self._refused: asyncio.Task[None] | None = None
        self._dirty: set[int] = set()  # jobs changed since the store last wrote them
        self._flush_lock = asyncio.Lock()

    # --- the HTTP API ------------------------------------------------------------------------------

    async def serve(self, routes: Sequence[web.RouteDef]) -> None:
        """Read the API's credentials and ACLs, open the agents' session, and serve ``routes``
        (every one behind the authentication middleware) on ``host:port``; sets ``port`` (the
        one bound) and ``url``."""
        self.auth = self.conn.api_auth()
        self._client_ssl, server_ssl = self.conn.client_ssl(), self.conn.server_ssl()
        self._http = self.conn.agent_session(self._client_ssl)
        self._agent_headers = self.conn.agent_headers()  # sandbox reads from agents (--authenticate-http)
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
        if self._http is not None:
            await self._http.close()
            self._http = None

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

    def error(self, driver: SchedulerDriver, message: str) -> None:
        """The master refused the subscription (401/403...): not transient, the service exits."""
        self._refused = stop_refused(self, message)

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

    async def _flush(self) -> None:
        """Write the jobs marked changed, one writer at a time (the loop and HTTP requests both
        flush). A write interrupted by a stop still completes on its thread, and a failed or
        interrupted write leaves its ids dirty, so the final flush writes them again: nothing is
        lost."""
        async with self._flush_lock:
            if not self._dirty:
                return
            ids = sorted(self._dirty)
            self._dirty.clear()
            try:
                await asyncio.shield(self._write_jobs(ids))
            except BaseException:
                self._dirty.update(ids)
                raise
            self._jobs_written(ids)

    async def _write_jobs(self, job_ids: list[int]) -> None:
        """Write these jobs (those the core still has) in one transaction: the framework's store."""
        raise NotImplementedError

    def _jobs_written(self, job_ids: list[int]) -> None:
        """These jobs are durable now (a hook; nothing by default)."""

    # --- the effect loop ---------------------------------------------------------------------------

    def poke(self) -> None:
        """Something changed: run a round soon."""
        self._wake.set()

    async def run_rounds(self, one_round: Callable[[], Awaitable[None]], until: Callable[[], float | None]) -> None:
        """The service's one loop: wait for a ``poke`` or ``until()`` seconds (None: no
        deadline), then run ``one_round``. A failed master call is logged (the round's effects are
        decided again next round); any other error is a bug, logged with its traceback, and the
        loop goes on."""
        label = self.framework_name
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(until()):
                    await self._wake.wait()
            self._wake.clear()
            try:
                await one_round()
            except TransportError as exc:
                log.warning("%s: master call failed: %s", label, exc)
            except Exception:
                log.exception("%s: scheduling round failed", label)
