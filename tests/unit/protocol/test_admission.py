"""protocol.admission: exact choices of which connection makes room."""

from __future__ import annotations

from protocol.admission import Limits, Phase, Slot, over, victim

W, B, IDLE = Phase.WAITING, Phase.BUSY, Phase.IDLE


def test_default_limits() -> None:
    assert Limits.of(1000) == Limits(total=1000, per_address=250, reserved=100)
    assert Limits.of(4, per_address=4, reserved=0) == Limits(4, 4, 0)
    assert Limits.of(1) == Limits(1, 1, 0)


def test_bounds() -> None:
    lim = Limits(total=10, per_address=3, reserved=2)
    assert over(lim, total=5, untrusted=5, from_address=2) == (False, False)
    assert over(lim, total=5, untrusted=8, from_address=2) == (True, False)  # the reserved share
    assert over(lim, total=10, untrusted=1, from_address=0) == (True, False)  # the pool
    assert over(lim, total=5, untrusted=5, from_address=3) == (False, True)


def test_the_heaviest_address_gives_its_oldest_waiting_socket_first() -> None:
    slots = {
        "a1": Slot("10.0.0.1", W, False, since=5.0),
        "a2": Slot("10.0.0.1", IDLE, False, since=1.0),
        "a3": Slot("10.0.0.1", W, False, since=3.0),
        "b1": Slot("10.0.0.2", W, False, since=0.0),  # older, but its address holds less
        "t1": Slot("10.0.0.1", IDLE, True, since=0.0),  # trusted: never
        "a4": Slot("10.0.0.1", B, False, since=0.0),  # busy: never
    }
    assert victim(slots, None, own_address_only=False) == "a3"
    assert victim(slots, "10.0.0.2", own_address_only=True) == "b1"
    # no waiting socket left on the heaviest address: its longest-idle one
    del slots["a1"], slots["a3"]
    assert victim(slots, None, own_address_only=False) == "a2"


def test_nothing_to_close_refuses() -> None:
    slots = {"t": Slot("a", IDLE, True, 0.0), "b": Slot("a", B, False, 0.0)}
    assert victim(slots, "a", own_address_only=False) is None
    assert victim({"x": Slot("b", W, False, 0.0)}, "a", own_address_only=True) is None
