"""The agent's log writer: one small process per agent that writes every task's stdout and stderr
into its sandbox, rotated (``agent/logrotate.py`` has the layout).

Why a process of its own (as Mesos' ``mesos-logrotate-logger``): a task's output must keep flowing
while the agent restarts, so its pipes cannot end in the agent. One process serves every task of
the agent (a per-task logger would cost a process start per launch); the agent starts it with the
first task that needs it (``agent/logs.py``), in its own session, and it outlives the agent.

How a task's output gets here: the agent makes two pipes per task; the task's wrapper gets the
write ends as its stdout and stderr *and holds the read ends too* (as fds 3 and 4, which the task
does not get); the agent passes the read ends to this process over a unix socket
(``<work dir>/meta/logger.sock``, ``SCM_RIGHTS``). So while the task lives its pipes always have a
reader: if this process dies, the task's writes wait (nothing is lost, the task is not killed by
SIGPIPE) until the agent starts a new one, which takes the pipes over again by opening the
wrapper's ``/proc/<pid>/fd/1`` and ``2`` for reading (``adopt``: a pipe opened through ``/proc``
is the same pipe) and resumes the files where they are.

The writing itself is a select loop: each readable pipe gives at most 128 KiB per round (every task
gets its turn), appended to the current file, split at ``max_size`` with a rotation in between.
Its memory stays flat whatever a task writes. A write that fails (a full disk) drops that data,
says so once per stream on stderr (``meta/logger.log``), and reading goes on: a task is never
slowed by its logs. When both pipes of a task reach end-of-file (the task and everything that
inherited its stdout are gone) it tells the agent ``closed``; the agent reports the task's end
after that, so the logs are complete when a framework hears of it.

Messages (JSON, one datagram each, on a SOCK_SEQPACKET socket; only a peer of our own uid or root
is served): agent -> ``{"op": "open", "key", "dir", "max_size", "max_files"}`` + 2 descriptors,
``{"op": "open_many", "tasks": [{"key", "dir", "max_size", "max_files"}, ...]}`` + 2 descriptors
per task in that order (at most ``OPEN_MANY`` tasks: a batch of launches in one datagram),
``{"op": "adopt", "key", "dir", "pid", "max_size", "max_files"}``, ``{"op": "hello"}``; this process
-> ``{"op": "keys", "keys": [...], "ops": ["open_many"]}`` (the answer to hello; ``ops``: what it
serves beyond ``open``, so an agent newer than its writer, which outlives agents, asks it no
more than it knows), ``{"op": "closed", "keys": [...]}`` (the tasks whose logs became complete in
one round of the loop).

It exits when no agent is connected and no stream is open. Run as a script
(``python -I agent/logger.py META_DIR``): it imports nothing of Agora but ``agent.logrotate``.
"""

from __future__ import annotations

import array
import contextlib
import errno
import fcntl
import json
import os
import selectors
import signal
import socket
import stat
import struct
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: find agent.logrotate next to us
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agent import logrotate as lr

READ_CHUNK = 1 << 17  # two pipe buffers (64 KiB each by default)
SOCKET_NAME = "logger.sock"
LOCK_NAME = "logger.lock"
FIRST_CONNECT_WITHIN = 30.0  # the agent that started us connects at once
OPEN_MANY = 64  # tasks per "open_many" (2 descriptors each: under the kernel's 253 per message)
MAX_OUTBOX = 100_000  # messages queued for an agent that reads none: it is gone in all but name


def _log(msg: str) -> None:
    sys.stderr.write(f"{time.strftime('%Y-%m-%d %H:%M:%S')} agora-logger[{os.getpid()}] {msg}\n")
    sys.stderr.flush()


