"""The master's registry in ZooKeeper (high availability): the same named operations as the
SQLite registry (``master.registry_ops``), kept as znodes so any elected master can recover them.

Layout under ``<path>/log_replicas`` (the child Mesos' detectors skip, see ``protocol.detector``)::

    epoch/e_NNNNNNNNNN      a sequential node made by each new leader: its sequence + 1 is the
                            leader's epoch (fencing), always above every earlier leader's
    registry/agents/<id>    JSON per agent (as ``AgentEntry``)
    registry/frameworks/<id>            JSON per framework (``info`` base64)
    registry/removed_frameworks/<id>    {"removed_at": t}
    registry/quotas/<role>  registry/weights/<role>    (keys are %-quoted)
    registry/agent_principals/<id>      {"principal": p} (authentication's agent binding)
    registry/maintenance/state          {"state": text} (the maintenance schedule and DOWN machines)

Only the leader writes (its ZooKeeper session is the fence: once it expires, every write fails and
the master stops). A batch is folded into the in-memory mirror first, then the nodes it changed are
written in one ZooKeeper transaction (``multi``; split past ~512 KB, the server's request limit
being 1 MB) before the master acts: write first, then act. The mirror is the leader's own view, so
the fold needs no reads. kazoo calls run on one writer thread; batches submitted while a write is
in flight are coalesced into the next transaction, like the SQLite registry.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
from collections.abc import Iterable
from typing import Any
from urllib.parse import quote, unquote

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from master import registry_ops as ops
from master.registry import GroupCommit, RegistryError
from protocol.detector import REGISTRY_CHILD

log = logging.getLogger("agora.master.registry_zk")

KINDS = ("agents", "frameworks", "removed_frameworks", "quotas", "weights", "agent_principals", "maintenance")
MAX_TXN_BYTES = 512 * 1024

Mirror = dict[tuple[str, str], dict[str, Any]]


def fold(mirror: Mirror, batch: Iterable[ops.RegistryOp]) -> set[tuple[str, str]]:
    """Apply ``batch`` to ``mirror`` (in place) exactly as the SQLite registry applies it; the
    keys whose node changed (pure)."""
    touched: set[tuple[str, str]] = set()

    def upd(key: tuple[str, str], **changes: Any) -> None:
        cur = mirror.get(key)
        if cur is not None:
            mirror[key] = cur | changes
            touched.add(key)

    for op in batch:
        match op:
            case ops.AgentAdmitted():
                key = ("agents", op.agent_id)
                cur = mirror.get(key)
                base = cur if cur is not None else {"registered_at": op.registered_at, "draining": False, "reservations": ""}
                mirror[key] = base | {
                    "hostname": op.hostname, "port": op.port, "resources": op.resources,
                    "attributes": op.attributes, "unreachable_since": None,
                }
                touched.add(key)
            case ops.AgentMarkedUnreachable():
                upd(("agents", op.agent_id), unreachable_since=op.at)
            case ops.AgentRemoved():
                if mirror.pop(("agents", op.agent_id), None) is not None:
                    touched.add(("agents", op.agent_id))
            case ops.AgentDrainSet():
                upd(
                    ("agents", op.agent_id), draining=op.draining, drain_kill=op.kill,
                    drain_max_grace=op.max_grace, drain_mark_gone=op.mark_gone, drained=op.drained,
                )
            case ops.ReservationsSet():
                upd(("agents", op.agent_id), reservations=op.resources)
            case ops.AgentPrincipalBound():  # kept when the agent is removed (as in SQLite)
                mirror[("agent_principals", op.agent_id)] = {"principal": op.principal}
                touched.add(("agent_principals", op.agent_id))
            case ops.FrameworkAdded():
                key = ("frameworks", op.framework_id)
                cur = mirror.get(key)
                base = cur if cur is not None else {"registered_at": op.registered_at}
                mirror[key] = base | {
                    "info": base64.b64encode(op.info).decode("ascii"),
                    "failover_timeout": op.failover_timeout, "deadline": None,
                }
                touched.add(key)
            case ops.FrameworkDisconnected():
                upd(("frameworks", op.framework_id), deadline=op.deadline)
            case ops.FrameworkReconnected():
                upd(("frameworks", op.framework_id), deadline=None)
            case ops.FrameworkRemoved():
                if mirror.pop(("frameworks", op.framework_id), None) is not None:
                    touched.add(("frameworks", op.framework_id))
                mirror[("removed_frameworks", op.framework_id)] = {"removed_at": op.at}
                touched.add(("removed_frameworks", op.framework_id))
            case ops.QuotaSet():
                mirror[("quotas", op.role)] = {"guarantee": op.guarantee, "limit": op.limit}
                touched.add(("quotas", op.role))
            case ops.QuotaRemoved():
                if mirror.pop(("quotas", op.role), None) is not None:
                    touched.add(("quotas", op.role))
            case ops.WeightSet():
                mirror[("weights", op.role)] = {"weight": op.weight}
                touched.add(("weights", op.role))
            case ops.MaintenanceSet():
                mirror[("maintenance", "state")] = {"state": op.state}
                touched.add(("maintenance", "state"))
            case _:  # pragma: no cover - the union is closed
                raise RegistryError(f"unknown registry operation {op!r}")
    return touched


def snapshot_of(mirror: Mirror, epoch: int) -> ops.RegistrySnapshot:
    """The ``RegistrySnapshot`` a mirror holds (sorted like the SQLite registry's)."""

    def rows(kind: str) -> list[tuple[str, dict[str, Any]]]:
        return sorted((k, v) for (kd, k), v in mirror.items() if kd == kind)

    agents = tuple(
        ops.AgentEntry(
            agent_id=k, hostname=v["hostname"], port=int(v["port"]), resources=v["resources"],
            attributes=v.get("attributes", ""), registered_at=float(v.get("registered_at", 0.0)),
            unreachable_since=None if v.get("unreachable_since") is None else float(v["unreachable_since"]),
            draining=bool(v.get("draining", False)), reservations=v.get("reservations", ""),
            # (absent from nodes written before drain modes were kept: deactivated only)
            drain_kill=bool(v.get("drain_kill", False)),
            drain_max_grace=None if v.get("drain_max_grace") is None else float(v["drain_max_grace"]),
            drain_mark_gone=bool(v.get("drain_mark_gone", False)), drained=bool(v.get("drained", False)),
        )
        for k, v in rows("agents")
    )
    frameworks = tuple(
        ops.FrameworkEntry(
            framework_id=k, info=base64.b64decode(v["info"]), failover_timeout=float(v["failover_timeout"]),
            registered_at=float(v.get("registered_at", 0.0)),
            deadline=None if v.get("deadline") is None else float(v["deadline"]),
        )
        for k, v in rows("frameworks")
    )
    return ops.RegistrySnapshot(
        master_seq=epoch,
        agent_principals=tuple((k, str(v["principal"])) for k, v in rows("agent_principals")),
        agents=agents,
        frameworks=frameworks,
        removed_frameworks=frozenset(k for k, _ in rows("removed_frameworks")),
        quotas=tuple(ops.QuotaSet(role=k, guarantee=v["guarantee"], limit=v.get("limit")) for k, v in rows("quotas")),
        weights=tuple(ops.WeightSet(role=k, weight=float(v["weight"])) for k, v in rows("weights")),
        maintenance=str(mirror.get(("maintenance", "state"), {}).get("state", "")),
    )


def _encode(value: dict[str, Any]) -> bytes:
    return json.dumps(value, separators=(",", ":"), sort_keys=True).encode()


class ZkRegistry(GroupCommit):
    """``RegistryStore`` in ZooKeeper: ``await ZkRegistry.open(zk, path)`` (a started kazoo
    client, the election path), then ``apply`` / ``read`` / ``close`` like ``Registry``."""

    _flush_name = "registry-zk-flush"

    def __init__(self, zk: KazooClient, root: str, mirror: Mirror, epoch: int) -> None:
        super().__init__("registry-zk")
        self.zk = zk
        self.root = root
        self.path = f"zk:{root}"
        self._mirror = mirror
        self.snapshot = snapshot_of(mirror, epoch)

    @staticmethod
    def registry_root(election_path: str) -> str:
        return f"{election_path.rstrip('/')}/{REGISTRY_CHILD}"

    @classmethod
    async def open(cls, zk: KazooClient, election_path: str) -> ZkRegistry:
        """Take the next epoch and read the whole registry back (the new leader's recovery)."""
        root = cls.registry_root(election_path)
        loop = asyncio.get_running_loop()
        try:
            mirror, epoch = await loop.run_in_executor(None, _open_sync, zk, root)
        except Exception as e:  # kazoo's errors and its handler's timeout alike
            raise RegistryError(f"cannot open the ZooKeeper registry at {root}: {e!r}") from e
        return cls(zk, root, mirror, epoch)

    def _node(self, key: tuple[str, str]) -> str:
        return f"{self.root}/registry/{key[0]}/{quote(key[1], safe='')}"

    def _write(self, batch: list[ops.RegistryOp]) -> None:
        before = {k: self._mirror.get(k) for k in _keys(batch)}
        touched = fold(self._mirror, batch)
        txn = self.zk.transaction()
        size = 0
        for key in sorted(touched):
            node, old, new = self._node(key), before.get(key), self._mirror.get(key)
            if new is None:
                if old is not None:
                    txn.delete(node)
                continue
            data = _encode(new)
            size += len(data) + len(node)
            if old is None:
                txn.create(node, data)
            else:
                txn.set_data(node, data)
            if size > MAX_TXN_BYTES:
                self._commit(txn)
                txn, size = self.zk.transaction(), 0
        self._commit(txn)
        self.writes += len(batch)

    def _commit(self, txn: Any) -> None:
        if not txn.operations:
            return
        results = txn.commit()
        self.transactions += 1
        bad = [r for r in results if isinstance(r, Exception)]
        if bad:
            raise RegistryError(f"ZooKeeper transaction failed: {bad[0]!r}")

    def read(self) -> ops.RegistrySnapshot:
        """What ZooKeeper holds now (blocking: for tests and tools)."""
        mirror, _ = _read_sync(self.zk, self.root)
        return snapshot_of(mirror, self.snapshot.master_seq)

    async def close(self) -> None:
        await self._stop_writing()


def _keys(batch: Iterable[ops.RegistryOp]) -> set[tuple[str, str]]:
    """Every mirror key an operation may touch (to remember what existed before the fold)."""
    out: set[tuple[str, str]] = set()
    for op in batch:
        if isinstance(op, ops.AgentPrincipalBound):
            out.add(("agent_principals", op.agent_id))
        elif isinstance(op, ops.QuotaSet | ops.QuotaRemoved):
            out.add(("quotas", op.role))
        elif isinstance(op, ops.WeightSet):
            out.add(("weights", op.role))
        elif isinstance(op, ops.MaintenanceSet):
            out.add(("maintenance", "state"))
        elif isinstance(op, ops.FrameworkRemoved):
            out.update({("frameworks", op.framework_id), ("removed_frameworks", op.framework_id)})
        elif isinstance(op, ops.FrameworkAdded | ops.FrameworkDisconnected | ops.FrameworkReconnected):
            out.add(("frameworks", op.framework_id))
        else:
            out.add(("agents", op.agent_id))
    return out


def _open_sync(zk: KazooClient, root: str) -> tuple[Mirror, int]:
    zk.ensure_path(f"{root}/epoch")
    for kind in KINDS:
        zk.ensure_path(f"{root}/registry/{kind}")
    made = zk.create(f"{root}/epoch/e_", b"", sequence=True)
    epoch = int(made.rsplit("_", 1)[1]) + 1
    zk.delete(made)  # the parent's sequence counter keeps counting
    mirror, _ = _read_sync(zk, root)
    return mirror, epoch


def _read_sync(zk: KazooClient, root: str) -> tuple[Mirror, int]:
    mirror: Mirror = {}
    for kind in KINDS:
        base = f"{root}/registry/{kind}"
        try:
            names = zk.get_children(base)
        except NoNodeError:
            continue
        pending = [(n, zk.get_async(f"{base}/{n}")) for n in names]
        for name, res in pending:
            try:
                data, _ = res.get()
            except NoNodeError:
                continue
            mirror[(kind, unquote(name))] = json.loads(data.decode())
    return mirror, len(mirror)
