"""The worker library: makes a plain training loop elastic.

Synchronous on purpose (training code is usually synchronous); HTTP via ``urllib``::

    from frameworks.elastic.worker import ElasticJob

    with ElasticJob.from_env() as job:          # or ElasticJob("http://host:port", "worker-1")
        params = job.init_parameters({"W": w0, "b": b0})   # first worker's values win
        for shard in job.shards():              # leases shards until every epoch is done
            for batch in my_batches(shard.index, shard.num_shards):
                grads, loss = compute(params, batch)
                params = job.push(grads, samples=len(batch), loss=loss)  # returns fresh params
        job.report(test_accuracy=evaluate(job.pull()))

What it does for you:

* **membership** — joins on first use, heartbeats from a background thread (which also renews
  its shard leases) and rejoins by itself when the coordinator forgot it (it expired, or the
  coordinator restarted from a checkpoint). ``job.rank``/``world_size``/``generation``/``peers``
  follow generation changes; ``on_generation_change`` is called with the new assignment.
* **leases** — each shard yielded by ``shards()`` is completed when the loop asks for the next
  one; ``shard.fail(reason)`` reports a bad shard instead; leaving the loop early (``break``,
  an exception) gives the lease back.
* **retries** — connection errors and 5xx answers are retried with capped exponential backoff
  for up to ``retry_deadline`` seconds, then ``CoordinatorUnavailable`` is raised.
* **SIGTERM** — when created in the main thread it installs a handler that raises
  ``WorkerTerminated`` (a ``SystemExit`` with code 143) in the training loop; ``close()`` (called
  by the ``with`` block and at interpreter exit) returns the lease and leaves the job.

Environment for ``from_env``: ``AGORA_ELASTIC_COORDINATOR`` (URL, required),
``AGORA_ELASTIC_WORKER_ID`` (default: the Mesos task id or ``<hostname>-<pid>``),
``AGORA_ELASTIC_ADDRESS`` (advertised to peers, optional).
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import signal
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Generator, Iterator
from types import FrameType, TracebackType
from typing import Any, TypeVar

import attrs
import numpy as np

from frameworks.elastic import messages as m
from frameworks.elastic import wire
from protocol.backoff import Backoff

log = logging.getLogger(__name__)
T = TypeVar("T")

ENV_COORDINATOR = "AGORA_ELASTIC_COORDINATOR"
ENV_WORKER_ID = "AGORA_ELASTIC_WORKER_ID"
ENV_ADDRESS = "AGORA_ELASTIC_ADDRESS"


class ElasticError(Exception):
    """Base of the worker library's errors."""


class CoordinatorUnavailable(ElasticError):
    """The coordinator did not answer within the retry deadline."""


class CoordinatorRejected(ElasticError):
    """The coordinator refused a request (bad input or conflicting state)."""

    def __init__(self, status: int, code: str, reason: str) -> None:
        super().__init__(f"coordinator refused ({status} {code}): {reason}")
        self.status = status
        self.code = code
        self.reason = reason


class WorkerTerminated(SystemExit):
    """Raised in the training loop when the worker receives SIGTERM."""

    def __init__(self) -> None:
        super().__init__(143)


@attrs.define
class Shard:
    """One leased piece of the dataset: process rows ``index::num_shards`` (or your own mapping)."""

    index: int
    epoch: int
    num_shards: int
    epochs: int
    lease_id: int
    _job: ElasticJob
    settled: bool = False
    lost: bool = False  # the coordinator took the lease back: further pushes for it are skipped

    def fail(self, reason: str) -> None:
        """Report that this shard cannot be processed (set aside after repeated failures)."""
        if not self.settled:
            self.settled = True
            self._job._lease_done("/v1/fail", self, reason)


