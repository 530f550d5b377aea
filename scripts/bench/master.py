"""The master alone: task throughput with 1,000 simulated agents, and the master's memory with
10,000 connected agents while 100,000 tasks run.

    .venv/bin/python scripts/bench/master.py                          # issue-level sizes
    .venv/bin/python scripts/bench/master.py --agents 20 --tasks 300 \\
        --scale-agents 50 --scale-tasks 500 --runs 1                   # smoke (seconds)

A real ``agora-master`` (subprocess) and *simulated agents* that speak the real agent channel
(``protocol.agent_channel``: a WebSocket to ``/api/v1/agent``, msgpack ``Frame``s through
``protocol.codec``) over loopback but start no processes: RUN_TASKS is answered at once with
STATUS_UPDATE TASK_RUNNING and TASK_FINISHED (fresh 16-byte uuids; an update is resent until its
ACKNOWLEDGE comes back), PING with PONG, KILL_TASK / SHUTDOWN_FRAMEWORK with TASK_KILLED. Many
agents share one asyncio process (``--sim-procs`` processes, aiohttp client WebSockets).

The framework is the client library (``SchedulerDriver``, msgpack, ``REUSABLE_OFFERS``), in
this process, launching ``true`` tasks (never run) one ACCEPT per offer.

* **throughput** — ``--agents`` agents, ``--tasks`` tasks per run: tasks/s from the first ACCEPT
  to the last TASK_FINISHED, ACCEPT → TASK_RUNNING latency, and the master's CPU per task
  (target ≥ 5,000 tasks/s with 1,000 agents);
* **scale** — ``--scale-agents`` agents connect and heartbeat (master pings), then
  ``--scale-tasks`` tasks are launched and kept RUNNING; the master's RSS is sampled throughout
  (target ≤ 1 GB with 10,000 agents and 100,000 tasks).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from protocol import agent_channel as ac
from protocol import codec, mesos
from protocol.resources import Resources
from protocol.task_states import TaskState as TS
from scripts.bench.common import (
    BenchError,
    Proc,
    PySpy,
    aggregate,
    emit_json,
    log,
    machine,
    print_profile,
    print_table,
    run_framework,
    run_main,
    start_master,
)

HERE = Path(__file__).resolve()
MT = ac.MessageType
GB = 2**30


# --- simulated agents (the worker processes) -------------------------------------------------------


class SimStats:
    def __init__(self) -> None:
        self.registered = 0
        self.run_tasks = 0
        self.updates = 0
        self.acks = 0
        self.pings = 0
        self.kills = 0
        self.resent = 0
        self.frames_in = 0
        self.frames_out = 0
        self.disconnects = 0
        self.errors: list[str] = []


class SimAgent:
    """One simulated agent on its own WebSocket."""

    def __init__(self, index: int, resources: tuple[Any, ...], hold: bool, stats: SimStats) -> None:
        self.index = index
        self.resources = resources
        self.hold = hold
        self.stats = stats
        self.agent_id: mesos.AgentID | None = None
        self.ws: aiohttp.ClientWebSocketResponse | None = None
        self.registered = asyncio.Event()
        # unacknowledged updates: uuid -> (message, last sent)
        self.pending: dict[bytes, tuple[ac.StatusUpdateMsg, float]] = {}
        # tasks kept running (hold mode): (framework id, task id)
        self.running: set[tuple[str, str]] = set()

    def _update(self, fid: mesos.FrameworkID, task_id: mesos.TaskID, state: Any, now: float) -> ac.StatusUpdateMsg:
        u = uuid.uuid4().bytes
        msg = ac.StatusUpdateMsg(
            framework_id=fid,
            status=mesos.TaskStatus(
                task_id=task_id,
                state=state,
                source=mesos.Source.SOURCE_EXECUTOR,
                agent_id=self.agent_id,
                executor_id=mesos.ExecutorID(task_id.value),
                timestamp=now,
                uuid=u,
            ),
        )
        self.pending[u] = (msg, now)
        return msg

    async def send(self, bodies: list[ac.Body]) -> None:
        if self.ws is None or self.ws.closed or not bodies:
            return
        # keep frames well under the cap: at most 2,000 messages per frame
        for i in range(0, len(bodies), 2000):
            await self.ws.send_bytes(ac.encode_frame(bodies[i : i + 2000]))
            self.stats.frames_out += 1

    async def run(self, session: aiohttp.ClientSession, url: str) -> None:
        try:
            self.ws = await session.ws_connect(url + ac.PATH, max_msg_size=ac.MAX_FRAME_BYTES, autoping=True)
        except (aiohttp.ClientError, OSError) as exc:
            self.stats.errors.append(f"agent {self.index}: connect: {exc!r}")
            self.registered.set()
            return
        ws = self.ws
        await self.send(
            [
                ac.Register(
                    hostname=f"sim-{self.index}",
                    port=1,
                    resources=self.resources,
                    version="0.1.0",
                    isolation="psutil",
                    boot_id="sim",
                )
            ]
        )
        try:
            async for msg in ws:
                if msg.type is not aiohttp.WSMsgType.BINARY:
                    break
                self.stats.frames_in += 1
                _, bodies = ac.decode_frame(msg.data)
                out: list[ac.Body] = []
                now = time.time()
                for b in bodies:
                    if isinstance(b, ac.Ping):
                        self.stats.pings += 1
                        out.append(ac.Pong(seq=b.seq))
                    elif isinstance(b, ac.RunTasks):
                        fid = b.framework_id
                        n0 = len(out)
                        for task in b.tasks:
                            self.stats.run_tasks += 1
                            out.append(self._update(fid, task.task_id, TS.TASK_RUNNING, now))
                            if self.hold:
                                self.running.add((fid.value, task.task_id.value))
                            else:
                                out.append(self._update(fid, task.task_id, TS.TASK_FINISHED, now))
                        self.stats.updates += len(out) - n0
                    elif isinstance(b, ac.AcknowledgeMsg):
                        if self.pending.pop(b.uuid, None) is not None:
                            self.stats.acks += 1
                    elif isinstance(b, ac.KillTask):
                        key = (b.framework_id.value, b.task_id.value)
                        if key in self.running:
                            self.running.discard(key)
                            self.stats.kills += 1
                            out.append(self._update(b.framework_id, b.task_id, TS.TASK_KILLED, now))
                    elif isinstance(b, ac.ShutdownFramework):
                        for key in [k for k in self.running if k[0] == b.framework_id.value]:
                            self.running.discard(key)
                            self.stats.kills += 1
                            out.append(self._update(b.framework_id, mesos.TaskID(key[1]), TS.TASK_KILLED, now))
                    elif isinstance(b, ac.Registered):
                        self.agent_id = b.agent_id
                        self.stats.registered += 1
                        self.registered.set()
                    elif isinstance(b, ac.Refused):
                        self.stats.errors.append(f"agent {self.index}: refused: {b.message}")
                        self.registered.set()
                await self.send(out)
        except (aiohttp.ClientError, ConnectionError, codec.DecodeError) as exc:
            self.stats.errors.append(f"agent {self.index}: {exc!r}")
        finally:
            self.stats.disconnects += 1
            self.registered.set()

    async def resend(self, older_than: float) -> None:
        """Resend updates not acknowledged for ``older_than`` seconds (at-least-once)."""
        now = time.time()
        stale = [(u, m) for u, (m, t) in self.pending.items() if now - t >= older_than]
        for u, m in stale:
            self.pending[u] = (m, now)
        self.stats.resent += len(stale)
        with contextlib.suppress(aiohttp.ClientError, ConnectionError):
            await self.send([m for _, m in stale])


async def sim_worker(url: str, first: int, count: int, resources: str, hold: bool, connect_parallel: int) -> int:
    """A worker process: ``count`` simulated agents; prints JSON lines on stdout for the parent
    (``registered`` when all are registered, ``stats`` when told to stop by SIGTERM)."""
    stats = SimStats()
    res = Resources.parse(resources).to_mesos()
    agents = [SimAgent(first + i, res, hold, stats) for i in range(count)]
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    connector = aiohttp.TCPConnector(limit=0, force_close=False)
    t0 = time.perf_counter()
    async with aiohttp.ClientSession(connector=connector) as session:
        tasks: list[asyncio.Task[None]] = []
        gate = asyncio.Semaphore(connect_parallel)

        async def start(a: SimAgent) -> None:
            async with gate:
                tasks.append(loop.create_task(a.run(session, url)))
                await a.registered.wait()

        await asyncio.gather(*(start(a) for a in agents))
        print(
            json.dumps({"event": "registered", "n": stats.registered, "seconds": time.perf_counter() - t0,
                        "errors": stats.errors[:3]}),
            flush=True,
        )

        async def resender() -> None:
            while True:
                await asyncio.sleep(5.0)
                for a in agents:
                    await a.resend(10.0)

        rs = loop.create_task(resender())
        await stop.wait()
        rs.cancel()
        _print_stats(stats)
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return 0


def _print_stats(s: SimStats) -> None:
    print(
        json.dumps(
            {
                "event": "stats",
                "registered": s.registered,
                "run_tasks": s.run_tasks,
                "updates": s.updates,
                "acks": s.acks,
                "pings": s.pings,
                "kills": s.kills,
                "resent": s.resent,
                "frames_in": s.frames_in,
                "frames_out": s.frames_out,
                "errors": s.errors[:5],
            }
        ),
        flush=True,
    )


class SimFleet:
    """The parent's handle on the worker processes."""

    def __init__(self) -> None:
        self.procs: list[asyncio.subprocess.Process] = []
        self.registered: list[dict[str, Any]] = []

    @classmethod
    async def start(
        cls, url: str, agents: int, procs: int, resources: str, hold: bool, connect_parallel: int, within: float
    ) -> SimFleet:
        self = cls()
        per = [agents // procs + (1 if i < agents % procs else 0) for i in range(procs)]
        first = 0
        for n in per:
            if n == 0:
                continue
            p = await asyncio.create_subprocess_exec(
                sys.executable,
                str(HERE),
                "--sim-worker",
                "--url",
                url,
                "--first",
                str(first),
                "--count",
                str(n),
                "--resources",
                resources,
                "--connect-parallel",
                str(connect_parallel),
                *(["--hold"] if hold else []),
                stdout=asyncio.subprocess.PIPE,
                start_new_session=True,
            )
            self.procs.append(p)
            first += n
        try:
            async with asyncio.timeout(within):
                for p in self.procs:
                    self.registered.append(await self._line(p))
        except (TimeoutError, BenchError):
            await self.stop()
            raise BenchError(f"simulated agents did not register within {within:.0f}s") from None
        got = sum(r["n"] for r in self.registered)
        if got < agents:
            errs = [e for r in self.registered for e in r.get("errors", [])]
            await self.stop()
            raise BenchError(f"only {got}/{agents} simulated agents registered: {errs[:3]}")
        return self

    @staticmethod
    async def _line(p: asyncio.subprocess.Process) -> dict[str, Any]:
        assert p.stdout is not None
        line = await p.stdout.readline()
        if not line:
            raise BenchError(f"simulated-agent worker {p.pid} exited ({await p.wait()})")
        result: dict[str, Any] = json.loads(line)
        return result

    @property
    def registration_seconds(self) -> float:
        return max((r["seconds"] for r in self.registered), default=0.0)

    def pids(self) -> list[int]:
        return [p.pid for p in self.procs]

    async def stop(self) -> dict[str, Any]:
        totals: dict[str, Any] = {}
        for p in self.procs:
            if p.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    p.send_signal(signal.SIGTERM)
        for p in self.procs:
            try:
                async with asyncio.timeout(30):
                    st = await self._line(p)
                for k, v in st.items():
                    if isinstance(v, int):
                        totals[k] = totals.get(k, 0) + v
                    elif k == "errors":
                        totals.setdefault("errors", []).extend(v)
            except (TimeoutError, BenchError, json.JSONDecodeError):
                pass
            if p.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, signal.SIGKILL)
            await p.wait()
        return totals


