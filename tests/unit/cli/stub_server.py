"""A canned HTTP(S) server on loopback for the CLI's tests: ``with stub_server(Handler) as addr``
serves ``Handler`` (a ``BaseHTTPRequestHandler``) on a free port of 127.0.0.1 in a thread and
yields ``host:port``; an ``ssl.SSLContext`` makes it HTTPS. Shut down and joined on exit."""

from __future__ import annotations

import contextlib
import ssl
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@contextlib.contextmanager
def stub_server(handler: type[BaseHTTPRequestHandler], tls: ssl.SSLContext | None = None) -> Iterator[str]:
    srv = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    if tls is not None:
        srv.socket = tls.wrap_socket(srv.socket, server_side=True)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        yield f"127.0.0.1:{srv.server_address[1]}"
    finally:
        srv.shutdown()
        srv.server_close()
        t.join(5)
