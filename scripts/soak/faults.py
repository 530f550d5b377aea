"""Fault soak: a real master and two real agents (processes on 127.0.0.1) under ``kill -9``
loops with tasks running, the HTTP fuzzer, and connection exhaustion; it prints its figures.

    .venv/bin/python scripts/soak/faults.py                                   # 20 + 20 kills, 10,000 fuzzed, 2,000 sockets
    .venv/bin/python scripts/soak/faults.py --master-kills 2 --agent-kills 2 \\
        --fuzz 200 --flood 200 --floods 1                                     # smoke (about a minute)

Phases, on one cluster (``--work-dir``, default a temporary directory, kept with ``--keep``):

1. **kill -9 loop.** A framework written with ``frameworks.client`` (not partition aware, so a
   task the master gave up on shows as ``TASK_LOST``) keeps ``--tasks`` tasks of ``sleep 1..5``
   running. Every ``--interval`` seconds the master or one agent (alternating, ``--master-kills``
   and ``--agent-kills`` in all) is sent SIGKILL and started again on the same port and work
   directory. Each restart's recovery is timed: for the master, until both agents are registered
   again and the framework is subscribed; for an agent, until its ``registered with master`` line.
   Then launching stops, every task is waited for, and each task's updates are counted: a task
   must end ``TASK_FINISHED`` with exactly one terminal update (updates resent with the same uuid
   are counted apart; reconciliation answers are restatements, not updates). A launch whose
   ACCEPT crossed its offer's rescind (an agent was just killed) is refused by the master with
   one ``TASK_LOST`` (``REASON_INVALID_OFFERS``) and never reaches an agent: counted apart as
   ``refused_at_accept``, not as lost; so is a launch the agent had recorded but not yet started
   when it was killed (one ``TASK_LOST`` "Agent restarted before the task was launched", it never
   runs): ``never_started``. No task process may outlive its task.
2. **fuzz.** ``--fuzz`` requests from ``tests/fuzzing.py`` (hypothesis; every endpoint of the
   master and an agent, both codecs, Unicode edge cases, malformed heads), with the framework's
   own id and stream id: 5xx answers, connections broken without an answer and event streams that
   did not start with an event are counted (all must be 0). The framework must still be
   subscribed, and a task launched afterwards must finish.
3. **connection exhaustion.** ``--flood`` sockets from one client (half idle, half a request head
   never finished) plus as many idle keep-alive connections, held while an agent is killed and
   restarted (``--floods`` times): the worst registration delay is reported, with the time a new
   framework takes to subscribe and an existing one's call to be answered under the flood.

Exit status 1 when any of the counts that must be 0 is not.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import random
import shutil
import socket
import sys
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Awaitable, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from frameworks.client.driver import Scheduler, SchedulerDriver
from frameworks.client.offers import OfferCacheError
from frameworks.client.transport import HttpTransport, TransportError
from protocol.backoff import Backoff
from protocol.mesos import (
    Capability,
    CapabilityType,
    CommandInfo,
    FrameworkInfo,
    Reason,
    TaskInfo,
    TaskStatus,
)
from protocol.mesos_common import TaskID
from protocol.resources import Resources
from protocol.task_states import TaskState, is_terminal
from tests.fuzzing import FuzzContext, FuzzRequest, Proc, requests, send

HOST = "127.0.0.1"
AGENT_RESOURCES = "cpus:4;mem:2048;disk:1000"


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


class Recorder(Scheduler):
    """Every update the framework is sent, in order."""

    def __init__(self) -> None:
        self.updates: list[TaskStatus] = []
        self.at: dict[int, str] = {}  # id(status) -> wall-clock time it came

    def update(self, driver: SchedulerDriver, status: TaskStatus) -> None:
        self.updates.append(status)
        self.at[id(status)] = time.strftime("%H:%M:%S")


class Cluster:
    def __init__(self, work: Path) -> None:
        self.work = work
        self.master_port = free_port()
        self.master = self._master()
        self.agents = [self._agent(i) for i in range(2)]

    def _master(self) -> Proc:
        return Proc([sys.executable, "-m", "master.main", "--ip", HOST, "--port", str(self.master_port),
                     "--work-dir", str(self.work / "master"), "--log-level", "INFO"], str(self.work / "master.log"))

    def _agent(self, i: int) -> Proc:
        return Proc([sys.executable, "-m", "agent.main", "--master", f"{HOST}:{self.master_port}", "--port", str(free_port()),
                     "--work-dir", str(self.work / f"agent{i}"), "--resources", AGENT_RESOURCES,
                     "--isolation", "psutil", "--log-level", "INFO"], str(self.work / f"agent{i}.log"))

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.master_port}"

    def start(self) -> None:
        self.master.start()
        for a in self.agents:
            a.start()

    def restart_agent(self, i: int, within: float = 60.0) -> float:
        """Start agent ``i`` again; seconds until it logs that it registered."""
        log = Path(self.agents[i].log)
        seen = log.read_text(errors="replace").count("registered with master")
        t0 = time.monotonic()
        self.agents[i].start()
        while log.read_text(errors="replace").count("registered with master") <= seen:
            if time.monotonic() - t0 > within:
                raise RuntimeError(f"agent {i} did not register within {within}s; see {log}")
            time.sleep(0.02)  # a log file gives no event to wait on
        return time.monotonic() - t0

    def stop(self) -> None:
        for a in self.agents:
            a.stop(sig=10)  # SIGUSR1: the agent kills and reports its tasks, then exits
        self.master.stop()

    def task_processes(self) -> list[psutil.Process]:
        """Live processes whose working directory is under an agent's sandboxes (tasks)."""
        out = []
        roots = [str(self.work / f"agent{i}") for i in range(len(self.agents))]
        for p in psutil.process_iter(["cwd", "name"]):
            cwd = p.info.get("cwd") or ""
            if any(cwd.startswith(r) for r in roots) and p.info.get("name") == "sleep":
                out.append(p)
        return out


