"""The master's per-task work, stage by stage, in one process (no sockets, no event loop).

    .venv/bin/python scripts/bench/master_stages.py                        # CPU time per stage
    .venv/bin/python scripts/bench/master_stages.py --agents 20 --tasks 400 --runs 1   # smoke
    valgrind --tool=callgrind --callgrind-out-file=/dev/null --collect-atstart=no \\
        --toggle-collect=functools_reduce .venv/bin/python scripts/bench/master_stages.py \\
        --agents 50 --tasks 400 --warm 400 --callgrind                   # instructions per task

What ``scripts/bench/master.py`` makes the master do for each task, without the network: a
REUSABLE_OFFERS framework's ACCEPT of 40 ``true`` tasks (msgpack bytes as the client sends them)
is decoded and handled by ``MasterState`` with the real allocator, its RUN_TASKS encoded as an
agent frame; the agent's frame of 80 status updates (RUNNING and FINISHED per task) is decoded and
handled, the updates encoded as the framework's RecordIO records; ACKNOWLEDGE_MANY calls of 285
acknowledgements are decoded and handled, the acknowledgements encoded as agent frames. Only the
master's side is timed (the simulated framework and agents build their messages untimed).

On a machine shared with other work, CPU time per stage varies by 20% or more from run to run;
the instruction count under callgrind (``--callgrind``: every timed stage runs inside
``functools.reduce``, the function callgrind toggles collection on) does not, so a change can be
judged by a few percent. Divide callgrind's ``Collected`` by ``--tasks`` (``--warm`` tasks run
first, outside the count, so the codec's one-time compilation is not counted). With
``--callgrind-stage NAME`` only that stage runs inside ``functools.reduce``: its count alone.
"""

from __future__ import annotations

import argparse
import functools
import gc
import statistics
import sys
import time
import uuid
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from master.events import AgentMessagesReceived, Effect, SendEvent, SendToAgent
from master.main import tune_gc
from master.testing import Harness, framework_info
from protocol import agent_channel as ac
from protocol import codec, mesos, recordio
from protocol.resources import Resources
from protocol.task_states import TaskState as TS
from scripts.bench.common import emit_json, print_table

STAGES = [
    ("accept.decode", "ACCEPT body -> Call (1/40 of an ACCEPT)"),
    ("accept.core", "ACCEPT handled by the core and allocator"),
    ("accept.encode", "RUN_TASKS agent frame encoded"),
    ("accept.events", "events of the ACCEPT encoded (offer updates)"),
    ("status.decode", "agent frame of status updates decoded (2 per task)"),
    ("status.core", "status updates handled (2 per task, resources recovered)"),
    ("status.events", "UPDATE events encoded as RecordIO records"),
    ("status.encode", "agent frames of the status updates' effects"),
    ("ack.decode", "ACKNOWLEDGE_MANY body decoded (2 acknowledgements per task)"),
    ("ack.core", "acknowledgements handled"),
    ("ack.encode", "ACKNOWLEDGE agent frames encoded"),
]


class _Discard(list[Effect]):
    """The harness keeps every effect it saw; here nothing is kept (a long run stays flat)."""

    def extend(self, _it: Any) -> None:
        return None


