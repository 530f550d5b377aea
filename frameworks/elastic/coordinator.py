"""The per-job coordinator: an aiohttp service its workers talk to with msgpack over HTTP.

Routes (POST bodies and replies are msgpack messages from ``messages.py``)::

    POST /v1/join       JoinRequest    -> AssignmentReply   (generation, rank, world size, peers)
    POST /v1/leave      WorkerRequest  -> AckReply          (returns the worker's leases)
    POST /v1/heartbeat  WorkerRequest  -> HeartbeatReply    (renews leases; known=False: rejoin)
    POST /v1/lease      WorkerRequest  -> LeaseReply        (GRANTED / WAIT / FINISHED / REJOIN)
    POST /v1/complete   LeaseDone      -> AckReply
    POST /v1/fail       LeaseDone      -> AckReply          (set aside after max_failures)
    POST /v1/release    LeaseDone      -> AckReply          (give back without a failure)
    POST /v1/init       InitRequest    -> Parameters        (first initializer wins)
    POST /v1/pull       PullRequest    -> Parameters
    POST /v1/push       PushRequest    -> PushReply         (SGD / momentum step)
    POST /v1/report     ReportRequest  -> AckReply          (free-form metrics)
    GET  /v1/status     JSON for the CLI and tests
    GET  /health

Errors are ``ErrorReply`` (msgpack) with 400 (bad input) or 409 (state conflict). A timer expires
silent workers and overdue leases; another writes a checkpoint every ``checkpoint_interval``
seconds when something changed, and once more on stop. On start the last checkpoint is restored.

Run: ``python -m frameworks.elastic.coordinator --spec job.toml --port 0`` (prints its URL).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import signal
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import attrs
from aiohttp import web

from frameworks.elastic import checkpoint, wire
from frameworks.elastic import messages as m
from frameworks.elastic.core import CoordinatorConfig, CoordinatorCore, CoordinatorError
from protocol.clock import Clock, SystemClock
from protocol.lifecycle import Service

log = logging.getLogger(__name__)
T = TypeVar("T")

MAX_BODY = 64 * 1024 * 1024


class Coordinator(Service):
    name = "elastic-coordinator"

    def __init__(
        self,
        config: CoordinatorConfig,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        checkpoint_dir: str | Path | None = None,
        checkpoint_interval: float = 30.0,
        clock: Clock | None = None,
        tick_interval: float | None = None,
    ) -> None:
        super().__init__()
        self.config = config
        self.host = host
        self.port = port
        self.checkpoint_dir = Path(checkpoint_dir) if checkpoint_dir else None
        self.checkpoint_interval = checkpoint_interval
        self.clock: Clock = clock or SystemClock()
        self.tick_interval = tick_interval or max(
            0.05, min(config.heartbeat_timeout, config.lease_timeout) / 4
        )
        self.core = CoordinatorCore(config)
        self.checkpoints_written = 0
        self._runner: web.AppRunner | None = None
        self._write_lock = asyncio.Lock()

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    # -- lifecycle -----------------------------------------------------------------------------
    async def _start(self) -> None:
        if self.checkpoint_dir is not None:
            ck = await asyncio.to_thread(checkpoint.load, self.checkpoint_dir)
            if ck is not None:
                self.core = CoordinatorCore.restore(self.config, ck, self.clock.now())
                log.info("restored checkpoint from %s", self.checkpoint_dir)
        app = web.Application(client_max_size=MAX_BODY)
        self._routes(app)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        self.port = int(self._runner.addresses[0][1])
        self.spawn(self._tick_loop(), name="coordinator-tick")
        if self.checkpoint_dir is not None:
            self.spawn(self._checkpoint_loop(), name="coordinator-checkpoint")

    async def _stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        if self.checkpoint_dir is not None:
            await self.checkpoint_now()

    async def checkpoint_now(self) -> Path | None:
        """Write a checkpoint now (atomically); returns its path."""
        if self.checkpoint_dir is None:
            return None
        async with self._write_lock:
            ck = self.core.snapshot(self.clock.now())
            self.core.dirty = False
            path = await asyncio.to_thread(checkpoint.save, self.checkpoint_dir, ck)
            self.checkpoints_written += 1
            return path

    async def _tick_loop(self) -> None:
        while True:
            await self.clock.sleep(self.tick_interval)
            self.core.tick(self.clock.now())

    async def _checkpoint_loop(self) -> None:
        while True:
            await self.clock.sleep(self.checkpoint_interval)
            if self.core.dirty:
                try:
                    await self.checkpoint_now()
                except OSError as e:  # keep serving; try again next interval
                    log.error("checkpoint to %s failed: %s", self.checkpoint_dir, e)

    # -- http ----------------------------------------------------------------------------------
    def _routes(self, app: web.Application) -> None:
        c = self.core_call
        app.router.add_post("/v1/join", c(m.JoinRequest, lambda core, r, now: core.join(r, now)))
        app.router.add_post("/v1/leave", c(m.WorkerRequest, lambda core, r, now: core.leave(r, now)))
        app.router.add_post("/v1/heartbeat", c(m.WorkerRequest, lambda core, r, now: core.heartbeat(r, now)))
        app.router.add_post("/v1/lease", c(m.WorkerRequest, lambda core, r, now: core.lease(r, now)))
        app.router.add_post("/v1/complete", c(m.LeaseDone, lambda core, r, now: core.complete(r, now)))
        app.router.add_post("/v1/fail", c(m.LeaseDone, lambda core, r, now: core.fail(r, now)))
        app.router.add_post("/v1/release", c(m.LeaseDone, lambda core, r, now: core.release(r, now)))
        app.router.add_post("/v1/init", c(m.InitRequest, lambda core, r, now: core.init(r, now)))
        app.router.add_post("/v1/pull", c(m.PullRequest, lambda core, r, now: core.pull(r, now)))
        app.router.add_post("/v1/push", c(m.PushRequest, lambda core, r, now: core.push(r, now)))
        app.router.add_post("/v1/report", c(m.ReportRequest, lambda core, r, now: core.report(r, now)))
        app.router.add_get("/v1/status", self._status)
        app.router.add_get("/health", self._health)

    def core_call(
        self, cls: type[T], fn: Callable[[CoordinatorCore, T, float], Any]
    ) -> Callable[[web.Request], Awaitable[web.Response]]:
        async def handler(request: web.Request) -> web.Response:
            body = await request.read()
            try:
                req = wire.decode(cls, body)
            except wire.DecodeError as e:
                return _error(400, "bad_request", str(e))
            try:
                reply = fn(self.core, req, self.clock.now())
            except CoordinatorError as e:
                return _error(e.status, e.code, e.reason)
            except Exception as e:  # a bug: log it with its stimulus and keep serving the others
                log.exception("coordinator %s failed on %r", request.path, req)
                return _error(500, "internal", f"{type(e).__name__}: {e}")
            return web.Response(body=wire.encode(reply), content_type=wire.MEDIA_TYPE)

        return handler

    async def _status(self, request: web.Request) -> web.Response:
        status = self.core.status(self.clock.now())
        status["checkpoints_written"] = self.checkpoints_written
        status["url"] = self.url
        return web.Response(text=json.dumps(status), content_type="application/json")

    async def _health(self, request: web.Request) -> web.Response:
        return web.json_response({"ok": True, "job": self.config.job})


def _error(status: int, code: str, reason: str) -> web.Response:
    return web.Response(
        status=status, body=wire.encode(m.ErrorReply(code, reason)), content_type=wire.MEDIA_TYPE
    )


# -- command line ------------------------------------------------------------------------------


def config_from_args(args: argparse.Namespace) -> tuple[CoordinatorConfig, str | None, float]:
    """The coordinator settings from ``--spec`` (a job TOML) overridden by explicit flags."""
    cfg = CoordinatorConfig()
    ck_dir: str | None = None
    ck_interval = 30.0
    if args.spec:
        from frameworks.elastic.spec import SpecError, parse_toml

        try:
            spec = parse_toml(Path(args.spec).read_text())
        except (OSError, SpecError) as e:
            raise SystemExit(f"coordinator: {args.spec}: {e}") from None
        cfg = attrs.evolve(
            cfg,
            job=spec.name,
            num_shards=spec.data.num_shards,
            epochs=spec.data.epochs,
            optimizer=spec.optimizer.kind,
            learning_rate=spec.optimizer.learning_rate,
            momentum=spec.optimizer.momentum,
        )
        ck_dir = spec.checkpoint.dir or None
        ck_interval = spec.checkpoint.interval
    overrides = {
        "job": args.job,
        "num_shards": args.num_shards,
        "epochs": args.epochs,
        "heartbeat_timeout": args.heartbeat_timeout,
        "lease_timeout": args.lease_timeout,
        "max_failures": args.max_failures,
        "optimizer": args.optimizer,
        "learning_rate": args.learning_rate,
        "momentum": args.momentum,
    }
    cfg = attrs.evolve(cfg, **{k: v for k, v in overrides.items() if v is not None})
    if args.checkpoint_dir is not None:
        ck_dir = args.checkpoint_dir or None
    if args.checkpoint_interval is not None:
        ck_interval = args.checkpoint_interval
    return cfg, ck_dir, ck_interval


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m frameworks.elastic.coordinator", description=__doc__.split("\n")[0]
    )
    p.add_argument("--spec", help="job TOML (data, optimizer and checkpoint sections are used)")
    p.add_argument("--job")
    p.add_argument("--num-shards", type=int)
    p.add_argument("--epochs", type=int)
    p.add_argument("--heartbeat-timeout", type=float)
    p.add_argument("--lease-timeout", type=float)
    p.add_argument("--max-failures", type=int)
    p.add_argument("--optimizer", choices=["sgd", "momentum"])
    p.add_argument("--learning-rate", type=float)
    p.add_argument("--momentum", type=float)
    p.add_argument("--checkpoint-dir")
    p.add_argument("--checkpoint-interval", type=float)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0)
    return p


async def serve(
    config: CoordinatorConfig, host: str, port: int, ck_dir: str | None, ck_interval: float
) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with Coordinator(
        config, host=host, port=port, checkpoint_dir=ck_dir, checkpoint_interval=ck_interval
    ) as coord:
        print(f"coordinator listening on {coord.url}", flush=True)
        await stop.wait()


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        cfg, ck_dir, ck_interval = config_from_args(args)
        CoordinatorCore(cfg)  # validates the settings before binding
    except (ValueError, CoordinatorError) as e:
        print(f"coordinator: {e}", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(cfg, args.host, args.port, ck_dir, ck_interval))
    return 0


if __name__ == "__main__":
    sys.exit(main())
