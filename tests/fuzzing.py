"""Test support: the HTTP fuzzer's request generator, a small blocking framework and real
processes, shared by ``tests/integration/master/test_fuzz_endpoints.py`` and
``scripts/soak/faults.py`` (needs the test dependencies: hypothesis).

``requests(ctx)`` is a hypothesis strategy of ``FuzzRequest``s over every endpoint of a master
and of an agent, well- and ill-formed, in both codecs: scheduler calls (SUBSCRIBE and, with the
victim framework's id and stream, every other call but TEARDOWN), operator calls, the GET views
and web UI pages with hostile path segments and query values, the agent's ``/files/*``,
``/state`` and executor API, and raw request heads (bad header bytes, NUL, broken chunking).
Text comes from ``nasty_text()``: lone surrogates, NUL and other control characters,
bidirectional overrides, combining marks, a BOM, non-characters, astral characters, path
traversal, over-long ids. JSON bodies carry surrogates as ``\\ud800`` escapes (legal JSON text);
msgpack bodies carry them as CESU bytes (``surrogatepass``), which no UTF-8 decoder accepts.

``send(host, port, req)`` performs one request with ``http.client`` and returns its status (0 when
the connection broke without an answer, ``STREAM_WITHOUT_EVENT`` when an accepted event stream
did not start with an event). ``Framework`` subscribes (JSON), declines offers while it does not
launch, acknowledges every update and can launch a command on its next offer: what the fuzzer
uses to show the master still launches. ``Proc`` runs a master or an agent as a process and
waits for its ``listening on`` line.
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import json
import queue
import signal
import socket
import subprocess
import threading
import time
import urllib.parse
from collections.abc import Callable
from typing import Any

import attrs
import msgpack
from hypothesis import strategies as st

NASTY = [
    "\ud800", "\udfff", "\ud83d", "\x00", "\x01", "\x1b[31m", "\x7f", "\u202e", "\u2066", "\u0301",
    "\ufeff", "\uffff", "\ufffe", "\U0001f600", "\U0010ffff", "../", "..", "/", "%00", "\\", "\r\n",
    "\u200b", "\u00a0", " ", "*", "", "\ud800\udc00",
]


def nasty_text(max_size: int = 40) -> st.SearchStrategy[str]:
    """Strings made to break text handling: any code point (surrogates included) mixed with the
    usual suspects, plus over-long ids."""
    pieces = st.one_of(
        st.sampled_from(NASTY),
        st.text(alphabet=st.characters(), max_size=8),
        st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF),  # lone surrogates
        st.text(alphabet="abc-._", min_size=1, max_size=4),
    )
    joined = st.lists(pieces, max_size=max(1, max_size // 4)).map("".join)
    # valid but for one piece (what gets past validation to the deeper layers: a role, an id, a
    # name a validator accepts except for a lone surrogate or a control character)
    near_valid = st.builds(lambda a, bad, b: a + bad + b, st.sampled_from(["a", "ml", "dev/team", "t1", ""]),
                           st.sampled_from(NASTY[:11]) | st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF),
                           st.sampled_from(["", "x", "-1"]))
    return st.one_of(joined, near_valid, near_valid, st.sampled_from(["x" * 256, "y" * 1000]), st.just("ok"))


@attrs.frozen
class FuzzContext:
    """What the generator may aim at: the victim framework (its calls reach the master's core)."""

    framework_id: str = "nobody"
    stream_id: str = "nostream"
    agent_port: int | None = None
    # a real outstanding offer of the victim, and its agent: an ACCEPT naming them whose tasks
    # are valid but for one piece of text gets past the offer checks to the agent's writer
    offer_id: str | None = None
    agent_id: str | None = None


@attrs.frozen
class FuzzRequest:
    target: str  # "master" | "agent"
    method: str
    path: str  # with its query string, already encoded
    headers: dict[str, str] = attrs.field(factory=dict)
    body: bytes = b""
    raw: bytes | None = None  # a whole request as bytes (malformed heads), sent as is


def _json(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=True).encode("ascii")  # a lone surrogate -> "\ud800"


def _msgpack(value: Any) -> bytes:
    return msgpack.packb(_fit64(value), use_bin_type=True, unicode_errors="surrogatepass")


def _fit64(value: Any) -> Any:
    """``value`` with integers msgpack cannot carry (beyond 64 bits) as floats."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return value if -(2**63) <= value < 2**64 else float(value)
    if isinstance(value, list):
        return [_fit64(v) for v in value]
    if isinstance(value, dict):
        return {k: _fit64(v) for k, v in value.items()}
    return value


def _header_text(s: str) -> str:
    """``s`` as a header value a client can send (printable ASCII: http.client refuses the rest)."""
    return "".join(c for c in s.encode("ascii", "replace").decode() if " " <= c < "\x7f")


def _id(t: st.SearchStrategy[str]) -> st.SearchStrategy[dict[str, Any]]:
    return st.builds(lambda v: {"value": v}, t)


def _json_value(t: st.SearchStrategy[str]) -> st.SearchStrategy[Any]:
    scalars = st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=False), t)
    inner = st.one_of(scalars, st.lists(scalars, max_size=3), st.dictionaries(t, scalars, max_size=3))
    return st.one_of(inner, st.lists(inner, max_size=3), st.dictionaries(t, inner, max_size=3))  # two levels deep


def _resources(t: st.SearchStrategy[str]) -> st.SearchStrategy[list[dict[str, Any]]]:
    res = st.fixed_dictionaries(
        {"name": st.sampled_from(["cpus", "mem", "disk", "gpus", "ports"]) | t, "type": st.sampled_from(["SCALAR", "RANGES", "SET", "BOGUS"])},
        optional={"scalar": st.builds(lambda v: {"value": v}, st.floats(allow_nan=True) | st.integers()), "role": t},
    )
    return st.lists(res, max_size=3)


def scheduler_bodies(ctx: FuzzContext, t: st.SearchStrategy[str]) -> st.SearchStrategy[dict[str, Any]]:
    fid = st.one_of(st.just({"value": ctx.framework_id}), _id(t))
    offer = _id(t) if ctx.offer_id is None else st.one_of(st.just({"value": ctx.offer_id}), _id(t))
    agent = _id(t) if ctx.agent_id is None else st.one_of(st.just({"value": ctx.agent_id}), _id(t))
    small = st.just([{"name": "cpus", "type": "SCALAR", "scalar": {"value": 0.01}},
                     {"name": "mem", "type": "SCALAR", "scalar": {"value": 1}}])
    task = st.fixed_dictionaries(
        {"name": t, "task_id": _id(t), "agent_id": agent, "resources": small | _resources(t)},
        optional={"command": st.fixed_dictionaries({"value": t}, optional={"shell": st.booleans(), "arguments": st.lists(t, max_size=3),
                                                                           "environment": st.builds(lambda n, v: {"variables": [{"name": n, "value": v}]}, t, t)}),
                  "labels": st.builds(lambda k, v: {"labels": [{"key": k, "value": v}]}, t, t)},
    )
    framework_info = st.fixed_dictionaries(
        {"user": t, "name": t},
        optional={"roles": st.lists(t, max_size=2), "capabilities": st.lists(st.builds(lambda c: {"type": c}, st.sampled_from(["MULTI_ROLE", "PARTITION_AWARE", "BOGUS"]) | t), max_size=2),
                  "failover_timeout": st.floats(allow_nan=True) | st.integers(), "principal": t, "hostname": t, "webui_url": t,
                  "labels": st.builds(lambda k, v: {"labels": [{"key": k, "value": v}]}, t, t), "id": _id(t)},
    )
    calls = st.one_of(
        st.builds(lambda fi: {"type": "SUBSCRIBE", "subscribe": {"framework_info": fi}}, framework_info),
        st.builds(lambda f, o, ts: {"type": "ACCEPT", "framework_id": f, "accept": {"offer_ids": [o], "operations": [{"type": "LAUNCH", "launch": {"task_infos": ts}}]}},
                  fid, offer, st.lists(task, max_size=2)),
        st.builds(lambda f, o: {"type": "DECLINE", "framework_id": f, "decline": {"offer_ids": [o], "filters": {"refuse_seconds": 0.1}}}, fid, _id(t)),
        st.builds(lambda f, tid, a: {"type": "KILL", "framework_id": f, "kill": {"task_id": tid, "agent_id": a}}, fid, _id(t), _id(t)),
        st.builds(lambda f, tid, a, u: {"type": "ACKNOWLEDGE", "framework_id": f, "acknowledge": {"task_id": tid, "agent_id": a, "uuid": u}},
                  fid, _id(t), _id(t), st.binary(max_size=20).map(lambda b: base64.b64encode(b).decode()) | t),
        st.builds(lambda f, tid: {"type": "RECONCILE", "framework_id": f, "reconcile": {"tasks": [{"task_id": tid}]}}, fid, _id(t)),
        st.builds(lambda f, r: {"type": "REVIVE", "framework_id": f, "revive": {"roles": [r]}}, fid, t),
        st.builds(lambda f, r: {"type": "SUPPRESS", "framework_id": f, "suppress": {"roles": [r]}}, fid, t),
        st.builds(lambda f, a, e, d: {"type": "MESSAGE", "framework_id": f, "message": {"agent_id": a, "executor_id": e, "data": d}},
                  fid, _id(t), _id(t), t),
        st.builds(lambda f, r: {"type": "REQUEST", "framework_id": f, "request": {"requests": [{"resources": r}]}}, fid, _resources(t)),
        st.builds(lambda f, fi: {"type": "UPDATE_FRAMEWORK", "framework_id": f, "update_framework": {"framework_info": fi}}, fid, framework_info),
        st.builds(lambda ty, f, v: {"type": ty, "framework_id": f, "junk": v}, st.sampled_from(["BOGUS", "UNKNOWN", "SHUTDOWN", "ACKNOWLEDGE_MANY"]) | t, fid, _json_value(t)),
    )
    return calls


def operator_bodies(t: st.SearchStrategy[str]) -> st.SearchStrategy[dict[str, Any]]:
    role = t.filter(lambda r: r != "*")
    reads = st.sampled_from(["GET_HEALTH", "GET_FLAGS", "GET_VERSION", "GET_METRICS", "GET_STATE", "GET_AGENTS", "GET_FRAMEWORKS",
                             "GET_EXECUTORS", "GET_TASKS", "GET_ROLES", "GET_WEIGHTS", "GET_MASTER", "GET_QUOTA", "GET_OPERATIONS",
                             "GET_MAINTENANCE_STATUS", "GET_LOGGING_LEVEL"]).map(lambda ty: {"type": ty})
    return st.one_of(
        reads,
        st.builds(lambda r: {"type": "UPDATE_QUOTA", "update_quota": {"quota_configs": [{"role": r, "guarantees": {"cpus": {"value": 0.1}}}]}}, role),
        st.builds(lambda r: {"type": "REMOVE_QUOTA", "remove_quota": {"role": r}}, role),
        st.builds(lambda r, w: {"type": "UPDATE_WEIGHTS", "update_weights": {"weight_infos": [{"role": r, "weight": w}]}}, role,
                  st.sampled_from([1.0, 2.5]) | st.floats(allow_nan=True) | st.integers()),
        st.builds(lambda a, why: {"type": "DRAIN_AGENT", "drain_agent": {"agent_id": a, "reason": why}}, _id(t), t),
        st.builds(lambda ty, a: {"type": ty, ty.lower(): {"agent_id": a}}, st.sampled_from(["DEACTIVATE_AGENT", "REACTIVATE_AGENT", "MARK_AGENT_GONE"]), _id(t)),
        st.builds(lambda f: {"type": "TEARDOWN", "teardown": {"framework_id": f}}, _id(t)),
        st.builds(lambda p, o: {"type": "READ_FILE", "read_file": {"path": p, "offset": o}}, t, st.integers(-5, 2**66)),
        st.builds(lambda p: {"type": "LIST_FILES", "list_files": {"path": p}}, t),
        st.builds(lambda lvl: {"type": "SET_LOGGING_LEVEL", "set_logging_level": {"level": lvl, "duration": {"nanoseconds": 1}}}, st.integers(-3, 3)),
        st.builds(lambda ty, v: {"type": ty, "junk": v}, st.sampled_from(["BOGUS", "UNKNOWN", "RESERVE_RESOURCES", "CREATE_VOLUMES", "GROW_VOLUME"]) | t, _json_value(t)),
    )


GET_PATHS = ["/state", "/state.json", "/master/state", "/master/state.json", "/state-summary", "/master/state-summary",
             "/metrics/snapshot", "/metrics", "/api/v1/offers", "/version", "/health", "/master/health", "/redirect",
             "/master/redirect", "/slaves", "/frameworks", "/tasks", "/roles", "/flags", "/weights", "/quota",
             "/files/browse", "/files/read", "/files/download", "/files/debug", "/",
             "/ui", "/ui/agents", "/ui/frameworks", "/ui/tasks", "/ui/offers", "/ui/roles", "/ui/maintenance"]
QUERY_KEYS = ["framework_id", "task_id", "agent_id", "path", "offset", "length", "state", "page", "limit", "jsonp", "role", "stream",
              "framework_id", "slave_id", "order", "frameworkId", "slaveId", "resources"]
FORM_PATHS = ["/teardown", "/reserve", "/unreserve", "/master/teardown"]


def _seg(t: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    """A path segment: the text percent-encoded (surrogates as CESU bytes, like a hostile client)."""
    return t.map(lambda s: urllib.parse.quote(s.encode("utf-8", "surrogatepass"), safe="") or "x")


def _query(t: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    pair = st.tuples(st.sampled_from(QUERY_KEYS) | t, t).map(
        lambda kv: urllib.parse.quote(kv[0].encode("utf-8", "surrogatepass"), safe="") + "="
        + urllib.parse.quote(kv[1].encode("utf-8", "surrogatepass"), safe="")
    )
    return st.lists(pair, max_size=3).map("&".join)


def _raw_heads(ctx: FuzzContext) -> st.SearchStrategy[FuzzRequest]:
    junk = st.binary(max_size=40)
    heads = st.one_of(
        st.builds(lambda j: b"GET /state HTTP/1.1\r\nHost: x\r\nX-Junk: " + j.replace(b"\r", b"").replace(b"\n", b"") + b"\r\n\r\n", junk),
        st.builds(lambda j: b"GET /" + j.replace(b" ", b"").replace(b"\r", b"").replace(b"\n", b"") + b" HTTP/1.1\r\nHost: x\r\n\r\n", junk),
        st.builds(lambda j: b"POST /api/v1/scheduler HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n" + j + b"\r\n", junk),
        st.builds(lambda j: b"POST /api/v1 HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " + j[:8] + b"\r\n\r\n{}", junk),
        st.builds(lambda j: b"GET /state HTTP/1.1\r\nHost: x\r\nAuthorization: Basic " + base64.b64encode(j) + b"\r\n\r\n", junk),
        st.builds(lambda j: j + b"\r\n\r\n", junk),
    )
    return heads.map(lambda raw: FuzzRequest("master", "RAW", "", raw=raw))


def requests(ctx: FuzzContext, text: st.SearchStrategy[str] | None = None) -> st.SearchStrategy[FuzzRequest]:
    t = text if text is not None else nasty_text()
    ctypes = st.sampled_from(["application/json", "application/x-msgpack"])

    def body_req(path: str, headers: dict[str, str]) -> Callable[[dict[str, Any], str, bool], FuzzRequest]:
        def build(value: dict[str, Any], ctype: str, with_stream: bool) -> FuzzRequest:
            h = {**headers, "Content-Type": ctype, "Accept": ctype}
            if with_stream and value.get("type") != "SUBSCRIBE":
                h["Mesos-Stream-Id"] = ctx.stream_id
            return FuzzRequest("master", "POST", path, h, _json(value) if ctype == "application/json" else _msgpack(value))

        return build

    sched = st.builds(body_req("/api/v1/scheduler", {}), scheduler_bodies(ctx, t), ctypes, st.booleans())
    oper = st.builds(body_req("/api/v1", {}), operator_bodies(t), ctypes, st.booleans())
    garbage = st.builds(lambda p, c, b: FuzzRequest("master", "POST", p, {"Content-Type": c}, b),
                        st.sampled_from(["/api/v1/scheduler", "/api/v1"]), ctypes | t.map(_header_text),
                        st.binary(max_size=60) | _json_value(t).map(_json))
    views = st.builds(lambda p, q: FuzzRequest("master", "GET", p + ("?" + q if q else "")), st.sampled_from(GET_PATHS), _query(t))
    quota_role = st.builds(lambda r: FuzzRequest("master", "GET", "/quota/" + r), _seg(t))
    forms = st.builds(lambda p, q: FuzzRequest("master", "POST", p, {"Content-Type": "application/x-www-form-urlencoded"}, q.encode()),
                      st.sampled_from(FORM_PATHS), _query(t))
    oper_alias = st.builds(lambda r: attrs.evolve(r, path="/api/v1/operator"), st.builds(body_req("/api/v1", {}), operator_bodies(t), ctypes, st.just(False)))
    ui = st.builds(
        lambda kind, a, b, q: FuzzRequest("master", "GET", {
            "agent": f"/ui/agents/{a}", "framework": f"/ui/frameworks/{a}", "task": f"/ui/tasks/{a}/{b}",
            "files": f"/ui/tasks/{a}/{b}/files", "read": f"/ui/tasks/{a}/{b}/files/read", "view": f"/ui/tasks/{a}/{b}/files/view",
            "download": f"/ui/tasks/{a}/{b}/files/download", "stdout": f"/ui/tasks/{a}/{b}/files/stdout"}[kind] + ("?" + q if q else "")),
        st.sampled_from(["agent", "framework", "task", "files", "read", "view", "download", "stdout"]),
        st.one_of(st.just(urllib.parse.quote(ctx.framework_id)), _seg(t)), _seg(t), _query(t),
    )
    out = [sched, sched, oper, oper_alias, garbage, views, quota_role, forms, ui, _raw_heads(ctx)]
    if ctx.agent_port is not None:
        agent_get = st.builds(lambda p, q: FuzzRequest("agent", "GET", p + ("?" + q if q else "")),
                              st.sampled_from(["/files/browse", "/files/read", "/files/download", "/state", "/metrics", "/health"]), _query(t))
        executor = st.builds(
            lambda ty, f, e, v: FuzzRequest("agent", "POST", "/api/v1/executor", {"Content-Type": "application/json"},
                                            _json({"type": ty, "framework_id": f, "executor_id": e, "update": v})),
            st.sampled_from(["SUBSCRIBE", "UPDATE", "MESSAGE", "HEARTBEAT", "BOGUS"]) | t, _id(t), _id(t), _json_value(t),
        )
        out += [agent_get, executor]
    return st.one_of(*out)


STREAM_WITHOUT_EVENT = -1  # ``send``: a 200 stream whose first record never came or was not an event


def send(host: str, port: int, req: FuzzRequest, timeout: float = 10.0) -> int:
    """One request; its HTTP status, 0 when the connection broke with no answer, or
    ``STREAM_WITHOUT_EVENT`` when a 200 event stream did not start with an event: a scheduler's
    SUBSCRIBED, or ERROR (saying why, as Mesos does for a refused subscription). A stream is closed
    after its first record."""
    if req.raw is not None:
        with socket.create_connection((host, port), timeout=timeout) as s:
            s.sendall(req.raw)
            s.shutdown(socket.SHUT_WR)
            head = b""
            try:
                while b"\r\n" not in head:
                    chunk = s.recv(4096)
                    if not chunk:
                        break
                    head += chunk
            except OSError:
                return 0
        parts = head.split(b" ", 2)
        return int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        conn.request(req.method, req.path, body=req.body or None, headers=req.headers)
        resp = conn.getresponse()
        streaming = resp.getheader("Mesos-Stream-Id") is not None or (
            req.path.startswith("/api/v1") and resp.getheader("Transfer-Encoding") == "chunked"
        )
        if resp.status == 200 and streaming:
            return resp.status if _first_event(resp, req.path == "/api/v1/scheduler") else STREAM_WITHOUT_EVENT
        resp.read()
        return resp.status
    except (http.client.HTTPException, OSError):
        return 0
    finally:
        conn.close()


def _first_event(resp: http.client.HTTPResponse, scheduler: bool) -> bool:
    """Whether the RecordIO stream's first record decodes (JSON or msgpack) to an event; for a
    scheduler stream, SUBSCRIBED or ERROR."""
    line = resp.readline()
    while line and not line.strip():
        line = resp.readline()
    if not line.strip().isdigit():
        return False
    record = resp.read(int(line))
    ctype = resp.getheader("Content-Type") or ""
    event = msgpack.unpackb(record, raw=False) if "msgpack" in ctype else json.loads(record)
    if not isinstance(event, dict):
        return False
    return event.get("type") in ("SUBSCRIBED", "ERROR") if scheduler else "type" in event


TERMINAL = frozenset({"TASK_FINISHED", "TASK_FAILED", "TASK_KILLED", "TASK_LOST", "TASK_ERROR", "TASK_DROPPED",
                      "TASK_GONE", "TASK_GONE_BY_OPERATOR"})


class Framework:
    """A blocking JSON framework for checks: subscribes, acknowledges every update it gets,
    records updates, and launches shell commands on offers (``launch``)."""

    def __init__(self, host: str, port: int, name: str = "fuzz-check", *, partition_aware: bool = False,
                 failover_timeout: float = 0.0) -> None:
        self.host, self.port, self.name = host, port, name
        self.partition_aware = partition_aware
        self.failover_timeout = failover_timeout
        self.framework_id = ""
        self.stream_id = ""
        self.events: queue.Queue[dict[str, Any]] = queue.Queue()
        self.updates: list[dict[str, Any]] = []
        self.heartbeats = 0
        self.closed = threading.Event()
        self.subscribed = threading.Event()
        self.take_offers = threading.Event()  # clear: offers are declined as they come
        self._conn: http.client.HTTPConnection | None = None
        self._reader: threading.Thread | None = None
        self._lock = threading.Lock()

    def start(self, within: float = 20.0) -> Framework:
        caps = [{"type": "MULTI_ROLE"}] + ([{"type": "PARTITION_AWARE"}] if self.partition_aware else [])
        info: dict[str, Any] = {"user": "nobody", "name": self.name, "roles": ["*"], "capabilities": caps,
                                "failover_timeout": self.failover_timeout}
        if self.framework_id:
            info["id"] = {"value": self.framework_id}
        body = {"type": "SUBSCRIBE", "subscribe": {"framework_info": info}}
        if self.framework_id:
            body["framework_id"] = {"value": self.framework_id}
        self.closed.clear()
        self.subscribed.clear()
        self._conn = http.client.HTTPConnection(self.host, self.port, timeout=within)
        self._conn.request("POST", "/api/v1/scheduler", body=_json(body),
                           headers={"Content-Type": "application/json", "Accept": "application/json"})
        resp = self._conn.getresponse()
        if resp.status != 200:
            raise RuntimeError(f"SUBSCRIBE answered {resp.status}: {resp.read()[:200]!r}")
        self.stream_id = resp.getheader("Mesos-Stream-Id") or ""
        self._reader = threading.Thread(target=self._read, args=(resp,), daemon=True)
        self._reader.start()
        if not self.subscribed.wait(within):
            raise RuntimeError("no SUBSCRIBED event")
        return self

    def _read(self, resp: http.client.HTTPResponse) -> None:
        try:
            while True:
                line = resp.readline()
                if not line:
                    return
                if not line.strip():
                    continue
                ev = json.loads(resp.read(int(line)))
                self._on(ev)
        except (OSError, ValueError, http.client.HTTPException):
            return
        finally:
            self.closed.set()

    def _on(self, ev: dict[str, Any]) -> None:
        ty = ev.get("type")
        if ty == "SUBSCRIBED":
            self.framework_id = ev["subscribed"]["framework_id"]["value"]
            self.subscribed.set()
        elif ty == "HEARTBEAT":
            with self._lock:
                self.heartbeats += 1
        elif ty == "OFFERS" and not self.take_offers.is_set():
            # not launching: give them back at once, so nothing sits held by a framework that waits
            self.decline(ev)
            return
        elif ty == "UPDATE":
            status = ev["update"]["status"]
            with self._lock:
                self.updates.append(status)
            if "uuid" in status:
                self.call({"type": "ACKNOWLEDGE", "acknowledge": {"agent_id": status["agent_id"], "task_id": status["task_id"],
                                                                  "uuid": status["uuid"]}})
        self.events.put(ev)

    def decline(self, offers_event: dict[str, Any]) -> int:
        ids = [o["id"] for o in offers_event["offers"]["offers"]]
        return self.call({"type": "DECLINE", "decline": {"offer_ids": ids, "filters": {"refuse_seconds": 0.2}}})

    def call(self, body: dict[str, Any]) -> int:
        body = {**body, "framework_id": {"value": self.framework_id}}
        conn = http.client.HTTPConnection(self.host, self.port, timeout=10)
        try:
            conn.request("POST", "/api/v1/scheduler", body=_json(body),
                         headers={"Content-Type": "application/json", "Mesos-Stream-Id": self.stream_id})
            r = conn.getresponse()
            r.read()
            return r.status
        except (OSError, http.client.HTTPException):
            return 0
        finally:
            conn.close()

    def next_event(self, types: set[str], within: float) -> dict[str, Any]:
        deadline = time.monotonic() + within
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no {sorted(types)} event within {within}s")
            try:
                ev = self.events.get(timeout=left)
            except queue.Empty:
                continue
            if ev.get("type") in types:
                return ev

    def launch(self, task_ids: list[str], command: str, within: float = 20.0, cpus: float = 0.1, mem: float = 16) -> None:
        """Launch ``task_ids`` on the next offers (REVIVE first) running ``command``; offers are
        kept from then on."""
        self.take_offers.set()
        self.drain()
        self.call({"type": "REVIVE", "revive": {}})
        left = list(task_ids)
        deadline = time.monotonic() + within
        while left:
            ev = self.next_event({"OFFERS"}, max(0.1, deadline - time.monotonic()))
            for offer in ev["offers"]["offers"]:
                cpu = sum(r.get("scalar", {}).get("value", 0) for r in offer["resources"] if r["name"] == "cpus")
                mem_have = sum(r.get("scalar", {}).get("value", 0) for r in offer["resources"] if r["name"] == "mem")
                n = int(min(len(left), cpu // cpus, mem_have // mem))
                take, left = left[:n], left[n:]
                tasks = [{"name": tid, "task_id": {"value": tid}, "agent_id": offer["agent_id"],
                          "command": {"value": command},
                          "resources": [{"name": "cpus", "type": "SCALAR", "scalar": {"value": cpus}},
                                        {"name": "mem", "type": "SCALAR", "scalar": {"value": mem}}]} for tid in take]
                op = [{"type": "LAUNCH", "launch": {"task_infos": tasks}}] if tasks else []
                self.call({"type": "ACCEPT", "accept": {"offer_ids": [offer["id"]], "operations": op,
                                                        "filters": {"refuse_seconds": 0.5}}})

    def drain(self) -> None:
        """Forget the events received so far (``next_event`` then waits for new ones)."""
        while True:
            try:
                self.events.get_nowait()
            except queue.Empty:
                return

    def wait_terminal(self, task_id: str, within: float) -> str:
        """The task's terminal state, once an update with one has come."""
        deadline = time.monotonic() + within
        while True:
            done = [s for s in self.states(task_id) if s in TERMINAL]
            if done:
                return done[-1]
            self.next_event({"UPDATE", "HEARTBEAT"}, max(0.01, deadline - time.monotonic()))

    def states(self, task_id: str) -> list[str]:
        with self._lock:
            return [u["state"] for u in self.updates if u["task_id"]["value"] == task_id
                    and u.get("reason") != "REASON_RECONCILIATION"]

    def close(self) -> None:
        """End the subscription: the socket shut (the reader sees its end), then closed."""
        if self._conn is not None and self._conn.sock is not None:
            with contextlib.suppress(OSError):
                self._conn.sock.shutdown(socket.SHUT_RDWR)
        if self._reader is not None:
            self._reader.join(timeout=5)
        if self._conn is not None:
            self._conn.close()


class Proc:
    """A master or agent as a real process (its own session, so a kill reaches its tasks' group
    only when meant to): ``start`` waits for its ``listening on`` line; output goes to ``log``."""

    def __init__(self, argv: list[str], log: str) -> None:
        self.argv = argv
        self.log = log
        self.popen: Any = None
        self.url = ""
        self._drain: threading.Thread | None = None

    def start(self, within: float = 30.0) -> Proc:
        self.url = ""
        ready = threading.Event()
        self.popen = subprocess.Popen(self.argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)

        def drain(out: Any) -> None:
            with open(self.log, "ab") as f:
                for line in out:
                    f.write(line)
                    f.flush()
                    text = line.decode("utf-8", "replace")
                    if not self.url and text.startswith("agora-") and " listening on " in text:
                        self.url = text.split(" listening on ", 1)[1].split()[0]
                        ready.set()

        self._drain = threading.Thread(target=drain, args=(self.popen.stdout,), daemon=True)
        self._drain.start()
        deadline = time.monotonic() + within
        while not ready.wait(0.05):
            if self.popen.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{self.argv[:3]} did not start; see {self.log}")
        return self

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1])

    @property
    def pid(self) -> int:
        return int(self.popen.pid)

    def kill9(self) -> None:
        if self.popen is not None and self.popen.poll() is None:
            self.popen.send_signal(signal.SIGKILL)
            self.popen.wait()
        self._reap()

    def _reap(self) -> None:
        """After the exit: the output read to its end, the pipe closed."""
        if self._drain is not None:
            self._drain.join(timeout=5)
            self._drain = None
        if self.popen is not None and self.popen.stdout is not None and not self.popen.stdout.closed:
            with contextlib.suppress(OSError, ValueError):
                self.popen.stdout.close()

    def stop(self, sig: int | None = None, within: float = 15.0) -> None:
        if self.popen is None or self.popen.poll() is not None:
            self._reap()
            return
        self.popen.send_signal(signal.SIGTERM if sig is None else sig)
        try:
            self.popen.wait(within)
        except subprocess.TimeoutExpired:
            self.kill9()
        self._reap()
