"""The agent's checkpoint: everything needed to recover after a crash, under the work dir.

Layout (``DIR`` is ``--work-dir``)::

    DIR/meta/agent.json                                agent id, boot id, resources, attributes
    DIR/meta/frameworks/<fid>/framework.json           FrameworkInfo (Mesos JSON)
    DIR/meta/frameworks/<fid>/tasks/<tid>/task.json    TaskInfo (+ group executor), flags
    DIR/meta/frameworks/<fid>/tasks/<tid>/updates.log  status updates and acks (records below)
    DIR/meta/frameworks/<fid>/tasks/<tid>/pid.json     wrapper pid, create time, boot id
    DIR/meta/frameworks/<fid>/tasks/<tid>/kill.json    why a kill was started (if one was)
    DIR/meta/frameworks/<fid>/tasks/<tid>/exit_status  "<code>\\n", written by the task wrapper
    DIR/sandboxes/<fid>/<tid>/{stdout,stderr}          the task's sandbox (cwd)

JSON files are ``{"crc32": C, "data": {...}}`` where ``C`` is the CRC-32 of the canonical JSON
of ``data`` (sorted keys, compact); a torn or altered file fails the check and is reported by
name (``CorruptCheckpoint``). Every JSON file is written atomically: write ``name.tmp``, fsync,
``os.replace``, fsync the directory.

``updates.log`` is a sequence of records ``<u32 length><u32 crc32><msgpack payload>`` (big
endian), each appended with one ``write`` and then fdatasync'd before the update is sent;
payloads are ``{"u": <TaskStatus>}`` (an update) or ``{"a": <uuid>}`` (an acknowledgement). A
record with a bad checksum is corruption; an incomplete *last* record (a crash mid-append on
power loss, never seen by anyone since it was not yet fsync'd) is cut off.

What is not fsync'd, and why that is safe: ``pid.json`` and ``kill.json`` (after a reboot no
task survives and the boot id differs, so a lost pid record changes nothing; within one boot the
page cache survives an agent ``kill -9``); ack records (a lost ack only makes the update be sent
again, which at-least-once allows); ``exit_status`` (written by ``/bin/sh``; a missing record is
reported LOST).
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import msgpack

from protocol import codec
from protocol.ids import valid_path_id
from protocol.mesos import ExecutorInfo, FrameworkInfo, TaskInfo, TaskStatus

_HEADER = struct.Struct(">II")
MAX_RECORD = 4 * 1024 * 1024


class CheckpointError(Exception):
    """A checkpoint problem, naming the file."""

    def __init__(self, path: Path | str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = str(path)
        self.reason = reason


class CorruptCheckpoint(CheckpointError):
    pass


@attrs.frozen
class AgentMeta:
    agent_id: str | None
    boot_id: str
    resources: str
    attributes: str = ""
    hostname: str = ""


@attrs.frozen
class PidRecord:
    pid: int
    create_time: float
    boot_id: str


@attrs.frozen
class TaskRecordFile:
    """What ``task.json`` holds."""

    framework_id: str
    task: TaskInfo
    executor: ExecutorInfo | None = None  # the group's executor for LAUNCH_GROUP tasks
    killing_state: bool = False


@attrs.frozen
class UpdateLog:
    updates: tuple[TaskStatus, ...]
    acked: frozenset[bytes]
    truncated: bool = False


@attrs.frozen
class RecoveredTaskFiles:
    framework_id: str
    task_id: str
    record: TaskRecordFile | None
    log: UpdateLog | None
    pid: PidRecord | None
    exit_code: int | None
    kill_reason: str | None
    broken: CorruptCheckpoint | None = None


@attrs.frozen
class Recovery:
    agent: AgentMeta | None
    frameworks: dict[str, FrameworkInfo]
    tasks: tuple[RecoveredTaskFiles, ...]
    broken: tuple[CorruptCheckpoint, ...]


# --- low-level file helpers -----------------------------------------------------------------


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes, fsync: bool = True) -> None:
    """``tmp`` + (fsync) + ``os.replace`` + (directory fsync): readers see old or new, never half."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, data)
        if fsync:
            os.fdatasync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    if fsync:
        fsync_dir(path.parent)


