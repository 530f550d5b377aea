"""The coordinator's decisions, without I/O: membership generations, the shard queue, the
parameter store and progress metrics of one elastic job. The aiohttp shell
(``coordinator.py``) decodes requests, passes ``now`` and encodes the replies; it also runs
``tick`` on a timer and writes ``snapshot`` to disk.
"""

from __future__ import annotations

import collections
from typing import Any

import attrs
import numpy as np

from frameworks.elastic import messages as m
from frameworks.elastic.membership import (
    Assignment,
    GenerationChanged,
    Membership,
    MembershipError,
    UnknownWorker,
)
from frameworks.elastic.optimizer import OptimizerError, ParameterStore
from frameworks.elastic.shards import LeaseReturned, Outcome, SetAside, ShardQueue

__pure__ = True

RATE_WINDOW = 10.0  # seconds of pushes used for samples/s
EMA = 0.1  # smoothing of reported loss and accuracy


class CoordinatorError(ValueError):
    """An expected refusal, turned into an HTTP error reply by the shell."""

    def __init__(self, code: str, reason: str, status: int = 400) -> None:
        super().__init__(f"{code}: {reason}")
        self.code = code
        self.reason = reason
        self.status = status


@attrs.frozen
class CoordinatorConfig:
    job: str = "job"
    num_shards: int = 16
    epochs: int = 1
    heartbeat_timeout: float = 10.0
    lease_timeout: float = 30.0
    max_failures: int = 3
    optimizer: str = "momentum"
    learning_rate: float = 0.1
    momentum: float = 0.9
    wait_retry: float = 0.2  # what a worker is told to wait when no shard is free

    @property
    def heartbeat_interval(self) -> float:
        return self.heartbeat_timeout / 3.0


@attrs.frozen
class LogEntry:
    at: float
    kind: str
    text: str


