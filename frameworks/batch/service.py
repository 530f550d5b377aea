"""The batch framework service: a scheduler on the client library, a job store, an HTTP API.

Shell only: every decision is ``BatchCore``'s. This module turns driver callbacks and HTTP
requests into core calls, runs one scheduling loop (woken by offers, updates, submissions and
the core's next deadline), and executes the effects: ACCEPT/LAUNCH, KILL, DECLINE,
SUPPRESS/REVIVE, REQUEST, and batched writes to the store.

HTTP API (JSON by default, msgpack with ``Content-Type``/``Accept: application/x-msgpack``):

- ``POST /api/v1/jobs`` (a job spec, see ``model.spec_from_dict``) -> ``201 {"id": N}``
- ``GET /api/v1/jobs[?state=PENDING]`` -> ``{"jobs": [summary, ...]}``
- ``GET /api/v1/jobs/{id}`` -> the job with its tasks, attempts and reason (``?summary=1``:
  without the tasks, for pollers; ``?task=I``: with task ``I`` only)
- ``POST /api/v1/jobs/{id}/cancel``
- ``POST /api/v1/jobs/{id}/tasks/{index}/kill`` -> kill that task's running attempt (``agora task
  kill``); it ends as a crash would (retried if it has retries left)
- ``GET /api/v1/jobs/{id}/logs?task=I&stream=stdout|stderr&offset=O&length=L`` -> read from the
  agent's sandbox (``/files/read``), ``{"data": str, "offset": int}``; once the sandbox is gone
  (or its agent), from the tail of the attempt's output kept in the store when it ended
  (``--log-tail``, ``logtail.py``), with ``"kept": {"from", "to", "note"}`` saying so
- ``GET /health``, ``GET /api/v1/framework`` (framework id, master, counts)
"""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import json
import logging
import time
import urllib.parse
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import aiohttp
import attrs
import msgpack
from aiohttp import web

from frameworks.batch import logtail, pages
from frameworks.batch.config import BatchConfig
from frameworks.batch.core import (
    ACTIVE,
    BatchCore,
    BatchError,
    DeclareDemand,
    Decline,
    Effect,
    JobEvent,
    JobRecord,
    Kill,
    Launch,
    Persist,
    Revive,
    Suppress,
    TaskLaunch,
    TaskRecord,
)
from frameworks.batch.events import EventBus, deliver
from frameworks.batch.logtail import DEFAULT_KEEP, KeptTail, kept, window_start
from frameworks.batch.metrics import CONTENT_TYPE as metrics_content_type
from frameworks.batch.metrics import BatchMetrics
from frameworks.batch.model import JOB_TERMINAL, JobSpec, JobState, SpecError, spec_from_dict, spec_to_dict
from frameworks.batch.planner import AgentCapacity, OfferView, gpu_sharing_error, port_count
from frameworks.batch.store import AccountingQuery, JobStore, attempt_to_dict
from frameworks.batch.warm import CHANNEL_PATH, RESULTS_PAGE, WarmServices, inputs_of
from frameworks.client import api_auth, webui
from frameworks.client.api_auth import ApiAuth, ApiAuthError, OwnerError, job_owner, principal_of
from frameworks.client.driver import KnownTask, Scheduler, SchedulerDriver
from frameworks.client.offers import OfferCacheError
from frameworks.client.options import ServiceConnection, advertised_host, stop_refused
from frameworks.client.placement import attribute_text
from frameworks.client.transport import HttpTransport, TransportError, base_url
from frameworks.service.dispatch import TaskState as ServiceTaskState
from protocol.acls import Action, job_problem, priority_problem, submit_problem
from protocol.codec import JSON, MSGPACK, loads_json
from protocol.lifecycle import Service
from protocol.mesos import (
    Capability,
    CapabilityType,
    CommandInfo,
    DurationInfo,
    Environment,
    FrameworkInfo,
    KillPolicy,
    Offer,
    Resource,
    TaskInfo,
    TaskStatus,
    Variable,
    VariableType,
)
from protocol.mesos_common import FrameworkID, TaskID
from protocol.resources import Resources
from protocol.task_states import TaskState, is_terminal
from protocol.usage import from_labels

log = logging.getLogger(__name__)

MAX_BODY = 1024 * 1024
COMMAND_CACHE = 256  # jobs whose shared TaskInfo parts are kept; resource shapes likewise
# Run first by every task of a gang: AGORA_GANG_HOSTS ("addr:slots,...") written as an MPI /
# DeepSpeed hostfile ("addr slots=N" a line) in the sandbox, its path in AGORA_GANG_HOSTFILE.
HOSTFILE_PRELUDE = (
    'AGORA_GANG_HOSTFILE="${MESOS_SANDBOX:-$PWD}/hostfile"; export AGORA_GANG_HOSTFILE; '
    '( IFS=,; for h in $AGORA_GANG_HOSTS; do printf \'%s slots=%s\\n\' "${h%:*}" "${h##*:}"; done ) '
    '> "$AGORA_GANG_HOSTFILE"'
)