def _canonical(data: Any) -> bytes:
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


def dump_json(data: Any) -> bytes:
    return json.dumps({"crc32": zlib.crc32(_canonical(data)), "data": data}, sort_keys=True).encode() + b"\n"


def load_json(path: Path) -> Any:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise
    except OSError as e:
        raise CorruptCheckpoint(path, f"unreadable: {e}") from e
    try:
        doc = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as e:
        raise CorruptCheckpoint(path, f"not valid JSON (truncated?): {e}") from e
    if not isinstance(doc, dict) or "crc32" not in doc or "data" not in doc:
        raise CorruptCheckpoint(path, "missing checksum envelope")
    if zlib.crc32(_canonical(doc["data"])) != doc["crc32"]:
        raise CorruptCheckpoint(path, "checksum mismatch")
    return doc["data"]


def encode_record(payload: dict[str, Any]) -> bytes:
    body = msgpack.packb(payload, use_bin_type=True)
    return _HEADER.pack(len(body), zlib.crc32(body)) + body


def read_records(path: Path) -> tuple[list[dict[str, Any]], int]:
    """All records of a log and the offset where the complete records end (less than the file
    size when an incomplete last record was dropped)."""
    data = path.read_bytes()
    out: list[dict[str, Any]] = []
    pos = 0
    while pos < len(data):
        if len(data) - pos < _HEADER.size:
            return out, pos
        length, crc = _HEADER.unpack_from(data, pos)
        if length > MAX_RECORD:
            raise CorruptCheckpoint(path, f"record at offset {pos} claims {length} bytes")
        start = pos + _HEADER.size
        if start + length > len(data):
            return out, pos
        body = data[start : start + length]
        if zlib.crc32(body) != crc:
            raise CorruptCheckpoint(path, f"checksum mismatch in record at offset {pos}")
        try:
            rec = msgpack.unpackb(body, raw=False)
        except Exception as e:  # msgpack raises several types
            raise CorruptCheckpoint(path, f"undecodable record at offset {pos}: {e}") from e
        if not isinstance(rec, dict):
            raise CorruptCheckpoint(path, f"record at offset {pos} is not a map")
        out.append(rec)
        pos = start + length
    return out, pos


def parse_exit_status(raw: bytes) -> int | None:
    """``"<int>\\n"``; anything else (empty, torn, garbage) means "not recorded"."""
    if not raw.endswith(b"\n"):
        return None
    try:
        return int(raw.strip())
    except ValueError:
        return None


# --- the checkpoint -------------------------------------------------------------------------


