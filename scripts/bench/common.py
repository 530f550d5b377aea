"""Shared helpers for the benchmarks in ``scripts/bench/``.

Every benchmark prints one or more tables and ends with exactly one JSON line (``emit_json``):
``{"bench": NAME, "machine": {...}, ...}``. Figures are medians of ``--runs`` runs with their
min and max (``spread``), and latencies are reported as p50/p99 (``latency_ms``).

Processes (master, agents, the batch framework) are started from the venv's console scripts
with ``--port 0``; ``Proc.start`` waits for the ``... listening on http://HOST:PORT`` line, keeps
draining the output into a log file, and ``Proc.stop`` ends the process group it started
(SIGTERM, then SIGKILL after a grace period).

The scripts import this module as ``scripts.bench.common`` after putting the repository root on
``sys.path`` (``scripts/`` is not an installed package).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import platform
import pwd
import re
import shlex
import signal
import statistics
import sys
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import psutil

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
READY = re.compile(r"listening on (https?://\S+)")


class BenchError(RuntimeError):
    """A benchmark could not run (a process did not start, a deadline passed)."""


# --- the machine ---------------------------------------------------------------------------------


def bench_user() -> str:
    """The FrameworkInfo user of the benchmark frameworks: the agents' own user, so tasks run
    without a user switch (a `setpriv` exec in front of every task), as the raw spawner's do."""
    return pwd.getpwuid(os.getuid()).pw_name


def machine() -> dict[str, Any]:
    """Cores, memory and CPU model of this machine (for the tables and docs/benchmarks.md)."""
    model = platform.processor() or ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return {
        "cores": os.cpu_count() or 1,
        "physical_cores": psutil.cpu_count(logical=False) or os.cpu_count() or 1,
        "memory_gb": round(psutil.virtual_memory().total / 2**30, 1),
        "cpu": model,
        "python": platform.python_version(),
        "load1": round(os.getloadavg()[0], 2),
    }


# --- statistics ----------------------------------------------------------------------------------


def percentile(values: Sequence[float], p: float) -> float:
    """Linear-interpolated percentile (``p`` in 0..100) of ``values``; NaN when empty."""
    if not values:
        return math.nan
    xs = sorted(values)
    if len(xs) == 1:
        return float(xs[0])
    k = (len(xs) - 1) * (p / 100.0)
    lo = math.floor(k)
    hi = min(lo + 1, len(xs) - 1)
    return float(xs[lo] + (xs[hi] - xs[lo]) * (k - lo))


def latency_ms(seconds: Sequence[float]) -> dict[str, float]:
    """p50/p99/max in milliseconds of latencies given in seconds."""
    return {
        "p50_ms": round(percentile(seconds, 50) * 1000, 3),
        "p99_ms": round(percentile(seconds, 99) * 1000, 3),
        "max_ms": round(max(seconds) * 1000, 3) if seconds else math.nan,
        "n": len(seconds),
    }


@attrs.frozen
class Spread:
    median: float
    min: float
    max: float
    n: int

    def as_dict(self, digits: int = 3) -> dict[str, float | int]:
        return {
            "median": round(self.median, digits),
            "min": round(self.min, digits),
            "max": round(self.max, digits),
            "n": self.n,
        }

    def __str__(self) -> str:
        if self.n <= 1:
            return fmt(self.median)
        return f"{fmt(self.median)} [{fmt(self.min)}..{fmt(self.max)}]"


def spread(values: Iterable[float]) -> Spread:
    xs = [float(v) for v in values if v is not None and not math.isnan(float(v))]
    if not xs:
        return Spread(math.nan, math.nan, math.nan, 0)
    return Spread(statistics.median(xs), min(xs), max(xs), len(xs))


def aggregate(runs: Sequence[Mapping[str, Any]]) -> dict[str, Spread]:
    """Median/min/max of every numeric key present in all ``runs``."""
    if not runs:
        return {}
    keys = [k for k, v in runs[0].items() if isinstance(v, int | float) and not isinstance(v, bool)]
    return {k: spread(r[k] for r in runs if isinstance(r.get(k), int | float)) for k in keys}


