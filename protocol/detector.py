"""Finding the leading master: a fixed ``host:port`` or a ``zk://`` URL (Mesos' layout).

With high availability the masters contend in ZooKeeper under one path (``zk://h1:p1,h2:p2/agora``).
Each master holds a sequential ephemeral znode ``json.info_NNNNNNNNNN`` whose data is its
``MasterInfo`` as JSON; the lowest sequence leads. This is exactly what Mesos writes and what its
detectors (pymesos included) read: the children of the path, ``log_replicas`` skipped, the lowest
one's ``address.ip``/``address.port``. Agora keeps its registry under ``<path>/log_replicas`` so
those detectors never mistake it for a master.

Used by every follower of the leader: the agent's channel, the client library's transport (so
the batch and elastic services), and the CLI. ``MasterDetector`` runs kazoo (which has its own
threads) and hands leader changes to the asyncio loop; ``resolve_once`` is the blocking form for
the CLI. The pure helpers (``parse_zk_url``, ``leader_node``, ``master_address``) carry the rules.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable

import attrs
from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import NoNodeError

log = logging.getLogger(__name__)

ZK_SCHEMES = ("zk://", "zoo://")
INFO_PREFIX = "json.info_"
REGISTRY_CHILD = "log_replicas"  # Mesos' replicated log lives here; detectors skip it


class DetectorError(ValueError):
    pass


@attrs.frozen
class ZkUrl:
    hosts: str  # "h1:p1,h2:p2" as kazoo takes it
    path: str  # "/agora" (no trailing slash; never "/")

    @property
    def url(self) -> str:
        return f"zk://{self.hosts}{self.path}"


def is_zk_url(master: str) -> bool:
    return master.strip().startswith(ZK_SCHEMES)


def parse_zk_url(url: str) -> ZkUrl:
    """``zk://h1:p1[,h2:p2...]/path`` → ``ZkUrl``; the path must be non-empty."""
    u = url.strip()
    for scheme in ZK_SCHEMES:
        if u.startswith(scheme):
            u = u[len(scheme) :]
            break
    else:
        raise DetectorError(f"not a zk:// URL: {url!r}")
    if "@" in u.split("/", 1)[0]:
        raise DetectorError(f"credentials in zk:// URLs are not supported: {url!r}")
    hosts, slash, path = u.partition("/")
    path = "/" + path.strip("/")
    if not hosts or not slash or path == "/":
        raise DetectorError(f"zk:// URL needs hosts and a path, e.g. zk://127.0.0.1:2181/agora: {url!r}")
    for h in hosts.split(","):
        host, sep, port = h.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise DetectorError(f"bad ZooKeeper address {h!r} in {url!r}")
    return ZkUrl(hosts=hosts, path=path)


def leader_node(children: list[str]) -> str | None:
    """The leading master's znode: the lowest ``json.info_`` sequence (other children ignored)."""
    infos = [c for c in children if c.startswith(INFO_PREFIX) and c[len(INFO_PREFIX) :].isdigit()]
    if not infos:
        return None
    return min(infos, key=lambda c: int(c[len(INFO_PREFIX) :]))


def master_address(data: bytes) -> str | None:
    """``host:port`` from a ``MasterInfo`` JSON (``address.ip``/``port``, else ``hostname``/``port``)."""
    try:
        info = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None
    if not isinstance(info, dict):
        return None
    addr = info.get("address")
    if isinstance(addr, dict):
        host = addr.get("ip") or addr.get("hostname")
        port = addr.get("port")
        if isinstance(host, str) and host and isinstance(port, int) and port > 0:
            return f"{host}:{port}"
    host, port = info.get("hostname"), info.get("port")
    if isinstance(host, str) and host and isinstance(port, int) and port > 0:
        return f"{host}:{port}"
    return None


def read_leader(zk: KazooClient, path: str) -> tuple[str, str] | None:
    """(znode name, ``host:port``) of the current leader, or None (blocking; a kazoo thread)."""
    for _ in range(5):  # the lowest node may vanish between the listing and the read
        try:
            children = zk.get_children(path)
        except NoNodeError:
            return None
        node = leader_node(children)
        if node is None:
            return None
        try:
            data, _ = zk.get(f"{path}/{node}")
        except NoNodeError:
            continue
        addr = master_address(data)
        return None if addr is None else (node, addr)
    return None


def resolve_once(url: str, timeout: float = 10.0) -> str:
    """The leader's ``host:port`` for a ``zk://`` URL (blocking; for the CLI). Raises
    ``DetectorError`` when ZooKeeper cannot be reached or no master leads."""
    zk_url = parse_zk_url(url)
    zk = KazooClient(hosts=zk_url.hosts, timeout=timeout)
    try:
        zk.start(timeout=timeout)
    except Exception as e:  # kazoo raises its own timeout type
        raise DetectorError(f"cannot reach ZooKeeper at {zk_url.hosts}: {e}") from e
    try:
        found = read_leader(zk, zk_url.path)
    finally:
        with contextlib.suppress(Exception):
            zk.stop()
            zk.close()
    if found is None:
        raise DetectorError(f"no leading master under {zk_url.url}")
    return found[1]