class Checkpoint:
    """Synchronous file operations on the layout above (the service runs them off the loop)."""

    def __init__(self, work_dir: Path | str, fsync: bool = True) -> None:
        self.work_dir = Path(work_dir).resolve()
        self.meta = self.work_dir / "meta"
        self.sandboxes = self.work_dir / "sandboxes"
        self.fsync = fsync
        self._logs: dict[tuple[str, str], int] = {}  # open updates.log fds

    def init(self) -> None:
        for d in (self.meta / "frameworks", self.sandboxes):
            d.mkdir(parents=True, exist_ok=True)

    # paths (every id must be path-safe; the resolved path must stay under the root)

    def _under(self, root: Path, *parts: str) -> Path:
        for p in parts:
            if not valid_path_id(p):
                raise CheckpointError(root, f"invalid id {p!r} for a path")
        path = root.joinpath(*parts)
        if not str(path.resolve()).startswith(str(root.resolve()) + os.sep):
            raise CheckpointError(path, "escapes its root")
        return path

    def framework_dir(self, fid: str) -> Path:
        return self._under(self.meta / "frameworks", fid)

    def task_dir(self, fid: str, tid: str) -> Path:
        return self._under(self.meta / "frameworks", fid, "tasks", tid)

    def sandbox(self, fid: str, tid: str) -> Path:
        return self._under(self.sandboxes, fid, tid)

    def exit_status_path(self, fid: str, tid: str) -> Path:
        return self.task_dir(fid, tid) / "exit_status"

    # agent

    def read_agent(self) -> AgentMeta | None:
        path = self.meta / "agent.json"
        try:
            d = load_json(path)
        except FileNotFoundError:
            return None
        try:
            return AgentMeta(**d)
        except TypeError as e:
            raise CorruptCheckpoint(path, f"bad fields: {e}") from e

    def write_agent(self, meta: AgentMeta) -> None:
        self.meta.mkdir(parents=True, exist_ok=True)
        atomic_write(self.meta / "agent.json", dump_json(attrs.asdict(meta)), self.fsync)

    # frameworks and tasks

    def write_framework(self, fid: str, info: FrameworkInfo) -> None:
        d = self.framework_dir(fid)
        d.mkdir(parents=True, exist_ok=True)
        atomic_write(d / "framework.json", dump_json(codec.to_builtins(info)), self.fsync)

    def write_task(self, rec: TaskRecordFile) -> None:
        d = self.task_dir(rec.framework_id, rec.task.task_id.value)
        d.mkdir(parents=True, exist_ok=True)
        data = {
            "framework_id": rec.framework_id,
            "task": codec.to_builtins(rec.task),
            "executor": codec.to_builtins(rec.executor) if rec.executor is not None else None,
            "killing_state": rec.killing_state,
        }
        atomic_write(d / "task.json", dump_json(data), self.fsync)
        if self.fsync:
            fsync_dir(d.parent)

    def write_pid(self, fid: str, tid: str, rec: PidRecord) -> None:
        atomic_write(self.task_dir(fid, tid) / "pid.json", dump_json(attrs.asdict(rec)), fsync=False)

    def write_kill(self, fid: str, tid: str, reason: str) -> None:
        atomic_write(self.task_dir(fid, tid) / "kill.json", dump_json({"reason": reason}), fsync=False)

    def _log_fd(self, fid: str, tid: str) -> int:
        fd = self._logs.get((fid, tid))
        if fd is None:
            path = self.task_dir(fid, tid) / "updates.log"
            created = not path.exists()
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            if created and self.fsync:
                fsync_dir(path.parent)
            self._logs[(fid, tid)] = fd
        return fd

    def append_update(self, fid: str, tid: str, status: TaskStatus) -> None:
        fd = self._log_fd(fid, tid)
        os.write(fd, encode_record({"u": codec.to_builtins(status, binary=True)}))
        if self.fsync:
            os.fdatasync(fd)

    def append_ack(self, fid: str, tid: str, uuid: bytes) -> None:
        os.write(self._log_fd(fid, tid), encode_record({"a": uuid}))

    def close_log(self, fid: str, tid: str) -> None:
        fd = self._logs.pop((fid, tid), None)
        if fd is not None:
            os.close(fd)

    def close(self) -> None:
        for key in list(self._logs):
            self.close_log(*key)

    def read_exit_status(self, fid: str, tid: str) -> int | None:
        try:
            return parse_exit_status(self.exit_status_path(fid, tid).read_bytes())
        except FileNotFoundError:
            return None

    def remove_task(self, fid: str, tid: str) -> None:
        """Drop a finished task's checkpoint (after its terminal acknowledgement)."""
        self.close_log(fid, tid)
        d = self.task_dir(fid, tid)
        shutil.rmtree(d, ignore_errors=True)
        fdir = self.framework_dir(fid)
        tasks = fdir / "tasks"
        try:
            if not any(tasks.iterdir()):
                shutil.rmtree(fdir, ignore_errors=True)
        except FileNotFoundError:
            pass

    # recovery

    def _task_dirs(self) -> Iterator[tuple[str, str, Path]]:
        root = self.meta / "frameworks"
        if not root.is_dir():
            return
        for fdir in sorted(root.iterdir()):
            tdir = fdir / "tasks"
            if not tdir.is_dir():
                continue
            for d in sorted(tdir.iterdir()):
                if d.is_dir():
                    yield fdir.name, d.name, d

    def read_log(self, path: Path) -> UpdateLog:
        records, end = read_records(path)
        truncated = end < path.stat().st_size
        updates: list[TaskStatus] = []
        acked: set[bytes] = set()
        for i, rec in enumerate(records):
            if "u" in rec:
                try:
                    updates.append(codec.from_builtins(TaskStatus, rec["u"], binary=True))
                except codec.DecodeError as e:
                    raise CorruptCheckpoint(path, f"record {i}: {e}") from e
            elif "a" in rec and isinstance(rec["a"], bytes):
                acked.add(rec["a"])
            else:
                raise CorruptCheckpoint(path, f"record {i} has an unknown kind")
        if truncated:
            with open(path, "r+b") as f:  # cut the torn tail so later appends stay aligned
                f.truncate(end)
        return UpdateLog(tuple(updates), frozenset(acked), truncated)

    def _read_task(self, fid: str, tid: str, d: Path) -> RecoveredTaskFiles:
        record = log = pid = None
        exit_code: int | None = None
        kill_reason: str | None = None
        try:
            if not valid_path_id(fid) or not valid_path_id(tid):
                raise CorruptCheckpoint(d, "directory name is not a valid id")
            try:
                data = load_json(d / "task.json")
            except FileNotFoundError:
                raise CorruptCheckpoint(d / "task.json", "missing") from None
            try:
                record = TaskRecordFile(
                    framework_id=data["framework_id"],
                    task=codec.from_builtins(TaskInfo, data["task"]),
                    executor=codec.from_builtins(ExecutorInfo, data["executor"]) if data.get("executor") else None,
                    killing_state=bool(data.get("killing_state", False)),
                )
            except (KeyError, TypeError, codec.DecodeError) as e:
                raise CorruptCheckpoint(d / "task.json", f"bad contents: {e}") from e
            if record.task.task_id.value != tid or record.framework_id != fid:
                raise CorruptCheckpoint(d / "task.json", "ids do not match the directory")
            if (d / "updates.log").exists():
                log = self.read_log(d / "updates.log")
            if (d / "pid.json").exists():
                try:
                    pid = PidRecord(**load_json(d / "pid.json"))
                except TypeError as e:
                    raise CorruptCheckpoint(d / "pid.json", f"bad fields: {e}") from e
            if (d / "kill.json").exists():
                kill_reason = str(load_json(d / "kill.json").get("reason"))
            exit_code = self.read_exit_status(fid, tid)
        except CorruptCheckpoint as e:
            return RecoveredTaskFiles(fid, tid, record, log, pid, exit_code, kill_reason, broken=e)
        return RecoveredTaskFiles(fid, tid, record, log, pid, exit_code, kill_reason)

    def recover(self) -> Recovery:
        """Read everything back. Agent-level corruption raises; a broken task is returned with
        ``broken`` set (the caller decides: ``--strict`` refuses to start)."""
        agent = self.read_agent()
        frameworks: dict[str, FrameworkInfo] = {}
        broken: list[CorruptCheckpoint] = []
        root = self.meta / "frameworks"
        if root.is_dir():
            for fdir in sorted(root.iterdir()):
                path = fdir / "framework.json"
                try:
                    frameworks[fdir.name] = codec.from_builtins(FrameworkInfo, load_json(path))
                except FileNotFoundError:
                    continue
                except codec.DecodeError as e:
                    broken.append(CorruptCheckpoint(path, f"bad contents: {e}"))
                except CorruptCheckpoint as e:
                    broken.append(e)
        tasks = tuple(self._read_task(fid, tid, d) for fid, tid, d in self._task_dirs())
        broken.extend(t.broken for t in tasks if t.broken is not None)
        return Recovery(agent, frameworks, tasks, tuple(broken))
