"""Malformed HTTP requests logged as one line each, rate limited per client address.

aiohttp logs every request it cannot parse (a bad header, a NUL in the path, a broken chunk) at
ERROR with a full traceback, from ``aiohttp.server`` -- one client sending garbage floods the log.
``install()`` puts a filter on that logger: such a record (its exception an aiohttp
``HttpProcessingError``, or a ``ConnectionResetError`` from a client that closed its connection
before its body came: the client's doing) becomes one WARNING line naming the client and the
problem, without the traceback, and each client address gets at most ``burst`` of them per
``window`` seconds; the next line from that address after a quiet window says how many were
left out. Anything else (a handler's own failure, the server's fault) keeps its traceback.
Shared by the master, the agent and the framework services (they all serve through aiohttp).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from aiohttp.http_exceptions import HttpProcessingError

LOGGER = "aiohttp.server"
MAX_CLIENTS = 10_000  # addresses remembered at once (the oldest window is forgotten first)


class MalformedRequestFilter(logging.Filter):
    def __init__(self, burst: int = 5, window: float = 60.0, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self.burst = burst
        self.window = window
        self.clock = clock
        self._seen: dict[str, tuple[float, int, int]] = {}  # address -> (window start, logged, left out)
        self.logged = 0
        self.suppressed = 0

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if not isinstance(exc, HttpProcessingError | ConnectionResetError):
            return True
        client = str(record.args[0]) if isinstance(record.args, tuple) and record.args else "unknown"
        now = self.clock()
        start, logged, left_out = self._seen.get(client, (now, 0, 0))
        if now - start >= self.window:
            start, logged, left_out = now, 0, left_out
        if logged >= self.burst:
            self._remember(client, (start, logged, left_out + 1))
            self.suppressed += 1
            return False
        note = f" ({left_out} more from this client left out before)" if left_out else ""
        if isinstance(exc, HttpProcessingError):
            problem = " ".join(str(exc.message or type(exc).__name__).split())[:200]
            record.msg = "malformed request from %s: %s %s%s"
            record.args = (client, exc.code, problem, note)
        else:  # the client closed its connection while its request (its body) was being read
            record.msg = "request from %s cut short: the connection closed before the request was read%s"
            record.args = (client, note)
        record.exc_info = None
        record.exc_text = None
        record.levelno, record.levelname = logging.WARNING, "WARNING"
        self._remember(client, (start, logged + 1, 0))
        self.logged += 1
        return True

    def _remember(self, client: str, value: tuple[float, int, int]) -> None:
        if client not in self._seen and len(self._seen) >= MAX_CLIENTS:
            oldest = min(self._seen, key=lambda k: self._seen[k][0])
            del self._seen[oldest]
        self._seen[client] = value


def install(logger_name: str = LOGGER) -> MalformedRequestFilter:
    """Put the filter on aiohttp's server logger once per process; returns the one installed."""
    logger = logging.getLogger(logger_name)
    for f in logger.filters:
        if isinstance(f, MalformedRequestFilter):
            return f
    f = MalformedRequestFilter()
    logger.addFilter(f)
    return f
