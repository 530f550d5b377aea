"""The agent's checkpoint: everything needed to recover after a crash, under the work dir.

Layout (``DIR`` is ``--work-dir``)::

    DIR/meta/agent.json                           agent id, boot id, resources identity, attributes
    DIR/meta/frameworks/<fid>/framework.json      FrameworkInfo (Mesos JSON)
    DIR/meta/frameworks/<fid>/tasks/<tid>.log     the task's log: task record, pid, kill, updates, acks
    DIR/meta/frameworks/<fid>/exits/<tid>         "<code>\\n", written by the task wrapper
    DIR/meta/frameworks/<fid>/executors/<eid>.exit   the same for a custom executor
    DIR/sandboxes/<fid>/<tid>/{stdout,stderr}     the task's sandbox (cwd)
    DIR/sandboxes/<fid>/<eid>/                    a custom or DEFAULT executor's sandbox
    DIR/sandboxes/<fid>/<eid>/tasks/<tid>/        the sandbox of a task run by the DEFAULT executor

One file per task keeps a launch to a single file creation and a corrupt file to a single task.
A task log is a sequence of records ``<u32 length><u32 crc32><msgpack payload>`` (big endian),
each appended with one ``write``. Payloads: ``{"t": task record}`` (always first; its
``"gpus"`` are the NVML indices of the task's GPU devices, when it has any; ``"group"`` the ids of
its task group's tasks, for a task launched with LAUNCH_GROUP), ``{"p": pid
record}``, ``{"k": {"reason", "deadline"}}`` (a kill under way and when its SIGKILL is due),
``{"u": TaskStatus}``, ``{"a": uuid}``. A record with a bad
checksum is corruption, reported with the file name; an incomplete *last* record (a crash
mid-append on power loss, never synced, so never acted upon) is cut off.

JSON files (``agent.json``, ``framework.json``) are ``{"crc32": C, "data": {...}}`` with ``C``
the CRC-32 of the canonical JSON of ``data``, written atomically: ``name.tmp``, fdatasync,
``os.replace``, fsync of the directory.

Group commit: every update is *written* before it is sent, and a *terminal* update is also
*durable* (``append_update(..., sync=True)``): ``commit()`` fdatasyncs each file that got a
durable update, once per batch, and fsyncs the directories that got new entries since the last
durable commit. The service writes a whole batch, commits, and only then sends.

Why only terminal updates are synced. Un-synced data is lost only by a machine crash (an agent
``kill -9`` keeps the page cache, and recovery reads it back), and a machine crash kills every
task too (the boot id changes; nothing is adopted). So a non-terminal update (RUNNING, KILLING)
lost that way is superseded by the truth the master learns next — the agent reports the task
LOST (its log survived without the update) or the master reports it GONE (the log did not
survive: "Task not on the agent") — a valid path for the framework in either case. A terminal
update lost that way could instead be contradicted: the framework saw FINISHED, and after the
reboot the agent, knowing only RUNNING, would report a second terminal state (LOST); so it is
fdatasynced before it is sent. Its fdatasync also makes everything
written to the same file before it durable (task record, pid, the earlier updates).

A task record is *written* before its process is spawned (so an agent ``kill -9`` at any point
leaves it in the page cache for recovery); it becomes durable with the task's terminal update.
Also not synced, on purpose: pid and kill records (after a reboot no task survives and the boot
id differs; within one boot the page cache survives an agent ``kill -9``), acks (a lost ack only
makes the update be sent again, which at-least-once allows), exit files (written by ``/bin/sh``;
a missing one is reported LOST).

Recycled files (``DIR/meta/free/<n>``). Creating a file costs far more than renaming one on the
kind of file system agents run on (ext4 without a journal scans recently deleted inodes on every
allocation, and an agent that unlinks two files per task keeps tens of thousands of them recent),
so a finished task's files are not unlinked: the sweep (``recycle_task``, after the task's
terminal acknowledgement, in the sweep thread) *truncates* its log and its exit file, then
*renames* each into the pool; a new task's log and exit file are *renamed* out of the pool
(``write_task``: the log with ``RENAME_NOREPLACE``, so a log that exists is still refused; the
exit file over whatever stale one its id left). Nothing is created or deleted per task once the
pool holds files. What recovery may find after a crash at each step (an agent ``kill -9``: the
page cache holds every completed step, in program order):

* before the truncate: the finished, fully acknowledged ``tasks/<tid>.log`` (and its exit file):
  removed at recovery as before;
* after the truncate, before the rename: an empty ``tasks/<tid>.log``: "created but never
  written", removed at recovery; the task's terminal update was acknowledged, so the master and
  the framework already have its end: nothing is lost and nothing is reported again;
* after the rename: an empty file in the pool: the pool is never read; ``init`` unlinks
  whatever it holds (unlinks, never truncates: see the next case);
* renaming out (``renameat2``, one atomic step): the file is either an empty pool entry or the
  new task's empty log/exit file, which is the state of a fresh ``O_CREAT`` (an empty log is a
  task never launched; an empty exit file is "no exit recorded"). Where ``renameat2`` is missing
  the move is ``link`` + ``unlink``: a crash between them leaves the same inode under both
  names, which is why ``init`` unlinks pool entries instead of truncating them;
* the task record written: exactly the situation of a freshly created log.

So a recycled file enters a task's name only empty, and leaves it only after the task's
terminal acknowledgement: nothing acknowledged is resurrected and nothing unacknowledged is
lost. After a *power loss*, a journaling file system (ext4's default ``data=ordered``) commits
metadata in order, so a rename out of the pool is never durable without the truncate before it;
without a journal no order holds for unsynced metadata (a freshly created file can show blocks
of a deleted one there too): a reused log that then shows another task's records is reported as
corrupt (moved to ``meta/corrupt``, the task ``TASK_LOST``: it died with the machine).
"""

