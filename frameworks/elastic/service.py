"""The elastic framework service: a scheduler on the client library, one in-process coordinator
per job, worker tasks launched through the master, a durable job store and an HTTP API.

Shell only: every decision is ``ElasticCore``'s (``service_core.py``). Driver callbacks and HTTP
requests become core calls; one loop (woken by offers, updates, requests, and a tick that polls
the coordinators' progress) runs the scheduling round and executes the effects in order:
start/stop coordinators, ACCEPT/LAUNCH worker tasks (persisted before they are sent), KILL,
REQUEST (the standing demand), DECLINE, and job-file writes. It runs on the framework host
(``frameworks/kit/host.py``: connection, driver, HTTP server, the loop, the master calls); its
HTTP API's handlers are ``api.py``.

Workers get ``AGORA_ELASTIC_COORDINATOR``, ``AGORA_ELASTIC_WORKER_ID`` (= the task id) and
``AGORA_ELASTIC_JOB`` (plus ``AGORA_ELASTIC_DATASET``, ``AGORA_ELASTIC_NUM_SHARDS``) in their environment (plus ``PYTHONPATH`` = this checkout and
``OMP_NUM_THREADS=1`` unless the spec sets them); a ``{python}`` argument in the worker command is
replaced by this interpreter.

A restart re-attaches: the framework id is kept in the work dir (failover under the same id, the
master keeps the tasks for ``failover_timeout``), the coordinators come back on their old ports
from their checkpoints, and the known workers are reconciled.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from frameworks.client.api_auth import ApiAuth
from frameworks.client.driver import KnownTask, SchedulerDriver
from frameworks.client.offers import OfferCacheError
from frameworks.client.transport import Transport, TransportError
from frameworks.elastic import messages as m
from frameworks.elastic import metrics
from frameworks.elastic.api import ElasticApi
from frameworks.elastic.coordinator import Coordinator
from frameworks.elastic.core import CoordinatorConfig, CoordinatorError
from frameworks.elastic.effects import (
    Effect,
    Kill,
    Launch,
    OfferSlot,
    Persist,
    StartCoordinator,
    StopCoordinator,
    WorkerGone,
    WorkerLaunch,
)
from frameworks.elastic.jobs import (
    Job,
    job_to_dict,
)
from frameworks.elastic.service_core import (
    ElasticCore,
)
from frameworks.elastic.spec import JobSpec
from frameworks.elastic.store import JobStore
from frameworks.kit.host import BASE_CAPABILITIES, Connection, FrameworkHost, HostedService, SandboxRead
from protocol.mesos import (
    CapabilityType,
    CommandInfo,
    Environment,
    KillPolicy,
    Offer,
    TaskInfo,
    TaskStatus,
)
from protocol.mesos_common import DurationInfo, TaskID
from protocol.resources import Resources
from protocol.task_states import TaskState

log = logging.getLogger(__name__)

REPO_ROOT = Path(__file__).resolve().parents[2]
CAPABILITIES = (*BASE_CAPABILITIES, CapabilityType.PARTITION_AWARE)


class ElasticService(HostedService):
    """The elastic framework on the framework host (``self.host``), which it gives its logic
    (``FrameworkLogic``: the driver's callbacks, the round, the store's writes); its HTTP API
    is given it as a narrow port (``ports.ElasticPort``)."""

    name = "agora-elastic"

    def __init__(
        self,
        master: str,
        work_dir: Path,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        roles: tuple[str, ...] = ("*",),
        framework_name: str = "agora-elastic",
        failover_timeout: float = 7 * 24 * 3600.0,
        coordinator_host: str | None = None,
        advertise_host: str | None = None,
        heartbeat_timeout: float = 3.0,
        lease_timeout: float = 30.0,
        max_worker_failures: int = 10,
        backoff_initial: float = 1.0,
        kill_grace: float = 5.0,
        tick: float = 0.5,
        transport: Transport | None = None,
        python: str = sys.executable,
        now: Callable[[], float] = time.time,
        ca: str | Path | None = None,
        tls_cert: str | Path | None = None,
        tls_key: str | Path | None = None,
        principal: str | None = None,
        secret: str | None = None,
        token: str | None = None,
        agent_http_credential: str | Path | None = None,
        credentials: str | Path | None = None,
        acls: str | Path | None = None,
    ) -> None:
        super().__init__()
        self.host = FrameworkHost(
            self, self, master, host=host, port=port, roles=roles, framework_name=framework_name,
            capabilities=CAPABILITIES, failover_timeout=failover_timeout, now=now, ca=ca, tls_cert=tls_cert,
            tls_key=tls_key, principal=principal, secret=secret, token=token,
            agent_http_credential=agent_http_credential, advertise_host=advertise_host, credentials=credentials,
            acls=acls,
        )  # fmt: skip
        self.work_dir = Path(work_dir)
        self.now = now
        self.rounds = 0  # scheduling rounds run
        # coordinators listen here (plain HTTP: worker traffic), published at ``advertise_host``
        self.coordinator_host = coordinator_host or host
        self.advertise_host = self.host.advertise_host
        self.heartbeat_timeout = heartbeat_timeout
        self.lease_timeout = lease_timeout
        self.kill_grace = kill_grace
        self.tick = tick
        self.python = python
        self._transport = transport
        self.core = ElasticCore(max_worker_failures=max_worker_failures, backoff_initial=backoff_initial)
        self.store = JobStore(self.work_dir)
        self.api = ElasticApi(self)  # its HTTP API, given this service as its port (ports.ElasticPort)
        self._metrics = metrics.registry(self)
        self.meta: dict[str, Any] = {}
        self.coordinators: dict[int, Coordinator] = {}
        self._pending: list[Effect] = []
        self._waiters: list[asyncio.Future[None]] = []
        self.reconcile_interval = 30.0  # stale STAGING workers are reconciled this often
        self._last_reconcile = 0.0

    # --- lifecycle ---------------------------------------------------------------------------------

    async def _start(self) -> None:
        self.meta = await asyncio.to_thread(self.store.load_meta)
        for record in await asyncio.to_thread(self.store.load_jobs):
            self.core.restore(record)
        self.core.next_job_id = max(self.core.next_job_id, int(self.meta.get("next_job_id", 1)))
        await self.host.serve(self.api.routes())
        # re-attach: the coordinators of jobs that had started come back on their old ports
        for job in self.core.jobs.values():
            if not job.terminal and job.coordinator_port is not None:
                await self._start_coordinator(job)
        driver = self.host.connect(self.meta.get("framework_id"), self._transport)
        for task_id, agent_id in self.core.known_tasks():  # reconciled explicitly on subscribe
            driver.tasks[task_id] = KnownTask(task_id, agent_id, TaskState.TASK_RUNNING)
        await driver.start()
        self.spawn(self.host.run_rounds(), name="elastic-schedule")

    async def _stop(self) -> None:
        if self.driver is not None:
            await self.driver.stop()  # not a teardown: the workers keep running for a restart
        for coord in list(self.coordinators.values()):
            with contextlib.suppress(Exception):
                await coord.stop()
        self.coordinators.clear()
        await self.host.close_api()
        with contextlib.suppress(Exception):
            await self.host.flush()

    # --- driver callbacks ----------------------------------------------------------------------------

    def on_subscribed(self, driver: SchedulerDriver, framework_id: str) -> None:
        self.core.forget_kills()  # a kill sent to an earlier subscription may be lost
        if self.meta.get("framework_id") != framework_id:
            self.meta["framework_id"] = framework_id
            self.store.save_meta(self.meta)
        self.host.poke()

    def on_offers(self, offers: list[Offer]) -> None:
        got = [(o.id.value, o.agent_id.value, Resources.from_mesos(o.resources)) for o in offers]
        log.debug("elastic: offers %s", [(oid, str(res)) for oid, _, res in got])
        self.core.on_offers(got, self.now())
        self.host.poke()  # the driver's offer cache holds them (role, agent endpoint included)

    def on_rescinded(self, offer_id: str) -> None:
        self.host.poke()

    def on_update(self, status: TaskStatus) -> None:
        log.debug("elastic: update %s %s %s", status.task_id.value, status.state.value, status.reason)
        effects = self.core.on_update(
            status.task_id.value,
            status.state,
            self.now(),
            reason=status.reason.value if status.reason else None,
            message=status.message,
            agent_id=status.agent_id.value if status.agent_id else None,
        )
        self._pending.extend(effects)
        self.host.poke()

    # --- requests (the HTTP API calls these; so may tests and embedding code) -----------------------------

    def submit(self, spec: JobSpec, user: str | None = None) -> int:
        job_id, effects = self.core.submit(spec, self.now(), user=user)
        self._pending.extend(effects)
        self.host.poke()
        return job_id

    def scale(self, job_id: int, max_workers: int | None = None, min_workers: int | None = None) -> None:
        self._pending.extend(
            self.core.scale(job_id, self.now(), max_workers=max_workers, min_workers=min_workers)
        )
        self.host.poke()

    def cancel(self, job_id: int) -> None:
        self._pending.extend(self.core.cancel(job_id, self.now()))
        self.host.poke()

    # --- the loop ----------------------------------------------------------------------------------------

    def next_round_in(self) -> float | None:
        return self.tick  # the coordinators' progress is polled

    async def on_round(self) -> None:
        """One round: progress from the coordinators, the core's decisions, their effects."""
        now = self.now()
        effects, self._pending = self._pending, []
        for job_id, coord in list(self.coordinators.items()):
            effects += self.core.on_progress(job_id, coord.core.status(coord.clock.now()), now)
        driver = self.driver
        if driver is not None and driver.connected:
            slots = [
                OfferSlot(c.offer_id, c.agent_id, c.hostname, c.available, driver.role_of(c))
                for c in driver.offers
                if c.available
            ]
            effects += self.core.schedule(slots, now)
            effects += self.core.resend_kills(now)
            if now - self._last_reconcile >= self.reconcile_interval:
                self._last_reconcile = now
                stale = self.core.stale_workers(now, self.reconcile_interval)
                if stale:
                    try:
                        await driver.reconcile(stale)
                    except TransportError as exc:
                        log.warning("elastic: reconcile failed: %s", exc)
        self.rounds += 1
        try:
            await self._execute(effects)
            await self.host.flush()
        finally:
            waiters, self._waiters = self._waiters, []
            for w in waiters:
                if not w.done():
                    w.set_result(None)

    async def wait_for(self, predicate: Callable[[], Any], within: float | None = 10.0) -> Any:
        """Wait until ``predicate()`` is truthy, re-checked after every scheduling round (for tests
        and demos); returns its value."""
        async with asyncio.timeout(within):
            while True:
                value = predicate()
                if value:
                    return value
                fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
                self._waiters.append(fut)
                await fut

    async def _execute(self, effects: list[Effect]) -> None:
        driver = self.driver
        assert driver is not None
        for e in effects:
            if isinstance(e, Persist):
                self.host.dirty.update(e.job_ids)
            elif isinstance(e, StartCoordinator):
                job = self.core.jobs[e.job_id]
                if e.job_id not in self.coordinators:
                    await self._start_coordinator(job)
            elif isinstance(e, StopCoordinator):
                coord = self.coordinators.get(e.job_id)
                if coord is not None:
                    self.host.dirty.update(
                        *(
                            x.job_ids
                            for x in self.core.on_progress(
                                e.job_id, coord.core.status(coord.clock.now()), self.now()
                            )
                            if isinstance(x, Persist)
                        )
                    )
                    # shielded: a service stop meanwhile waits for it instead of cutting it short
                    await asyncio.shield(coord.stop())  # writes its final checkpoint
                    self.coordinators.pop(e.job_id, None)
            elif isinstance(e, WorkerGone):
                coord = self.coordinators.get(e.job_id)
                if coord is not None and e.died is not None:
                    coord.core.worker_died(e.task_id, e.died, coord.clock.now())
                elif coord is not None:
                    with contextlib.suppress(CoordinatorError):
                        coord.core.leave(m.WorkerRequest(e.task_id), coord.clock.now())
            elif isinstance(e, Launch):
                await self._launch(driver, e)
            else:
                if isinstance(e, Kill):
                    log.info("elastic: killing %s (%s)", e.task_id, e.reason)
                try:
                    await self.host.call_master(e)
                except TransportError as exc:  # kills are sent again later, the demand on resubscribe
                    log.warning("elastic: %s not sent: %s", type(e).__name__, exc)

    async def _launch(self, driver: SchedulerDriver, e: Launch) -> None:
        await self.host.flush()  # durable before the master hears of the tasks
        job = self.core.jobs[e.tasks[0].job_id]
        role = driver.role_of(driver.offers.get(e.offer_id)) if e.offer_id in driver.offers else job.spec.role
        infos = [self._task_info(job, w, role) for w in e.tasks]
        try:
            await driver.launch(e.offer_id, infos)
        except (OfferCacheError, TransportError) as exc:  # the offer or the master went away
            log.info("elastic: launch on %s not possible: %s", e.offer_id, exc)
            for w in e.tasks:
                self._pending += self.core.on_update(
                    w.task_id,
                    TaskState.TASK_DROPPED,
                    self.now(),
                    reason="REASON_INVALID_OFFERS",
                    message=str(exc),
                )
            self.host.poke()

    async def write_jobs(self, job_ids: list[int]) -> None:
        records = [job_to_dict(self.core.jobs[i]) for i in job_ids if i in self.core.jobs]
        self.meta["next_job_id"] = self.core.next_job_id
        meta = dict(self.meta)

        def write() -> None:
            self.store.save_jobs(records)
            self.store.save_meta(meta)

        await asyncio.to_thread(write)

    async def _start_coordinator(self, job: Job) -> None:
        spec = job.spec
        cfg = CoordinatorConfig(
            job=spec.name,
            num_shards=spec.data.num_shards,
            epochs=spec.data.epochs,
            heartbeat_timeout=self.heartbeat_timeout,
            lease_timeout=self.lease_timeout,
            optimizer=spec.optimizer.kind,
            learning_rate=spec.optimizer.learning_rate,
            momentum=spec.optimizer.momentum,
        )
        ck_dir = (
            Path(spec.checkpoint.dir)
            if spec.checkpoint.dir
            else self.store.job_dir(job.job_id) / "checkpoint"
        )

        def make(port: int) -> Coordinator:
            return Coordinator(
                cfg,
                host=self.coordinator_host,
                port=port,
                checkpoint_dir=ck_dir,
                checkpoint_interval=spec.checkpoint.interval,
            )

        coord = make(job.coordinator_port or 0)
        self.coordinators[job.job_id] = coord  # registered first: a stop meanwhile still stops it
        try:
            await coord.start()
        except OSError as exc:
            if not job.coordinator_port:
                raise
            log.warning(
                "elastic: job %d: port %d is taken (%s); workers will be replaced",
                job.job_id,
                job.coordinator_port,
                exc,
            )
            coord = make(0)
            self.coordinators[job.job_id] = coord
            await coord.start()
        self._pending += self.core.set_coordinator(job.job_id, coord.port, self._coordinator_url(coord))
        self.host.dirty.add(job.job_id)
        log.info("elastic: job %d coordinator at %s", job.job_id, self._coordinator_url(coord))

    def _coordinator_url(self, coord: Coordinator) -> str:
        return f"http://{self.advertise_host}:{coord.port}"

    def _task_info(self, job: Job, w: WorkerLaunch, role: str) -> TaskInfo:
        coord = self.coordinators.get(job.job_id)
        url = self._coordinator_url(coord) if coord is not None else (job.coordinator_url or "")
        env = {"PYTHONPATH": str(REPO_ROOT), "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
        env.update(job.spec.worker.env)
        env.update(
            AGORA_ELASTIC_COORDINATOR=url,
            AGORA_ELASTIC_WORKER_ID=w.task_id,
            AGORA_ELASTIC_JOB=str(job.job_id),
            AGORA_ELASTIC_DATASET=job.spec.data.dataset,
            AGORA_ELASTIC_NUM_SHARDS=str(job.spec.data.num_shards),
        )
        argv = [self.python if a == "{python}" else a for a in job.spec.worker.command]
        return TaskInfo(
            name=f"{job.spec.name}-w{w.index}",
            task_id=TaskID(w.task_id),
            resources=w.resources.to_mesos(allocation_role=role),
            command=CommandInfo(
                value=argv[0], arguments=tuple(argv), shell=False, environment=Environment.of(env)
            ),
            kill_policy=KillPolicy(grace_period=DurationInfo(int(self.kill_grace * 1e9))),
        )

    def jobs_written(self, job_ids: list[int]) -> None:
        """(Nothing waits on a write: ``submit_durably`` flushes itself.)"""

    # --- the API's port (``ports.ElasticPort``) ------------------------------------------------------

    @property
    def auth(self) -> ApiAuth:
        return self.host.auth

    @property
    def roles(self) -> tuple[str, ...]:
        return self.host.roles

    @property
    def jobs(self) -> dict[int, Job]:
        return self.core.jobs

    def job(self, job_id: int) -> Job:
        return self.core.job(job_id)

    def master_ui(self) -> str | None:
        return self.host.master_ui()

    def connection(self) -> Connection:
        return self.host.connection()

    def coordinator_urls(self) -> dict[int, str]:
        return {k: self._coordinator_url(c) for k, c in self.coordinators.items()}

    def coordinator_status(self, job_id: int) -> dict[str, Any] | None:
        coord = self.coordinators.get(job_id)
        return None if coord is None else coord.core.status(coord.clock.now())

    def metrics_text(self) -> bytes:
        return metrics.render(self._metrics)

    async def read_sandbox(self, agent_id: str | None, task_id: str, stream: str, offset: int,
                           length: int) -> SandboxRead:
        return await self.host.read_sandbox(agent_id, task_id, stream, offset, length)

    async def submit_durably(self, spec: JobSpec, owner: str | None) -> int:
        job_id = self.submit(spec, owner)
        self.host.dirty.add(job_id)
        await self.host.flush()  # durable before the answer
        return job_id