def socket_address(meta_dir: Path) -> tuple[str, int | None]:
    """The socket's path, short enough for ``sun_path`` (108 bytes): a long work dir is reached
    through ``/proc/self/fd/<dir fd>``; the caller closes the returned fd (None: no fd)."""
    path = str(meta_dir / SOCKET_NAME)
    if len(path.encode()) < 100:
        return path, None
    fd = os.open(meta_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    return f"/proc/self/fd/{fd}/{SOCKET_NAME}", fd


class Stream:
    """One of a task's streams: its pipe and the rotated files it goes to."""

    def __init__(self, key: str, name: str, dirfd: int, rfd: int, max_size: int, max_files: int) -> None:
        self.key, self.name, self.dirfd, self.rfd = key, name, dirfd, rfd
        self.max_size, self.max_files = max(1, max_size), max(1, max_files)
        self.dropped = 0
        self.eof = False
        self.base = 0
        self.fd = -1
        self.size = 0
        self._resume()

    def _resume(self) -> None:
        """Open the current file to append (a new logger taking a stream over continues it)."""
        try:
            self.fd = os.open(self.name, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC,
                              0o644, dir_fd=self.dirfd)
        except OSError:
            self._create()
            return
        st = os.fstat(self.fd)
        if not stat.S_ISREG(st.st_mode):
            os.close(self.fd)
            self._create()
            return
        self.size = st.st_size
        with contextlib.suppress(OSError):
            state = lr.parse_state(self._read_state())
            if state is not None and state[1] == st.st_ino:
                self.base = state[0]

    def _read_state(self) -> bytes:
        fd = os.open(lr.state_name(self.name), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=self.dirfd)
        try:
            return os.read(fd, 4096)
        finally:
            os.close(fd)

    def _create(self) -> None:
        """A fresh current file, never through a link a task planted (O_EXCL after unlink)."""
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.name, dir_fd=self.dirfd)
        self.fd = os.open(self.name, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                          0o644, dir_fd=self.dirfd)
        self.size = 0

    def rotate(self) -> None:
        """``stdout`` always names a file, so a reader never finds it missing: the older files
        move up a name, the current one gets the name ``stdout.1`` as a second (hard) link, a new
        file replaces ``stdout`` in one rename, then the state names the new file."""
        d = self.dirfd
        renames = lr.rotation_renames(self.name, self.max_files)
        for old, new in renames[:-1]:
            with contextlib.suppress(FileNotFoundError):
                os.rename(old, new, src_dir_fd=d, dst_dir_fd=d)
        if renames:
            first = renames[-1][1]
            with contextlib.suppress(FileNotFoundError):
                os.unlink(first, dir_fd=d)
            try:
                os.link(self.name, first, src_dir_fd=d, dst_dir_fd=d, follow_symlinks=False)
            except FileNotFoundError:
                pass  # somebody removed it: nothing to keep
            except OSError:  # no hard links here: a moment without stdout
                with contextlib.suppress(FileNotFoundError):
                    os.rename(self.name, first, src_dir_fd=d, dst_dir_fd=d)
        tmp = lr.state_name(self.name) + ".new"
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp, dir_fd=d)
        new_fd = os.open(tmp, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                         0o644, dir_fd=d)
        os.rename(tmp, self.name, src_dir_fd=d, dst_dir_fd=d)
        os.close(self.fd)
        self.fd, self.base, self.size = new_fd, self.base + self.size, 0
        self._write_state(os.fstat(self.fd).st_ino)

    def _write_state(self, ino: int) -> None:
        tmp, final = lr.state_name(self.name) + ".tmp", lr.state_name(self.name)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp, dir_fd=self.dirfd)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644, dir_fd=self.dirfd)
        try:
            os.write(fd, lr.state_json(self.base, ino))
        finally:
            os.close(fd)
        os.rename(tmp, final, src_dir_fd=self.dirfd, dst_dir_fd=self.dirfd)

    def feed(self, data: bytes) -> None:
        view = memoryview(data)
        done = 0
        try:
            for rotate, n in lr.split_write(self.size, len(data), self.max_size):
                if rotate:
                    self.rotate()
                piece, view = view[:n], view[n:]
                while piece:
                    w = os.write(self.fd, piece)
                    piece = piece[w:]
                    self.size += w
                    done += w
        except OSError as e:
            if self.fd < 0:  # the rotation failed half-way: keep appending somewhere
                with contextlib.suppress(OSError):
                    self._resume()
            if not self.dropped:
                _log(f"task {self.key}: cannot write its {self.name} ({os.strerror(e.errno or 0)}): "
                     "its output is dropped until writing works again")
            self.dropped += len(data) - done
        else:
            if self.dropped:
                _log(f"task {self.key}: writing its {self.name} works again ({self.dropped} bytes were dropped)")
                self.dropped = 0

    def close(self) -> None:
        for fd in (self.fd, self.rfd):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self.fd = self.rfd = -1


