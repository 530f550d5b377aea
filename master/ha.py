"""High availability: a master's candidacy in ZooKeeper (``--zk zk://hosts/path``).

Every master started with ``--zk`` joins the election at start: it creates a sequential ephemeral
znode ``<path>/json.info_NNNNNNNNNN`` holding its ``MasterInfo`` as JSON (what Mesos writes, so
pymesos and Mesos' detectors find the leader with the same ``zk://`` URL), and the lowest sequence
leads. Until it leads, the master serves nothing but redirects: the scheduler, operator and agent
endpoints answer ``307`` with ``Location: //leader:port<path>`` (``503`` while no leader is known),
see ``LeaderRedirect``. Once elected it takes the next epoch and reads the registry from
ZooKeeper (``master.registry_zk``), recovers, and serves.

Losing the session ends the master: the ephemeral znode is gone and a standby may lead with a
higher epoch. kazoo reports ``LOST`` when the server says the session expired (e.g. after a
``SIGSTOP`` past the timeout); while merely disconnected (``SUSPENDED``, a partition from
ZooKeeper) it cannot know, so after ``session_timeout`` of disconnection the master assumes the
session expired, like Mesos' master. Either way ``on_lost`` is called once (the service logs it
and exits non-zero).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web
from kazoo.client import KazooClient, KazooState

from protocol.detector import INFO_PREFIX, MasterDetector, parse_zk_url

log = logging.getLogger("agora.master.ha")

# served by every master, leading or not (liveness, version)
LOCAL_PATHS = frozenset({"/health", "/master/health", "/version"})


class LeaderElection:
    """One master's candidacy. ``start()`` connects and enters; ``await elected()`` returns once
    this master's znode is the lowest; ``detector.current`` is the leader's ``host:port``."""

    def __init__(self, url: str, session_timeout: float, on_lost: Callable[[str], None]) -> None:
        self.zk_url = parse_zk_url(url)
        self.session_timeout = session_timeout
        self._on_lost = on_lost
        self.zk = KazooClient(hosts=self.zk_url.hosts, timeout=session_timeout)
        self.detector = MasterDetector(self.zk_url.url, session_timeout=session_timeout, client=self.zk)
        self.znode: str | None = None  # our candidacy, "json.info_NNNNNNNNNN"
        self.leading = False
        self._lost = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._suspended_timer: threading.Timer | None = None
        self._lock = threading.Lock()

    @property
    def path(self) -> str:
        return self.zk_url.path

    async def start(self, master_info_json: bytes) -> None:
        """Connect (within ``session_timeout``) and create our candidacy znode holding
        ``master_info_json`` (Mesos' ``MasterInfo`` JSON)."""
        self._loop = asyncio.get_running_loop()
        try:
            await self._loop.run_in_executor(None, lambda: self.zk.start(timeout=self.session_timeout))
        except Exception as e:  # kazoo's own timeout type
            await self._loop.run_in_executor(None, _stop_client, self.zk)
            raise OSError(f"cannot reach ZooKeeper at {self.zk_url.hosts}: {e or type(e).__name__}") from e
        self.zk.add_listener(self._on_state)
        made = await self._loop.run_in_executor(None, self._enter, master_info_json)
        self.znode = made.rsplit("/", 1)[1]
        log.info("entered the election at %s as %s", self.zk_url.url, self.znode)
        await self.detector.start()

    def _enter(self, data: bytes) -> str:
        self.zk.ensure_path(self.path)
        return str(self.zk.create(f"{self.path}/{INFO_PREFIX}", data, ephemeral=True, sequence=True))

    async def elected(self) -> None:
        """Return once our znode leads (the detector re-reads on every change of the children)."""
        await self.detector.wait_until(lambda d: d.leader_znode is not None and d.leader_znode == self.znode)
        self.leading = True
        log.info("elected leading master at %s (%s)", self.zk_url.url, self.znode)

    # --- session loss (kazoo threads) ----------------------------------------------------------

    def _on_state(self, state: str) -> None:
        if state == KazooState.LOST:
            self._lose("ZooKeeper session expired")
        elif state == KazooState.SUSPENDED:
            with self._lock:
                if self._suspended_timer is None:
                    t = threading.Timer(self.session_timeout, self._lose, ("disconnected from ZooKeeper for longer than the session timeout",))
                    t.daemon = True
                    self._suspended_timer = t
                    t.start()
        elif state == KazooState.CONNECTED:
            with self._lock:
                if self._suspended_timer is not None:
                    self._suspended_timer.cancel()
                    self._suspended_timer = None

    def _lose(self, why: str) -> None:
        with self._lock:
            if self._lost:
                return
            self._lost = True
        loop = self._loop
        if loop is not None:
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(self._on_lost, why)

    async def close(self) -> None:
        """Leave the election (our znode goes with the session)."""
        with self._lock:
            self._lost = True  # a close is not a loss
            if self._suspended_timer is not None:
                self._suspended_timer.cancel()
        await self.detector.close()
        await asyncio.get_running_loop().run_in_executor(None, _stop_client, self.zk)


def _stop_client(zk: KazooClient) -> None:
    with contextlib.suppress(Exception):
        zk.stop()
        zk.close()


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class LeaderRedirect:
    """aiohttp middleware for a master that does not lead: ``307`` to the leader (Mesos'
    ``Location: //host:port<path?query>``), ``503`` while no leader is known or while this master,
    elected, still recovers. ``/health`` and ``/version`` are answered locally; everything is
    served once ``leading()`` (elected and recovered: the core exists)."""

    def __init__(self, leading: Callable[[], bool], leader: Callable[[], str | None], me: Callable[[], str]) -> None:
        self._leading = leading
        self._leader = leader
        self._me = me

    def middleware(self) -> Any:
        @web.middleware
        async def redirect(request: web.Request, handler: Handler) -> web.StreamResponse:
            if self._leading() or request.path in LOCAL_PATHS:
                return await handler(request)
            leader = self._leader()
            if leader is None:
                return web.Response(status=503, text="No leading master is elected")
            if leader == self._me():  # elected and still recovering (or our own old znode)
                return web.Response(status=503, text="Master is recovering")
            target = request.rel_url.path_qs if request.path not in ("/redirect", "/master/redirect") else ""
            return web.Response(status=307, headers={"Location": f"//{leader}{target}"})

        return redirect