class BatchService(Service, Scheduler):
    name = "agora-batch"

    def __init__(
        self,
        master: str,
        work_dir: Path,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        roles: tuple[str, ...] = ("*",),
        framework_name: str = "agora-batch",
        gang_timeout: float = 30.0,
        preempt_queues: tuple[str, ...] = (),
        failover_timeout: float = 7 * 24 * 3600.0,
        flush_interval: float = 0.01,
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
        config: BatchConfig | None = None,
        usage_interval: float = 10.0,
        log_tail: int = DEFAULT_KEEP,
    ) -> None:
        Service.__init__(self)
        self.master = master
        # how the service reaches the master and agents (frameworks/client/options.py): TLS
        # (``ca`` pins the cluster CA; the certificate and key make the API and its webui_url
        # https), the principal with its secret or token, the agents' --authenticate-http credential
        self.conn = ServiceConnection.of(
            master, ca=ca, tls_cert=tls_cert, tls_key=tls_key, principal=principal, secret=secret, token=token,
            agent_http_credential=agent_http_credential, credentials=credentials, acls=acls,
        )
        self.auth = ApiAuth()  # who may call the API (--credentials/--acls), read at start
        self.auth_failures: dict[str, int] = {}
        self.config = config or BatchConfig()  # users, fair share, limits (--config batch.toml)
        self.usage_interval = usage_interval  # seconds between writes of the users' usage
        self.log_tail = log_tail  # bytes of each stream of an ended attempt kept in the store (0: none)
        self._tail_slots = asyncio.Semaphore(4)
        self.principal = principal
        self.work_dir = work_dir
        self.host = host
        self.advertise_host = advertised_host(host, advertise_host)  # webui_url: never 0.0.0.0
        self.port = port
        self.roles = roles
        self.framework_name = framework_name
        self.failover_timeout = failover_timeout
        self.flush_interval = flush_interval  # group commit: changes within it share one write
        self.now = now
        self.core = BatchCore(gang_timeout=gang_timeout, config=self.config, preempt_queues=preempt_queues)
        self.store = JobStoreRef(work_dir)
        self.driver: SchedulerDriver | None = None
        self._wake = asyncio.Event()
        self._dirty: set[int] = set()
        self._flush_lock = asyncio.Lock()
        self._persist = asyncio.Event()  # set when a job turns dirty: the flusher writes it
        # submitted jobs not yet durable -> the futures their submit answers wait on (``_submit``)
        self._unsaved: dict[int, asyncio.Future[None]] = {}
        self.submit_hold = 0.05  # the longest a submission waits to share the write of its launch
        self.rounds = 0  # scheduling rounds run
        self.flushes = 0  # store writes of task progress
        self._commands: dict[int, tuple[Variable, ...]] = {}
        self._mesos_resources: dict[tuple[Resources, str], tuple[Resource, ...]] = {}
        self._queued: list[Effect] = []  # effects from callbacks, run by the one scheduling loop
        self._runner: web.AppRunner | None = None
        self._http: aiohttp.ClientSession | None = None
        self._refused: asyncio.Task[None] | None = None
        self._agent_headers: dict[str, str] = {}
        self.url = ""
        self.metrics = BatchMetrics(self)  # /metrics; the wait-time histogram is observed in update()
        self.events = EventBus()
        self.notify_delay = 1.0  # first backoff between webhook tries (doubling, at most 60 s)
        self._notifying: set[int] = set()
        self.cluster_interval = 10.0  # seconds between reads of the cluster's agents (/state)
        self._cluster_at: float | None = None  # when the latest read started
        self.warm = WarmServices(self)  # service jobs: warm instances fed service tasks (warm.py)

    # --- lifecycle -------------------------------------------------------------------------------

    async def _start(self) -> None:
        store = self.store.open()
        for key, usage in (await asyncio.to_thread(store.load_usage)).items():
            self.core.usage.restore(key, usage)  # fair-share decay goes on from the stored usage
        for job in await asyncio.to_thread(store.load):
            self.core.restore(job)
        await self.warm.restore()
        self.auth = self.conn.api_auth()
        client_ssl, server_ssl = self.conn.client_ssl(), self.conn.server_ssl()
        self._http = self.conn.agent_session(client_ssl)
        self._agent_headers = self.conn.agent_headers()  # task logs from agents' /files (--authenticate-http)
        app = web.Application(
            client_max_size=MAX_BODY, middlewares=[api_auth.middleware(lambda: self.auth, self.now, self.auth_failures)]
        )
        app.add_routes(
            [
                web.get("/health", self._health),
                web.get("/", self._ui_jobs),
                web.get("/ui", self._ui_jobs),
                web.get("/ui/jobs/{id}", self._ui_job),
                web.get("/metrics", self._metrics),
                web.get("/api/v1/whoami", self._whoami),
                web.get("/api/v1/priority", self._priority),
                web.get("/api/v1/share", self._share),
                web.get("/api/v1/history", self._history),
                web.get("/api/v1/accounting", self._accounting),
                web.get("/api/v1/framework", self._framework),
                web.post("/api/v1/jobs", self._submit),
                web.get("/api/v1/jobs", self._list),
                web.get("/api/v1/jobs/{id}", self._show),
                web.post("/api/v1/jobs/{id}/cancel", self._cancel),
                web.post("/api/v1/jobs/{id}/hold", self._hold),
                web.post("/api/v1/jobs/{id}/release", self._release),
                web.post("/api/v1/jobs/{id}/requeue", self._requeue),
                web.post("/api/v1/jobs/{id}/update", self._update),
                web.get("/api/v1/events", self._events),
                web.post("/api/v1/jobs/{id}/tasks/{index}/kill", self._kill_task),
                web.get("/api/v1/jobs/{id}/logs", self._logs),
                web.get("/api/v1/jobs/{id}/results", self._results),
                web.get(CHANNEL_PATH, self.warm.channel),
            ]
        )
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, ssl_context=server_ssl)
        await site.start()
        self.port = int(self._runner.addresses[0][1])
        self.url = f"{'https' if server_ssl is not None else 'http'}://{self.advertise_host}:{self.port}"
        # The API's address rides in FrameworkInfo.webui_url, so `agora job` finds it via the master.
        fid = store.get_meta("framework_id")
        info = FrameworkInfo(
            user=getpass.getuser(),
            name=self.framework_name,
            principal=self.principal,
            id=FrameworkID(fid) if fid else None,
            failover_timeout=self.failover_timeout,
            webui_url=self.url,
            roles=self.roles,
            capabilities=tuple(
                Capability(c)
                for c in (
                    CapabilityType.MULTI_ROLE,
                    CapabilityType.REUSABLE_OFFERS,
                    CapabilityType.REVOCABLE_RESOURCES,
                    CapabilityType.GPU_RESOURCES,
                    CapabilityType.TASK_KILLING_STATE,
                )
            ),
        )
        self.driver = SchedulerDriver(info, self.conn.transport(client_ssl), scheduler=self)
        self._notify_unsent()
        await self.driver.start()
        self.spawn(self._loop(), name="batch-schedule")
        self.spawn(self._flusher(), name="batch-flush")
        self.spawn(self._usage_saver(), name="batch-usage")
        self.spawn(self.warm.flusher(), name="batch-service-tasks")
        if self.config.retention_days is not None:
            self.spawn(self._purger(self.config.retention_days), name="batch-purge")

    async def _stop(self) -> None:
        self.events.close()
        if self.driver is not None:
            await self.driver.stop()
        if self._runner is not None:
            # stop listening first: a service instance told we go away connects again at once,
            # and a connection accepted while the runner shuts down would be left open
            for site in list(self._runner.sites):
                await site.stop()
        with contextlib.suppress(Exception):
            await self.warm.close()
        if self._runner is not None:
            await self._runner.cleanup()
        if self._http is not None:
            await self._http.close()
        with contextlib.suppress(Exception):
            await self._flush()
        with contextlib.suppress(Exception):
            await self._save_usage()
        self.store.close()

    def reload(self) -> bool:
        """SIGHUP: read ``--credentials`` and ``--acls`` again; a file that fails keeps the old set."""
        try:
            self.auth = self.auth.reloaded()
        except ApiAuthError as exc:
            log.error("reload: keeping the previous credentials and ACLs: %s", exc)
            return False
        log.info("reload: credentials and ACLs re-read")
        return True

    async def _save_usage(self) -> None:
        """The users' usage, charged up to now, to the store (what a restart goes on from)."""
        self.core.usage.advance(self.now())
        await self.store.open().asave_usage(self.core.usage.usage)

    async def purge(self, retention_days: float) -> tuple[list[int], int]:
        """Forget finished jobs, and drop accounting rows, that ended more than ``retention_days``
        ago (the jobs a live job still depends on stay). The jobs' ids and the rows dropped."""
        cutoff = self.now() - retention_days * 86400.0
        gone = self.core.purge(cutoff)
        rows = await asyncio.to_thread(self.store.open().purge, gone, cutoff)
        if gone or rows:
            log.info("batch: purged %d finished job(s) and %d accounting row(s) older than %g days",
                     len(gone), rows, retention_days)
        return gone, rows

    async def _purger(self, retention_days: float) -> None:
        every = min(3600.0, retention_days * 86400.0 / 10)
        while True:
            try:
                await self.purge(retention_days)
            except Exception:
                log.exception("batch: purging old jobs failed; trying again later")
            await asyncio.sleep(every)

    async def _usage_saver(self) -> None:
        while True:
            await asyncio.sleep(self.usage_interval)
            try:
                await self._save_usage()
            except Exception:
                log.exception("batch: writing the users' usage failed; retrying")

    # --- driver callbacks ------------------------------------------------------------------------

    def error(self, driver: SchedulerDriver, message: str) -> None:
        """The master refused the subscription (401/403...): not transient, the service exits."""
        self._refused = stop_refused(self, message)

    def subscribed(self, driver: SchedulerDriver, framework_id: str, master_info: object) -> None:
        self.store.open().set_meta("framework_id", framework_id)
        # Every attempt we launched (or were launching when we crashed) is reconciled explicitly
        # by the driver right after this: a launch the master never got is answered LOST/UNKNOWN/
        # GONE and retried under a new id; a running or finished one is adopted.
        for task_id, agent_id in self.core.active_attempts():
            if task_id not in driver.tasks:
                driver.tasks[task_id] = KnownTask(task_id, agent_id, TaskState.TASK_STAGING)
        # a gang that was aborting or restarting when the service stopped, and every kill decided
        # before it (a preemption, a requeue, a cancel) whose task still runs: the kills go out again
        self._absorb(self.core.resume_kills())
        self._wake.set()

    def offers(self, driver: SchedulerDriver, offers: list[Offer]) -> None:
        self._wake.set()  # the driver's offer cache holds them (role, agent endpoint included)

    def offer_rescinded(self, driver: SchedulerDriver, offer_id: str) -> None:
        self._wake.set()

    def update(self, driver: SchedulerDriver, status: TaskStatus) -> None:
        exit_code = _exit_code(status)
        # what the attempt used: the agent's measurement, on its terminal status as labels
        used = from_labels(status.labels.labels) if status.labels is not None and is_terminal(status.state) else None
        if self.log_tail > 0 and is_terminal(status.state) and status.agent_id is not None:
            self._keep_tail(status.task_id.value, status.agent_id.value)
        effects = self.core.on_update(
            status.task_id.value,
            status.state,
            self.now(),
            agent_id=status.agent_id.value if status.agent_id else None,
            message=status.message,
            reason=status.reason.value if status.reason else None,
            exit_code=exit_code,
            cpu_seconds=used.cpu_seconds if used is not None else None,
            mem_peak_bytes=used.mem_peak_bytes if used is not None else None,
        )
        if status.state is TaskState.TASK_RUNNING:
            self._observe_start(status.task_id.value)
        self.warm.on_status(status.task_id.value, status.state, status.message)
        self._absorb(effects)
        self._wake.set()

    def _keep_tail(self, task_id: str, agent_id: str) -> None:
        """An attempt that ran ended: the last ``log_tail`` bytes of its stdout and stderr into the
        store, read from its sandbox off the callback (the agent reports the end once the logs
        are complete)."""
        task = self.core.find_task(task_id)
        cur = task.current if task is not None else None
        if task is None or cur is None or cur.task_id != task_id or cur.started_at is None:
            return  # never started: no sandbox output to keep
        with contextlib.suppress(RuntimeError):  # (stopping)
            self.spawn(self._copy_tail(task.job_id, task_id, agent_id), name=f"batch-tail-{task_id}")

    async def _copy_tail(self, job_id: int, task_id: str, agent_id: str) -> None:
        driver = self.driver
        agent = driver.offers.agent_urls.get(agent_id) if driver is not None else None
        if driver is None or driver.framework_id is None or agent is None or self._http is None:
            log.warning("batch: cannot keep the output of %s: its agent %s is not known here", task_id, agent_id)
            return
        box = f"{driver.framework_id}/{task_id}"
        async with self._tail_slots:  # many attempts ending at once: a few copies at a time
            try:
                # one listing tells which streams hold anything (a task that printed nothing costs
                # one request); a rotated stream has stdout.1 ... beside stdout
                async with self._http.get(f"{agent}/files/browse", params={"path": box},
                                          headers=self._agent_headers) as resp:
                    if resp.status == 404:
                        return  # no sandbox: nothing to keep
                    if resp.status != 200:
                        raise ValueError(f"HTTP {resp.status}: {(await resp.text())[:200]}")
                    listing = await resp.json()
                names = {str(e["path"]).rsplit("/", 1)[-1] for e in listing if int(e.get("size", 0)) > 0}
                tails: dict[str, KeptTail] = {}
                for stream in ("stdout", "stderr"):
                    if any(n == stream or n.startswith(stream + ".") for n in names):
                        tail = await self._read_tail(agent, f"{box}/{stream}")
                        if tail is not None and tail.data:
                            tails[stream] = tail
                if tails:
                    await self.store.open().asave_tails(job_id, task_id, tails)
            except (aiohttp.ClientError, TimeoutError, ValueError, KeyError, TypeError) as exc:
                log.warning("batch: cannot keep the output of %s from agent %s: %s", task_id, agent_id, exc)

    async def _read_tail(self, agent: str, path: str) -> KeptTail | None:
        """The last ``log_tail`` bytes of ``path`` in the agent's sandboxes (None: no such file)."""
        assert self._http is not None

        async def read(offset: int, length: int) -> tuple[int, bytes] | None:
            assert self._http is not None
            params = {"path": path, "offset": str(offset), "length": str(length)}
            async with self._http.get(f"{agent}/files/read", params=params, headers=self._agent_headers) as resp:
                if resp.status == 404:
                    return None
                if resp.status != 200:
                    raise ValueError(f"HTTP {resp.status}: {(await resp.text())[:200]}")
                d = await resp.json()
            return int(d["offset"]), str(d["data"]).encode("utf-8")

        end = await read(-1, 0)
        if end is None:
            return None
        size = end[0]
        start = at = window_start(size, self.log_tail)
        data = b""
        while at < size:
            got = await read(at, size - at)
            if got is None or not got[1]:
                break
            if got[0] > at and not data:  # rotated past the window's start: the tail starts later
                start = got[0]
            data += got[1]
            at = got[0] + len(got[1])
        return kept(start, data[-self.log_tail:] if len(data) > self.log_tail else data)

    def _observe_start(self, task_id: str) -> None:
        """A task's first attempt started: how long it waited since its job was submitted."""
        task = self.core.find_task(task_id)
        if task is None or task.attempt != 0 or task.current is None or task.current.started_at is None:
            return
        job = self.core.jobs[task.job_id]
        if len(task.history) == 1:
            self.metrics.wait.labels(job.spec.queue).observe(max(0.0, task.current.started_at - job.submitted_at))

    # --- the scheduling loop ---------------------------------------------------------------------

    async def _loop(self) -> None:
        while True:
            now = self.now()
            deadline = self.core.next_wakeup(now)
            timeout = None if deadline is None else max(0.0, deadline - now)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await self._wake.wait()
            self._wake.clear()
            try:
                await self._schedule_once()
            except TransportError as exc:
                log.warning("batch: master call failed: %s", exc)
            except Exception:
                # A bug, not an outcome: log it with its stimulus and keep scheduling.
                log.exception("batch: scheduling round failed")

    async def _flusher(self) -> None:
        """Write changed jobs, at most once per ``flush_interval``: what changes while a write is
        on its way, or within the interval after it, goes in the next one (one transaction and
        one fsync for many updates; the scheduling loop never waits for the disk)."""
        while True:
            await self._persist.wait()
            self._persist.clear()
            try:
                await self._flush()
            except Exception:
                log.exception("batch: writing the job store failed; retrying")
                self._persist.set()
            await asyncio.sleep(self.flush_interval)

    async def _schedule_once(self) -> None:
        driver = self.driver
        assert driver is not None
        self.rounds += 1
        now = self.now()
        effects, self._queued = self._queued, []
        effects += self.core.tick(now)
        if driver.connected and self.core.has_pending_work() and (
            self._cluster_at is None or now - self._cluster_at >= self.cluster_interval
        ):
            self._cluster_at = now
            with contextlib.suppress(RuntimeError):  # (stopping)
                self.spawn(self._read_cluster(), name="batch-cluster")
        planned = list(self._unsaved)  # submissions this round plans (later ones: the next round)
        views = self._offer_views() if driver.connected else []
        if driver.connected:
            effects += self.core.schedule(views, now)
        await self._execute(effects)
        if (views or not driver.connected) and any(i in self._unsaved for i in planned):
            # Submissions this round could not launch (a launch writes them with its attempt):
            # written now, so their answers do not wait. With no offer in view (a REVIVE on its
            # way) they wait for the round with the offers, at most ``submit_hold``.
            await self._flush()

    def _offer_views(self) -> list[OfferView]:
        driver = self.driver
        if driver is None:
            return []
        views = []
        for cached in driver.offers:
            # Offers whose resources are all in use stay in view (empty): the planner can
            # then say "all held resources in use" rather than "no offers".
            views.append(
                OfferView(
                    offer_id=cached.offer_id,
                    agent_id=cached.agent_id,
                    hostname=cached.hostname,
                    role=driver.role_of(cached),
                    resources=cached.available,
                    attributes={k: attribute_text(v) for k, v in cached.attributes.items()},
                    address=_host_of(driver.offers.agent_urls.get(cached.agent_id)),
                )
            )
        return views

    async def _read_cluster(self) -> None:
        """The cluster's agents from the master's ``/state`` (totals, attributes, revocable): what
        a waiting job is told it "cannot fit in". Read at most every ``cluster_interval`` while
        jobs wait; a failed read keeps the last answer (and no reason claims what it cannot know)."""
        driver, http = self.driver, self._http
        if driver is None or http is None or not isinstance(driver.transport, HttpTransport):
            return
        headers = {"Accept": "application/json"}
        if driver.transport.authorization:  # the master's credential, as the scheduler calls send it
            headers["Authorization"] = driver.transport.authorization
        try:
            async with http.get(f"{driver.transport.base}/state", headers=headers) as resp:
                if resp.status != 200:
                    log.debug("batch: reading the master's /state: HTTP %d", resp.status)
                    return
                state = await resp.json()
        except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
            log.debug("batch: reading the master's /state: %s", exc)
            return
        self.core.cluster = cluster_of(state)
        self._wake.set()

    async def _execute(self, effects: list[Effect]) -> None:
        driver = self.driver
        assert driver is not None
        launches: list[Launch] = []
        for e in effects:
            if isinstance(e, Persist):
                self._mark_dirty(e.job_ids)
            elif isinstance(e, JobEvent):
                self._publish(e)
            elif not driver.connected:
                if isinstance(e, Launch):  # never sent: back to PENDING (same id, nothing left)
                    self._absorb(self.core.launch_not_sent([t.task_id for t in e.tasks], self.now()))
                continue
            elif isinstance(e, Launch):
                launches.append(e)  # sent together with the launches next to it
                continue
            await self._launch_all(launches)
            launches = []
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
        await self._launch_all(launches)

    async def _launch_all(self, launches: list[Launch]) -> None:
        """ACCEPT on several offers at once (each on its own agent; one call each): a round waits
        for the slowest answer, not for the sum of them.

        Write-first: the LAUNCHING attempts are made durable (one flush for the whole round)
        before any ACCEPT leaves, so a crash right after the send can never bring the task back
        as PENDING under the same task id (a duplicate launch of an id the agent may run)."""
        if not launches:
            return
        self._mark_dirty(t.job_id for e in launches for t in e.tasks)
        try:
            await self._flush()
        except Exception:
            log.exception("batch: could not save launches; not sending them")
            back = self.core.launch_not_sent([t.task_id for e in launches for t in e.tasks], self.now())
            self._mark_dirty(i for b in back if isinstance(b, Persist) for i in b.job_ids)
            return
        if len(launches) == 1:
            await self._launch(launches[0])
        elif launches:
            results = await asyncio.gather(*(self._launch(e) for e in launches), return_exceptions=True)
            for r in results:
                if isinstance(r, BaseException):
                    raise r

    async def _launch(self, e: Launch) -> None:
        driver = self.driver
        assert driver is not None
        infos = [self._task_info(t, e.agent_id) for t in e.tasks]
        try:
            await driver.launch(e.offer_id, infos)
        except OfferCacheError as exc:
            # The offer changed between planning and sending (rescinded, regrown, declined).
            log.info("batch: launch on %s not sent: %s", e.offer_id, exc)
            back = self.core.launch_not_sent([t.task_id for t in e.tasks], self.now())
            self._mark_dirty(i for b in back if isinstance(b, Persist) for i in b.job_ids)
            self._wake.set()

    def _absorb(self, effects: list[Effect]) -> None:
        """Effects produced in a callback or an HTTP handler: the scheduling loop runs them, in
        order, before its next plan (one loop issues every call, so none race each other)."""
        for e in effects:
            if isinstance(e, Persist):
                self._mark_dirty(e.job_ids)
            elif isinstance(e, JobEvent):
                self._publish(e)
            else:
                self._queued.append(e)
        self._wake.set()

    def _publish(self, e: JobEvent) -> None:
        job = self.core.jobs.get(e.job_id)
        self.events.publish(e, job.spec.name if job is not None else "")
        if e.kind == "finished" and job is not None:
            self.warm.job_ended(job)
        if e.kind == "finished" and job is not None and job.spec.notify and not job.notified:
            self._notify(job)

    def _notify(self, job: JobRecord) -> None:
        """POST the job's final state to its ``notify`` URL (retried with backoff, in the
        background); once delivered the job is marked notified, so a restart does not resend."""
        if job.job_id in self._notifying or self._http is None or not job.spec.notify:
            return
        self._notifying.add(job.job_id)
        url, body = job.spec.notify, {"event": "finished", "job": job_summary(job)}
        http = self._http

        async def send() -> None:
            try:
                if await deliver(http, url, body, base_delay=self.notify_delay):
                    job.notified = True
                    self._mark_dirty((job.job_id,))
            finally:
                self._notifying.discard(job.job_id)

        with contextlib.suppress(RuntimeError):  # (stopping)
            self.spawn(send(), name=f"batch-notify-{job.job_id}")

    def _notify_unsent(self) -> None:
        for job in self.core.jobs.values():
            if job.spec.notify and not job.notified and job.state in JOB_TERMINAL:
                self._notify(job)

    def _mark_dirty(self, job_ids: Iterable[int]) -> None:
        self._dirty.update(job_ids)
        if self._dirty:
            self._persist.set()

    async def _flush(self) -> None:
        """Write changed jobs. A write interrupted by a stop still completes on its thread, and
        its ids stay dirty so the final flush in ``_stop`` writes them again: nothing is lost."""
        async with self._flush_lock:
            if not self._dirty:
                return
            ids = sorted(self._dirty)
            self._dirty.clear()
            jobs = [self.core.jobs[i] for i in ids if i in self.core.jobs]
            self.flushes += 1
            try:
                await asyncio.shield(self.store.open().awrite(jobs))
            except BaseException:
                self._dirty.update(ids)
                raise
            for i in ids:
                if (saved := self._unsaved.pop(i, None)) is not None and not saved.done():
                    saved.set_result(None)

    def _task_info(self, t: TaskLaunch, agent_id: str) -> TaskInfo:
        spec = t.spec
        shared = self._commands.get(t.job_id)
        if shared is None:
            # What every task of the job shares, built once per job (not once per task).
            env = dict(spec.env)
            env.update(AGORA_JOB_ID=str(t.job_id), AGORA_TASK_INDEX="", AGORA_ARRAY_SIZE=str(spec.count))
            variables = Environment.of(env).variables
            shared = tuple(v for v in variables if v.name != "AGORA_TASK_INDEX")
            if len(self._commands) >= COMMAND_CACHE:
                del self._commands[next(iter(self._commands))]
            self._commands[t.job_id] = shared
        own = [Variable(name="AGORA_TASK_INDEX", value=str(t.index), type=VariableType.VALUE)]
        own += [Variable(name=k, value=v, type=VariableType.VALUE) for k, v in t.env]
        env_info = Environment((*shared, *own))
        if spec.gang > 0:
            # The gang's hostfile (MPI, DeepSpeed) in the sandbox, then the command itself.
            if spec.shell is not None:
                command = CommandInfo(value=f"{HOSTFILE_PRELUDE}\n{spec.shell}", shell=True, environment=env_info)
            else:
                argv = ("/bin/sh", "-c", f'{HOSTFILE_PRELUDE}\nexec "$@"', spec.name or "agora-gang", *spec.argv)
                command = CommandInfo(value="/bin/sh", arguments=argv, shell=False, environment=env_info)
        elif spec.shell is not None:
            command = CommandInfo(value=spec.shell, shell=True, environment=env_info)
        else:
            command = CommandInfo(value=spec.argv[0], arguments=spec.argv, shell=False, environment=env_info)
        key = (t.resources, spec.queue)
        resources = self._mesos_resources.get(key)
        if resources is None:
            resources = t.resources.to_mesos(allocation_role=spec.queue)
            if len(self._mesos_resources) >= COMMAND_CACHE:
                del self._mesos_resources[next(iter(self._mesos_resources))]
            self._mesos_resources[key] = resources
        if t.run_as is not None:  # the owner's OS account (the agent switches to it)
            command = attrs.evolve(command, user=t.run_as)
        kill_policy = None
        if spec.grace is not None:  # SIGTERM, then SIGKILL this long after (a kill, a preemption)
            kill_policy = KillPolicy(grace_period=DurationInfo(int(spec.grace * 1e9)))
        info = TaskInfo(
            name=t.name, task_id=TaskID(t.task_id), resources=resources, command=command, kill_policy=kill_policy
        )
        return self.warm.task_info(t, command, info) if spec.service else info

    # --- HTTP API --------------------------------------------------------------------------------

    async def _health(self, request: web.Request) -> web.Response:
        return web.Response(status=200)

    async def _metrics(self, request: web.Request) -> web.Response:
        return web.Response(body=self.metrics.render(), headers={"Content-Type": metrics_content_type})

    def _master_ui(self) -> str | None:
        """The master's web UI, linked from every page (None for a ZooKeeper address)."""
        try:
            return None if self.master.startswith("zk://") else base_url(self.master, "https" if self.conn.ca else "http")
        except ValueError:
            return None

    async def _ui_jobs(self, request: web.Request) -> web.Response:
        user = request.query.get("user") or None
        state = (request.query.get("state") or "").upper() or None
        jobs = [
            job_summary(j) for j in self.core.jobs.values()
            if (user is None or (j.user or "") == user) and (state is None or j.state.value == state)
        ]
        return _html(pages.jobs_page(jobs, self._share_rows(), user=user, state=state, master=self._master_ui(),
                                     principal=principal_of(request)))

    async def _ui_job(self, request: web.Request) -> web.Response:
        job = self._job(request)
        if isinstance(job, web.Response):
            return _html(webui.error_page(pages.SERVICE, 404, f"no job {request.match_info['id']}"), 404)
        stream = request.query.get("stream", "stdout")
        task: int | None = None
        if "task" in request.query:
            try:
                task = int(request.query["task"])
            except ValueError:
                return _html(webui.error_page(pages.SERVICE, 400, "task must be an integer"), 400)
        if stream not in ("stdout", "stderr") or (task is not None and not 0 <= task < len(job.tasks)):
            return _html(webui.error_page(pages.SERVICE, 400, f"no such log: task {task}, {stream}"), 400)
        return _html(pages.job_page(job_detail(job), task=task, stream=stream, master=self._master_ui(),
                                    principal=principal_of(request)))

    async def _whoami(self, request: web.Request) -> web.Response:
        return _reply(request, api_auth.whoami(request, self.auth))

    def _denied(self, request: web.Request, job: JobRecord, action: Action, what: str) -> web.Response | None:
        """``403`` unless the request's principal owns ``job`` or an ACL lets it (``action``)."""
        problem = job_problem(self.auth.acls, action, principal_of(request), job.user, what)
        return None if problem is None else _error(request, 403, problem)

    async def _priority(self, request: web.Request) -> web.Response:
        """Every pending job's multifactor priority and its factors (``agora job priority``)."""
        factors = self.core.priorities(self.now())
        weights = attrs.asdict(self.config.fairshare)
        rows = []
        for job_id, f in sorted(factors.items(), key=lambda kv: (-kv[1].total, kv[0])):
            job = self.core.jobs[job_id]
            if job.state is not JobState.PENDING and not job.pending:
                continue
            rows.append({
                "id": job_id, "name": job.spec.name, "user": job.user, "queue": job.spec.queue,
                "priority": f.total, "fairshare": f.fairshare, "job_priority": f.priority, "age": f.age,
                "size": f.size, "nice": job.spec.priority,
            })
        return _reply(request, {"jobs": rows, "weights": weights})

    async def _history(self, request: web.Request) -> web.Response:
        """Jobs as ``sacct`` lists them, newest first: ``?user=&queue=&state=S1,S2&since=&until=
        &limit=`` (times in Unix seconds; a job counts when it overlaps the window)."""
        try:
            q = history_query(request)
        except ValueError as exc:
            return _error(request, 400, str(exc))
        states = set(q.states)
        if bad := states - {s.value for s in JobState}:
            return _error(request, 400, f"state: unknown {', '.join(sorted(bad))} (states: "
                          f"{', '.join(s.value for s in JobState)})")
        rows = []
        for job in self.core.jobs.values():
            if job.periodic or (q.user is not None and (job.user or "") != q.user):
                continue
            if (q.queue is not None and job.spec.queue != q.queue) or (states and job.state.value not in states):
                continue
            if q.until is not None and job.submitted_at >= q.until:
                continue
            if q.since is not None and job.ended_at is not None and job.ended_at < q.since:
                continue
            rows.append(history_row(job))
        rows.sort(key=lambda r: (r["ended_at"] or r["started_at"] or r["submitted_at"], r["id"]), reverse=True)
        return _reply(request, {"jobs": rows[: q.limit]})

    async def _accounting(self, request: web.Request) -> web.Response:
        """Every attempt that ran (``sacct``'s steps), newest first, from the accounting table:
        ``?user=&queue=&state=TASK_FAILED,...&since=&until=&job=&limit=``."""
        try:
            q = history_query(request)
            job_id = int(request.query["job"]) if "job" in request.query else None
        except ValueError as exc:
            return _error(request, 400, str(exc))
        rows = await asyncio.to_thread(self.store.open().accounting, attrs.evolve(q, job_id=job_id))
        return _reply(request, {"attempts": rows})

    def _share_rows(self) -> list[dict[str, Any]]:
        return [
            {
                "queue": s.queue, "user": s.user, "shares": s.shares, "norm_shares": s.norm_shares,
                "usage": s.usage.billing, "cpu_seconds": s.usage.cpu, "gpu_seconds": s.usage.gpu,
                "mem_mb_seconds": s.usage.mem, "norm_usage": s.norm_usage, "fairshare": s.factor,
            }
            for s in sorted(self.core.shares(self.now()).values(), key=lambda s: (s.queue, s.user))
        ]

    async def _share(self, request: web.Request) -> web.Response:
        """Every (queue, user) with live jobs: decayed usage, shares, fair-share factor (``agora share``)."""
        rows = self._share_rows()
        return _reply(request, {"users": rows, "half_life": self.config.fairshare.half_life,
                                "limits": self.config.limits.as_dict()})

    async def _framework(self, request: web.Request) -> web.Response:
        driver = self.driver
        counts: dict[str, int] = {}
        for job in self.core.jobs.values():
            counts[job.state.value] = counts.get(job.state.value, 0) + 1
        return _reply(
            request,
            {
                "framework_id": driver.framework_id if driver else None,
                "connected": bool(driver and driver.connected),
                "master": self.master,
                "jobs": counts,
                "offers": len(driver.offers) if driver else 0,
                "rounds": self.rounds,
                "flushes": self.flushes,
            },
        )

    def _queue_error(self, queue: str) -> str | None:
        if queue in self.roles:
            return None
        # no offer would ever come for it: refuse now, not wait forever
        served = ", ".join(repr(r) for r in self.roles)
        return (f"queue {queue!r} is not served by {self.framework_name}: "
                f"it subscribes with roles {served} (start it with --roles, or agora up --roles)")

    async def _submit(self, request: web.Request) -> web.Response:
        """One spec, or ``{"jobs": [spec, ...]}`` (a job file): all or none, where an ``after``
        entry ``{"name": N, "kind": K}`` names an earlier job of the same list."""
        try:
            body = await _read(request)
            claimed = body.pop("user", None) if isinstance(body, dict) else None
            inputs = body.pop("inputs", None) if isinstance(body, dict) else None
            if isinstance(body, dict) and "jobs" in body:
                specs = jobs_from_list(body["jobs"])
            else:
                specs = [spec_from_dict(body)]
            if inputs is not None and not (len(specs) == 1 and specs[0].service and "jobs" not in body):
                raise SpecError("inputs: only a single service job (service: true) takes inputs")
            if any(s.service for s in specs):
                if len(specs) != 1 or "jobs" in body:
                    raise SpecError("service: a service job is submitted alone, with its inputs")
                inputs = inputs_of({"inputs": inputs})
        except SpecError as exc:
            return _error(request, 400, str(exc))
        principal = principal_of(request)
        try:
            # the authenticated principal, never the body's word; without authentication the
            # claimed user (the body's, else the CLI's X-Agora-User)
            owner = job_owner(principal, claimed) or requester(request)
        except OwnerError as exc:
            return _error(request, exc.status, str(exc))
        if any(s.gpus != int(s.gpus) for s in specs) and not self.core.cluster:
            await self._read_cluster()  # whether any agent shares GPUs
        for n, spec in enumerate(specs):
            which = "" if len(specs) == 1 else f"job {n + 1} ({spec.name}): "
            err = self._queue_error(spec.queue) or gpu_sharing_error(spec, self.core.cluster)
            if err:
                return _error(request, 400, which + err)
            if (problem := submit_problem(self.auth.acls, principal, spec.queue)) is not None:
                return _error(request, 403, which + problem)
            if (problem := priority_problem(self.auth.acls, principal, owner, 0, spec.priority)) is not None:
                return _error(request, 403, which + problem)
            if (refused := self.core.admission(spec, owner)) is not None:
                return _error(request, 429, f"{which}refused by the limits: {refused}")
        run_as = self.config.users.run_as(owner, verified=principal is not None)
        try:
            ids, effects = self.core.submit_many(specs, self.now(), owner, run_as)
        except BatchError as exc:
            return _error(request, 400, str(exc))
        if inputs is not None:
            self.warm.register(self.core.jobs[ids[0]], inputs)
            # Durable before we answer: the ids we return are never lost (one transaction for all).
            await self.store.open().awrite([self.core.jobs[i] for i in ids])
            await self.warm.submitted(self.core.jobs[ids[0]], inputs)
            self._absorb([e for e in effects if not isinstance(e, Persist)])
        else:
            await self._save_submitted(ids, effects)
        self._wake.set()
        if len(ids) == 1 and not (isinstance(body, dict) and "jobs" in body):
            return _reply(request, {"id": ids[0], "state": self.core.jobs[ids[0]].state.value}, status=201)
        return _reply(
            request, {"ids": ids, "jobs": [job_summary(self.core.jobs[i]) for i in ids]}, status=201
        )

    async def _save_submitted(self, ids: list[int], effects: list[Effect]) -> None:
        """Make the submitted jobs durable before the answer (the ids we return are never lost),
        sharing one write with their launch: the jobs turn dirty without waking the flusher, the
        scheduling round that places them writes them together with their LAUNCHING attempts
        (``_launch_all``: one transaction, before the ACCEPT leaves), or the round that cannot
        place them writes them as they are. Either way the answer follows the commit, and so does
        the ACCEPT: one durable write per job on the way to its first task, not two. All the jobs
        of a submission turn dirty at once, so one transaction holds them all (all or none).
        Their events are published after the write (never a job that a crash could take back)."""
        loop = asyncio.get_running_loop()
        waits = []
        for i in ids:
            self._unsaved[i] = fut = loop.create_future()
            waits.append(fut)
        self._dirty.update(ids)
        self._absorb([e for e in effects if not isinstance(e, (Persist, JobEvent))])  # a REVIVE
        try:
            try:
                async with asyncio.timeout(self.submit_hold):
                    await asyncio.gather(*waits)
            except TimeoutError:  # no round could take them yet (no offers, a call under way)
                await self._flush()
        except BaseException:
            self._persist.set()  # a failed write or a cancelled answer: the flusher writes them
            raise
        finally:
            for i in ids:
                self._unsaved.pop(i, None)
        self._absorb([e for e in effects if isinstance(e, JobEvent)])

    async def _hold(self, request: web.Request) -> web.Response:
        return await self._change(request, lambda job, who: self.core.hold(job.job_id, self.now(), who))

    async def _release(self, request: web.Request) -> web.Response:
        return await self._change(request, lambda job, who: self.core.release(job.job_id, self.now(), who))

    async def _requeue(self, request: web.Request) -> web.Response:
        return await self._change(request, lambda job, who: self.core.requeue(job.job_id, self.now(), who))

    async def _update(self, request: web.Request) -> web.Response:
        try:
            changes = await _read(request)
        except SpecError as exc:
            return _error(request, 400, str(exc))
        if not isinstance(changes, dict):
            return _error(request, 400, "update: expected an object of fields to change")
        queue = changes.get("queue")
        if isinstance(queue, str) and (err := self._queue_error(queue)):
            return _error(request, 400, f"queue: {err}")

        def apply(job: JobRecord, who: str) -> list[Effect]:
            new = changes.get("priority")
            if isinstance(new, int) and (
                problem := priority_problem(self.auth.acls, principal_of(request), job.user, job.spec.priority, new)
            ):
                raise _Forbidden(problem)
            effects = self.core.update(job.job_id, changes, self.now(), who)
            self._commands.pop(job.job_id, None)  # its tasks' shared environment (count) changed
            return effects

        return await self._change(request, apply)

    async def _change(
        self, request: web.Request, act: Callable[[JobRecord, str], list[Effect]]
    ) -> web.Response:
        """Run one of hold/release/update/requeue for the request's job and principal; a refusal
        (409, or 400 for a bad field) changes nothing. Written before the answer."""
        job = self._job(request)
        if isinstance(job, web.Response):
            return job
        if (denied := self._denied(request, job, Action.MANAGE_JOBS, "change")) is not None:
            return denied
        try:
            effects = act(job, requester(request))
        except _Forbidden as exc:
            return _error(request, 403, str(exc))
        except SpecError as exc:
            return _error(request, 400, str(exc))
        except BatchError as exc:
            return _error(request, 409, str(exc))
        self._mark_dirty((job.job_id,))
        await self._flush()
        self._absorb(effects)
        return _reply(request, job_summary(job))

    async def _events(self, request: web.Request) -> web.StreamResponse:
        """The job events as they happen, one JSON object per line (``?since=N``: first the
        held events numbered after N; ``?jobs=1,2``: only those jobs)."""
        since: int | None = None
        only: set[int] | None = None
        try:
            if "since" in request.query:
                since = int(request.query["since"])
            if request.query.get("jobs"):
                only = {int(x) for x in request.query["jobs"].split(",") if x}
        except ValueError:
            return _error(request, 400, "since and jobs must be integers")
        resp = web.StreamResponse(headers={"Content-Type": "application/x-ndjson", "Cache-Control": "no-cache"})
        await resp.prepare(request)
        try:
            async for d in self.events.follow(since):
                if only is None or d.get("job_id") in only or d["kind"] == "heartbeat":
                    await resp.write(json.dumps(d).encode() + b"\n")
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        return resp

    async def _list(self, request: web.Request) -> web.Response:
        want = request.query.get("state")
        periodic = request.query.get("periodic", "") in ("1", "true")
        if want is not None and want.upper() not in JobState.__members__:
            return _error(request, 400, f"state: unknown job state {want!r} (one of {', '.join(JobState.__members__)})")
        user = request.query.get("user")
        jobs = [
            job_summary(j)
            for j in self.core.jobs.values()
            if (want is None or j.state.value == want.upper()) and (not periodic or j.periodic)
            and (user is None or (j.user or "") == user)
        ]
        if request.query.get("start", "") in ("1", "true"):
            starts = self.core.expected_starts(self._offer_views(), self.now())
            for d in jobs:
                if d["id"] in starts:
                    d["expected_start"] = starts[d["id"]]
        return _reply(request, {"jobs": jobs})

    async def _show(self, request: web.Request) -> web.Response:
        """The job with every task; ``?summary=1``: without tasks (O(1), for pollers);
        ``?task=I``: with task ``I`` only."""
        job = self._job(request)
        if isinstance(job, web.Response):
            return job
        if request.query.get("summary", "") in ("1", "true"):
            return _reply(request, job_summary(job))
        if "task" in request.query:
            try:
                index = int(request.query["task"])
            except ValueError:
                return _error(request, 400, "task must be an integer")
            if not 0 <= index < len(job.tasks):
                return _error(request, 404, f"job {job.job_id} has no task {index}")
            return _reply(request, job_detail(job, [job.tasks[index]]))
        detail = job_detail(job)
        if (service := await self.warm.summary(job)) is not None:
            detail["service"] = service
        return _reply(request, detail)

    async def _results(self, request: web.Request) -> web.Response:
        """A service job's service tasks with their results, ``?offset=I&limit=N&state=S``
        (``next``: the offset of the next page, when there may be one)."""
        job = self._job(request)
        if isinstance(job, web.Response):
            return job
        if not job.spec.service:
            return _error(request, 400, f"job {job.job_id} is not a service job")
        if (denied := self._denied(request, job, Action.VIEW_JOB_LOGS, "read the results of")) is not None:
            return denied
        try:
            offset = int(request.query.get("offset", "0"))
            limit = int(request.query.get("limit", str(RESULTS_PAGE)))
        except ValueError:
            return _error(request, 400, "offset and limit must be integers")
        if offset < 0 or not 0 < limit <= 100 * RESULTS_PAGE:
            return _error(request, 400, f"offset must be >= 0 and limit within 1..{100 * RESULTS_PAGE}")
        state = request.query.get("state")
        if state is not None:
            state = state.upper()
            if state not in {s.value for s in ServiceTaskState}:
                return _error(request, 400, f"state: one of {', '.join(s.value for s in ServiceTaskState)}")
        return _reply(request, await self.warm.results(job, offset, limit, state))

    async def _cancel(self, request: web.Request) -> web.Response:
        job = self._job(request)
        if isinstance(job, web.Response):
            return job
        if (denied := self._denied(request, job, Action.MANAGE_JOBS, "cancel")) is not None:
            return denied
        try:
            effects = self.core.cancel(job.job_id, self.now(), requester(request))
        except BatchError as exc:
            return _error(request, 409, str(exc))
        self._absorb(effects)
        self._wake.set()
        return _reply(request, job_summary(job))

    async def _kill_task(self, request: web.Request) -> web.Response:
        job = self._job(request)
        if isinstance(job, web.Response):
            return job
        if (denied := self._denied(request, job, Action.MANAGE_JOBS, "kill a task of")) is not None:
            return denied
        index = request.match_info["index"]
        task = job.tasks[int(index)] if index.isdigit() and int(index) < len(job.tasks) else None
        if task is None:
            return _error(request, 404, f"job {job.job_id} has no task {index}")
        cur = task.current
        if task.phase not in ACTIVE or cur is None:
            return _error(request, 409, f"task {index} of job {job.job_id} is not running ({task.phase.value})")
        self._absorb([Kill(cur.task_id, cur.agent_id, "killed by the operator")])
        return _reply(request, {"job": job.job_id, "task": task.index, "task_id": cur.task_id})

    async def _logs(self, request: web.Request) -> web.Response:
        job = self._job(request)
        if isinstance(job, web.Response):
            return job
        if (denied := self._denied(request, job, Action.VIEW_JOB_LOGS, "read the logs of")) is not None:
            return denied
        try:
            index = int(request.query.get("task", "0"))
            offset = int(request.query.get("offset", "0"))
            length = int(request.query.get("length", str(64 * 1024)))
        except ValueError:
            return _error(request, 400, "task, offset and length must be integers")
        stream = request.query.get("stream", "stdout")
        if stream not in ("stdout", "stderr"):
            return _error(request, 400, "stream must be stdout or stderr")
        if not 0 <= index < len(job.tasks):
            return _error(request, 404, f"job {job.job_id} has no task {index}")
        attempt = job.tasks[index].current
        if attempt is None or attempt.agent_id is None:
            return _error(request, 404, f"task {index} of job {job.job_id} has not started")
        head = {"task": index, "attempt": attempt.attempt, "stream": stream}

        async def from_kept(status: int, why: str) -> web.Response:
            """The sandbox (or its agent) is gone: the tail kept when the attempt ended, if any."""
            tail = await asyncio.to_thread(self.store.open().tail, attempt.task_id, stream)
            if tail is None:
                return _error(request, status, why)
            at, data = logtail.read(tail, offset, length)
            window = {"from": tail.start, "to": tail.size, "note": logtail.note(stream, tail)}
            return _reply(request, {**head, "data": data.decode("utf-8", "replace"), "offset": at, "kept": window})

        driver = self.driver
        agent = driver.offers.agent_urls.get(attempt.agent_id) if driver is not None else None
        if agent is None or driver is None or driver.framework_id is None or self._http is None:
            return await from_kept(503, f"agent {attempt.agent_id} is not reachable from here")
        path = f"{driver.framework_id}/{attempt.task_id}/{stream}"
        try:
            async with self._http.get(
                f"{agent}/files/read", params={"path": path, "offset": str(offset), "length": str(length)},
                headers=self._agent_headers,
            ) as resp:
                if resp.status == 404:
                    return await from_kept(404, await resp.text())
                if resp.status != 200:
                    return _error(request, resp.status, await resp.text())
                data = await resp.json()
        except (aiohttp.ClientError, TimeoutError) as exc:
            return await from_kept(503, f"agent {attempt.agent_id}: {exc}")
        return _reply(request, {**head, **data})

    def _job(self, request: web.Request) -> JobRecord | web.Response:
        try:
            return self.core.job(int(request.match_info["id"]))
        except (ValueError, BatchError):
            return _error(request, 404, f"no job {request.match_info['id']}")


