"""The agent's side of its log writer (shell; the writer is ``agent/logger.py``).

``open_streams`` (a spawner thread, before the spawn) makes the task's two pipes and hands their
read ends to the log writer, starting it first if none runs for this work dir; the spawn gives
the task the write ends as stdout/stderr and its wrapper the read ends as fds 3 and 4. A task
whose logs cannot be handed over (the writer cannot be started) gets plain ``stdout``/``stderr``
files instead: its output is never lost, only not rotated.

On the event loop the client listens for the writer's ``closed`` (a task's pipes reached
end-of-file: its logs are complete) and for the writer's death: then a new writer is started and
takes over the pipes of every live task (``adopt``, through the wrapper's ``/proc/<pid>/fd/1``, ``2``). After an
agent restart, ``track`` + ``revive`` do the same for the re-attached tasks: the writer that ran
before the restart usually still runs and just says which tasks it has.
"""

from __future__ import annotations

import array
import asyncio
import contextlib
import fcntl
import json
import logging
import os
import socket
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from agent.logger import OPEN_MANY, SOCKET_NAME, socket_address

log = logging.getLogger(__name__)

LOGGER_SCRIPT = str(Path(__file__).resolve().parent / "logger.py")
START_WITHIN = 10.0  # how long a new log writer may take to listen
FLUSH_TIMEOUT = 2.0  # how long a task's end waits for its logs to be complete
_MIN_FD = 10  # pipe descriptors above the ones the spawn's dup2s target (1..4)


def uses_log_pipes(pid: int) -> bool:
    """Whether a (re-attached) wrapper's stdout and stderr are log pipes (it was started with them)."""
    try:
        return all(os.readlink(f"/proc/{pid}/fd/{n}").startswith("pipe:") for n in (1, 2))
    except OSError:
        return False


