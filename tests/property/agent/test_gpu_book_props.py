"""Property: whatever order tasks launch, end and the agent restarts in, no device is held by two
live tasks (without sharing; with sharing no device is held beyond its capacity), a task that
ended holds nothing, a recovered task keeps exactly its devices, and a request is refused only
when the free devices really cannot hold it."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from agent.gpus import MILLI, GpuBook, GpuDevice, Refused, whole

AMOUNTS = [0, 0.25, 0.5, 1, 2, 3, 1.5]

ops = st.lists(
    st.one_of(
        st.tuples(st.just("launch"), st.integers(0, 7), st.sampled_from(AMOUNTS)),
        st.tuples(st.just("end"), st.integers(0, 7), st.just(0)),
        st.tuples(st.just("restart"), st.just(0), st.just(0)),
    ),
    max_size=60,
)


def check(book: GpuBook, live: dict[int, tuple[tuple[int, ...], float]], sharing: bool) -> None:
    for index in book.devices:
        holders = book.holders(index)
        assert all(h in live for h in holders), "an ended task still holds a device"
        assert book.used(index) <= MILLI
        if not sharing:
            assert len(holders) <= 1, f"device {index} held by {holders}"
    for key, (devices, amount) in live.items():
        got = tuple(d.index for d in book.of(key))
        assert got == devices
        if amount > 0 and whole(amount):
            assert len(got) == round(amount)
            assert all(book.holders(i) == (key,) for i in got)


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 4), st.booleans(), ops)
def test_book_invariants(ndev: int, sharing: bool, seq: list[tuple[str, int, float]]) -> None:
    devices = tuple(GpuDevice(i, f"GPU-{i}", "Model", 1000) for i in range(ndev))
    book = GpuBook(devices, sharing=sharing)
    live: dict[int, tuple[tuple[int, ...], float]] = {}  # what the checkpoint holds: devices, amount
    for op, key, amount in seq:
        if op == "launch":
            if key in live:
                continue  # a task id is launched once while it lives
            free_whole = len(book.free())
            fits_share = any(book.used(i) + round(amount * MILLI) <= MILLI for i in book.devices)
            got = book.assign(key, amount)
            if isinstance(got, Refused):
                if not whole(amount):
                    assert got.error == (not sharing or amount > 1)
                    if sharing and amount < 1:
                        assert not fits_share
                else:
                    assert not got.error and free_whole < round(amount)
                assert key not in book
                continue
            assert whole(amount) or sharing
            live[key] = (tuple(d.index for d in got), amount)
        elif op == "end":
            released = book.release(key)
            if key in live:
                assert released == live.pop(key)[0]
            else:
                assert released == ()
        else:  # the agent restarts: a new book, every live task restored from its checkpoint
            book = GpuBook(devices, sharing=sharing)
            for k, (held, amount) in live.items():
                if held:
                    assert book.restore(k, held, amount) is None
        check(book, live, sharing)