class JobStoreRef:
    """Opens the store lazily in the work dir (so constructing the service does no I/O)."""

    def __init__(self, work_dir: Path) -> None:
        self.path = work_dir / "batch" / "jobs.db"
        self._store: JobStore | None = None

    def open(self) -> JobStore:
        if self._store is None:
            self._store = JobStore(self.path)
        return self._store

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None


def job_exit_code(job: JobRecord) -> int | None:
    """The job's exit code: an aborted gang's failing rank's, else the highest of its tasks' last
    attempts (0 for a job whose tasks all finished), None while no task has ended."""
    if job.exit_code is not None:
        return job.exit_code
    last = [t.history[-1].exit_code for t in job.tasks if t.history and t.history[-1].exit_code is not None]
    return max(last) if last else None


def job_summary(job: JobRecord) -> dict[str, Any]:
    return {
        "id": job.job_id,
        "name": job.spec.name,
        "user": job.user,
        "run_as": job.run_as,
        "state": job.state.value,
        "queue": job.spec.queue,
        "priority": job.spec.priority,
        "count": job.spec.count,
        "gang": job.spec.gang,
        "gang_policy": job.spec.policy.value if job.spec.gang > 0 else None,
        "gang_restarts": job.gang_restarts,
        "exit_code": job_exit_code(job),
        "tasks": job.counts(),
        "submitted_at": job.submitted_at,
        "started_at": job.started_at,
        "ended_at": job.ended_at,
        "reason": job.reason,
        "held": job.held,
        **({"parent_id": job.parent_id, "due_at": job.due_at} if job.parent_id is not None else {}),
        **(
            {"schedule": job.spec.schedule, "concurrency": job.spec.concurrency.value, "next_run": job.next_run,
             "runs": len(job.runs), "last_run_id": job.runs[-1] if job.runs else None}
            if job.periodic else {}
        ),
    }