class LogWriterClient:
    def __init__(self, meta_dir: Path, max_size: int, max_files: int) -> None:
        self.meta_dir = meta_dir
        self.max_size = max_size
        self.max_files = max_files
        self._lock = threading.Lock()
        self._sock: socket.socket | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._on_closed: Callable[[str], None] = lambda key: None
        self.live: dict[str, tuple[str, int]] = {}  # key -> (sandbox, wrapper pid): logs being written
        self.closed: set[str] = set()  # keys whose logs the writer reported complete
        self.started = 0  # log writers this agent started
        self._many = False  # the connected writer takes a batch's pipes in one message ("open_many")
        self.batches = 0  # "open_many" messages sent
        self._stopping = False

    def attach(self, loop: asyncio.AbstractEventLoop, on_closed: Callable[[str], None]) -> None:
        self._loop = loop
        self._on_closed = on_closed

    # --- connection (blocking: spawner threads, or ``asyncio.to_thread``) ------------------------

    def _connect(self) -> socket.socket | None:
        addr, dfd = socket_address(self.meta_dir)
        s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET | socket.SOCK_CLOEXEC)
        try:
            s.connect(addr)
        except OSError:
            s.close()
            return None
        finally:
            if dfd is not None:
                os.close(dfd)
        return s

    def _start_writer(self) -> None:
        """Start ``agent/logger.py`` in its own session, detached (init reaps it), its messages
        appended to ``meta/logger.log``."""
        logf = str(self.meta_dir / "logger.log")
        script = '"$@" </dev/null >>"$0" 2>&1 & exit 0'
        pid = os.posix_spawn("/bin/sh", ["/bin/sh", "-c", script, logf, sys.executable, "-I", LOGGER_SCRIPT,
                                         str(self.meta_dir)],
                             {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}, setsid=True)
        os.waitpid(pid, 0)
        self.started += 1

    def _ensure(self) -> socket.socket | None:
        """Under the lock: the connection, (re)made and the live tasks handed over if needed."""
        if self._sock is not None:
            return self._sock
        if self._stopping:
            return None
        s = self._connect()
        if s is None:
            self._start_writer()
            deadline = time.monotonic() + START_WITHIN
            while s is None and time.monotonic() < deadline:
                time.sleep(0.005)  # the new writer binds its socket within milliseconds
                s = self._connect()
            if s is None:
                log.error("the log writer (%s) did not start: tasks get plain stdout/stderr files", LOGGER_SCRIPT)
                return None
            log.info("started the log writer for %s", self.meta_dir)
        have = self._hello(s)
        for key, (sandbox, pid) in list(self.live.items()):
            if key not in have:
                self._send(s, {"op": "adopt", "key": key, "dir": sandbox, "pid": pid,
                               "max_size": self.max_size, "max_files": self.max_files})
        s.setblocking(False)
        self._sock = s
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._watch, s)
        return s

    def _hello(self, s: socket.socket) -> set[str]:
        self._send(s, {"op": "hello"})
        s.settimeout(5.0)
        try:
            while True:
                msg = json.loads(s.recv(1 << 20))
                if msg.get("op") == "keys":
                    self._many = "open_many" in msg.get("ops", ())  # a writer from before it: one by one
                    return set(msg.get("keys", ()))
                if msg.get("op") == "closed" and self._loop is not None:
                    for key in msg.get("keys", ()):
                        self._loop.call_soon_threadsafe(self._closed, str(key))
        except (OSError, ValueError):
            return set()

    @staticmethod
    def _send(s: socket.socket, msg: dict[str, object], fds: tuple[int, ...] = ()) -> None:
        data = json.dumps(msg).encode()
        if fds:
            s.sendmsg([data], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds).tobytes())])
        else:
            s.send(data)

    @staticmethod
    def _pipes(key: str) -> list[int] | None:
        """Two pipes, ``[out_r, out_w, err_r, err_w]``, above the descriptors the spawn targets."""
        fds: list[int] = []
        try:
            for _ in range(2):
                r, w = os.pipe2(os.O_CLOEXEC)
                for fd in (r, w):
                    if fd < _MIN_FD:  # (rare in a running agent: its low descriptors are taken)
                        fds.append(fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, _MIN_FD))
                        os.close(fd)
                    else:
                        fds.append(fd)
        except OSError as e:
            for fd in fds:
                os.close(fd)
            log.error("task %s: no log pipes (%s): plain stdout/stderr files", key, e)
            return None
        return fds

    def open_many(self, tasks: list[tuple[str, Path]]) -> dict[str, tuple[tuple[int, int], tuple[int, int]] | None]:
        """The checkpoint thread, for a batch of launches: ``open_streams`` for each task, the read
        ends handed to the writer in one message per ``OPEN_MANY`` tasks (one lock, one ``sendmsg``)
        when it takes them so; else one by one. The spawns close the descriptors."""
        out: dict[str, tuple[tuple[int, int], tuple[int, int]] | None] = {}
        made: list[tuple[str, str, list[int]]] = []
        for key, sandbox in tasks:
            fds = self._pipes(key)
            if fds is None:
                out[key] = None
            else:
                made.append((key, str(sandbox), fds))
        with self._lock:
            s = self._ensure()
            if s is not None and self._many:
                for i in range(0, len(made), OPEN_MANY):
                    chunk = made[i:i + OPEN_MANY]
                    msg: dict[str, object] = {"op": "open_many", "tasks": [{"key": k, "dir": d, "max_size": self.max_size,
                                                         "max_files": self.max_files} for k, d, _ in chunk]}
                    try:
                        self._send_now(s, msg, tuple(fd for _, _, f in chunk for fd in (f[0], f[2])))
                    except OSError as e:
                        log.warning("log writer connection lost (%s): reconnecting", e)
                        self._drop(s)
                        break
                    self.batches += 1
                    for k, _, f in chunk:
                        out[k] = (f[1], f[3]), (f[0], f[2])
        for key, box, fds in made:
            if key not in out:  # not sent in a batch: one by one (reconnecting if need be)
                for fd in fds:
                    os.close(fd)
                out[key] = self.open_streams(key, Path(box))
        return out

    def _send_now(self, s: socket.socket, msg: dict[str, object], fds: tuple[int, ...]) -> None:
        """Send on the (non-blocking) connection, waiting for room if the writer is behind."""
        try:
            self._send(s, msg, fds)
        except BlockingIOError:
            s.setblocking(True)
            try:
                self._send(s, msg, fds)
            finally:
                s.setblocking(False)

    def open_streams(self, key: str, sandbox: Path) -> tuple[tuple[int, int], tuple[int, int]] | None:
        """Spawner thread: ``((stdout, stderr) write ends, (their read ends))`` for the spawn, the
        read ends already with the log writer; None: plain files. The caller closes all four."""
        sb = str(sandbox)
        fds = self._pipes(key)
        if fds is None:
            return None
        out_r, out_w, err_r, err_w = fds
        msg = {"op": "open", "key": key, "dir": sb, "max_size": self.max_size, "max_files": self.max_files}
        with self._lock:
            for _attempt in range(2):
                s = self._ensure()
                if s is None:
                    break
                try:
                    self._send_now(s, msg, (out_r, err_r))
                    return (out_w, err_w), (out_r, err_r)
                except OSError as e:
                    log.warning("log writer connection lost (%s): reconnecting", e)
                    self._drop(s)
        for fd in fds:
            os.close(fd)
        return None

    def revive(self) -> None:
        """Blocking: make sure a writer runs and has every live task (after an agent restart, or
        when the writer died)."""
        with self._lock:
            self._ensure()

    def _drop(self, s: socket.socket) -> None:
        if self._sock is s:
            self._sock = None
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._unwatch, s)
        else:
            s.close()

    # --- event loop -------------------------------------------------------------------------------

    def _watch(self, s: socket.socket) -> None:
        if self._sock is s and self._loop is not None:
            self._loop.add_reader(s.fileno(), self._readable, s)

    def _unwatch(self, s: socket.socket) -> None:
        if self._loop is not None:
            with contextlib.suppress(Exception):
                self._loop.remove_reader(s.fileno())
        s.close()

    def _readable(self, s: socket.socket) -> None:
        try:
            data = s.recv(1 << 20)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self._writer_gone(s)
            return
        try:
            msg = json.loads(data)
        except ValueError:
            return
        if msg.get("op") == "closed":
            for key in msg.get("keys", ()):
                self._closed(str(key))

    def _writer_gone(self, s: socket.socket) -> None:
        with self._lock:
            if self._sock is s:
                self._sock = None
        self._unwatch(s)
        if self._stopping:
            return
        log.warning("the log writer went away: starting another one for %d task(s)", len(self.live))
        if self.live and self._loop is not None:
            self._loop.run_in_executor(None, self.revive)

    def _closed(self, key: str) -> None:
        self.closed.add(key)
        self._on_closed(key)

    def track(self, key: str, sandbox: str, pid: int) -> None:
        """A task whose logs the writer has (a short task's ``closed`` may have come already)."""
        self.live[key] = (sandbox, pid)

    def waits_for(self, key: str) -> bool:
        """Whether a task's end must wait for its logs (its writer has not said ``closed``)."""
        return key in self.live and key not in self.closed

    def untrack(self, key: str) -> None:
        self.live.pop(key, None)
        self.closed.discard(key)

    def close(self) -> None:
        """The agent stops: let go of the writer (it goes on for the tasks that go on)."""
        self._stopping = True
        with self._lock:
            s, self._sock = self._sock, None
        if s is not None:
            self._unwatch(s)


__all__ = ["FLUSH_TIMEOUT", "SOCKET_NAME", "LogWriterClient", "uses_log_pipes"]
