"""A real ZooKeeper server for the HA tests: one JVM per test package (``zk_server``), started
from Debian's jars (``scripts/install-zookeeper``) with a temp data dir on a free port, waited for
with ``ruok`` and killed afterwards. Each test gets its own chroot path (``zk_url``)."""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest

ZK_JAR = Path("/usr/share/java/zookeeper.jar")  # its manifest names the other jars
CLASSPATH = f"{ZK_JAR}:/usr/share/java/slf4j-nop.jar"
TICK_MS = 100  # sessions may be as short as 2 ticks: tests use 1-2 s
START_TIMEOUT = 30.0


@attrs.frozen
class ZkServer:
    host: str
    port: int
    proc: subprocess.Popen[bytes]

    @property
    def hosts(self) -> str:
        return f"{self.host}:{self.port}"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _ruok(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as s:
            s.sendall(b"ruok")
            return s.recv(8) == b"imok"
    except OSError:
        return False


@contextlib.contextmanager
def zookeeper() -> Iterator[ZkServer]:
    """Start a ZooKeeper server (temp data dir, free port), wait for ``ruok``, kill it after."""
    java = shutil.which("java")
    assert java is not None and ZK_JAR.exists(), "run scripts/install-zookeeper"
    root = Path(tempfile.mkdtemp(prefix="agora-zk-"))
    port = _free_port()
    cfg = root / "zoo.cfg"
    cfg.write_text(
        f"tickTime={TICK_MS}\ndataDir={root / 'data'}\nclientPort={port}\nclientPortAddress=127.0.0.1\n"
        "minSessionTimeout=200\nmaxSessionTimeout=60000\nadmin.enableServer=false\n"
        "4lw.commands.whitelist=ruok,stat,srvr\nforceSync=no\n"
    )
    with open(root / "zookeeper.log", "wb") as log:  # the child keeps its own copy of the fd
        proc = subprocess.Popen(
            [java, "-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp", CLASSPATH,
             "org.apache.zookeeper.server.ZooKeeperServerMain", str(cfg)],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
        )
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while not _ruok(port):
            assert proc.poll() is None, f"ZooKeeper exited: {(root / 'zookeeper.log').read_text()[-2000:]}"
            assert time.monotonic() < deadline, "ZooKeeper did not answer ruok in time"
            time.sleep(0.05)  # polling a process we cannot be notified by
        yield ZkServer("127.0.0.1", port, proc)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="package")
def zk_server() -> Iterator[ZkServer]:
    with zookeeper() as server:
        yield server


_paths = itertools.count(1)


@pytest.fixture
def zk_url(zk_server: ZkServer) -> str:
    """A fresh path per test: ``zk://127.0.0.1:PORT/agora-test-N``."""
    return f"zk://{zk_server.hosts}/agora-test-{os.getpid()}-{next(_paths)}"
