"""A batch of launches hands its tasks' log pipes to the real log writer (``agent/logger.py``, its
own process) in one message (``open_many``), and one by one to a writer that does not say it
takes them so (a writer older than the agent: writers outlive agents)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import psutil

from agent.logs import LogWriterClient


def writers(meta: Path) -> list[psutil.Process]:
    out = []
    for p in psutil.process_iter(["cmdline"]):
        cmd = p.info["cmdline"] or []
        if len(cmd) >= 4 and cmd[-2].endswith("agent/logger.py") and cmd[-1] == str(meta):
            out.append(p)
    return out


def until(pred: object, within: float = 20.0) -> None:
    deadline = time.monotonic() + within
    while not pred():  # type: ignore[operator]
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.01)  # polling files another process writes, with a deadline


def write_and_close(pipes: tuple[tuple[int, int], tuple[int, int]] | None, out: bytes, err: bytes) -> None:
    """What a task does with its ends: write, exit (the agent's copies of the read ends closed too)."""
    assert pipes is not None
    (out_w, err_w), (out_r, err_r) = pipes
    os.write(out_w, out)
    os.write(err_w, err)
    for fd in (out_w, err_w, out_r, err_r):
        os.close(fd)


def test_a_batch_of_pipes_in_one_message_and_one_by_one_to_an_older_writer(tmp_path: Path) -> None:
    meta = tmp_path / "meta"
    meta.mkdir()
    client = LogWriterClient(meta, 1 << 20, 2)
    boxes = {f"t/f/{n}": tmp_path / n for n in ("a", "b", "c", "d")}
    for box in boxes.values():
        box.mkdir()
    try:
        got = client.open_many([(k, boxes[k]) for k in ("t/f/a", "t/f/b", "t/f/c")])
        assert client.batches == 1 and client.started == 1 and sorted(got) == ["t/f/a", "t/f/b", "t/f/c"]
        for key, pipes in got.items():
            write_and_close(pipes, f"out of {key}\n".encode(), f"err of {key}\n".encode())
        client._many = False  # what a writer from before open_many answers to hello
        late = client.open_many([("t/f/d", boxes["t/f/d"])])
        assert client.batches == 1  # sent one by one
        write_and_close(late["t/f/d"], b"out of d\n", b"")
        for key, box in boxes.items():
            want = b"out of d\n" if key == "t/f/d" else f"out of {key}\n".encode()
            until(lambda box=box, want=want: (box / "stdout").exists() and (box / "stdout").read_bytes() == want)
        assert (boxes["t/f/b"] / "stderr").read_bytes() == b"err of t/f/b\n"
    finally:
        client.close()
        for w in writers(meta):  # the writer outlives agents; this test's goes with it
            w.kill()
            w.wait(10)