async def repeat(n: int, run: Callable[[int], Awaitable[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Run ``run(i)`` ``n`` times in sequence and collect the results."""
    return [await run(i) for i in range(n)]


# --- output --------------------------------------------------------------------------------------


def fmt(v: object) -> str:
    if isinstance(v, float):
        if math.isnan(v):
            return "-"
        if abs(v) >= 1000:
            return f"{v:,.0f}"
        if abs(v) >= 10:
            return f"{v:.1f}"
        return f"{v:.3g}" if v else "0"
    if isinstance(v, int) and not isinstance(v, bool):
        return f"{v:,}"
    return str(v)


def print_table(title: str, headers: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    cells = [[fmt(c) for c in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in cells:
        for i, c in enumerate(row):
            widths[i] = max(widths[i], len(c))
    line = "  ".join("-" * w for w in widths)
    print(f"\n{title}")
    print("  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)))
    print(line)
    for row in cells:
        print("  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True))))
    sys.stdout.flush()


def emit_json(bench: str, payload: Mapping[str, Any]) -> None:
    """The benchmark's final line: one JSON object (``bench``, ``machine`` and the figures)."""
    out = {"bench": bench, "machine": machine(), **payload}
    print(json.dumps(out, default=_json_default, separators=(",", ":")), flush=True)


def _json_default(o: object) -> object:
    if isinstance(o, Spread):
        return o.as_dict()
    if isinstance(o, Path):
        return str(o)
    raise TypeError(f"not JSON serializable: {type(o).__name__}")


def log(msg: str) -> None:
    """Progress on stderr (stdout holds the tables and the JSON line)."""
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# --- processes -----------------------------------------------------------------------------------


def console(name: str, module: str) -> list[str]:
    """The venv's console script ``name`` or ``python -m module`` when it is not installed.
    ``AGORA_BENCH_<NAME>`` (e.g. ``AGORA_BENCH_AGORA_MASTER="python my_master.py"``) overrides
    the command, to benchmark another build."""
    override = os.environ.get("AGORA_BENCH_" + name.upper().replace("-", "_"))
    if override:
        return shlex.split(override)
    exe = BIN / name
    if exe.exists():
        return [str(exe)]
    return [sys.executable, "-m", module]


class Proc:
    """A component process we started (own session); output goes to ``log_path``."""

    def __init__(self, name: str, proc: asyncio.subprocess.Process, log_path: Path) -> None:
        self.name = name
        self.proc = proc
        self.log_path = log_path
        self.url = ""
        self._ready: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._drain: asyncio.Task[None] | None = None

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def address(self) -> str:
        """``host:port`` of the URL the process printed."""
        return self.url.split("://", 1)[-1].rstrip("/")

    @classmethod
    async def start(
        cls,
        name: str,
        argv: Sequence[str],
        log_path: Path,
        within: float = 30.0,
        env: Mapping[str, str] | None = None,
        ready: re.Pattern[str] = READY,
    ) -> Proc:
        _mkdir(log_path.parent)
        full_env = dict(os.environ)
        full_env.setdefault("PYTHONUNBUFFERED", "1")
        if env:
            full_env.update(env)
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
            env=full_env,
            cwd=str(REPO),
        )
        self = cls(name, proc, log_path)
        self._drain = asyncio.get_running_loop().create_task(self._read(ready), name=f"drain-{name}")
        try:
            async with asyncio.timeout(within):
                self.url = await asyncio.shield(self._ready)
        except (TimeoutError, BenchError) as exc:
            await self.stop()
            tail = _tail(log_path)
            raise BenchError(f"{name} did not start ({exc or 'timeout'}); log {log_path}:\n{tail}") from None
        return self

    async def _read(self, ready: re.Pattern[str]) -> None:
        assert self.proc.stdout is not None
        with self.log_path.open("ab") as f:
            async for line in self.proc.stdout:
                f.write(line)
                if not self._ready.done():
                    m = ready.search(line.decode("utf-8", "replace"))
                    if m:
                        self._ready.set_result(m.group(1))
                    f.flush()
            f.flush()
        if not self._ready.done():
            self._ready.set_exception(BenchError(f"{self.name} exited with {await self.proc.wait()}"))
            self._ready.exception()  # mark retrieved

    def rss(self) -> int:
        """Resident set size in bytes (0 once gone)."""
        try:
            return int(psutil.Process(self.pid).memory_info().rss)
        except psutil.Error:
            return 0

    def cpu_seconds(self) -> float:
        try:
            t = psutil.Process(self.pid).cpu_times()
            return float(t.user + t.system)
        except psutil.Error:
            return 0.0

    async def stop(self, grace: float = 10.0) -> int | None:
        """SIGTERM the process group we started, SIGKILL it after ``grace`` seconds."""
        if self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                async with asyncio.timeout(grace):
                    await self.proc.wait()
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                await self.proc.wait()
        # the group may hold children that outlived the leader (task processes): end them too
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        if self._drain is not None:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                async with asyncio.timeout(5):
                    await self._drain
        return self.proc.returncode


def _mkdir(path: Path) -> None:
    path.mkdir(parents=True, exist_ok=True)


def _tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


async def start_master(work_dir: Path, *extra: str, within: float = 60.0) -> Proc:
    _mkdir(work_dir)
    argv = [
        *console("agora-master", "master.main"),
        "--ip",
        "127.0.0.1",
        "--port",
        "0",
        "--work-dir",
        str(work_dir),
        *extra,
    ]
    return await Proc.start("master", argv, work_dir / "master.log", within=within)


def without_gpus(resources: str) -> str:
    """The agent's ``--resources`` with ``gpus:0`` unless they name gpus: the benchmarks'
    frameworks lack ``GPU_RESOURCES``, and an agent that probed this machine's GPUs would be
    offered to none of them (Mesos semantics), so on a GPU machine they would wait forever."""
    names = {t.split(":", 1)[0].split("(", 1)[0].strip() for t in resources.split(";") if t.strip()}
    return resources if "gpus" in names else f"{resources.rstrip(';')};gpus:0"


async def start_agent(master: str, work_dir: Path, resources: str, *extra: str, within: float = 60.0) -> Proc:
    _mkdir(work_dir)
    resources = without_gpus(resources)
    argv = [
        *console("agora-agent", "agent.main"),
        "--master",
        master,
        "--port",
        "0",
        "--work-dir",
        str(work_dir),
        "--resources",
        resources,
        *extra,
    ]
    return await Proc.start(f"agent-{work_dir.name}", argv, work_dir / "agent.log", within=within)


async def start_batch(master: str, work_dir: Path, *extra: str, within: float = 60.0) -> Proc:
    _mkdir(work_dir)
    argv = [
        sys.executable,
        "-m",
        "frameworks.batch",
        "--master",
        master,
        "--port",
        "0",
        "--work-dir",
        str(work_dir),
        *extra,
    ]
    return await Proc.start("batch", argv, work_dir / "batch.log", within=within)


async def stop_all(procs: Iterable[Proc]) -> None:
    await asyncio.gather(*(p.stop() for p in procs), return_exceptions=True)


async def wait_until(
    cond: Callable[[], bool | Awaitable[bool]], within: float, interval: float = 0.02, what: str = "condition"
) -> None:
    """Poll ``cond`` until true (only where no event exists to await); BenchError after ``within`` s."""
    deadline = time.monotonic() + within
    while True:
        r = cond()
        if not isinstance(r, bool):
            r = await r
        if r:
            return
        if time.monotonic() > deadline:
            raise BenchError(f"timed out after {within:.0f}s waiting for {what}")
        await asyncio.sleep(interval)


def run_main(coro: Awaitable[int]) -> int:
    """Run a benchmark's async main on uvloop (as the components do)."""
    import logging

    import uvloop

    logging.basicConfig(level=logging.WARNING, format="[%(asctime)s] %(name)s: %(message)s", stream=sys.stderr)
    logging.getLogger("frameworks.client.driver").setLevel(logging.INFO)

    async def wrapped() -> int:
        return await coro

    return uvloop.run(wrapped())


# --- a load-generating framework on the client library ----------------------------------------

EPS = 1e-9


RETRY_REASONS = frozenset({"REASON_INVALID_OFFERS", "REASON_OFFER_RESCINDED"})


class Runner:
    """A framework (a ``Scheduler`` for ``SchedulerDriver``) that launches ``total`` tasks on
    whatever its cached (reusable) offers hold, one ACCEPT per offer with as many tasks as fit.

    Records per task the ACCEPT time and the TASK_RUNNING arrival (launch latency), and the
    first ACCEPT and the last terminal update (throughput). ``hold``: done when every task is
    RUNNING (tasks are left running). ``ack_workers`` > 0: the driver's ``ack_concurrency``
    (concurrent acknowledgement calls; 0 = the driver's default). ``window`` > 0: at most that many
    tasks launched and not yet terminal (a steady state, so latency is not a burst's queue).
    """

    def __init__(
        self,
        total: int,
        cpus: float,
        mem: float,
        prefix: str,
        command: Any,
        hold: bool = False,
        ack_workers: int = 0,
        window: int = 0,
    ) -> None:
        from protocol.resources import Resources

        self.total = total
        self.cpus = cpus
        self.mem = mem
        self.shape = Resources.of(cpus=cpus, mem=mem)
        self.shape_mesos = self.shape.to_mesos()
        self.prefix = prefix
        self.command = command
        self.hold = hold
        self.ack_workers = ack_workers
        self.window = window
        self.next_index = 0
        self.retry: list[str] = []
        self.retried = 0
        self.overclaims = 0
        self.unsent = 0
        self.accepted_at: dict[str, float] = {}
        self.latencies: list[float] = []
        self.states: dict[str, int] = {}
        self.running = 0
        self.terminal = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self.accepts = 0
        self.first_launch: float | None = None
        self.last_running: float | None = None
        self.last_terminal: float | None = None
        self.wake = asyncio.Event()
        self.done = asyncio.Event()
        self.errors: list[str] = []

    # Scheduler callbacks (run inside the driver's stream loop; kept short and synchronous)
    def subscribed(self, driver: Any, framework_id: str, master_info: object) -> None:
        self.wake.set()

    def offers(self, driver: Any, offers: list[Any]) -> None:
        self.wake.set()

    def offer_rescinded(self, driver: Any, offer_id: str) -> None:
        self.wake.set()

    def message(self, driver: Any, agent_id: str, executor_id: str, data: bytes) -> None:
        return None

    def failure(self, driver: Any, agent_id: str | None, executor_id: str | None, status: int | None) -> None:
        return None

    def disconnected(self, driver: Any) -> None:
        if not self.done.is_set():
            self.errors.append("driver disconnected")

    def error(self, driver: Any, message: str) -> None:
        self.errors.append(f"framework error: {message}")
        self.done.set()

    def update(self, driver: Any, status: Any) -> None:
        from protocol.task_states import TaskState, is_terminal

        now = time.perf_counter()
        tid = status.task_id.value
        state = status.state
        if state is TaskState.TASK_RUNNING:
            t = self.accepted_at.get(tid)
            if t is not None:
                self.latencies.append(now - t)
                self.running += 1
                self.last_running = now
                if self.hold and self.running >= self.total:
                    self.done.set()
        if is_terminal(state) and tid in self.accepted_at:
            self.accepted_at.pop(tid, None)
            if self._lost_to_offer_race(status) and self.retried < self.total:
                # the offer was gone by the time the ACCEPT arrived (rescinded, expired): the
                # task never started; launch it again on a current offer
                self.retried += 1
                self.retry.append(tid)
                self.in_flight -= 1
                self.wake.set()
                return
            self.states[state.name] = self.states.get(state.name, 0) + 1
            if state is not TaskState.TASK_FINISHED and len(self.errors) < 5:
                self.errors.append(f"{tid}: {state.name} {status.reason} {status.message}")
            self.terminal += 1
            self.in_flight -= 1
            self.last_terminal = now
            if self.terminal >= self.total:
                self.done.set()
            self.wake.set()

    def _lost_to_offer_race(self, status: Any) -> bool:
        """The task never started because the offer had changed under the ACCEPT: the offer was
        gone (rescinded/expired) or the master's copy held less than our cache (an OFFERS
        regrowth that crossed our ACCEPT)."""
        reason = status.reason.name if status.reason is not None else ""
        if reason in RETRY_REASONS:
            return True
        if reason == "REASON_TASK_INVALID" and "than offered" in (status.message or ""):
            self.overclaims += 1
            return True
        return False

    async def launcher(self, driver: Any) -> None:
        """Woken by offers and updates: fill every cached offer with pending tasks, one ACCEPT
        per offer, the ACCEPTs of one pass sent concurrently."""
        from frameworks.client.offers import OfferCacheError
        from protocol.mesos import TaskInfo
        from protocol.mesos_common import TaskID

        while self.next_index < self.total or self.retry:
            await self.wake.wait()
            self.wake.clear()
            if not driver.connected:
                continue
            sends = []
            for cached in driver.offers:
                left = self.total - self.next_index + len(self.retry)
                if self.window:
                    left = min(left, self.window - self.in_flight)
                if left <= 0:
                    break
                avail = cached.available
                fit = min(
                    int(avail.scalar("cpus") / self.cpus + EPS),
                    int(avail.scalar("mem") / self.mem + EPS),
                    left,
                )
                if fit <= 0:
                    continue
                try:
                    # claim now (synchronously), so later planning sees what this pass took
                    claim = driver.offers.take(cached.offer_id, self.shape * fit)
                except OfferCacheError:
                    continue
                infos = []
                for _ in range(fit):
                    if self.retry:
                        tid = f"{self.retry.pop()}r"
                    else:
                        tid = f"{self.prefix}-{self.next_index}"
                        self.next_index += 1
                    infos.append(
                        TaskInfo(
                            name=tid,
                            task_id=TaskID(tid),
                            resources=self.shape_mesos,
                            command=self.command,
                        )
                    )
                now = time.perf_counter()
                if self.first_launch is None:
                    self.first_launch = now
                for t in infos:
                    self.accepted_at[t.task_id.value] = now
                self.in_flight += fit
                self.max_in_flight = max(self.max_in_flight, self.in_flight)
                self.accepts += 1
                sends.append(self._send(driver, cached.offer_id, infos, claim))
            # at most 8 ACCEPTs in flight (the transport pools 16 connections; a call queued for
            # a connection longer than its connect timeout fails)
            try:
                for i in range(0, len(sends), 8):
                    await asyncio.gather(*sends[i : i + 8])
            finally:
                for c in sends:
                    c.close()  # the ones a cancellation left unstarted (no "never awaited")

    async def _send(self, driver: Any, offer_id: str, infos: list[Any], claim: Any) -> None:
        from frameworks.client.offers import OfferCacheError
        from frameworks.client.transport import TransportError

        try:
            await driver.launch(offer_id, infos, claims=[claim])
        except (OfferCacheError, TransportError) as exc:
            # the offer was rescinded or shrunk before the call went out, or the call failed
            # (an overloaded master): plan these again
            if isinstance(exc, TransportError) and len(self.errors) < 5:
                self.errors.append(f"ACCEPT failed: {exc}")
            self.unsent += len(infos)
            for t in infos:
                self.accepted_at.pop(t.task_id.value, None)
                self.retry.append(t.task_id.value)
            self.in_flight -= len(infos)
            self.wake.set()


async def run_framework(
    master: str,
    n: int,
    cpus: float,
    mem: float,
    within: float,
    command: Any,
    hold: bool = False,
    ack_workers: int = 0,
    name: str = "bench",
    on_done: Callable[[Runner], Awaitable[dict[str, Any]]] | None = None,
    before_launch: Callable[[], Awaitable[None]] | None = None,
    partial_ok: bool = False,
    window: int = 0,
) -> dict[str, Any]:
    """Subscribe a REUSABLE_OFFERS framework (client library, msgpack), launch ``n`` tasks, wait
    until all are terminal (or RUNNING with ``hold``), tear down; the figures of the run.
    ``before_launch`` runs once subscribed, before the first ACCEPT (e.g. to connect agents);
    ``on_done`` runs while the framework is still subscribed (e.g. to sample the master).
    ``partial_ok``: at the deadline, report what was reached (``complete`` false) instead of
    failing, as long as some task runs."""
    import uuid

    from frameworks.client.demand import demand
    from frameworks.client.driver import SchedulerDriver
    from frameworks.client.transport import HttpTransport
    from protocol.codec import MSGPACK
    from protocol.mesos import Capability, CapabilityType, FrameworkInfo

    info = FrameworkInfo(
        user=bench_user(),
        name=name,
        # GPU_RESOURCES: an agent with GPUs (one named in --resources) is offered to it too
        capabilities=(Capability(type=CapabilityType.REUSABLE_OFFERS), Capability(type=CapabilityType.GPU_RESOURCES)),
    )
    runner = Runner(n, cpus, mem, f"{name}-{uuid.uuid4().hex[:8]}", command, hold=hold, ack_workers=ack_workers, window=window)
    extra: dict[str, Any] = {}
    kw: dict[str, Any] = {"ack_concurrency": ack_workers} if ack_workers else {}
    driver = SchedulerDriver(info, HttpTransport(master, MSGPACK), runner, **kw)  # type: ignore[arg-type]
    async with driver:
        await driver.wait_subscribed(within=30)
        await driver.request([demand(runner.shape, n)])
        if before_launch is not None:
            await before_launch()  # offers arriving meanwhile are cached
        loop = asyncio.get_running_loop()
        helpers = [loop.create_task(runner.launcher(driver), name="bench-launcher")]
        waiter = loop.create_task(runner.done.wait())
        complete = True
        try:
            async with asyncio.timeout(within):
                await asyncio.wait([waiter, *helpers], return_when=asyncio.FIRST_COMPLETED)
            for h in helpers:
                if h.done() and not h.cancelled() and h.exception() is not None:
                    raise BenchError(f"{name}: {h.get_name()} failed: {h.exception()!r}") from h.exception()
            if not runner.done.is_set():
                await asyncio.wait_for(waiter, within)
        except TimeoutError:
            msg = (
                f"{name}: {runner.running} running, {runner.terminal} terminal of {n} after {within:.0f}s "
                f"(launched {runner.next_index}; {runner.errors[:3]})"
            )
            if not (partial_ok and runner.running):
                raise BenchError(msg) from None
            log(f"  {msg}: reporting the partial run")
            complete = False
        finally:
            waiter.cancel()
            for h in helpers:
                h.cancel()
            for h in helpers:
                with contextlib.suppress(asyncio.CancelledError):
                    await h
        if on_done is not None:
            extra = await on_done(runner)
        with contextlib.suppress(Exception):
            await driver.teardown()
    finished = runner.states.get("TASK_FINISHED", 0)
    if not hold and finished == 0:
        raise BenchError(f"{name}: no task finished: {runner.errors}")
    assert runner.first_launch is not None
    end = runner.last_running if hold else runner.last_terminal
    assert end is not None
    dt = max(end - runner.first_launch, 1e-9)
    reached = n if complete else (runner.running if hold else runner.terminal)
    return {
        "tasks": n,
        "complete": complete,
        "reached": reached,
        "seconds": dt,
        "rate": reached / dt,
        "finished": finished,
        "failed": 0 if hold else n - finished,
        "accepts": runner.accepts,
        "retried": runner.retried,
        "overclaims": runner.overclaims,
        "unsent": runner.unsent,
        "max_in_flight": runner.max_in_flight,
        **{f"launch_{k}": v for k, v in latency_ms(runner.latencies).items() if k != "n"},
        "errors": runner.errors[:3],
        **extra,
    }


# --- profiling (py-spy) ------------------------------------------------------------------------


class PySpy:
    """``py-spy record`` of one process into collapsed stacks (``--profile``); ``summary()`` gives
    the functions with the most samples on top of the stack (self) and anywhere in it (total)."""

    def __init__(self, pid: int, out: Path, rate: int = 200) -> None:
        self.pid = pid
        self.out = out
        self.rate = rate
        self.proc: asyncio.subprocess.Process | None = None

    @staticmethod
    def available() -> bool:
        return (BIN / "py-spy").exists()

    async def start(self) -> None:
        _mkdir(self.out.parent)
        self.proc = await asyncio.create_subprocess_exec(
            str(BIN / "py-spy"),
            "record",
            "--pid",
            str(self.pid),
            "--rate",
            str(self.rate),
            "--format",
            "raw",
            "--nonblocking",
            "-o",
            str(self.out),
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )

    async def stop(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                async with asyncio.timeout(30):
                    await self.proc.wait()
            except TimeoutError:
                self.proc.kill()
                await self.proc.wait()

    def summary(self, top: int = 15) -> dict[str, list[tuple[str, float]]]:
        return summarize_collapsed(self.out, top)


def summarize_collapsed(path: Path, top: int = 15) -> dict[str, list[tuple[str, float]]]:
    """Self and total sample shares (percent) per function from py-spy's collapsed stacks."""
    self_n: dict[str, int] = {}
    total_n: dict[str, int] = {}
    samples = 0
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return {"self": [], "total": []}
    for line in text.splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        frames = [_short_frame(f) for f in stack.split(";") if f and not f.startswith("process ")]
        frames = [f for f in frames if f]
        if not frames:
            continue
        samples += n
        self_n[frames[-1]] = self_n.get(frames[-1], 0) + n
        for f in set(frames):
            if not _generic(f):
                total_n[f] = total_n.get(f, 0) + n
    if not samples:
        return {"self": [], "total": []}

    def pct(d: dict[str, int]) -> list[tuple[str, float]]:
        return [(k, round(100.0 * v / samples, 1)) for k, v in sorted(d.items(), key=lambda kv: -kv[1])[:top]]

    return {"self": pct(self_n), "total": pct(total_n), "samples": [("samples", float(samples))]}


_GENERIC = ("stdlib/asyncio/", "asyncio/", "selectors.py", "click/", "uvloop/", "aiohttp/web_protocol.py", "stdlib/runpy.py")


def _generic(frame: str) -> bool:
    """Frames every sample passes through (the loop, the CLI, ``<module>``): no news inclusively."""
    return frame.startswith(_GENERIC) or frame.endswith((":<module>", ":run_main", ":main", ":wrapped", ":serve"))


def _short_frame(frame: str) -> str:
    """``func (/path/to/repo/master/state.py:123)`` -> ``master/state.py:func``."""
    m = re.match(r"(?P<func>.*?) \((?P<file>[^:()]+)(?::\d+)?\)$", frame.strip())
    if not m:
        return frame.strip()
    file = m.group("file")
    for marker in ("/site-packages/", "/lib/python3"):
        if marker in file:
            file = file.split(marker, 1)[1]
            if marker == "/lib/python3":
                file = "stdlib/" + file.split("/", 1)[-1]
            break
    else:
        with contextlib.suppress(ValueError):
            file = str(Path(file).resolve().relative_to(REPO))
    return f"{file}:{m.group('func')}"


def print_profile(title: str, summary: Mapping[str, Sequence[tuple[str, float]]], top: int = 12) -> None:
    rows_self = list(summary.get("self", []))[:top]
    rows_total = list(summary.get("total", []))[:top]
    if rows_self:
        print_table(f"{title}: self time (% of samples)", ["function", "%"], rows_self)
    if rows_total:
        print_table(f"{title}: inclusive time (% of samples)", ["function", "%"], rows_total)