def history_query(request: web.Request) -> AccountingQuery:
    """The filters ``/api/v1/history`` and ``/api/v1/accounting`` share (``ValueError`` naming a bad one)."""
    q = request.query

    def number(key: str) -> float | None:
        if key not in q:
            return None
        try:
            value = float(q[key])
        except ValueError:
            raise ValueError(f"{key}: expected Unix seconds, got {q[key]!r}") from None
        if value != value:
            raise ValueError(f"{key}: expected Unix seconds, got {q[key]!r}")
        return value

    try:
        limit = int(q.get("limit", "1000"))
    except ValueError:
        raise ValueError(f"limit: expected a whole number, got {q['limit']!r}") from None
    if not 1 <= limit <= 100_000:
        raise ValueError("limit: expected 1..100000")
    states = tuple(s.strip().upper() for s in q.get("state", "").split(",") if s.strip())
    return AccountingQuery(user=q.get("user"), queue=q.get("queue"), states=states, since=number("since"),
                           until=number("until"), limit=limit)


def history_row(job: JobRecord) -> dict[str, Any]:
    """One job as ``agora job history`` prints it: its summary, its exit code (an aborted gang's
    failing rank's, else the highest of its tasks' last attempts), elapsed time, and what its
    attempts used (CPU seconds summed, the highest memory peak)."""
    attempts = [a for t in job.tasks for a in t.history]
    cpu = [a.cpu_seconds for a in attempts if a.cpu_seconds is not None]
    peak = [a.mem_peak_bytes for a in attempts if a.mem_peak_bytes is not None]
    start, end = job.started_at, job.ended_at
    return {
        **job_summary(job),
        "elapsed": None if start is None or end is None else max(0.0, end - start),
        "attempts": len(attempts),
        "cpu_seconds": round(sum(cpu), 3) if cpu else None,
        "mem_peak_bytes": max(peak) if peak else None,
    }