class ElasticJob:
    def __init__(
        self,
        coordinator_url: str,
        worker_id: str | None = None,
        *,
        address: str = "",
        timeout: float = 10.0,
        retry_deadline: float = 60.0,
        heartbeat: bool = True,
        handle_sigterm: bool = True,
        on_generation_change: Callable[[m.AssignmentReply], None] | None = None,
    ) -> None:
        self.url = coordinator_url.rstrip("/")
        self.worker_id = worker_id or f"{socket.gethostname()}-{os.getpid()}"
        self.address = address
        self.timeout = timeout
        self.retry_deadline = retry_deadline
        self.on_generation_change = on_generation_change
        self.assignment: m.AssignmentReply | None = None
        self.param_version: int | None = None
        self._params: dict[str, np.ndarray] | None = None
        self._lock = threading.RLock()
        self._current: Shard | None = None
        self._closed = False
        self._stop = threading.Event()
        self._heartbeat_enabled = heartbeat
        self._heartbeat_thread: threading.Thread | None = None
        if handle_sigterm and threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, self._on_sigterm)
        atexit.register(self.close)

    @classmethod
    def from_env(cls, **kwargs: Any) -> ElasticJob:
        url = os.environ.get(ENV_COORDINATOR)
        if not url:
            raise ElasticError(f"{ENV_COORDINATOR} is not set: where is the coordinator?")
        worker_id = os.environ.get(ENV_WORKER_ID) or os.environ.get("MESOS_TASK_ID")
        return cls(url, worker_id, address=os.environ.get(ENV_ADDRESS, ""), **kwargs)

    # -- context -------------------------------------------------------------------------------
    def __enter__(self) -> ElasticJob:
        self.join()
        return self

    def __exit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # -- membership ----------------------------------------------------------------------------
    @property
    def rank(self) -> int:
        return self._ensure_joined().rank

    @property
    def world_size(self) -> int:
        return self._ensure_joined().world_size

    @property
    def generation(self) -> int:
        return self._ensure_joined().generation

    @property
    def peers(self) -> tuple[m.PeerInfo, ...]:
        return self._ensure_joined().peers

    def join(self) -> m.AssignmentReply:
        if self._closed:
            raise ElasticError(f"worker {self.worker_id} is closed")
        a = self._call("/v1/join", m.JoinRequest(self.worker_id, self.address), m.AssignmentReply)
        self._set_assignment(a)
        if self._heartbeat_enabled and self._heartbeat_thread is None:
            self._heartbeat_thread = threading.Thread(
                target=self._heartbeat_loop, name=f"elastic-heartbeat-{self.worker_id}", daemon=True
            )
            self._heartbeat_thread.start()
        return a

    def _ensure_joined(self) -> m.AssignmentReply:
        with self._lock:
            a = self.assignment
        return a if a is not None else self.join()

    def _set_assignment(self, a: m.AssignmentReply) -> None:
        with self._lock:
            old = self.assignment
            self.assignment = a
        if old is not None and old.generation != a.generation:
            log.info("generation %d -> %d: rank %d of %d", old.generation, a.generation, a.rank, a.world_size)
            if self.on_generation_change is not None:
                self.on_generation_change(a)

    def heartbeat(self) -> m.HeartbeatReply:
        """One heartbeat (the background thread calls this); rejoins when forgotten."""
        reply = self._call("/v1/heartbeat", m.WorkerRequest(self.worker_id, self._gen()), m.HeartbeatReply)
        if not reply.known and not self._closed and not reply.finished:
            self.join()
        elif reply.assignment is not None:
            self._set_assignment(reply.assignment)
        return reply

    def _gen(self) -> int | None:
        with self._lock:
            return self.assignment.generation if self.assignment else None

    def _heartbeat_loop(self) -> None:
        while not self._stop.is_set():
            with self._lock:
                interval = self.assignment.heartbeat_interval if self.assignment else 1.0
            if self._stop.wait(interval):
                return
            try:
                self.heartbeat()
            except ElasticError as e:
                if self._closed:
                    return
                log.warning("heartbeat failed: %s", e)

    # -- shards --------------------------------------------------------------------------------
    def shards(self) -> Generator[Shard, None, None]:
        """Lease shards until every epoch is done. A yielded shard is completed when the loop comes
        back for the next one (unless ``shard.fail`` was called); leaving early returns the lease."""
        self._ensure_joined()
        backoff = Backoff(0.05, 1.0, rng=None)
        while not self._closed:
            reply = self._call("/v1/lease", m.WorkerRequest(self.worker_id, self._gen()), m.LeaseReply)
            if reply.status is m.LeaseStatus.FINISHED:
                return
            if reply.status is m.LeaseStatus.REJOIN:
                self.join()
                continue
            if reply.status is m.LeaseStatus.WAIT:
                time.sleep(min(backoff.next(), reply.retry_after or 1.0))
                continue
            backoff.reset()
            assert reply.lease_id is not None and reply.shard is not None and reply.epoch is not None
            shard = Shard(reply.shard, reply.epoch, reply.num_shards, reply.epochs, reply.lease_id, self)
            with self._lock:
                self._current = shard
            try:
                yield shard
            except GeneratorExit:
                self._give_back(shard, "worker left the loop")
                raise
            if not shard.settled:
                shard.settled = True
                self._lease_done("/v1/complete", shard, "")
            with self._lock:
                if self._current is shard:  # a lost shard: no lease of ours any more
                    self._current = None

    @contextlib.contextmanager
    def lease(self) -> Iterator[Shard | None]:
        """Lease one shard for a ``with`` block: completed on success, failed on an exception
        (with the exception as the reason). Yields None when the job is finished."""
        self._ensure_joined()
        for shard in self.shards():
            try:
                yield shard
            except Exception as e:
                shard.fail(f"{type(e).__name__}: {e}")
                raise
            if not shard.settled:
                shard.settled = True
                self._lease_done("/v1/complete", shard, "")
            return
        yield None

    def _lease_done(self, path: str, shard: Shard, reason: str) -> bool:
        with self._lock:
            if self._current is shard:
                self._current = None
        ack = self._call(path, m.LeaseDone(self.worker_id, shard.lease_id, reason), m.AckReply)
        if not ack.accepted:
            log.info("shard %d (lease %d): %s", shard.index, shard.lease_id, ack.detail)
        return ack.accepted

    def _give_back(self, shard: Shard, reason: str) -> None:
        if shard.settled:
            return
        shard.settled = True
        with contextlib.suppress(ElasticError):
            self._lease_done("/v1/release", shard, reason)

    # -- parameters ----------------------------------------------------------------------------
    def init_parameters(self, initial: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Offer initial parameters; returns the job's parameters (the first offer wins, and a job
        restored from a checkpoint keeps its saved ones)."""
        params = self._call("/v1/init", m.InitRequest(self.worker_id, m.to_arrays(initial)), m.Parameters)
        return self._take(params)

    def pull(self) -> dict[str, np.ndarray]:
        """The current parameters (cached locally when unchanged)."""
        with self._lock:
            have = self.param_version if self._params is not None else None
        params = self._call("/v1/pull", m.PullRequest(self.worker_id, have), m.Parameters)
        if params.unchanged and self._params is not None:
            return {k: v.copy() for k, v in self._params.items()}
        if not params.initialized:
            raise CoordinatorRejected(409, "not_initialized", "no parameters yet: call init_parameters first")
        return self._take(params)

    def push(
        self,
        grads: dict[str, np.ndarray],
        *,
        samples: int = 0,
        loss: float | None = None,
        accuracy: float | None = None,
    ) -> dict[str, np.ndarray]:
        """Send gradients (applied by the coordinator's optimizer); returns the updated parameters.

        Inside ``shards()`` the push names the current shard's lease: if the coordinator took it
        back (it expired and was leased again) the gradients are not applied, the shard is marked
        ``lost`` (not completed; it is redone elsewhere) and later pushes for it are skipped."""
        with self._lock:
            shard = self._current
        if shard is not None and shard.lost:
            return self.pull()
        req = m.PushRequest(
            self.worker_id,
            m.to_arrays(grads),
            samples=samples,
            loss=None if loss is None else float(loss),
            accuracy=None if accuracy is None else float(accuracy),
            base_version=self.param_version,
            lease_id=shard.lease_id if shard is not None else None,
        )
        reply = self._call("/v1/push", req, m.PushReply)
        if not reply.applied and shard is not None:
            log.info("shard %d (lease %d): %s", shard.index, shard.lease_id, reply.detail)
            shard.lost = shard.settled = True
        if reply.parameters is None:
            self.param_version = reply.version
            return self.pull()
        return self._take(reply.parameters)

    def report(self, **metrics: float) -> None:
        """Job-level metrics shown in the coordinator status (e.g. ``test_accuracy=0.95``)."""
        self._call(
            "/v1/report",
            m.ReportRequest(self.worker_id, {k: float(v) for k, v in metrics.items()}),
            m.AckReply,
        )

    def _take(self, params: m.Parameters) -> dict[str, np.ndarray]:
        values = m.from_arrays(params.arrays)
        with self._lock:
            self._params = values
            self.param_version = params.version
        return {k: v.copy() for k, v in values.items()}

    # -- shutdown ------------------------------------------------------------------------------
    def close(self) -> None:
        """Return the current lease, leave the job and stop heartbeating (idempotent)."""
        if self._closed:
            return
        self._closed = True
        self._stop.set()
        hb = self._heartbeat_thread
        if hb is not None and hb is not threading.current_thread():
            hb.join(self.timeout + 1.0)  # no heartbeat (or rejoin) may race with our leave
        with self._lock:
            shard = self._current
        if shard is not None:
            self._give_back(shard, "worker exiting")
        if self.assignment is not None:
            saved, self.retry_deadline = self.retry_deadline, min(self.retry_deadline, 5.0)
            try:
                self._call("/v1/leave", m.WorkerRequest(self.worker_id), m.AckReply)
            except ElasticError as e:
                log.warning("leave failed (the coordinator will expire us): %s", e)
            finally:
                self.retry_deadline = saved
        with contextlib.suppress(Exception):
            atexit.unregister(self.close)

    def _on_sigterm(self, signum: int, frame: FrameType | None) -> None:
        if self._closed:
            return
        raise WorkerTerminated()

    # -- http ----------------------------------------------------------------------------------
    def _call(self, path: str, msg: Any, reply_cls: type[T]) -> T:
        data = wire.encode(msg)
        deadline = time.monotonic() + self.retry_deadline
        backoff = Backoff(0.05, 2.0)
        while True:
            req = urllib.request.Request(
                self.url + path,
                data=data,
                method="POST",
                headers={"Content-Type": wire.MEDIA_TYPE, "Accept": wire.MEDIA_TYPE},
            )
            try:
                with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                    body = resp.read()
                return wire.decode(reply_cls, body)
            except urllib.error.HTTPError as e:
                body = e.read()
                if e.code < 500:
                    try:
                        err = wire.decode(m.ErrorReply, body)
                        raise CoordinatorRejected(e.code, err.code, err.reason) from None
                    except wire.DecodeError:
                        raise CoordinatorRejected(
                            e.code, "http", body[:200].decode("utf-8", "replace")
                        ) from None
                problem = f"HTTP {e.code}"
            except (urllib.error.URLError, ConnectionError, TimeoutError, OSError) as e:
                problem = str(getattr(e, "reason", e))
            except wire.DecodeError as e:
                problem = f"undecodable reply: {e}"
            delay = backoff.next()
            if time.monotonic() + delay > deadline:
                raise CoordinatorUnavailable(
                    f"{self.url}{path}: {problem} (gave up after {self.retry_deadline}s)"
                )
            log.debug("%s%s: %s; retrying in %.2fs", self.url, path, problem, delay)
            time.sleep(delay)