from __future__ import annotations

import collections
import concurrent.futures
import contextlib
import ctypes
import errno
import itertools
import json
import os
import shutil
import stat
import struct
import zlib
from pathlib import Path
from typing import Any

import attrs
import msgpack

from agent.checkpoint_records import (  # the records, re-exported
    AgentMeta,
    CheckpointError,
    CorruptCheckpoint,
    PidRecord,
    RecoveredTaskFiles,
    Recovery,
    TaskRecordFile,
    UpdateLog,
)
from protocol import codec
from protocol.ids import valid_path_id
from protocol.mesos import ExecutorInfo, FrameworkInfo, TaskInfo, TaskStatus

_HEADER = struct.Struct(">II")
MAX_RECORD = 4 * 1024 * 1024
__all__ = ["AgentMeta", "Checkpoint", "CheckpointError", "CorruptCheckpoint", "PidRecord", "RecoveredTaskFiles", "Recovery", "TaskRecordFile", "UpdateLog"]

OPEN_LOGS = 256  # task logs kept open between batches (a task appends ~5 records in its life)
FREE_POOL = 1024  # emptied checkpoint files kept in ``meta/free`` for new tasks (beyond: unlinked)


# --- low-level file helpers -----------------------------------------------------------------


def fsync_dir(path: Path | str) -> None:
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


_AT_FDCWD = -100
_RENAME_NOREPLACE = 1
try:
    _renameat2: Any = ctypes.CDLL(None, use_errno=True).renameat2
    _renameat2.argtypes = (ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint)
    _renameat2.restype = ctypes.c_int
except (AttributeError, OSError):  # a libc without it (glibc < 2.28, musl < 1.2.5)
    _renameat2 = None


def rename_noreplace(src: str, dst: str) -> None:
    """Move ``src`` to ``dst`` unless ``dst`` exists (``FileExistsError``): ``renameat2`` with
    ``RENAME_NOREPLACE`` (one atomic step), else ``link`` + ``unlink``."""
    if _renameat2 is not None:
        if _renameat2(_AT_FDCWD, os.fsencode(src), _AT_FDCWD, os.fsencode(dst), _RENAME_NOREPLACE) == 0:
            return
        e = ctypes.get_errno()
        if e not in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP):  # EINVAL: a file system without it
            raise OSError(e, os.strerror(e), dst)
    os.link(src, dst)
    os.unlink(src)


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


def _gpus(raw: Any) -> tuple[int, ...]:
    """A task record's GPU device indices (absent in records without devices)."""
    if raw is None:
        return ()
    if not isinstance(raw, list) or not all(isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in raw):
        raise ValueError(f"gpus must be a list of device indices, not {raw!r}")
    return tuple(raw)


def _real_dirs(*paths: str) -> None:
    """Each of ``paths`` (outermost first) is a real directory or not there yet."""
    for p in paths:
        try:
            mode = os.lstat(p).st_mode
        except FileNotFoundError:
            return  # not created yet (nor, then, anything below it)
        if not stat.S_ISDIR(mode):
            raise CheckpointError(p, "escapes its root" if stat.S_ISLNK(mode) else "is not a directory")