def job_detail(job: JobRecord, tasks: Sequence[TaskRecord] | None = None) -> dict[str, Any]:
    """The summary, the spec and ``tasks`` (default: all of them) with their attempts."""
    out = job_summary(job)
    out["spec"] = spec_to_dict(job.spec)
    out["changes"] = list(job.changes)
    out["task_list"] = [
        {
            "index": t.index,
            "phase": t.phase.value,
            "attempt": t.attempt,
            "failures": t.failures,
            "history": [attempt_to_dict(a) for a in t.history],
        }
        for t in (job.tasks if tasks is None else tasks)
    ]
    return out


class _Forbidden(Exception):
    """A change the request's principal may not make (``403``, nothing changed)."""


def requester(request: web.Request) -> str:
    """Who makes ``request``: the authenticated principal when the service authenticates (the
    one ``frameworks.client.api_auth``'s middleware sets), else the user name the client
    sends in ``X-Agora-User`` (the CLI sends the local user; not verified), else "anonymous"."""
    principal = principal_of(request)
    if principal:
        return principal
    claimed = request.headers.get("X-Agora-User", "").strip()
    if claimed and len(claimed) <= 64 and claimed.isprintable():
        return claimed
    return "anonymous"


def jobs_from_list(raw: Any) -> list[JobSpec]:
    """The specs of a multi-job submission; ``after: [{"name": N, ...}]`` names an earlier job
    of the list, becoming ``job_id = -k`` (the k-th, 1-based) for ``BatchCore.submit_many``."""
    if not isinstance(raw, list) or not raw:
        raise SpecError("jobs: expected a non-empty list of jobs")
    names: dict[str, int] = {}
    specs = []
    for n, d in enumerate(raw):
        if not isinstance(d, dict):
            raise SpecError(f"jobs[{n}]: expected an object")
        after = []
        for i, dep in enumerate(d.get("after") or ()):
            if isinstance(dep, dict) and "name" in dep:
                k = names.get(dep["name"])
                if k is None:
                    raise SpecError(f"jobs[{n}].after[{i}]: no earlier job named {dep['name']!r} in the file")
                dep = {"job_id": -k, "kind": dep.get("kind", "success")}
            after.append(dep)
        try:
            spec = spec_from_dict({**d, "after": after})
        except SpecError as exc:
            raise SpecError(f"jobs[{n}].{exc}") from exc
        if spec.name in names:
            raise SpecError(f"jobs[{n}].name: {spec.name!r} is used by two jobs of the file")
        names[spec.name] = n + 1
        specs.append(spec)
    return specs