# --- the master under test -------------------------------------------------------------------------


def master_config(path: Path, **overrides: Any) -> Path:
    """A TOML config with the master's default limits (connection caps, per-principal rate limit:
    agent connections have their own cap and the framework's acknowledgements are batched, so the
    defaults carry these loads) except the per-stream event buffer, raised so that the scale phase's
    100,000 RUNNING updates cannot close a framework stream that falls behind while it launches."""
    values: dict[str, Any] = {
        "max_framework_queue": 1_000_000,
        "log_level": "WARNING",
    }
    values.update(overrides)
    lines = ["[master]"]
    for k, v in values.items():
        lines.append(f"{k} = {json.dumps(v)}")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return path


class RssSampler:
    def __init__(self, proc: Proc, interval: float = 0.25) -> None:
        self.proc = proc
        self.interval = interval
        self.samples: list[tuple[float, int]] = []
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        while True:
            self.samples.append((time.perf_counter(), self.proc.rss()))
            await asyncio.sleep(self.interval)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    @property
    def peak(self) -> int:
        return max((r for _, r in self.samples), default=0)


PROFILES: dict[str, Any] = {}
COMMAND = mesos.CommandInfo(shell=False, value="true", arguments=("true",))


async def throughput_phase(args: argparse.Namespace, base: Path) -> list[dict[str, Any]]:
    cfg = master_config(base / "tp" / "master.toml", ping_interval=args.ping_interval)
    master = await start_master(base / "tp" / "master", "--config", str(cfg))
    fleet: SimFleet | None = None
    rows: list[dict[str, Any]] = []
    try:
        log(f"throughput: {args.agents} simulated agents in {args.sim_procs} process(es)")
        fleet = await SimFleet.start(
            master.url, args.agents, args.sim_procs, args.agent_resources, False, args.connect_parallel, args.within
        )
        log(f"  registered in {fleet.registration_seconds:.1f}s")
        spies: dict[str, PySpy] = {}
        if args.profile:
            spies = {
                "master": PySpy(master.pid, base / "profile-master.txt"),
                "framework": PySpy(os.getpid(), base / "profile-framework.txt"),
                "sim-agents": PySpy(fleet.pids()[0], base / "profile-sim.txt"),
            }
            for spy in spies.values():
                await spy.start()
        for i in range(args.runs):
            cpu0 = master.cpu_seconds()
            sim0 = sum(_cpu(pid) for pid in fleet.pids())
            me0 = _cpu(os.getpid())
            r = await run_framework(
                master.address,
                args.tasks,
                args.task_cpus,
                args.task_mem,
                args.within,
                COMMAND,
                ack_workers=args.ack_workers,
                name=f"bench-master-{i}",
                window=args.window,
            )
            cpu = master.cpu_seconds() - cpu0
            row = {
                "rate": r["rate"],
                "seconds": r["seconds"],
                "launch_p50_ms": r["launch_p50_ms"],
                "launch_p99_ms": r["launch_p99_ms"],
                "master_cpu_ms_per_task": 1000 * cpu / args.tasks,
                "master_cpu_util": cpu / r["seconds"],
                "sim_cpu_ms_per_task": 1000 * (sum(_cpu(pid) for pid in fleet.pids()) - sim0) / args.tasks,
                "framework_cpu_ms_per_task": 1000 * (_cpu(os.getpid()) - me0) / args.tasks,
                "accepts": r["accepts"],
                "failed": r["failed"],
            }
            row["master_bound_rate"] = 1000.0 / row["master_cpu_ms_per_task"] if row["master_cpu_ms_per_task"] else 0.0
            rows.append(row)
            log(
                f"  run {i + 1}/{args.runs}: {row['rate']:.0f} tasks/s, launch p50 {row['launch_p50_ms']:.1f} ms, "
                f"p99 {row['launch_p99_ms']:.1f} ms; master {row['master_cpu_ms_per_task']:.3f} ms CPU/task "
                f"({row['master_cpu_util']:.0%} of a core), framework {row['framework_cpu_ms_per_task']:.3f}, "
                f"sim agents {row['sim_cpu_ms_per_task']:.3f}"
            )
            if r["errors"]:
                log(f"  errors: {r['errors']}")
        if args.latency_tasks:
            # one task at a time: the launch latency of an idle master (no queue in front)
            lat = await run_framework(
                master.address,
                args.latency_tasks,
                args.task_cpus,
                args.task_mem,
                args.within,
                COMMAND,
                ack_workers=args.ack_workers,
                name="bench-latency",
                window=1,
            )
            for row in rows:
                row["idle_launch_p50_ms"] = lat["launch_p50_ms"]
                row["idle_launch_p99_ms"] = lat["launch_p99_ms"]
            log(f"  one at a time: ACCEPT→RUNNING p50 {lat['launch_p50_ms']:.1f} ms, p99 {lat['launch_p99_ms']:.1f} ms")
        for who, spy in spies.items():
            await spy.stop()
            summary = spy.summary()
            print_profile(f"profile of the {who} (py-spy, throughput runs)", summary)
            PROFILES[who] = summary
    finally:
        if fleet is not None:
            st = await fleet.stop()
            if st.get("errors"):
                log(f"  simulated-agent errors: {st['errors'][:3]}")
        await master.stop()
    return rows


