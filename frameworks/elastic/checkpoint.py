"""Coordinator checkpoints on disk: written atomically (temporary file, fsync, ``os.replace``,
fsync of the directory) so a crash leaves either the old or the new checkpoint, never half of one."""

from __future__ import annotations

import os
from pathlib import Path

from frameworks.elastic import wire
from frameworks.elastic.messages import Checkpoint

CHECKPOINT_NAME = "coordinator.ckpt"


class CheckpointError(ValueError):
    """A checkpoint file that cannot be read; names the file."""


def write_atomic(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def save(directory: str | Path, ck: Checkpoint) -> Path:
    path = Path(directory) / CHECKPOINT_NAME
    write_atomic(path, wire.encode(ck))
    return path


def load(directory: str | Path) -> Checkpoint | None:
    """The saved checkpoint, None when there is none; ``CheckpointError`` when it is unreadable."""
    path = Path(directory) / CHECKPOINT_NAME
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as e:
        raise CheckpointError(f"{path}: cannot read checkpoint: {e}") from None
    try:
        return wire.decode(Checkpoint, data)
    except wire.DecodeError as e:
        raise CheckpointError(f"{path}: corrupt checkpoint: {e}") from None