class CoordinatorCore:
    def __init__(self, config: CoordinatorConfig, generation: int = 0) -> None:
        self.config = config
        self.membership = Membership(config.heartbeat_timeout, generation_number=generation)
        self.shards = ShardQueue(config.num_shards, config.epochs, config.lease_timeout, config.max_failures)
        self.store = ParameterStore(config.optimizer, config.learning_rate, config.momentum)
        self.samples_total = 0
        self.pushes = 0
        self.lease_returns = 0
        self.stale_pushes = 0  # pushes refused for a lease no longer held
        self.loss: float | None = None
        self.accuracy: float | None = None
        self.reports: dict[str, float] = {}
        self.log: collections.deque[LogEntry] = collections.deque(maxlen=500)
        self._rate: collections.deque[tuple[float, int]] = collections.deque()
        self.dirty = False  # something worth checkpointing changed
        self.restored_from: float | None = None

    # -- membership ----------------------------------------------------------------------------
    def join(self, req: m.JoinRequest, now: float) -> m.AssignmentReply:
        try:
            a, change = self.membership.join(req.worker_id, req.address, now)
        except MembershipError as e:
            raise CoordinatorError("bad_worker", str(e)) from None
        self.shards.worker_back(req.worker_id)  # alive after all: its silence counts for nothing
        self._note_change(change, now)
        return self._assignment(a)

    def leave(self, req: m.WorkerRequest, now: float) -> m.AckReply:
        change = self.membership.leave(req.worker_id, now)
        returned = self.shards.release_worker(req.worker_id, f"{req.worker_id} left")
        self.shards.worker_back(req.worker_id)  # a clean exit: nothing counts against its shards
        self._note_returns(returned, now)
        self._note_change(change, now)
        return m.AckReply(change is not None, f"{len(returned)} lease(s) returned")

    def worker_died(self, worker_id: str, reason: str, now: float) -> None:
        """The worker's process died (the service's terminal update for its task): it leaves, and
        the shards it held - now, or when it went silent before - count a death each (set aside
        after repeated deaths). A heartbeat timeout alone (``tick``) counts no death."""
        change = self.membership.leave(worker_id, now)
        returned, aside = self.shards.worker_died(worker_id, f"{worker_id} died: {reason}")
        self._note_returns(returned, now)
        self._note_set_aside(aside, now)
        self._note_change(change, now)

    def heartbeat(self, req: m.WorkerRequest, now: float) -> m.HeartbeatReply:
        try:
            a = self.membership.heartbeat(req.worker_id, now)
        except UnknownWorker:
            return m.HeartbeatReply(known=False, finished=self.shards.finished)
        self.shards.renew(req.worker_id, now)
        return m.HeartbeatReply(known=True, assignment=self._assignment(a), finished=self.shards.finished)

    # -- shards --------------------------------------------------------------------------------
    def lease(self, req: m.WorkerRequest, now: float) -> m.LeaseReply:
        cfg = self.config
        if self.shards.finished:
            return m.LeaseReply(m.LeaseStatus.FINISHED, num_shards=cfg.num_shards, epochs=cfg.epochs)
        if not self.membership.is_member(req.worker_id):
            return m.LeaseReply(m.LeaseStatus.REJOIN, num_shards=cfg.num_shards, epochs=cfg.epochs)
        self.membership.heartbeat(req.worker_id, now)  # any request is a sign of life
        lease = self.shards.lease(req.worker_id, now)
        if lease is None:
            return m.LeaseReply(
                m.LeaseStatus.WAIT, num_shards=cfg.num_shards, epochs=cfg.epochs, retry_after=cfg.wait_retry
            )
        self.dirty = True
        return m.LeaseReply(
            m.LeaseStatus.GRANTED,
            lease_id=lease.lease_id,
            shard=lease.shard,
            epoch=lease.epoch,
            num_shards=cfg.num_shards,
            epochs=cfg.epochs,
            expires_in=lease.expires_at - now,
        )

    def complete(self, req: m.LeaseDone, now: float) -> m.AckReply:
        epoch_before = self.shards.epoch
        outcome = self.shards.complete(req.lease_id, req.worker_id)
        if outcome is Outcome.STALE:
            return m.AckReply(False, "stale lease: it expired or was returned; the shard is redone elsewhere")
        self.dirty = True
        if self.shards.epoch != epoch_before:
            self._log(
                now,
                "epoch",
                f"epoch {epoch_before} done" + (" — all epochs finished" if self.shards.finished else ""),
            )
        return m.AckReply(True)

    def fail(self, req: m.LeaseDone, now: float) -> m.AckReply:
        res = self.shards.fail(req.lease_id, req.worker_id, req.reason or "unspecified")
        if res.outcome is Outcome.STALE:
            return m.AckReply(False, "stale lease")
        self.dirty = True
        if res.set_aside is not None:
            self._note_set_aside((res.set_aside,), now, "failures")
            return m.AckReply(True, "set aside")
        self._log(now, "shard_failed", f"{req.worker_id} failed a shard: {req.reason}")
        return m.AckReply(True, "returned to to-do")

    def release(self, req: m.LeaseDone, now: float) -> m.AckReply:
        back = self.shards.release(req.lease_id, req.worker_id, req.reason or f"released by {req.worker_id}")
        if back is None:
            return m.AckReply(False, "stale lease")
        self._note_returns((back,), now)
        return m.AckReply(True)

    # -- parameters ----------------------------------------------------------------------------
    def init(self, req: m.InitRequest, now: float) -> m.Parameters:
        try:
            taken = self.store.initialize(m.from_arrays(req.arrays))
        except (m.ArrayError, OptimizerError) as e:
            raise CoordinatorError("bad_parameters", str(e)) from None
        if taken:
            self.dirty = True
            self._log(now, "init", f"parameters initialized by {req.worker_id}")
        return self._parameters()

    def pull(self, req: m.PullRequest, now: float) -> m.Parameters:
        if req.have_version is not None and req.have_version == self.store.version and self.store.initialized:
            return m.Parameters(self.store.version, True, unchanged=True)
        return self._parameters()

    def push(self, req: m.PushRequest, now: float) -> m.PushReply:
        if req.lease_id is not None and not self.shards.holds(req.lease_id, req.worker_id):
            # the shard was taken back (lease expired or returned) and is redone elsewhere: its
            # gradients must not count twice
            self.stale_pushes += 1
            return m.PushReply(
                self.store.version,
                parameters=self._parameters() if req.return_parameters else None,
                applied=False,
                detail=f"lease {req.lease_id} is no longer held by {req.worker_id}: gradients not applied",
            )
        try:
            version = self.store.apply(m.from_arrays(req.gradients))
        except (m.ArrayError, OptimizerError) as e:
            raise CoordinatorError(
                "bad_gradients", str(e), status=409 if not self.store.initialized else 400
            ) from None
        self.pushes += 1
        self.dirty = True
        if req.samples > 0:
            self.samples_total += req.samples
            self._rate.append((now, req.samples))
        if req.loss is not None and np.isfinite(req.loss):
            self.loss = req.loss if self.loss is None else (1 - EMA) * self.loss + EMA * req.loss
        if req.accuracy is not None and np.isfinite(req.accuracy):
            self.accuracy = (
                req.accuracy if self.accuracy is None else (1 - EMA) * self.accuracy + EMA * req.accuracy
            )
        staleness = version - 1 - req.base_version if req.base_version is not None else 0
        return m.PushReply(version, max(0, staleness), self._parameters() if req.return_parameters else None)

    def report(self, req: m.ReportRequest, now: float) -> m.AckReply:
        for k, v in req.metrics.items():
            if not np.isfinite(v):
                raise CoordinatorError("bad_metric", f"metric {k} is not finite")
        self.reports.update(req.metrics)
        self.dirty = True
        return m.AckReply(True)

    # -- timers --------------------------------------------------------------------------------
    def tick(self, now: float) -> None:
        """Expire silent members (returning their leases) and overdue leases."""
        change = self.membership.expire(now)
        if change is not None:
            for w in change.left:  # silent, not known dead: no death counts against its shards
                self._note_returns(self.shards.worker_timed_out(w, f"{w} missed its heartbeats"), now)
        self._note_change(change, now)
        self._note_returns(self.shards.expire(now), now)

    def samples_per_second(self, now: float) -> float:
        while self._rate and self._rate[0][0] < now - RATE_WINDOW:
            self._rate.popleft()
        if not self._rate:
            return 0.0
        span = max(now - self._rate[0][0], 1.0)
        return sum(n for _, n in self._rate) / span

    # -- persistence ---------------------------------------------------------------------------
    def snapshot(self, now: float) -> m.Checkpoint:
        s = self.shards.snapshot()
        shards = m.ShardsSnapshot(
            num_shards=s["num_shards"],
            epochs=s["epochs"],
            epoch=s["epoch"],
            next_lease_id=s["next_lease_id"],
            completed_total=s["completed_total"],
            done=tuple(s["done"]),
            failures=dict(s["failures"]),
            set_aside=tuple(m.SetAsideInfo(a, n, r) for a, n, r in s["set_aside"]),
            deaths=dict(s["deaths"]),
        )
        return m.Checkpoint(
            job=self.config.job,
            saved_at=now,
            generation=self.membership.generation_number,
            param_version=self.store.version,
            shards=shards,
            samples_total=self.samples_total,
            parameters=m.to_arrays(self.store.params),
            optimizer_state=m.to_arrays(self.store.velocity),
            reports=dict(self.reports),
        )

    @classmethod
    def restore(cls, config: CoordinatorConfig, ck: m.Checkpoint, now: float) -> CoordinatorCore:
        """A core resumed from a checkpoint: same parameters, optimizer state, shard progress and a
        generation number above the saved one (workers rejoin into a new generation)."""
        if ck.shards.num_shards != config.num_shards or ck.shards.epochs != config.epochs:
            raise CoordinatorError(
                "checkpoint_mismatch",
                f"checkpoint has {ck.shards.num_shards} shards x {ck.shards.epochs} epochs, "
                f"the job has {config.num_shards} x {config.epochs}",
            )
        core = cls(config, generation=ck.generation)
        snap: dict[str, Any] = {
            "num_shards": ck.shards.num_shards,
            "epochs": ck.shards.epochs,
            "epoch": ck.shards.epoch,
            "done": list(ck.shards.done),
            "failures": dict(ck.shards.failures),
            "set_aside": [[a.shard, a.failures, a.reason] for a in ck.shards.set_aside],
            "deaths": dict(ck.shards.deaths),
            "next_lease_id": ck.shards.next_lease_id,
            "completed_total": ck.shards.completed_total,
        }
        core.shards = ShardQueue.restore(snap, config.lease_timeout, config.max_failures)
        if ck.parameters:
            try:
                core.store.load(
                    m.from_arrays(ck.parameters), m.from_arrays(ck.optimizer_state), ck.param_version
                )
            except (m.ArrayError, OptimizerError) as e:
                raise CoordinatorError("bad_checkpoint", str(e)) from None
        core.samples_total = ck.samples_total
        core.reports = dict(ck.reports)
        core.restored_from = ck.saved_at
        core._log(
            now,
            "restore",
            f"restored checkpoint of {ck.saved_at:.3f} (epoch {ck.shards.epoch}, version {ck.param_version})",
        )
        return core

    # -- status --------------------------------------------------------------------------------
    def status(self, now: float) -> dict[str, Any]:
        g = self.membership.generation
        return {
            "job": self.config.job,
            "finished": self.shards.finished,
            "generation": g.number,
            "world_size": g.world_size,
            "workers": [
                {
                    "worker_id": p.worker_id,
                    "rank": p.rank,
                    "address": p.address,
                    "last_seen_ago": round(now - self.membership.last_seen(p.worker_id), 3),
                    "leases": [le.shard for le in self.shards.leases_of(p.worker_id)],
                }
                for p in g.peers
            ],
            "shards": {
                **self.shards.counts(),
                "epoch": self.shards.epoch,
                "epochs": self.config.epochs,
                "num_shards": self.config.num_shards,
                "progress": round(self.shards.progress(), 4),
                "completed_total": self.shards.completed_total,
                "set_aside_detail": [
                    {"shard": a.shard, "failures": a.failures, "reason": a.reason}
                    for a in self.shards.set_aside()
                ],
            },
            "leases": [
                {"lease_id": le.lease_id, "shard": le.shard, "epoch": le.epoch, "worker_id": le.worker_id}
                for le in self.shards.leases()
            ],
            "lease_returns": self.lease_returns,
            "stale_pushes": self.stale_pushes,
            "progress": {
                "samples_per_second": round(self.samples_per_second(now), 2),
                "samples_total": self.samples_total,
                "loss": self.loss,
                "accuracy": self.accuracy,
                "param_version": self.store.version,
                "pushes": self.pushes,
                "reports": dict(self.reports),
            },
            "restored_from": self.restored_from,
            "log": [{"at": e.at, "kind": e.kind, "text": e.text} for e in list(self.log)[-50:]],
        }

    # -- helpers -------------------------------------------------------------------------------
    def _assignment(self, a: Assignment) -> m.AssignmentReply:
        return m.AssignmentReply(
            worker_id=a.worker_id,
            generation=a.generation,
            rank=a.rank,
            world_size=a.world_size,
            peers=tuple(m.PeerInfo(p.worker_id, p.address, p.rank) for p in a.peers),
            heartbeat_interval=self.config.heartbeat_interval,
            finished=self.shards.finished,
        )

    def _parameters(self) -> m.Parameters:
        return m.Parameters(self.store.version, self.store.initialized, m.to_arrays(self.store.params))

    def _note_change(self, change: GenerationChanged | None, now: float) -> None:
        if change is not None:
            self.dirty = True
            self._log(
                now,
                "generation",
                f"generation {change.generation.number} (world size {change.generation.world_size}): {change.reason}",
            )

    def _note_returns(self, returned: tuple[LeaseReturned, ...], now: float) -> None:
        for r in returned:
            self.lease_returns += 1
            self._log(
                now,
                "lease_returned",
                f"shard {r.lease.shard} (epoch {r.lease.epoch}, lease {r.lease.lease_id}) of {r.lease.worker_id} back to to-do: {r.reason}",
            )

    def _note_set_aside(self, aside: tuple[SetAside, ...], now: float, what: str = "deaths") -> None:
        for a in aside:
            self.dirty = True
            self._log(now, "set_aside", f"shard {a.shard} set aside after {a.failures} {what}: {a.reason}")

    def _log(self, now: float, kind: str, text: str) -> None:
        self.log.append(LogEntry(now, kind, text))
