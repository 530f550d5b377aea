from __future__ import annotations

import pytest

from frameworks.elastic.membership import Membership, MembershipError, UnknownWorker


def test_join_assigns_ranks_in_join_order_and_bumps_generation() -> None:
    m = Membership(heartbeat_timeout=5.0)
    a, ch1 = m.join("w-a", "10.0.0.1:1", now=0.0)
    b, ch2 = m.join("w-b", "10.0.0.2:1", now=1.0)
    assert ch1 is not None and ch2 is not None
    assert (a.rank, a.world_size, a.generation) == (0, 1, 1)
    assert (b.rank, b.world_size, b.generation) == (1, 2, 2)
    assert ch2.joined == ("w-b",)
    # everyone sees the same peers in the current generation
    assert m.assignment("w-a").peers == m.assignment("w-b").peers
    assert [p.worker_id for p in m.generation.peers] == ["w-a", "w-b"]


def test_rejoin_same_address_is_idempotent() -> None:
    m = Membership(heartbeat_timeout=5.0)
    m.join("w", "a:1", 0.0)
    again, change = m.join("w", "a:1", 3.0)
    assert change is None and again.generation == 1
    moved, change = m.join("w", "b:2", 4.0)
    assert change is not None and moved.generation == 2 and moved.peers[0].address == "b:2"


def test_leave_compacts_ranks_and_is_idempotent() -> None:
    m = Membership(heartbeat_timeout=5.0)
    for i, w in enumerate(["a", "b", "c"]):
        m.join(w, f"h:{i}", 0.0)
    change = m.leave("a", 1.0)
    assert change is not None and change.left == ("a",)
    assert m.assignment("b").rank == 0 and m.assignment("c").rank == 1
    assert m.generation.number == 4 and m.generation.world_size == 2
    assert m.leave("a", 2.0) is None
    with pytest.raises(UnknownWorker):
        m.assignment("a")


def test_heartbeat_timeout_expires_silent_members_in_one_generation() -> None:
    m = Membership(heartbeat_timeout=5.0)
    m.join("a", "h:1", 0.0)
    m.join("b", "h:2", 0.0)
    m.join("c", "h:3", 0.0)
    m.heartbeat("c", 4.0)
    assert m.expire(5.0) is None  # exactly at the timeout: still alive
    assert m.next_deadline() == 5.0
    change = m.expire(5.5)
    assert change is not None and set(change.left) == {"a", "b"}
    assert change.generation.number == 4
    assert m.members() == ("c",) and m.assignment("c").rank == 0
    with pytest.raises(UnknownWorker, match="rejoin"):
        m.heartbeat("a", 6.0)


def test_bad_input() -> None:
    with pytest.raises(MembershipError):
        Membership(heartbeat_timeout=0)
    m = Membership(heartbeat_timeout=1)
    with pytest.raises(MembershipError):
        m.join("", "x", 0.0)


def test_generation_number_can_resume_after_restore() -> None:
    m = Membership(heartbeat_timeout=1, generation_number=41)
    a, _ = m.join("w", "h", 0.0)
    assert a.generation == 42