def cluster_of(state: Any) -> tuple[AgentCapacity, ...]:
    """The active agents of a master ``/state`` as ``AgentCapacity`` (scalar totals, attributes
    as text, revocable resources)."""
    out = []
    for a in (state.get("slaves") if isinstance(state, dict) else None) or []:
        if not isinstance(a, dict) or not a.get("active", True) or a.get("draining"):
            continue
        out.append(
            AgentCapacity(
                str(a.get("id", "")),
                _scalars(a.get("resources")),
                {k: attribute_text(v) for k, v in (a.get("attributes") or {}).items()},
                _scalars(a.get("revocable_resources")),
                _port_count((a.get("resources") or {}).get("ports") if isinstance(a.get("resources"), dict) else None),
            )
        )
    return tuple(out)


def _port_count(text: Any) -> int:
    """How many ports ``/state`` shows an agent with: ``"[31000-32000]"`` is 1001."""
    if not isinstance(text, str) or not text.strip():
        return 0
    try:
        return port_count(Resources.parse(f"ports:{text.strip()}"))
    except ValueError:
        return 0


def _scalars(d: Any) -> dict[str, float]:
    if not isinstance(d, dict):
        return {}
    return {k: float(v) for k, v in d.items() if isinstance(v, int | float) and not isinstance(v, bool)}