async def scale_phase(args: argparse.Namespace, base: Path, i: int) -> dict[str, Any]:
    d = base / f"scale{i}"
    cfg = master_config(d / "master.toml", ping_interval=args.ping_interval)
    master = await start_master(d / "master", "--config", str(cfg))
    sampler = RssSampler(master)
    sampler.start()
    fleet: SimFleet | None = None
    out: dict[str, Any] = {"rss_start_mb": master.rss() / 2**20}
    try:

        async def connect_agents() -> None:
            # The framework is subscribed first, so offers reach it agent by agent as they
            # register (one OFFERS event with 10,000 offers is ~6 MB: more than the client
            # decodes in one message, see docs/benchmarks.md).
            nonlocal fleet
            log(f"scale: {args.scale_agents} simulated agents in {args.sim_procs} process(es)")
            fleet = await SimFleet.start(
                master.url,
                args.scale_agents,
                args.sim_procs,
                args.scale_agent_resources,
                True,
                args.connect_parallel,
                args.within,
            )
            out["register_seconds"] = fleet.registration_seconds
            out["register_rate"] = args.scale_agents / max(fleet.registration_seconds, 1e-9)
            out["rss_agents_mb"] = master.rss() / 2**20
            log(f"  registered in {fleet.registration_seconds:.1f}s; master RSS {out['rss_agents_mb']:.0f} MB")

        async def hold(runner: Any) -> dict[str, Any]:
            # all tasks RUNNING: keep them so through a few ping rounds, sampling RSS
            t_end = time.perf_counter() + args.hold_seconds
            peak = 0
            while time.perf_counter() < t_end:
                peak = max(peak, master.rss())
                await asyncio.sleep(0.25)
            return {"rss_running_mb": master.rss() / 2**20, "rss_hold_peak_mb": peak / 2**20}

        spy = PySpy(master.pid, d / "profile-master-scale.txt") if args.profile else None
        if spy is not None:
            await spy.start()
        r = await run_framework(
            master.address,
            args.scale_tasks,
            args.task_cpus,
            args.task_mem,
            args.scale_within,
            COMMAND,
            hold=True,
            ack_workers=args.ack_workers,
            name=f"bench-scale-{i}",
            before_launch=connect_agents,
            on_done=hold,
            partial_ok=True,
        )
        if spy is not None:
            await spy.stop()
            PROFILES["master-scale"] = spy.summary()
            print_profile("profile of the master (py-spy, scale phase: launch and hold)", PROFILES["master-scale"])
        out.update(
            tasks_running=r["reached"],
            launch_rate=r["rate"],
            launch_p50_ms=r["launch_p50_ms"],
            launch_p99_ms=r["launch_p99_ms"],
            rss_running_mb=r["rss_running_mb"],
            rss_hold_peak_mb=r["rss_hold_peak_mb"],
        )
    finally:
        await sampler.stop()
        out["rss_peak_mb"] = sampler.peak / 2**20
        if fleet is not None:
            st = await fleet.stop()
            out["pings"] = st.get("pings", 0)
            if st.get("errors"):
                log(f"  simulated-agent errors: {st['errors'][:3]}")
        await master.stop()
    log(
        f"  {out.get('tasks_running', 0)}/{args.scale_tasks} tasks RUNNING at {out.get('launch_rate', 0):.0f}/s; master RSS {out.get('rss_running_mb', 0):.0f} MB "
        f"(peak {out['rss_peak_mb']:.0f} MB); {out['pings']} pongs"
    )
    return out


