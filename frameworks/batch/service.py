"""The batch framework service: a scheduler on the client library, a job store, an HTTP API.

Shell only: every decision is ``BatchCore``'s. This module turns driver callbacks and HTTP
requests into core calls, runs one scheduling loop (woken by offers, updates, submissions and
the core's next deadline), and executes the effects: ACCEPT/LAUNCH, KILL, DECLINE,
SUPPRESS/REVIVE, REQUEST, and batched writes to the store.

It runs on the framework host (``frameworks/kit/host.py``: connection, driver, HTTP server,
effect loop); its API's handlers are ``api.py``, the JSON views of its records ``views.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

from frameworks.batch.api import BatchApi
from frameworks.batch.config import BatchConfig
from frameworks.batch.core import (
    BatchCore,
    Effect,
    JobEvent,
    JobRecord,
    Kill,
    Launch,
    Persist,
    TaskLaunch,
)
from frameworks.batch.events import EventBus, deliver
from frameworks.batch.fairshare import Factors, Share
from frameworks.batch.logtail import DEFAULT_KEEP, KeptTail
from frameworks.batch.metrics import BatchMetrics
from frameworks.batch.model import JOB_TERMINAL, JobSpec
from frameworks.batch.planner import AgentCapacity, OfferView
from frameworks.batch.store import AccountingQuery, JobStore
from frameworks.batch.tails import TailKeeper, TailPorts, fetch_tails
from frameworks.batch.task_infos import TaskInfos
from frameworks.batch.views import cluster_of, exit_code_of, host_of, job_summary
from frameworks.batch.warm import CHANNEL_PATH, WarmPorts, WarmServices
from frameworks.client.api_auth import ApiAuth
from frameworks.client.driver import KnownTask, SchedulerDriver
from frameworks.client.offers import OfferCacheError
from frameworks.client.placement import attribute_text
from frameworks.client.transport import HttpTransport
from frameworks.kit.host import Connection, FrameworkHost, HostedService, SandboxRead
from protocol.mesos import (
    Offer,
    TaskInfo,
    TaskStatus,
)
from protocol.task_states import TaskState, is_terminal
from protocol.usage import from_labels

log = logging.getLogger(__name__)

class BatchService(HostedService):
    """The batch framework on the framework host (``self.host``), which it gives its logic
    (``FrameworkLogic``: the driver's callbacks, the scheduling round, the store's writes)."""

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
        super().__init__()
        self.host = FrameworkHost(
            self, self, master, host=host, port=port, roles=roles, framework_name=framework_name,
            failover_timeout=failover_timeout, now=now, ca=ca, tls_cert=tls_cert, tls_key=tls_key,
            principal=principal, secret=secret, token=token, agent_http_credential=agent_http_credential,
            advertise_host=advertise_host, credentials=credentials, acls=acls,
        )  # fmt: skip
        self.work_dir = Path(work_dir)
        self.now = now
        self.rounds = 0  # scheduling rounds run
        self.config = config or BatchConfig()  # users, fair share, limits (--config batch.toml)
        self.usage_interval = usage_interval  # seconds between writes of the users' usage
        self.log_tail = log_tail  # bytes of each stream of an ended attempt kept in the store (0: none)
        self._tail_slots = asyncio.Semaphore(4)
        self.tails = TailKeeper(TailPorts(  # the ends of a tick's attempts, one request per agent
            log_tail=lambda: self.log_tail,
            agent_url=self.host.agent_url,
            framework=lambda: self.driver.framework_id if self.driver is not None else None,
            http=lambda: (h, self.host.agent_headers) if (h := self.host.agent_http) is not None else None,
            save=lambda job, task, tails: self.store.open().asave_tails(job, task, tails),
            spawn=lambda coro, name: self.spawn(coro, name=name),
            one_by_one=self._copy_tail,
        ), self._tail_slots)
        self.flush_interval = flush_interval  # group commit: changes within it share one write
        self.core = BatchCore(gang_timeout=gang_timeout, config=self.config, preempt_queues=preempt_queues)
        self.store = JobStoreRef(work_dir)
        self._persist = asyncio.Event()  # set when a job turns dirty: the flusher writes it
        # submitted jobs not yet durable -> the futures their submit answers wait on (``_submit``)
        self._unsaved: dict[int, asyncio.Future[None]] = {}
        self.submit_hold = 0.05  # the longest a submission waits to share the write of its launch
        self.flushes = 0  # store writes of task progress
        self._infos = TaskInfos()  # the launches' TaskInfos, with what a job's tasks share
        self._queued: list[Effect] = []  # effects from callbacks, run by the one scheduling loop
        self.metrics = BatchMetrics(self)  # /metrics; the wait-time histogram is observed in update()
        self.events = EventBus()
        self.notify_delay = 1.0  # first backoff between webhook tries (doubling, at most 60 s)
        self._notifying: set[int] = set()
        self.cluster_interval = 10.0  # seconds between reads of the cluster's agents (/state)
        self._cluster_at: float | None = None  # when the latest read started
        self.warm = WarmServices(WarmPorts(  # service jobs: warm instances fed service tasks (warm.py)
            store=self.store.open, live=lambda: self.core.live.values(),
            finished=lambda job, failure: self._absorb(self.core.service_finished(job, failure, self.now())),
            now=lambda: self.now(), url=lambda: self.url, ca=self.host.conn.ca,
            spawn=lambda coro, name: self.spawn(coro, name=name),
        ))
        self.api = BatchApi(self)  # its HTTP API, given this service as its port (ports.BatchPort)

    # --- lifecycle -------------------------------------------------------------------------------

    async def _start(self) -> None:
        store = self.store.open()
        for key, usage in (await asyncio.to_thread(store.load_usage)).items():
            self.core.usage.restore(key, usage)  # fair-share decay goes on from the stored usage
        for job in await asyncio.to_thread(store.load):
            self.core.restore(job)
        await self.warm.restore()
        await self.host.serve([*self.api.routes(), web.get(CHANNEL_PATH, self.warm.channel)])
        driver = self.host.connect(store.get_meta("framework_id"))
        self._notify_unsent()
        await driver.start()
        self.spawn(self.host.run_rounds(), name="batch-schedule")
        self.spawn(self._flusher(), name="batch-flush")
        self.spawn(self._usage_saver(), name="batch-usage")
        self.spawn(self.warm.flusher(), name="batch-service-tasks")
        if self.config.retention_days is not None:
            self.spawn(self._purger(self.config.retention_days), name="batch-purge")

    async def _stop(self) -> None:
        self.events.close()
        if self.driver is not None:
            await self.driver.stop()
        # stop listening first: a service instance told we go away connects again at once, and a
        # connection accepted while the runner shuts down would be left open
        await self.host.stop_listening()
        with contextlib.suppress(Exception):
            await self.warm.close()
        await self.host.close_api()
        with contextlib.suppress(Exception):
            await self.host.flush()
        with contextlib.suppress(Exception):
            await self._save_usage()
        self.store.close()

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

    def on_subscribed(self, driver: SchedulerDriver, framework_id: str) -> None:
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
        self.host.poke()

    def on_offers(self, offers: list[Offer]) -> None:
        self.host.poke()  # the driver's offer cache holds them (role, agent endpoint included)

    def on_rescinded(self, offer_id: str) -> None:
        self.host.poke()

    def on_update(self, status: TaskStatus) -> None:
        exit_code = exit_code_of(status)
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
        self.host.poke()

    def _keep_tail(self, task_id: str, agent_id: str) -> None:
        """An attempt that ran ended: the last ``log_tail`` bytes of its stdout and stderr into the
        store, read from its sandbox off the callback (the agent reports the end once the logs
        are complete)."""
        task = self.core.find_task(task_id)
        cur = task.current if task is not None else None
        if task is None or cur is None or cur.task_id != task_id or cur.started_at is None:
            return  # never started: no sandbox output to keep
        with contextlib.suppress(RuntimeError):  # (stopping)
            self.tails.add(task.job_id, task_id, agent_id)

    async def _copy_tail(self, job_id: int, task_id: str, agent_id: str) -> None:
        """One attempt's tail, with a listing and reads (agents that do not serve ``/files/tails``)."""
        driver, http = self.driver, self.host.agent_http
        agent = self.host.agent_url(agent_id)
        if driver is None or driver.framework_id is None or agent is None or http is None:
            log.warning("batch: cannot keep the output of %s: its agent %s is not known here", task_id, agent_id)
            return
        async with self._tail_slots:  # many attempts ending at once: a few copies at a time
            try:
                tails = await fetch_tails(http, self.host.agent_headers, agent, f"{driver.framework_id}/{task_id}",
                                          self.log_tail)
                if tails:
                    await self.store.open().asave_tails(job_id, task_id, tails)
            except (aiohttp.ClientError, TimeoutError, ValueError, KeyError, TypeError) as exc:
                log.warning("batch: cannot keep the output of %s from agent %s: %s", task_id, agent_id, exc)

    def _observe_start(self, task_id: str) -> None:
        """A task's first attempt started: how long it waited since its job was submitted."""
        task = self.core.find_task(task_id)
        if task is None or task.attempt != 0 or task.current is None or task.current.started_at is None:
            return
        job = self.core.jobs[task.job_id]
        if len(task.history) == 1:
            self.metrics.wait.labels(job.spec.queue).observe(max(0.0, task.current.started_at - job.submitted_at))

    # --- the scheduling loop ---------------------------------------------------------------------

    def next_round_in(self) -> float | None:
        """Seconds until the core's next deadline (None: none; the loop waits for a poke)."""
        now = self.now()
        deadline = self.core.next_wakeup(now)
        return None if deadline is None else max(0.0, deadline - now)

    async def _flusher(self) -> None:
        """Write changed jobs, at most once per ``flush_interval``: what changes while a write is
        on its way, or within the interval after it, goes in the next one (one transaction and
        one fsync for many updates; the scheduling loop never waits for the disk)."""
        while True:
            await self._persist.wait()
            self._persist.clear()
            try:
                await self.host.flush()
            except Exception:
                log.exception("batch: writing the job store failed; retrying")
                self._persist.set()
            await asyncio.sleep(self.flush_interval)

    async def on_round(self) -> None:
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
        if (views or not driver.connected or self.core.suppressed) and any(i in self._unsaved for i in planned):
            # Submissions this round could not launch (a launch writes them with its attempt):
            # written now, so their answers do not wait (nor do they when no offers will come:
            # suppressed, say for a periodic job's submission). With no offer in view and a
            # REVIVE on its way they wait for the round with the offers, at most ``submit_hold``.
            await self.host.flush()

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
                    address=host_of(driver.offers.agent_urls.get(cached.agent_id)),
                )
            )
        return views

    async def _read_cluster(self) -> None:
        """The cluster's agents from the master's ``/state`` (totals, attributes, revocable): what
        a waiting job is told it "cannot fit in". Read at most every ``cluster_interval`` while
        jobs wait; a failed read keeps the last answer (and no reason claims what it cannot know)."""
        driver, http = self.driver, self.host.agent_http
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
        self.host.poke()

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
            await self.host.call_master(e)
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
            await self.host.flush()
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
            self.host.poke()

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
        self.host.poke()

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
        if job.job_id in self._notifying or self.host.agent_http is None or not job.spec.notify:
            return
        self._notifying.add(job.job_id)
        url, body = job.spec.notify, {"event": "finished", "job": job_summary(job)}
        http = self.host.agent_http

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
        self.host.dirty.update(job_ids)
        if self.host.dirty:
            self._persist.set()

    async def write_jobs(self, job_ids: list[int]) -> None:
        jobs = [self.core.jobs[i] for i in job_ids if i in self.core.jobs]
        self.flushes += 1
        await self.store.open().awrite(jobs)

    def jobs_written(self, job_ids: list[int]) -> None:
        for i in job_ids:  # the submissions waiting for their write (``_save_submitted``)
            if (saved := self._unsaved.pop(i, None)) is not None and not saved.done():
                saved.set_result(None)

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
        self.host.dirty.update(ids)
        self._absorb([e for e in effects if not isinstance(e, (Persist, JobEvent))])  # a REVIVE
        try:
            try:
                async with asyncio.timeout(self.submit_hold):
                    await asyncio.gather(*waits)
            except TimeoutError:  # no round could take them yet (no offers, a call under way)
                await self.host.flush()
        except BaseException:
            self._persist.set()  # a failed write or a cancelled answer: the flusher writes them
            raise
        finally:
            for i in ids:
                self._unsaved.pop(i, None)
        self._absorb([e for e in effects if isinstance(e, JobEvent)])

    def _task_info(self, t: TaskLaunch, agent_id: str) -> TaskInfo:
        command, info = self._infos.build(t)  # task_infos.py
        return self.warm.task_info(t, command, info) if t.spec.service else info

    # --- the API's port (``ports.BatchPort``): what HTTP requests read and do -------------------

    @property
    def auth(self) -> ApiAuth:
        return self.host.auth

    @property
    def roles(self) -> tuple[str, ...]:
        return self.host.roles

    @property
    def framework_name(self) -> str:
        return self.host.framework_name

    @property
    def jobs(self) -> dict[int, JobRecord]:
        return self.core.jobs

    @property
    def cluster(self) -> tuple[AgentCapacity, ...]:
        return self.core.cluster

    def job(self, job_id: int) -> JobRecord:
        return self.core.job(job_id)

    def master_ui(self) -> str | None:
        return self.host.master_ui()

    def connection(self) -> Connection:
        return self.host.connection()

    def priorities(self, now: float) -> dict[int, Factors]:
        return self.core.priorities(now)

    def shares(self, now: float) -> dict[tuple[str, str], Share]:
        return self.core.shares(now)

    def admission(self, spec: JobSpec, user: str | None) -> str | None:
        return self.core.admission(spec, user)

    def expected_starts(self) -> dict[int, float | None]:
        return self.core.expected_starts(self._offer_views(), self.now())

    def metrics_text(self) -> bytes:
        return self.metrics.render()

    async def read_cluster(self) -> None:
        await self._read_cluster()

    async def accounting(self, query: AccountingQuery) -> list[dict[str, Any]]:
        return await asyncio.to_thread(self.store.open().accounting, query)

    async def kept_tail(self, task_id: str, stream: str) -> KeptTail | None:
        return await asyncio.to_thread(self.store.open().tail, task_id, stream)

    async def read_sandbox(self, agent_id: str | None, task_id: str, stream: str, offset: int,
                           length: int) -> SandboxRead:
        return await self.host.read_sandbox(agent_id, task_id, stream, offset, length)

    async def service_summary(self, job: JobRecord) -> dict[str, int] | None:
        return await self.warm.summary(job)

    async def service_results(self, job: JobRecord, offset: int, limit: int, state: str | None) -> dict[str, Any]:
        return await self.warm.results(job, offset, limit, state)

    def follow_events(self, since: int | None) -> AsyncIterator[dict[str, Any]]:
        return self.events.follow(since)

    async def submit(self, specs: list[JobSpec], owner: str, verified: bool, inputs: list[str] | None) -> list[int]:
        run_as = self.config.users.run_as(owner, verified=verified)
        ids, effects = self.core.submit_many(specs, self.now(), owner, run_as)
        if inputs is not None:
            self.warm.register(self.core.jobs[ids[0]], inputs)
            # Durable before we answer: the ids we return are never lost (one transaction for all).
            await self.store.open().awrite([self.core.jobs[i] for i in ids])
            await self.warm.submitted(self.core.jobs[ids[0]], inputs)
            self._absorb([e for e in effects if not isinstance(e, Persist)])
        else:
            await self._save_submitted(ids, effects)
        self.host.poke()
        return ids

    async def hold(self, job_id: int, who: str) -> None:
        await self._changed(job_id, self.core.hold(job_id, self.now(), who))

    async def release(self, job_id: int, who: str) -> None:
        await self._changed(job_id, self.core.release(job_id, self.now(), who))

    async def requeue(self, job_id: int, who: str) -> None:
        await self._changed(job_id, self.core.requeue(job_id, self.now(), who))

    async def update(self, job_id: int, changes: Mapping[str, Any], who: str) -> None:
        effects = self.core.update(job_id, changes, self.now(), who)
        self._infos.forget(job_id)  # its tasks' shared environment (count) changed
        await self._changed(job_id, effects)

    async def _changed(self, job_id: int, effects: list[Effect]) -> None:
        """A change to a job, written before the answer; its effects go to the loop."""
        self._mark_dirty((job_id,))
        await self.host.flush()
        self._absorb(effects)

    def cancel(self, job_id: int, who: str) -> None:
        self._absorb(self.core.cancel(job_id, self.now(), who))

    def kill_attempt(self, task_id: str, agent_id: str | None, why: str) -> None:
        self._absorb([Kill(task_id, agent_id, why)])


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


