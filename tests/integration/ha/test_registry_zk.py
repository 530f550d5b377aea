"""The ZooKeeper registry against a real server: every named operation, read back the way the
SQLite registry reads it; epochs grow with each open; a batch is one transaction."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import attrs
import pytest
from kazoo.client import KazooClient

from master import registry_ops as ops
from master.registry import Registry
from master.registry_zk import ZkRegistry
from protocol.detector import parse_zk_url


@pytest.fixture
async def zk(zk_url: str) -> AsyncIterator[tuple[KazooClient, str]]:
    u = parse_zk_url(zk_url)
    client = KazooClient(hosts=u.hosts, timeout=5.0)
    client.start(timeout=10)
    try:
        yield client, u.path
    finally:
        client.stop()
        client.close()


BATCH: list[ops.RegistryOp] = [
    ops.AgentAdmitted("a1", "h1", 5051, "cpus:4;mem:1024", "rack:r1", registered_at=1.0),
    ops.AgentAdmitted("a2", "h2", 5051, "cpus:2", registered_at=2.0),
    ops.AgentAdmitted("a3", "h3", 5051, "cpus:1", registered_at=3.0),
    ops.AgentMarkedUnreachable("a2", at=10.0),
    ops.AgentDrainSet("a1", draining=True),
    ops.AgentDrainSet("a2", draining=True, kill=True, max_grace=2.5, mark_gone=True, drained=True),  # DRAIN_AGENT
    ops.ReservationsSet("a1", "cpus(web):1"),
    ops.AgentRemoved("a3"),
    ops.AgentMarkedUnreachable("nobody", at=1.0),  # unknown agent: no effect (as in SQLite)
    ops.FrameworkAdded("f1", b"\x81\xa4name\xa2f1", 60.0, registered_at=5.0),
    ops.FrameworkAdded("f2", b"\x00\xff", 0.0, registered_at=6.0),
    ops.FrameworkDisconnected("f1", deadline=100.0),
    ops.FrameworkRemoved("f2", at=7.0),
    ops.QuotaSet("web", "cpus:2", "cpus:4"),
    ops.QuotaSet("a/b", "mem:10"),  # hierarchical role: quoted as a znode name
    ops.QuotaRemoved("a/b"),
    ops.QuotaSet("eng/ml", "gpus:1"),
    ops.WeightSet("web", 2.5),
    ops.AgentPrincipalBound("a1", "agent-principal"),  # authentication's binding of an agent id
    ops.MaintenanceSet('{"down":[],"windows":[]}'),
    ops.MaintenanceSet('{"down":[["h1",""]],"windows":[{"duration_ns":null,"machines":[["h1",""]],"start_ns":5}]}'),
]


async def test_operations_read_back_like_sqlite(zk: tuple[KazooClient, str], tmp_path: Path) -> None:
    client, path = zk
    reg = await ZkRegistry.open(client, path)
    first_epoch = reg.snapshot.master_seq
    assert reg.snapshot.agents == () and reg.snapshot.frameworks == ()
    await reg.apply(BATCH)
    await reg.close()

    sqlite = await Registry.open(tmp_path)
    await sqlite.apply(BATCH)
    expected = sqlite.read()
    await sqlite.close()

    again = await ZkRegistry.open(client, path)  # a new leader recovering
    snap = again.snapshot
    assert snap.master_seq > first_epoch
    assert attrs.evolve(snap, master_seq=0) == attrs.evolve(expected, master_seq=0)  # everything else alike
    assert snap.agents == expected.agents
    assert snap.frameworks == expected.frameworks
    assert snap.removed_frameworks == expected.removed_frameworks == frozenset({"f2"})
    assert snap.quotas == expected.quotas
    assert snap.weights == expected.weights
    a1 = next(a for a in snap.agents if a.agent_id == "a1")
    assert (a1.draining, a1.reservations, a1.attributes) == (True, "cpus(web):1", "rack:r1")
    a2 = next(a for a in snap.agents if a.agent_id == "a2")
    assert a2.unreachable_since == 10.0
    assert (a2.drain_kill, a2.drain_max_grace, a2.drain_mark_gone, a2.drained) == (True, 2.5, True, True)
    assert snap.agent_principals == (("a1", "agent-principal"),)
    last = BATCH[-1]
    assert isinstance(last, ops.MaintenanceSet)
    assert snap.maintenance == expected.maintenance == last.state

    # re-admission clears unreachable and keeps registered_at; reconnect clears the deadline
    await again.apply([ops.AgentAdmitted("a2", "h2b", 5052, "cpus:3", registered_at=99.0), ops.FrameworkReconnected("f1")])
    now = again.read()
    a2 = next(a for a in now.agents if a.agent_id == "a2")
    assert (a2.hostname, a2.port, a2.unreachable_since, a2.registered_at) == ("h2b", 5052, None, 2.0)
    assert next(f for f in now.frameworks if f.framework_id == "f1").deadline is None
    assert again.transactions >= 1 and again.writes == 2
    await again.close()


async def test_epochs_increase_and_a_batch_is_one_transaction(zk: tuple[KazooClient, str]) -> None:
    client, path = zk
    epochs = []
    for _ in range(3):
        reg = await ZkRegistry.open(client, path)
        epochs.append(reg.snapshot.master_seq)
        await reg.close()
    assert epochs == sorted(epochs) and len(set(epochs)) == 3

    reg = await ZkRegistry.open(client, path)
    await reg.apply([ops.AgentAdmitted(f"agent-{i}", "h", 1, "cpus:1") for i in range(200)])
    assert reg.transactions == 1
    assert len(reg.read().agents) == 200
    await reg.close()


async def test_a_write_after_the_session_is_gone_fails(zk: tuple[KazooClient, str]) -> None:
    """The session is the fence: a deposed leader's write never lands."""
    client, path = zk
    reg = await ZkRegistry.open(client, path)
    client.stop()
    with pytest.raises(Exception, match="registry write failed"):
        await reg.apply([ops.WeightSet("web", 1.0)])
    await reg.close()
    client.start(timeout=10)