class Logger:
    def __init__(self, meta_dir: Path) -> None:
        self.meta_dir = meta_dir
        self.sel = selectors.DefaultSelector()
        self.streams: dict[int, Stream] = {}  # pipe fd -> stream
        self.tasks: dict[str, list[Stream]] = {}
        self.dirfds: dict[str, int] = {}
        self.agents: dict[int, socket.socket] = {}
        self.outbox: dict[int, list[bytes]] = {}  # per agent connection: messages it has not taken yet
        self.closed: list[str] = []  # tasks whose logs became complete in this round
        self.listener: socket.socket | None = None
        self._lock = -1  # the work dir's logger.lock, held while we run

    # --- the socket ---------------------------------------------------------------------------

    def listen(self) -> bool:
        lock = os.open(self.meta_dir / LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return False  # another logger serves this work dir
        self._lock = lock  # held until we exit
        addr, dfd = socket_address(self.meta_dir)
        try:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.meta_dir / SOCKET_NAME)
            s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            s.bind(addr)
            os.chmod(self.meta_dir / SOCKET_NAME, 0o600)
            s.listen(16)
            s.setblocking(False)
        finally:
            if dfd is not None:
                os.close(dfd)
        self.listener = s
        self.sel.register(s, selectors.EVENT_READ, self._accept)
        return True

    def _accept(self, _: object) -> None:
        assert self.listener is not None
        try:
            conn, _addr = self.listener.accept()
        except BlockingIOError:
            return
        creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        _pid, uid, _gid = struct.unpack("3i", creds)
        if uid not in (0, os.getuid()):
            _log(f"refused a connection from uid {uid}")
            conn.close()
            return
        conn.setblocking(False)
        self.agents[conn.fileno()] = conn
        self.sel.register(conn, selectors.EVENT_READ, self._from_agent)

    def _drop_agent(self, conn: socket.socket) -> None:
        self.agents.pop(conn.fileno(), None)
        self.outbox.pop(conn.fileno(), None)
        with contextlib.suppress(Exception):
            self.sel.unregister(conn)
        conn.close()

    def _from_agent(self, conn: socket.socket) -> None:
        fds = array.array("i")
        try:
            msg, ancdata, _flags, _addr = conn.recvmsg(1 << 20, socket.CMSG_SPACE(2 * OPEN_MANY * fds.itemsize))
        except BlockingIOError:
            return
        except OSError:
            self._drop_agent(conn)
            return
        for level, kind, data in ancdata:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds.frombytes(data[: len(data) - (len(data) % fds.itemsize)])
        if not msg:
            for fd in fds:
                os.close(fd)
            self._drop_agent(conn)
            return
        try:
            req = json.loads(msg)
            op = req["op"]
        except (ValueError, KeyError, TypeError):
            for fd in fds:
                os.close(fd)
            return
        taken = False
        if op == "open" and len(fds) == 2:
            self._open(req, list(fds))
            taken = True
        elif op == "open_many" and isinstance(req.get("tasks"), list) and len(fds) == 2 * len(req["tasks"]):
            for i, task in enumerate(req["tasks"]):
                if isinstance(task, dict):
                    self._open(task, list(fds[2 * i:2 * i + 2]))
                else:
                    for fd in fds[2 * i:2 * i + 2]:
                        os.close(fd)
            taken = True
        elif op == "adopt":
            self._adopt(req)
        elif op == "hello":
            self._send(conn, {"op": "keys", "keys": sorted(self.tasks), "ops": ["open_many"]})
        for fd in fds if not taken else ():
            os.close(fd)

    def _send(self, conn: socket.socket, msg: dict[str, object]) -> None:
        """Send, or queue while the agent is slow to read (never block the loop on it)."""
        box = self.outbox.setdefault(conn.fileno(), [])
        box.append(json.dumps(msg).encode())
        if len(box) == 1:
            self._flush(conn)
        elif len(box) > MAX_OUTBOX:
            _log(f"an agent read nothing of {len(box)} messages: dropping its connection")
            self._drop_agent(conn)

    def _flush(self, conn: socket.socket) -> None:
        box = self.outbox.get(conn.fileno(), [])
        try:
            while box:
                conn.send(box[0])
                box.pop(0)
        except BlockingIOError:
            pass
        except OSError:
            self._drop_agent(conn)
            return
        events = selectors.EVENT_READ | (selectors.EVENT_WRITE if box else 0)
        with contextlib.suppress(KeyError, ValueError):
            if self.sel.get_key(conn).events != events:
                self.sel.modify(conn, events, self._from_agent)

    # --- streams ------------------------------------------------------------------------------

    def _open(self, req: dict[str, object], fds: list[int]) -> None:
        key = str(req["key"])
        if key in self.tasks:  # a task id used again while pipes of its predecessor linger
            self._forget(key)
        try:
            dirfd = os.open(str(req["dir"]), os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError as e:
            _log(f"task {key}: cannot open its sandbox {req['dir']}: {e}")
            for fd in fds:
                os.close(fd)
            return
        streams: list[Stream] = []
        try:
            for name, fd in zip(lr.STREAMS, fds, strict=True):
                os.set_blocking(fd, False)
                streams.append(Stream(key, name, dirfd, fd, int(req["max_size"]), int(req["max_files"])))  # type: ignore[call-overload]
        except (OSError, ValueError, TypeError) as e:
            _log(f"task {key}: cannot open its log files: {e}")
            for s in streams:
                s.close()
            os.close(dirfd)
            for fd in fds[len(streams):]:
                os.close(fd)
            return
        self.dirfds[key] = dirfd
        self.tasks[key] = streams
        for s in streams:
            self.streams[s.rfd] = s
            self.sel.register(s.rfd, selectors.EVENT_READ, s)

    def _adopt(self, req: dict[str, object]) -> None:
        """Take over the pipes of a task whose logger died: its wrapper holds their read ends."""
        key = str(req["key"])
        if key in self.tasks:
            return
        pid = int(req["pid"])  # type: ignore[call-overload]
        fds: list[int] = []
        try:
            for n in (1, 2):  # its stdout/stderr: opened for reading, the very pipes
                fd = os.open(f"/proc/{pid}/fd/{n}", os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
                fds.append(fd)
                if not stat.S_ISFIFO(os.fstat(fd).st_mode):
                    raise OSError(errno.EINVAL, f"fd {n} of {pid} is not a pipe")
        except OSError as e:
            _log(f"task {key}: cannot take over its pipes from pid {pid}: {e}")
            for fd in fds:
                os.close(fd)
            return
        _log(f"task {key}: took over its pipes from pid {pid}")
        self._open(req, fds)

    def _pipe_readable(self, s: Stream) -> None:
        try:
            data = os.read(s.rfd, READ_CHUNK)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if data:
            s.feed(data)
            return
        s.eof = True
        self.sel.unregister(s.rfd)
        del self.streams[s.rfd]
        if all(x.eof for x in self.tasks.get(s.key, [])):
            self._forget(s.key)
            self.closed.append(s.key)  # told at the end of this round, with the others

    def _forget(self, key: str) -> None:
        for x in self.tasks.pop(key, []):
            if not x.eof:
                self.sel.unregister(x.rfd)
                self.streams.pop(x.rfd, None)
            x.close()
        dirfd = self.dirfds.pop(key, None)
        if dirfd is not None:
            os.close(dirfd)

    # --- the loop -----------------------------------------------------------------------------

    def run(self) -> int:
        started = time.monotonic()
        seen_agent = False
        while True:
            if self.agents:
                seen_agent = True
            if not self.agents and not self.tasks and (seen_agent or time.monotonic() - started > FIRST_CONNECT_WITHIN):
                return 0
            for key, events in self.sel.select(timeout=1.0):
                data = key.data
                if isinstance(data, Stream):
                    self._pipe_readable(data)
                elif events & selectors.EVENT_WRITE and key.fileobj in self.agents.values():
                    self._flush(key.fileobj)  # type: ignore[arg-type]
                    if events & selectors.EVENT_READ:
                        data(key.fileobj)
                else:
                    data(key.fileobj)
            if self.closed:
                for conn in list(self.agents.values()):
                    self._send(conn, {"op": "closed", "keys": self.closed})
                self.closed = []


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        sys.stderr.write("usage: logger.py META_DIR\n")
        return 2
    for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGPIPE):
        signal.signal(sig, signal.SIG_IGN)
    lg = Logger(Path(argv[1]))
    if not lg.listen():
        return 0
    _log("started")
    code = lg.run()
    _log("no agent and no task left: exiting")
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv))
