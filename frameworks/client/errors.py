"""The client library's errors (pure: the session raises them, the transports too).

``MasterUnavailable`` (connection refused/reset, 503, timeouts, a broken stream: retry with
backoff), ``CallRejected`` (4xx: the call itself is wrong, do not retry it as is),
``NotConnected`` (a call made while no subscription is live). ``frameworks.client.transport``
re-exports all four.
"""

from __future__ import annotations

__pure__ = True


class TransportError(Exception):
    pass


class MasterUnavailable(TransportError):
    """The master could not be reached or the stream broke; reconnect with backoff."""


class CallRejected(TransportError):
    """The master refused the call (4xx)."""

    def __init__(self, status: int, message: str) -> None:
        self.status = status
        self.message = message
        super().__init__(f"HTTP {status}: {message}")


class NotConnected(TransportError):
    """A call was made while the driver has no live subscription."""
