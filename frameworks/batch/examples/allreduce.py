"""A gang's ranks find each other and allreduce over TCP, with the standard library only.

Run as every task of a gang job (``agora job submit --count 3 --gang 3 -- python3 allreduce.py``):
it reads what the batch framework gives each rank (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``,
``LOCAL_WORLD_SIZE``, ``NODE_RANK``, ``MASTER_ADDR``, ``MASTER_PORT``, ``AGORA_GANG_HOSTS`` and the
hostfile at ``AGORA_GANG_HOSTFILE``), checks that they agree with each other, and sums a vector
across the ranks the way ``torch.distributed``'s ``env://`` rendezvous does: rank 0 listens on
``MASTER_ADDR:MASTER_PORT``, every other rank connects to it and sends its rank, world size and
vector; rank 0 checks that every rank 1..WORLD_SIZE-1 came exactly once with the same world size,
adds the vectors and sends the sum back; every rank checks the sum against the one it expects.
Exit 0 and ``rank R/W: allreduce ok ...`` on success; exit 1 with the reason otherwise.

``--fail-rank R`` makes rank R exit 1 before the rendezvous (its peers then wait in the
collective, as real ranks do when one dies); with ``--fail-once MARKER`` only while the file
MARKER does not exist (the failing rank creates it), so a restarted gang succeeds.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import time
from typing import Any

CONNECT_TIMEOUT = 120.0  # seconds a rank keeps trying to reach rank 0


def _env(name: str) -> str:
    value = os.environ.get(name)
    if value is None or value == "":
        raise SystemExit(f"allreduce: {name} is not set (not a task of an Agora gang?)")
    return value


def _vector(rank: int) -> list[int]:
    return [rank + 1, (rank + 1) ** 2, 1]


def _expected(world: int) -> list[int]:
    return [sum(_vector(r)[i] for r in range(world)) for i in range(3)]


def _send(sock: socket.socket, obj: Any) -> None:
    sock.sendall(json.dumps(obj).encode() + b"\n")


def _recv(f: Any) -> Any:
    line = f.readline()
    if not line:
        raise ConnectionError("peer closed the connection")
    return json.loads(line)


def check_environment() -> dict[str, Any]:
    """Every variable present and consistent; the hostfile agrees with AGORA_GANG_HOSTS."""
    rank, world = int(_env("RANK")), int(_env("WORLD_SIZE"))
    local_rank, local_world = int(_env("LOCAL_RANK")), int(_env("LOCAL_WORLD_SIZE"))
    node_rank = int(_env("NODE_RANK"))
    hosts = [h.rsplit(":", 1) for h in _env("AGORA_GANG_HOSTS").split(",")]
    slots = [int(n) for _, n in hosts]
    if not 0 <= rank < world:
        raise SystemExit(f"allreduce: RANK {rank} is not within 0..{world - 1}")
    if not 0 <= local_rank < local_world or not 0 <= node_rank < len(hosts):
        raise SystemExit(f"allreduce: LOCAL_RANK {local_rank}/{local_world} or NODE_RANK {node_rank} out of range")
    if slots[node_rank] != local_world:
        raise SystemExit(f"allreduce: node {node_rank} has {slots[node_rank]} slots, LOCAL_WORLD_SIZE is {local_world}")
    if sum(slots) != world:
        raise SystemExit(f"allreduce: AGORA_GANG_HOSTS holds {sum(slots)} slots for WORLD_SIZE {world}")
    with open(_env("AGORA_GANG_HOSTFILE")) as f:
        lines = [line.split() for line in f.read().splitlines() if line.strip()]
    if [(h, f"slots={n}") for h, n in hosts] != [tuple(line) for line in lines]:
        raise SystemExit(f"allreduce: the hostfile {lines} does not match AGORA_GANG_HOSTS {hosts}")
    return {
        "rank": rank, "world": world, "local_rank": local_rank, "local_world": local_world,
        "node_rank": node_rank, "nodes": len(hosts), "addr": _env("MASTER_ADDR"), "port": int(_env("MASTER_PORT")),
    }


def serve(me: dict[str, Any]) -> list[int]:
    """Rank 0: gather every other rank's vector, check who came, send the sum to all."""
    world = me["world"]
    total = _vector(0)
    peers: dict[int, tuple[socket.socket, Any]] = {}
    with socket.create_server((me["addr"], me["port"]), backlog=world) as server:
        server.settimeout(CONNECT_TIMEOUT)
        while len(peers) < world - 1:
            conn, _ = server.accept()
            f = conn.makefile("r")
            hello = _recv(f)
            r = hello["rank"]
            if hello["world"] != world:
                raise SystemExit(f"allreduce: rank {r} says WORLD_SIZE {hello['world']}, rank 0 has {world}")
            if not 1 <= r < world or r in peers:
                raise SystemExit(f"allreduce: unexpected or repeated rank {r}")
            peers[r] = (conn, f)
            total = [a + b for a, b in zip(total, hello["vector"], strict=True)]
        for conn, _ in peers.values():
            _send(conn, {"sum": total, "ranks": sorted([0, *peers])})
            conn.close()
    return total


def join(me: dict[str, Any]) -> list[int]:
    """Any other rank: reach rank 0 (it may start later), send ours, receive the sum."""
    deadline = time.monotonic() + CONNECT_TIMEOUT
    while True:
        try:
            sock = socket.create_connection((me["addr"], me["port"]), timeout=5)
            break
        except OSError:
            if time.monotonic() > deadline:
                raise SystemExit(f"allreduce: rank 0 at {me['addr']}:{me['port']} never answered") from None
            time.sleep(0.1)
    with sock:
        sock.settimeout(CONNECT_TIMEOUT)
        _send(sock, {"rank": me["rank"], "world": me["world"], "vector": _vector(me["rank"])})
        reply = _recv(sock.makefile("r"))
    if reply["ranks"] != list(range(me["world"])):
        raise SystemExit(f"allreduce: rank 0 saw ranks {reply['ranks']}")
    return list(reply["sum"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fail-rank", type=int, default=None, help="this rank exits 1 before the rendezvous")
    parser.add_argument("--fail-once", default=None, help="only while this marker file does not exist")
    args = parser.parse_args(argv)
    me = check_environment()
    if args.fail_rank == me["rank"] and (args.fail_once is None or not os.path.exists(args.fail_once)):
        if args.fail_once is not None:
            with open(args.fail_once, "w") as f:
                f.write(f"rank {me['rank']} failed once\n")
        print(f"rank {me['rank']}/{me['world']}: failing on purpose", flush=True)
        return 1
    total = serve(me) if me["rank"] == 0 else join(me)
    if total != _expected(me["world"]):
        print(f"rank {me['rank']}: allreduce gave {total}, expected {_expected(me['world'])}", file=sys.stderr)
        return 1
    print(
        f"rank {me['rank']}/{me['world']}: allreduce ok sum={total} node {me['node_rank']}/{me['nodes']} "
        f"local {me['local_rank']}/{me['local_world']} via {me['addr']}:{me['port']}",
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