def run_once(agents: int, tasks: int, warm: int, callgrind: bool, only: str | None = None) -> dict[str, float]:
    """Seconds of process CPU per stage over ``tasks`` tasks (after ``warm`` untimed ones)."""
    h = Harness(ping_interval=1e9, ping_timeout=1e9)
    h.effects = _Discard()
    for i in range(agents):
        h.agent("cpus:4;mem:8192;disk:10000;ports:[31000-32000]", hostname=f"sim-{i}")
    fid, sid = h.subscribe(framework_info("bench", "REUSABLE_OFFERS"))
    framework_id = mesos.FrameworkID(fid)
    shape = Resources.parse("cpus:0.1;mem:32").to_mesos()
    command = mesos.CommandInfo(shell=False, value="true", arguments=("true",))
    spent: dict[str, float] = defaultdict(float)
    done = 0

    def stage(name: str, fn: Callable[..., Any], *args: Any) -> Any:
        if done < warm:
            return fn(*args)
        if callgrind:
            if only is not None and name != only:
                return fn(*args)
            return functools.reduce(lambda _a, _b: fn(*args), (0, 0))
        t0 = time.process_time()
        out = fn(*args)
        spent[name] += time.process_time() - t0
        return out

    def records(fx: list[Effect]) -> None:
        for e in fx:
            if isinstance(e, SendEvent):
                recordio.encode(codec.encode(e.event, codec.MSGPACK))

    def agent_frames(fx: list[Effect]) -> dict[int, bytes]:
        per: dict[int, list[ac.Body]] = defaultdict(list)
        for e in fx:
            if isinstance(e, SendToAgent):
                per[e.conn_id].append(e.body)
        return {c: ac.encode_frame(b, 1) for c, b in per.items()}

    offers: dict[str, mesos.Offer] = {}

    def take_offers(fx: list[Effect]) -> None:
        for e in fx:
            if isinstance(e, SendEvent) and e.event.type is mesos.EventType.OFFERS:
                assert e.event.offers is not None
                for o in e.event.offers.offers:
                    offers[o.id.value] = o

    take_offers(h.allocate())
    tune_gc()  # as agora-master does after startup
    seq = 0
    total = warm + tasks
    while done < total:
        acks: list[mesos.Acknowledge] = []
        for o in list(offers.values()):
            if done >= total:
                break
            infos = []
            for _ in range(40):
                tid = f"bench-abcdef12-{seq}"
                seq += 1
                infos.append(mesos.TaskInfo(name=tid, task_id=mesos.TaskID(tid), resources=shape, command=command))
            op = mesos.Operation(type=mesos.OperationType.LAUNCH, launch=mesos.Launch(task_infos=tuple(infos)))
            body = codec.encode_msgpack(
                mesos.Call.make_accept(framework_id, (o.id,), (op,), mesos.Filters(refuse_seconds=0))
            )
            call = stage("accept.decode", codec.decode_msgpack, mesos.Call, body)
            fx = stage("accept.core", h.call, fid, sid, call)
            frames = stage("accept.encode", agent_frames, fx)
            stage("accept.events", records, fx)
            take_offers(fx)
            for conn, data in frames.items():  # the simulated agent answers (untimed)
                now = time.time()
                updates: list[ac.Body] = []
                for b in ac.decode_frame(data)[1]:
                    if isinstance(b, ac.RunTasks):
                        for t in b.tasks:
                            for st in (TS.TASK_RUNNING, TS.TASK_FINISHED):
                                status = mesos.TaskStatus(
                                    task_id=t.task_id, state=st, source=mesos.Source.SOURCE_EXECUTOR,
                                    agent_id=o.agent_id, executor_id=mesos.ExecutorID(t.task_id.value),
                                    timestamp=now, uuid=uuid.uuid4().bytes,
                                )
                                updates.append(ac.StatusUpdateMsg(framework_id=b.framework_id, status=status))
                status_frame = ac.encode_frame(updates)
                _, got = stage("status.decode", ac.decode_frame, status_frame)
                fx = stage("status.core", h.feed, AgentMessagesReceived(conn, tuple(got)))
                stage("status.events", records, fx)
                stage("status.encode", agent_frames, fx)
                take_offers(fx)
                for e in fx:
                    if isinstance(e, SendEvent) and e.event.update is not None:
                        s = e.event.update.status
                        if s.uuid is not None and s.agent_id is not None:
                            acks.append(mesos.Acknowledge(agent_id=s.agent_id, task_id=s.task_id, uuid=s.uuid))
            done += len(infos)
        for i in range(0, len(acks), 285):  # the framework's ACKNOWLEDGE_MANY calls
            many = mesos.AcknowledgeMany(acknowledgements=tuple(acks[i : i + 285]))
            body = codec.encode_msgpack(
                mesos.Call(type=mesos.CallType.ACKNOWLEDGE_MANY, framework_id=framework_id, acknowledge_many=many)
            )
            call = stage("ack.decode", codec.decode_msgpack, mesos.Call, body)
            fx = stage("ack.core", h.call, fid, sid, call)
            stage("ack.encode", agent_frames, fx)
        take_offers(h.allocate())
    gc.collect()
    return dict(spent)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--agents", type=int, default=200, help="agents (cpus:4, 40 tasks each per ACCEPT)")
    p.add_argument("--tasks", type=int, default=8000, help="tasks timed per run")
    p.add_argument("--warm", type=int, default=400, help="tasks run first, untimed")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--callgrind", action="store_true", help="run the timed stages inside functools.reduce")
    p.add_argument(
        "--callgrind-stage", choices=[name for name, _ in STAGES], help="with --callgrind: only this stage (its own count)"
    )
    args = p.parse_args(argv)
    runs = [run_once(args.agents, args.tasks, args.warm, args.callgrind, args.callgrind_stage) for _ in range(args.runs)]
    if args.callgrind:
        print(f"{args.tasks} tasks in the callgrind count (divide Collected by it)")
        return 0
    per_task = {name: [1e6 * r.get(name, 0.0) / args.tasks for r in runs] for name, _ in STAGES}
    totals = [sum(v[i] for v in per_task.values()) for i in range(args.runs)]
    rows: list[tuple[object, ...]] = [
        (name, label, statistics.median(v), min(v), max(v)) for (name, label), v in zip(STAGES, per_task.values(), strict=True)
    ]
    rows.append(("total", "master CPU per task, these stages", statistics.median(totals), min(totals), max(totals)))
    print_table(
        f"master stages: {args.tasks} tasks x {args.runs} run(s), {args.agents} agents; us of CPU per task",
        ["stage", "what", "median", "min", "max"],
        rows,
    )
    emit_json(
        "master_stages",
        {
            "params": {"agents": args.agents, "tasks": args.tasks, "warm": args.warm, "runs": args.runs},
            "us_per_task": {k: {"median": statistics.median(v), "min": min(v), "max": max(v)} for k, v in per_task.items()},
            "total_us_per_task": {"median": statistics.median(totals), "min": min(totals), "max": max(totals)},
        },
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