class MasterDetector:
    """Follows the leading master of a ``zk://`` URL (``current``; ``await leader(timeout)``).

    kazoo watches the path's children from its own threads; every change (and every reconnect)
    schedules a re-read on the asyncio loop, whose result updates ``current`` and wakes waiters.
    Pass ``client`` to share a started kazoo client (the master's own session)."""

    def __init__(self, url: str, *, session_timeout: float = 10.0, client: KazooClient | None = None) -> None:
        self.zk_url = parse_zk_url(url)
        self.session_timeout = session_timeout
        self._own_client = client is None
        self.zk = client or KazooClient(hosts=self.zk_url.hosts, timeout=session_timeout)
        self.current: str | None = None  # "host:port"
        self.leader_znode: str | None = None
        self.changes = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._cond: asyncio.Condition | None = None
        self._refresh: asyncio.Task[None] | None = None
        self._dirty = False
        self._closed = False

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._cond = asyncio.Condition()
        if self._own_client:
            try:
                await self._loop.run_in_executor(None, lambda: self.zk.start(timeout=self.session_timeout))
            except Exception as e:
                raise DetectorError(f"cannot reach ZooKeeper at {self.zk_url.hosts}: {e}") from e
        self.zk.add_listener(self._on_state)
        await self._loop.run_in_executor(None, self._watch)
        await self._reread()

    def _watch(self) -> None:
        self.zk.ensure_path(self.zk_url.path)
        self.zk.ChildrenWatch(self.zk_url.path, self._on_children, send_event=False)

    # kazoo threads -> the loop
    def _on_children(self, _children: list[str]) -> bool:
        self._poke()
        return not self._closed

    def _on_state(self, state: str) -> None:
        if state == KazooState.CONNECTED:
            self._poke()

    def _poke(self) -> None:
        loop = self._loop
        if loop is not None and not self._closed:
            with contextlib.suppress(RuntimeError):  # the loop closed
                loop.call_soon_threadsafe(self._schedule)

    def _schedule(self) -> None:
        self._dirty = True
        if self._refresh is None or self._refresh.done():
            self._refresh = asyncio.get_running_loop().create_task(self._refresh_loop(), name="master-detector")

    async def _refresh_loop(self) -> None:
        while self._dirty and not self._closed:
            self._dirty = False
            await self._reread()

    async def _reread(self) -> None:
        assert self._loop is not None and self._cond is not None
        try:
            found = await self._loop.run_in_executor(None, read_leader, self.zk, self.zk_url.path)
        except Exception as e:  # kazoo's errors, its handler's timeout, a closed client
            log.info("cannot read the leading master from %s: %r", self.zk_url.url, e)
            return
        node, addr = found if found is not None else (None, None)
        if addr != self.current or node != self.leader_znode:
            if addr != self.current:
                log.info("leading master (%s): %s", self.zk_url.url, addr or "none")
            self.current, self.leader_znode = addr, node
            self.changes += 1
        async with self._cond:
            self._cond.notify_all()

    async def leader(self, within: float) -> str:
        """The leader's ``host:port``, waiting up to ``within`` seconds for one (``TimeoutError``)."""
        assert self._cond is not None, "start() first"
        async with asyncio.timeout(within):
            async with self._cond:
                await self._cond.wait_for(lambda: self.current is not None)
        assert self.current is not None
        return self.current

    async def wait_until(self, pred: Callable[[MasterDetector], bool], within: float | None = None) -> None:
        """Wait until ``pred(self)`` holds, re-checked after every re-read (``TimeoutError``)."""
        assert self._cond is not None, "start() first"
        async with asyncio.timeout(within):
            async with self._cond:
                await self._cond.wait_for(lambda: pred(self))

    async def wait_change(self, than: str | None, within: float) -> str | None:
        """Wait until the leader differs from ``than`` (``TimeoutError`` after ``within`` seconds)."""
        assert self._cond is not None, "start() first"
        async with asyncio.timeout(within):
            async with self._cond:
                await self._cond.wait_for(lambda: self.current != than)
        return self.current

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._refresh is not None:
            self._refresh.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._refresh
        self.zk.remove_listener(self._on_state)
        if self._own_client and self._loop is not None:
            await self._loop.run_in_executor(None, _stop_client, self.zk)


def _stop_client(zk: KazooClient) -> None:
    with contextlib.suppress(Exception):
        zk.stop()
        zk.close()


class MasterResolver:
    """One way for a follower to ask "where is the leader now?": a fixed ``host:port`` (or URL)
    is returned as is; a ``zk://`` URL starts a ``MasterDetector`` on first use."""

    def __init__(self, master: str, *, session_timeout: float = 10.0) -> None:
        self.master = master.strip()
        self.session_timeout = session_timeout
        self.detector: MasterDetector | None = None

    @property
    def is_zk(self) -> bool:
        return is_zk_url(self.master)

    async def resolve(self, within: float = 10.0) -> str:
        """``host:port`` (or the fixed address as given)."""
        if not self.is_zk:
            return self.master
        if self.detector is None:
            det = MasterDetector(self.master, session_timeout=self.session_timeout)
            try:
                async with asyncio.timeout(within):
                    await det.start()
            except BaseException:
                await det.close()
                raise
            self.detector = det
        return await self.detector.leader(within)

    async def close(self) -> None:
        if self.detector is not None:
            await self.detector.close()
            self.detector = None