async def active_agents(http: aiohttp.ClientSession, url: str) -> int:
    try:
        async with http.get(url + "/state", timeout=aiohttp.ClientTimeout(total=5)) as r:
            state = await r.json()
    except (aiohttp.ClientError, TimeoutError, ValueError):
        return -1
    return sum(1 for a in state.get("slaves", []) if a.get("active"))


class Launcher:
    """Keeps ``target`` tasks in flight on the offers the driver holds."""

    def __init__(self, driver: SchedulerDriver, rec: Recorder, target: int, rng: random.Random) -> None:
        self.d, self.rec, self.target, self.rng = driver, rec, target, rng
        self.sent: list[str] = []  # ACCEPT carried it to the master (the call was answered 202)
        self.not_sent = 0  # launches the call failed for (master down): never reached a master
        self.running = True
        self.n = 0

    def in_flight(self) -> int:
        done = {s.task_id.value for s in self.rec.updates if is_terminal(s.state)}
        return sum(1 for t in self.sent if t not in done)

    async def run(self) -> None:
        while self.running:
            try:
                await self.d.wait_for(lambda: not self.running or (len(self.d.offers) > 0 and self.in_flight() < self.target), 1.0)
            except TimeoutError:
                continue
            for offer in list(self.d.offers):
                want = self.target - self.in_flight()
                if want <= 0 or not self.running:
                    break
                cpus, mem = offer.available.scalar("cpus"), offer.available.scalar("mem")
                k = int(min(want, cpus // 0.1, mem // 16))
                if k <= 0:
                    continue
                tasks = []
                for _ in range(k):
                    self.n += 1
                    tid = f"soak-{self.n}"
                    tasks.append(TaskInfo(name=tid, task_id=TaskID(tid), resources=Resources.parse("cpus:0.1;mem:16").to_mesos(),
                                          command=CommandInfo(value=f"exec sleep {self.rng.uniform(1, 5):.2f}")))
                try:
                    await self.d.launch(offer.offer_id, tasks)
                except (TransportError, OfferCacheError):
                    self.not_sent += len(tasks)
                    continue
                self.sent.extend(t.task_id.value for t in tasks)


def count_updates(rec: Recorder, tids: list[str]) -> dict[str, Any]:
    by: dict[str, list[TaskStatus]] = {}
    for s in rec.updates:
        if s.reason is Reason.REASON_RECONCILIATION:
            continue  # a restatement of what the master knows, not an update
        by.setdefault(s.task_id.value, []).append(s)
    finished = lost = refused = never_started = duplicates = resent = no_end = 0
    ends: Counter[str] = Counter()
    for tid in tids:
        terminal = [s for s in by.get(tid, []) if is_terminal(s.state)]
        uuids = {s.uuid for s in terminal}
        resent += len(terminal) - len(uuids)
        if not terminal:
            no_end += 1
            continue
        if len(uuids) > 1:
            duplicates += 1
        ends[terminal[0].state.name] += 1
        if terminal[0].state is TaskState.TASK_FINISHED:
            finished += 1
        elif terminal[0].reason is Reason.REASON_INVALID_OFFERS and len(by[tid]) == 1:
            # its ACCEPT named an offer the master no longer held (rescinded as its agent was
            # killed): the launch was refused, the task never reached an agent, told once
            refused += 1
        elif (terminal[0].reason is Reason.REASON_AGENT_RESTARTED and len(by[tid]) == 1
              and (terminal[0].message or "").startswith("Agent restarted before the task was launched")):
            # the agent recorded the launch and was killed before starting it: reported once,
            # it never ran (as in Mesos; test_r4_checkpointed_but_never_spawned)
            never_started += 1
        else:
            lost += 1
            trail = ", ".join(f"{rec.at.get(id(s), '?')} {s.state.name}/{s.reason.name if s.reason else '-'}/{s.source.name if s.source else '-'}: {s.message or ''}"
                              for s in by[tid])
            print(f"  not finished: {tid}: {trail}", flush=True)
    return {"finished": finished, "refused_at_accept": refused, "never_started": never_started, "lost": lost, "no_end": no_end, "duplicates": duplicates, "resent": resent, "ends": dict(ends)}


async def kill_loop(cl: Cluster, d: SchedulerDriver, rec: Recorder, args: argparse.Namespace, out: dict[str, Any]) -> None:
    rng = random.Random(args.seed)
    launcher = Launcher(d, rec, args.tasks, rng)
    runner = asyncio.create_task(launcher.run())
    kinds = ["master"] * args.master_kills + ["agent"] * args.agent_kills
    rng.shuffle(kinds)
    master_rec: list[float] = []
    agent_rec: list[float] = []
    async with aiohttp.ClientSession() as http:
        await d.wait_for(lambda: len(launcher.sent) >= args.tasks, 60)
        for i, kind in enumerate(kinds):
            await asyncio.sleep(rng.uniform(0.5, 1.5) * args.interval)  # tasks start, run and end meanwhile
            if kind == "master":
                cl.master.kill9()
                await asyncio.sleep(rng.uniform(0.1, 1.0))
                t0 = time.monotonic()
                await asyncio.to_thread(cl.master.start)
                while await active_agents(http, cl.url) < len(cl.agents) or not d.connected:
                    if time.monotonic() - t0 > 120:
                        raise RuntimeError("the cluster did not come back after a master restart")
                    await asyncio.sleep(0.05)
                master_rec.append(time.monotonic() - t0)
            else:
                a = rng.randrange(len(cl.agents))
                cl.agents[a].kill9()
                await asyncio.sleep(rng.uniform(0.1, 1.0))
                agent_rec.append(await asyncio.to_thread(cl.restart_agent, a))
            print(f"  {time.strftime('%H:%M:%S')} kill {i + 1}/{len(kinds)}: {kind} back in "
                  f"{(master_rec if kind == 'master' else agent_rec)[-1]:.2f} s; {len(launcher.sent)} tasks launched", flush=True)
    launcher.running = False
    await runner
    sent = list(launcher.sent)
    ended = {s.task_id.value for s in rec.updates if is_terminal(s.state) and s.reason is not Reason.REASON_RECONCILIATION}
    try:
        await d.wait_for(lambda: all(t in ended or _ended(rec, t) for t in sent), 120)
    except TimeoutError:
        pass
    await asyncio.sleep(2)  # late duplicates, if any, would come now
    counts = count_updates(rec, sent)
    orphans = len(cl.task_processes())
    out.update(master_kills=len(master_rec), agent_kills=len(agent_rec), tasks_launched=len(sent), launch_calls_failed=launcher.not_sent,
               master_recovery_max=max(master_rec, default=0.0), master_recovery_median=_median(master_rec),
               agent_registration_max=max(agent_rec, default=0.0), agent_registration_median=_median(agent_rec),
               orphan_processes=orphans, **counts)


def _ended(rec: Recorder, tid: str) -> bool:
    return any(s.task_id.value == tid and is_terminal(s.state) and s.reason is not Reason.REASON_RECONCILIATION for s in rec.updates)


def _median(xs: list[float]) -> float:
    return sorted(xs)[len(xs) // 2] if xs else 0.0


def fuzz(cl: Cluster, d: SchedulerDriver, n: int, seed: int, out: dict[str, Any]) -> None:
    from hypothesis import HealthCheck, given, settings
    from hypothesis import seed as hseed

    assert d.framework_id is not None and d.stream_id is not None
    ctx = FuzzContext(framework_id=d.framework_id, stream_id=d.stream_id, agent_port=int(cl.agents[0].url.rsplit(":", 1)[1]))
    statuses: Counter[int] = Counter()
    bad: list[tuple[int, FuzzRequest]] = []

    @hseed(seed)
    @settings(max_examples=n, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(req=requests(ctx))
    def one(req: FuzzRequest) -> None:
        port = ctx.agent_port if req.target == "agent" else cl.master_port
        assert port is not None
        status = send(HOST, port, req)
        statuses[status] += 1
        if status >= 500 or (status <= 0 and req.raw is None):
            bad.append((status, req))

    t0 = time.monotonic()
    one()
    out.update(fuzzed=sum(statuses.values()), fuzz_seconds=time.monotonic() - t0,
               fuzz_5xx=sum(v for k, v in statuses.items() if k >= 500),
               fuzz_broken=sum(1 for s, r in bad if s == 0), fuzz_stream_without_event=sum(1 for s, r in bad if s < 0),
               fuzz_statuses=dict(sorted(statuses.items())))
    for s, r in bad[:5]:
        print(f"  fuzz failure {s}: {r.method} {r.path[:100]} {r.body[:200]!r}", flush=True)


@contextlib.contextmanager
def flood(port: int, n: int) -> Iterator[list[socket.socket]]:
    """``n`` sockets (half idle, half with an unfinished request head) and ``n`` idle keep-alive
    connections, all from one client; closed on exit."""
    socks: list[socket.socket] = []
    try:
        for i in range(n):
            try:
                c = socket.create_connection((HOST, port), timeout=5)
                if i % 2:
                    c.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n")
            except OSError:
                continue
            socks.append(c)
        for _ in range(n):
            try:
                c = socket.create_connection((HOST, port), timeout=5)
                c.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
                c.recv(4096)
            except OSError:
                pass
            socks.append(c)
        yield socks
    finally:
        for c in socks:
            c.close()


async def exhaustion(cl: Cluster, d: SchedulerDriver, args: argparse.Namespace, out: dict[str, Any]) -> None:
    regs: list[float] = []
    subs: list[float] = []
    calls: list[float] = []
    for i in range(args.floods):
        with flood(cl.master_port, args.flood):
            a = i % len(cl.agents)
            cl.agents[a].kill9()
            regs.append(await asyncio.to_thread(cl.restart_agent, a))
            t0 = time.monotonic()
            await d.revive()
            calls.append(time.monotonic() - t0)
            t0 = time.monotonic()
            fresh = SchedulerDriver(FrameworkInfo(user="nobody", name=f"under-flood-{i}", roles=("*",), failover_timeout=0.0,
                                                  capabilities=(Capability(type=CapabilityType.MULTI_ROLE),)),
                                    HttpTransport(cl.url), backoff=Backoff(0.01, 0.2))
            async with fresh:
                await fresh.wait_subscribed(60)
                subs.append(time.monotonic() - t0)  # (no failover timeout: it is gone once it leaves)
        print(f"  flood {i + 1}/{args.floods}: agent registered in {regs[-1]:.2f} s, framework subscribed in {subs[-1]:.2f} s, "
              f"call answered in {calls[-1]:.3f} s", flush=True)
    out.update(flood_sockets=2 * args.flood, floods=args.floods, flood_registration_max=max(regs, default=0.0),
               flood_subscribe_max=max(subs, default=0.0), flood_call_max=max(calls, default=0.0))


async def phase(name: str, out: dict[str, Any], work: Awaitable[Any]) -> None:
    """Run one phase; a failure is recorded as ``<name>_error`` (the figures still print)."""
    try:
        await work
    except Exception as e:
        traceback.print_exc()
        out[f"{name}_error"] = repr(e)[:300]


async def launch_one(d: SchedulerDriver, rec: Recorder, tid: str, out: dict[str, Any]) -> None:
    """Launch ``true`` as ``tid``; ``out[tid]`` is how it ended."""
    await d.revive()
    def fits(o: Any) -> bool:
        return bool(o.available.scalar("cpus") >= 0.1 and o.available.scalar("mem") >= 16)

    await d.wait_for(lambda: any(fits(o) for o in d.offers), 60)
    offer = next(o for o in d.offers if fits(o))
    await d.launch(offer.offer_id, [TaskInfo(name=tid, task_id=TaskID(tid), resources=Resources.parse("cpus:0.1;mem:16").to_mesos(),
                                             command=CommandInfo(value="true"))])
    await d.wait_for(lambda: _ended(rec, tid), 60)
    out[tid] = next(s.state for s in rec.updates if s.task_id.value == tid and is_terminal(s.state)).name


async def main_async(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    out: dict[str, Any] = {}
    cl = Cluster(work)
    cl.start()
    rec = Recorder()
    info = FrameworkInfo(user="nobody", name="soak", roles=("*",), failover_timeout=3600.0,
                         capabilities=(Capability(type=CapabilityType.MULTI_ROLE),))
    d = SchedulerDriver(info, HttpTransport(cl.url), scheduler=rec, backoff=Backoff(0.05, 0.5))
    t0 = time.monotonic()
    try:
        async with d:
            await d.wait_subscribed(60)
            if args.master_kills + args.agent_kills:
                print(f"kill -9 loop: {args.master_kills} master and {args.agent_kills} agent kills, {args.tasks} tasks in flight", flush=True)
                await phase("kill_loop", out, kill_loop(cl, d, rec, args, out))
            if args.fuzz:
                print(f"fuzz: {args.fuzz} requests", flush=True)
                await phase("fuzz", out, asyncio.to_thread(fuzz, cl, d, args.fuzz, args.seed, out))
                await d.wait_subscribed(30)
                await phase("launch_after_fuzz", out, launch_one(d, rec, "after-fuzz", out))
            if args.floods:
                print(f"connection exhaustion: {2 * args.flood} sockets, {args.floods} agent restarts under them", flush=True)
                await phase("flood", out, exhaustion(cl, d, args, out))
                await phase("launch_after_flood", out, launch_one(d, rec, "after-flood", out))
    finally:
        cl.stop()
    out["seconds"] = time.monotonic() - t0
    return out


def report(out: dict[str, Any]) -> int:
    print("\n== figures")
    for k, v in out.items():
        print(f"{k:28} {v:.2f}" if isinstance(v, float) else f"{k:28} {v}")
    must_be_zero = ["lost", "no_end", "duplicates", "orphan_processes", "fuzz_5xx", "fuzz_broken", "fuzz_stream_without_event"]
    bad = [k for k in must_be_zero if out.get(k, 0)] + [k for k in out if k.endswith("_error")]
    for k in ("after-fuzz", "after-flood"):
        if k in out and out[k] != "TASK_FINISHED":
            bad.append(k)
    print("\nOK" if not bad else f"\nFAILED: {', '.join(bad)}")
    return 1 if bad else 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--master-kills", type=int, default=20)
    p.add_argument("--agent-kills", type=int, default=20)
    p.add_argument("--tasks", type=int, default=16, help="tasks kept in flight during the kill loop")
    p.add_argument("--interval", type=float, default=3.0, help="seconds between kills (randomised 0.5-1.5x)")
    p.add_argument("--fuzz", type=int, default=10_000, help="fuzzed requests")
    p.add_argument("--flood", type=int, default=1000, help="sockets per kind in the connection flood (2x in all)")
    p.add_argument("--floods", type=int, default=5, help="agent restarts under the flood")
    p.add_argument("--seed", type=int, default=20)
    p.add_argument("--work-dir", type=Path)
    p.add_argument("--keep", action="store_true", help="keep the work directory (logs)")
    args = p.parse_args()
    work = args.work_dir or Path(tempfile.mkdtemp(prefix="agora-soak-"))
    work.mkdir(parents=True, exist_ok=True)
    print(f"work dir {work}", flush=True)
    try:
        out = asyncio.run(main_async(args, work))
    finally:
        if not args.keep and args.work_dir is None:
            shutil.rmtree(work, ignore_errors=True)
    return report(out)


if __name__ == "__main__":
    sys.exit(main())