def _cpu(pid: int) -> float:
    import psutil

    try:
        t = psutil.Process(pid).cpu_times()
        return float(t.user + t.system)
    except psutil.Error:
        return 0.0


async def main(args: argparse.Namespace) -> int:
    base = Path(args.work_dir or tempfile.mkdtemp(prefix="agora-bench-master-"))
    tp_rows: list[dict[str, Any]] = []
    scale_rows: list[dict[str, Any]] = []
    try:
        if args.tasks > 0:
            tp_rows = await throughput_phase(args, base)
        for i in range(args.scale_runs if args.scale_tasks > 0 else 0):
            scale_rows.append(await scale_phase(args, base, i))
    finally:
        if not args.keep and not args.work_dir:
            import shutil

            shutil.rmtree(base, ignore_errors=True)
    tp = aggregate(tp_rows)
    sc = aggregate(scale_rows)
    rows: list[tuple[object, ...]] = []
    for key, label in [
        ("rate", f"tasks/s launched+finished ({args.agents} agents)"),
        ("launch_p50_ms", "ACCEPT→RUNNING p50 under load (ms)"),
        ("launch_p99_ms", "ACCEPT→RUNNING p99 under load (ms)"),
        ("idle_launch_p50_ms", "ACCEPT→RUNNING p50, one at a time (ms)"),
        ("idle_launch_p99_ms", "ACCEPT→RUNNING p99, one at a time (ms)"),
        ("master_cpu_ms_per_task", "master CPU per task (ms)"),
        ("master_bound_rate", "master-CPU-bound rate (tasks/s)"),
        ("master_cpu_util", "master CPU utilisation (cores)"),
        ("framework_cpu_ms_per_task", "framework CPU per task (ms)"),
        ("sim_cpu_ms_per_task", "simulated agents CPU per task (ms)"),
    ]:
        if key in tp:
            rows.append((label, tp[key].median, tp[key].min, tp[key].max))
    for key, label in [
        ("register_rate", f"agent registrations/s ({args.scale_agents} agents)"),
        ("rss_agents_mb", f"master RSS, {args.scale_agents} agents (MB)"),
        ("launch_rate", f"tasks/s launched to RUNNING (of {args.scale_tasks})"),
        ("tasks_running", "tasks RUNNING while RSS sampled"),
        ("rss_running_mb", "master RSS with those tasks running (MB)"),
        ("rss_peak_mb", "master RSS peak (MB)"),
    ]:
        if key in sc:
            rows.append((label, sc[key].median, sc[key].min, sc[key].max))
    print_table(
        f"master: throughput {args.tasks} tasks x {args.runs} run(s); scale {args.scale_agents} agents / "
        f"{args.scale_tasks} tasks x {args.scale_runs}; targets >= 5,000 tasks/s, RSS <= 1,024 MB",
        ["figure", "median", "min", "max"],
        rows,
    )
    m = machine()
    print(f"machine: {m['cores']} cores, {m['memory_gb']} GB, {m['cpu']}")
    met: dict[str, bool] = {}
    if "rate" in tp:
        met["throughput_5000"] = tp["rate"].median >= 5000
    if "rss_peak_mb" in sc:
        met["rss_1gb"] = sc["rss_peak_mb"].median <= 1024
    emit_json(
        "master",
        {
            "params": {
                "agents": args.agents,
                "tasks": args.tasks,
                "runs": args.runs,
                "scale_agents": args.scale_agents,
                "scale_tasks": args.scale_tasks,
                "scale_runs": args.scale_runs,
                "sim_procs": args.sim_procs,
                "ack_workers": args.ack_workers,
                "window": args.window,
                "ping_interval": args.ping_interval,
            },
            "throughput": tp,
            "scale": sc,
            "met": met,
            "runs": {"throughput": tp_rows, "scale": scale_rows},
            "profiles": PROFILES,
            "anchors": {"nomad_c1m_containers_per_s": 3750, "kube_scheduler_pods_per_s": [680, 810]},
        },
    )
    return 0


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--agents", type=int, default=1000, help="simulated agents (throughput)")
    p.add_argument("--tasks", type=int, default=20000, help="tasks per throughput run (0 = skip)")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--scale-agents", type=int, default=10000)
    p.add_argument("--scale-tasks", type=int, default=100000, help="tasks kept running (0 = skip the scale phase)")
    p.add_argument("--scale-runs", type=int, default=1)
    p.add_argument("--hold-seconds", type=float, default=8.0, help="seconds to keep the tasks running")
    p.add_argument("--agent-resources", default="cpus:4;mem:8192;disk:10000;ports:[31000-32000]")
    p.add_argument("--scale-agent-resources", default="cpus:1;mem:1024;disk:1000;ports:[31000-32000]")
    p.add_argument("--task-cpus", type=float, default=0.1, help="(10 tasks per scale agent, 40 per throughput agent)")
    p.add_argument("--task-mem", type=float, default=32.0)
    p.add_argument("--sim-procs", type=int, default=1, help="processes the simulated agents are spread over")
    p.add_argument("--connect-parallel", type=int, default=200, help="agents connecting at once")
    p.add_argument(
        "--ack-workers", type=int, default=0, help="the driver's ack_concurrency (0 = its default)"
    )
    p.add_argument("--latency-tasks", type=int, default=200, help="tasks launched one at a time (idle latency)")
    p.add_argument(
        "--window", type=int, default=4000, help="max tasks in flight in the throughput runs (0 = no limit)"
    )
    p.add_argument("--ping-interval", type=float, default=5.0, help="master -> agent ping interval (s)")
    p.add_argument("--within", type=float, default=300.0, help="deadline per phase step (s)")
    p.add_argument(
        "--scale-within", type=float, default=120.0, help="deadline for launching the scale tasks (partial after)"
    )
    p.add_argument("--profile", action="store_true", help="py-spy the master, framework and sim agents")
    p.add_argument("--work-dir")
    p.add_argument("--keep", action="store_true")
    # worker mode (internal)
    p.add_argument("--sim-worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--url", help=argparse.SUPPRESS)
    p.add_argument("--first", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--count", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--resources", default="", help=argparse.SUPPRESS)
    p.add_argument("--hold", action="store_true", help=argparse.SUPPRESS)
    return p.parse_args(argv)


if __name__ == "__main__":
    _args = parse()
    if _args.sim_worker:
        sys.exit(
            run_main(
                sim_worker(_args.url, _args.first, _args.count, _args.resources, _args.hold, _args.connect_parallel)
            )
        )
    sys.exit(run_main(main(_args)))