def _group(raw: Any) -> tuple[str, ...]:
    """A task record's task group (absent for tasks launched alone and in older records)."""
    if raw is None:
        return ()
    if not isinstance(raw, list) or not all(isinstance(i, str) for i in raw):
        raise ValueError(f"group must be a list of task ids, not {raw!r}")
    return tuple(raw)


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
    """Synchronous file operations on the layout above (the service runs them in one thread)."""

    def __init__(self, work_dir: Path | str, fsync: bool = True) -> None:
        self.work_dir = Path(work_dir).resolve()
        self.meta = self.work_dir / "meta"
        self.sandboxes = self.work_dir / "sandboxes"
        self.fsync = fsync
        # hot paths build paths as strings (pathlib's joins cost more than the syscalls here)
        self._fw_root = str(self.meta / "frameworks")
        self._sb_root = str(self.sandboxes)
        self._valid: set[str] = set()  # ids already checked by ``valid_path_id``
        self._frameworks: set[str] = set()  # frameworks whose framework.json is known to exist
        self._pending: dict[str, int] = {}  # files written in this batch -> open fd
        self._open: dict[str, int] = {}  # logs kept open after their batch, oldest first
        self._sync: set[str] = set()  # files that must be fdatasync'd at commit
        self._dirs: set[str] = set()  # directories that got new entries
        self._syncers = concurrent.futures.ThreadPoolExecutor(max_workers=8, thread_name_prefix="ckpt-sync")
        # the pool of emptied files (see "Recycled files" above): filled by the sweep thread,
        # taken by the checkpoint thread (deque appends and pops are atomic)
        self._free_root = str(self.meta / "free")
        self._free: collections.deque[str] = collections.deque()
        self._free_seq = itertools.count()
        self.recycled = 0  # files put in the pool
        self.reused = 0  # files taken from it

    def init(self) -> None:
        self._frameworks.clear()
        for d in (self.meta / "frameworks", self.sandboxes):
            d.mkdir(parents=True, exist_ok=True)
        self.clear_pool()

    def clear_pool(self) -> None:
        """Unlink whatever the pool holds (left by an earlier run: never read, never truncated,
        since a crash between ``link`` and ``unlink`` may have left a task's live file there too)."""
        self._free.clear()
        shutil.rmtree(self._free_root, ignore_errors=True)
        os.makedirs(self._free_root, exist_ok=True)

    @property
    def pool_size(self) -> int:
        return len(self._free)

    # paths (every id must be path-safe; the resolved path must stay under the root)

    def _check(self, *ids: str) -> None:
        for i in ids:
            if i not in self._valid:
                if not valid_path_id(i):
                    raise CheckpointError(i, f"invalid id {i!r} for a path")
                if len(self._valid) > 100_000:
                    self._valid.clear()
                self._valid.add(i)

    def framework_dir(self, fid: str) -> Path:
        self._check(fid)
        return self.meta / "frameworks" / fid

    def _log(self, fid: str, tid: str) -> str:
        self._check(fid, tid)
        return f"{self._fw_root}/{fid}/tasks/{tid}.log"

    def _exit(self, fid: str, tid: str) -> str:
        self._check(fid, tid)
        return f"{self._fw_root}/{fid}/exits/{tid}"

    def task_log(self, fid: str, tid: str) -> Path:
        return Path(self._log(fid, tid))

    def exit_status_path(self, fid: str, tid: str) -> Path:
        return Path(self._exit(fid, tid))

    def executor_exit_path(self, fid: str, eid: str) -> Path:
        self._check(fid, eid)
        return self.meta / "frameworks" / fid / "executors" / f"{eid}.exit"

    def sandbox(self, fid: str, tid: str) -> Path:
        """The sandbox path, checked so that a symlink cannot redirect it: the root is resolved
        and the ids are single path components (``valid_path_id``), so the path can only leave
        the root through a symlink at ``<fid>`` or ``<fid>/<tid>``; both are ``lstat``ed and
        must be real directories when they exist (two syscalls where ``resolve()`` takes one
        per path component)."""
        self._check(fid, tid)
        fdir = f"{self._sb_root}/{fid}"
        path = f"{fdir}/{tid}"
        _real_dirs(fdir, path)
        return Path(path)

    def task_sandbox(self, fid: str, tid: str, executor_id: str | None = None) -> Path:
        """A task's sandbox: ``sandbox(fid, tid)``, or for a task run by the DEFAULT executor
        (``executor_id``), ``tasks/<tid>`` under the executor's sandbox, as Mesos nests a task
        group's containers under their executor's; checked the same way."""
        if executor_id is None:
            return self.sandbox(fid, tid)
        self._check(fid, executor_id, tid)
        edir = f"{self._sb_root}/{fid}/{executor_id}"
        path = f"{edir}/tasks/{tid}"
        _real_dirs(f"{self._sb_root}/{fid}", edir, f"{edir}/tasks", path)
        return Path(path)

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
        for sub in ("tasks", "exits", "executors"):
            (d / sub).mkdir(parents=True, exist_ok=True)
        atomic_write(d / "framework.json", dump_json(codec.to_builtins(info)), self.fsync)
        if self.fsync:
            fsync_dir(d.parent)
        self._frameworks.add(fid)

    def has_framework(self, fid: str) -> bool:
        """Whether ``framework.json`` exists (remembered once seen; forgotten when the framework's
        directory is removed)."""
        if fid in self._frameworks:
            return True
        if (self.framework_dir(fid) / "framework.json").exists():
            self._frameworks.add(fid)
            return True
        return False

    def _append(self, path: str, payload: dict[str, Any], sync: bool, create: bool = False) -> None:
        fd = self._pending.get(path)
        if fd is None:
            fd = self._open.pop(path, None)
            if fd is not None and create:  # a stale descriptor of a removed log
                os.close(fd)
                fd = None
            elif fd is not None:
                self._pending[path] = fd
        if fd is None:
            if create:
                fd = self._create(path)
                self._dirs.add(os.path.dirname(path))
            else:
                try:
                    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
                except FileNotFoundError:
                    raise CheckpointError(path, "task log missing") from None
            self._pending[path] = fd
        data = encode_record(payload)
        n = os.write(fd, data)
        if n != len(data):  # a full file system cut the record: take the piece back, the log stays whole
            with contextlib.suppress(OSError):
                os.ftruncate(fd, os.fstat(fd).st_size - n)
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), path)
        if sync:
            self._sync.add(path)

    def _take(self) -> str | None:
        try:
            return self._free.popleft()
        except IndexError:
            return None

    def _place(self, path: str, replace: bool) -> bool:
        """Move an emptied file from the pool to ``path`` (the parent made if missing); False
        when the pool is empty. ``FileExistsError`` (``replace`` False) when ``path`` exists."""
        src = self._take()
        if src is None:
            return False
        for attempt in (0, 1):
            try:
                if replace:
                    os.rename(src, path)
                else:
                    rename_noreplace(src, path)
                self.reused += 1
                return True
            except FileExistsError:
                self._free.appendleft(src)
                raise
            except FileNotFoundError:
                parent = os.path.dirname(path)
                if attempt == 1 or os.path.isdir(parent):
                    return False  # the pool file is gone (not ours to explain): create instead
                os.makedirs(parent, exist_ok=True)
                self._dirs.add(os.path.dirname(parent))
        return False

    def _create(self, path: str) -> int:
        """A new, empty task log open for appends: renamed from the pool, else created."""
        if self._place(path, replace=False):
            return os.open(path, os.O_WRONLY | os.O_APPEND)
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_EXCL
        try:
            return os.open(path, flags, 0o644)
        except FileNotFoundError:
            parent = os.path.dirname(path)
            os.makedirs(parent, exist_ok=True)
            self._dirs.add(os.path.dirname(parent))
            return os.open(path, flags, 0o644)

    def write_task(self, rec: TaskRecordFile) -> None:
        """Start the task's log with its task record (durable at the next ``commit``)."""
        data = {
            "framework_id": rec.framework_id,
            "task": codec.to_builtins(rec.task, binary=True),
            "executor": codec.to_builtins(rec.executor, binary=True) if rec.executor is not None else None,
            "killing_state": rec.killing_state,
        }
        if rec.gpus:
            data["gpus"] = list(rec.gpus)
        if rec.group:
            data["group"] = list(rec.group)
        path = self._log(rec.framework_id, rec.task.task_id.value)
        try:
            self._append(path, {"t": data}, sync=False, create=True)
        except FileExistsError:
            raise CheckpointError(path, "task log already exists") from None
        # the wrapper's exit file, empty ("no exit recorded") until it writes it: from the pool
        # when it has one, so that the wrapper's ``>`` truncates instead of creating
        with contextlib.suppress(OSError):
            self._place(self._exit(rec.framework_id, rec.task.task_id.value), replace=True)

    def write_pid(self, fid: str, tid: str, rec: PidRecord) -> None:
        pid = {"pid": rec.pid, "create_time": rec.create_time, "boot_id": rec.boot_id}
        self._append(self._log(fid, tid), {"p": pid}, sync=False)

    def write_kill(self, fid: str, tid: str, reason: str, deadline: float | None = None) -> None:
        self._append(self._log(fid, tid), {"k": {"reason": reason, "deadline": deadline}}, sync=False)

    def append_update(self, fid: str, tid: str, status: TaskStatus, sync: bool = True) -> None:
        """Append a status update; with ``sync`` it is fdatasync'd at the next ``commit`` (the
        service asks for that for terminal updates only — see the module docstring)."""
        self._append(self._log(fid, tid), {"u": codec.to_builtins(status, binary=True)}, sync=sync)

    def append_ack(self, fid: str, tid: str, uuid: bytes) -> None:
        self._append(self._log(fid, tid), {"a": uuid}, sync=False)

    def commit(self) -> None:
        """End a batch. If it holds records that must be durable (terminal updates), fdatasync each
        such file once and fsync every directory that got a new entry since the last durable
        commit (a task record becomes durable with its task's terminal update, which is in the
        same file — see the module docstring). The logs stay open for their next records."""
        try:
            if self.fsync and self._sync:
                fds = [fd for fd in (self._pending.get(p) for p in self._sync) if fd is not None]
                if len(fds) > 1:
                    # concurrent fdatasyncs let the file system share journal commits
                    list(self._syncers.map(os.fdatasync, fds))
                else:
                    for fd in fds:
                        os.fdatasync(fd)
                for d in self._dirs:
                    with contextlib.suppress(FileNotFoundError):
                        fsync_dir(d)
                self._dirs.clear()
            elif not self.fsync:
                self._dirs.clear()
        finally:
            # keep the batch's logs open for the next records (most recent last), up to a cap
            self._open.update(self._pending)
            self._pending.clear()
            self._sync.clear()
            while len(self._open) > OPEN_LOGS:
                os.close(self._open.pop(next(iter(self._open))))

    def release(self, fid: str, tid: str) -> None:
        """The task's log gets no more records (its stream is done): close it if it is open."""
        path = self._log(fid, tid)
        for fds in (self._pending, self._open):
            fd = fds.pop(path, None)
            if fd is not None:
                os.close(fd)
        self._sync.discard(path)

    def close(self) -> None:
        self.commit()
        for fd in self._open.values():
            os.close(fd)
        self._open.clear()
        self._syncers.shutdown(wait=True)

    def read_exit_status(self, fid: str, tid: str) -> int | None:
        try:
            with open(self._exit(fid, tid), "rb") as f:
                return parse_exit_status(f.read())
        except FileNotFoundError:
            return None

    def remove_task(self, fid: str, tid: str) -> None:
        """Drop a finished task's checkpoint (after its terminal acknowledgement)."""
        self.release(fid, tid)
        for p in (self._log(fid, tid), self._exit(fid, tid)):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(p)

    def recycle_task(self, fid: str, tid: str) -> None:
        """A finished, acknowledged task's files into the pool (the sweep thread; the batch side
        has ``release``d the log): each truncated, then renamed (see "Recycled files" above);
        unlinked once the pool is full."""
        for p in (self._log(fid, tid), self._exit(fid, tid)):
            if len(self._free) >= FREE_POOL:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(p)
                continue
            try:
                os.truncate(p, 0)
            except FileNotFoundError:
                continue
            dst = f"{self._free_root}/{next(self._free_seq)}"
            try:
                os.rename(p, dst)
            except FileNotFoundError:  # the pool directory went away (a work dir cleaned by hand)
                os.makedirs(self._free_root, exist_ok=True)
                os.rename(p, dst)
            self._free.append(dst)
            self.recycled += 1

    def unlink_task(self, fid: str, tid: str) -> None:
        """Remove a finished task's files (safe from another thread than the batch's; the batch
        side has ``release``d the log)."""
        for p in (self._log(fid, tid), self._exit(fid, tid)):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(p)

    def remove_framework_if_empty(self, fid: str) -> bool:
        d = self.framework_dir(fid)
        try:
            if any((d / "tasks").iterdir()):
                return False
        except FileNotFoundError:
            pass
        self._frameworks.discard(fid)
        shutil.rmtree(d, ignore_errors=True)
        return True

    # recovery

    def read_task_log(
        self, path: Path
    ) -> tuple[TaskRecordFile, UpdateLog, PidRecord | None, dict[str, Any] | None]:
        records, end = read_records(path)
        truncated = end < path.stat().st_size
        if not records or "t" not in records[0]:
            raise CorruptCheckpoint(path, "the log does not start with a task record")
        try:
            t = records[0]["t"]
            rec = TaskRecordFile(
                framework_id=t["framework_id"],
                task=codec.from_builtins(TaskInfo, t["task"], binary=True),
                executor=codec.from_builtins(ExecutorInfo, t["executor"], binary=True) if t.get("executor") else None,
                killing_state=bool(t.get("killing_state", False)),
                gpus=_gpus(t.get("gpus")),
                group=_group(t.get("group")),
            )
        except (KeyError, TypeError, ValueError, codec.DecodeError) as e:
            raise CorruptCheckpoint(path, f"bad task record: {e}") from e
        updates: list[TaskStatus] = []
        acked: set[bytes] = set()
        pid: PidRecord | None = None
        kill: dict[str, Any] | None = None
        for i, r in enumerate(records[1:], 1):
            try:
                if "u" in r:
                    updates.append(codec.from_builtins(TaskStatus, r["u"], binary=True))
                elif "a" in r and isinstance(r["a"], bytes):
                    acked.add(r["a"])
                elif "p" in r:
                    pid = PidRecord(**r["p"])
                elif "k" in r and isinstance(r["k"], dict):
                    kill = r["k"]
                else:
                    raise CorruptCheckpoint(path, f"record {i} has an unknown kind")
            except (TypeError, codec.DecodeError) as e:
                raise CorruptCheckpoint(path, f"record {i}: {e}") from e
        if truncated:
            with open(path, "r+b") as f:  # cut the torn tail so later appends stay aligned
                f.truncate(end)
        return rec, UpdateLog(tuple(updates), frozenset(acked), truncated), pid, kill

    def _read_task(self, fid: str, tid: str, path: Path) -> RecoveredTaskFiles:
        record = log = pid = None
        kill: dict[str, Any] | None = None
        exit_code: int | None = None
        broken: CorruptCheckpoint | None = None
        try:
            if not valid_path_id(fid) or not valid_path_id(tid):
                raise CorruptCheckpoint(path, "file name is not a valid id")
            record, log, pid, kill = self.read_task_log(path)
            if record.task.task_id.value != tid or record.framework_id != fid:
                raise CorruptCheckpoint(path, "ids do not match the file name")
            exit_code = self.read_exit_status(fid, tid)
        except CorruptCheckpoint as e:
            broken = e
        reason = str(kill["reason"]) if kill and kill.get("reason") else None
        deadline = kill.get("deadline") if kill else None
        return RecoveredTaskFiles(
            fid, tid, record, log, pid, exit_code, reason,
            float(deadline) if isinstance(deadline, int | float) else None, broken=broken,
        )

    def recover(self) -> Recovery:
        """Read everything back. A corrupt ``agent.json`` raises; a broken task is returned with
        ``broken`` set (the caller decides: ``--strict`` refuses to start)."""
        agent = self.read_agent()
        frameworks: dict[str, FrameworkInfo] = {}
        broken: list[CorruptCheckpoint] = []
        tasks: list[RecoveredTaskFiles] = []
        root = self.meta / "frameworks"
        for fdir in sorted(root.iterdir()) if root.is_dir() else ():
            path = fdir / "framework.json"
            try:
                frameworks[fdir.name] = codec.from_builtins(FrameworkInfo, load_json(path))
            except FileNotFoundError:
                pass
            except codec.DecodeError as e:
                broken.append(CorruptCheckpoint(path, f"bad contents: {e}"))
            except CorruptCheckpoint as e:
                broken.append(e)
            tdir = fdir / "tasks"
            for log in sorted(tdir.glob("*.log")) if tdir.is_dir() else ():
                if log.stat().st_size == 0:
                    log.unlink()  # created but the task record never written: never launched
                    continue
                tasks.append(self._read_task(fdir.name, log.name[: -len(".log")], log))
        broken.extend(t.broken for t in tasks if t.broken is not None)
        return Recovery(agent, frameworks, tuple(tasks), tuple(broken))