def _host_of(url: str | None) -> str:
    """The host part of an agent's URL (``http://127.0.0.1:5051`` -> ``127.0.0.1``): where its
    tasks are reached; "" when unknown (the offer's hostname is used then)."""
    if not url:
        return ""
    try:
        return urllib.parse.urlsplit(url).hostname or ""
    except ValueError:
        return ""


def _exit_code(status: TaskStatus) -> int | None:
    """Exit code from the status: Agora agents put ``exit_code=N`` in a label and the message."""
    if status.labels is not None:
        for label in status.labels.labels:
            if label.key == "exit_code" and label.value is not None:
                with contextlib.suppress(ValueError):
                    return int(label.value)
    msg = status.message or ""
    marker = "exit code "
    if marker in msg:
        tail = msg.split(marker, 1)[1].split()[0].rstrip(".,;)")
        with contextlib.suppress(ValueError):
            return int(tail)
    if status.state.value == "TASK_FINISHED":
        return 0
    return None


async def _read(request: web.Request) -> Any:
    raw = await request.read()
    ctype = request.content_type
    try:
        if ctype == MSGPACK:
            return msgpack.unpackb(raw, raw=False, strict_map_key=True)
        return loads_json(raw or b"{}")  # strict: every string it gives encodes
    except (ValueError, msgpack.UnpackException) as exc:
        raise SpecError(f"body is not valid {ctype or JSON}: {exc}") from exc


def _wants_msgpack(request: web.Request) -> bool:
    return MSGPACK in request.headers.get("Accept", "")


def _reply(request: web.Request, body: Any, status: int = 200) -> web.Response:
    if _wants_msgpack(request):
        return web.Response(body=msgpack.packb(body, use_bin_type=True), status=status, content_type=MSGPACK)
    return web.json_response(body, status=status)


def _html(markup: str, status: int = 200) -> web.Response:
    return web.Response(text=markup, status=status, content_type="text/html")


def _error(request: web.Request, status: int, message: str) -> web.Response:
    return _reply(request, {"error": message}, status=status)

