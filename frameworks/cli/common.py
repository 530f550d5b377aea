"""Shared helpers for the ``agora`` CLI, tests and benchmarks: which master to talk to, small
HTTP reads of the master's operator API, and managing local processes (start, wait until
ready, stop with SIGTERM then SIGKILL of the whole process group, never leaving orphans).

The CLI starts master and agents as processes; it never imports ``master``/``agent``.
"""

from __future__ import annotations

import contextlib
import http
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any, TypeVar

import attrs
import psutil

DEFAULT_MASTER = "127.0.0.1:5050"
REPO_ROOT = Path(__file__).resolve().parents[2]
T = TypeVar("T")


class CliError(Exception):
    """An expected failure with a message for the user (no traceback)."""


# --- TLS: the cluster CA (``agora --ca FILE`` or ``AGORA_CA``) --------------------------------

_ca: str | None = None


def set_ca(path: str | None) -> None:
    """The CA (PEM) that HTTPS servers (master, framework services) must chain to (``--ca``)."""
    global _ca
    _ca = path or None


def ca_file() -> str | None:
    return _ca or os.environ.get("AGORA_CA") or _file_value("ca") or None


def ssl_context() -> ssl.SSLContext | None:
    """The client context pinning the cluster CA, or None (the system trust store)."""
    ca = ca_file()
    if ca is None:
        return None
    from protocol.tls import TlsError, client_context

    try:
        return client_context(ca, ca_flag="--ca")
    except TlsError as exc:
        raise CliError(str(exc)) from exc


# --- authentication: a bearer token (``agora --token TOKEN`` or ``AGORA_TOKEN``) --------------

_token: str | None = None


def set_token(token: str | None) -> None:
    """The bearer token presented to the master (``--token``; its operator or framework principal)."""
    global _token
    _token = token or None


def token() -> str | None:
    return _token or os.environ.get("AGORA_TOKEN") or _file_value("token") or None


_basic: tuple[str, str] | None = None


def set_basic(principal: str | None, secret: str | None) -> None:
    """A principal and its secret (``--principal``/``--secret``), sent as HTTP Basic when no
    token is given."""
    global _basic
    _basic = (principal, secret) if principal and secret else None


def basic() -> tuple[str, str] | None:
    if _basic is not None:
        return _basic
    principal = os.environ.get("AGORA_PRINCIPAL") or _file_value("principal")
    secret = os.environ.get("AGORA_SECRET") or _file_value("secret")
    return (principal, secret) if principal and secret else None


def authorization() -> str | None:
    """The ``Authorization`` every request carries: the token, else principal and secret, else none."""
    from protocol.authn import client_header

    tok = token()
    if tok is not None:
        return client_header(token=tok)
    pair = basic()
    return client_header(pair[0], pair[1]) if pair is not None else None


def has_credential() -> bool:
    return token() is not None or basic() is not None


class Unreachable(CliError):
    """A request that got no answer at all (refused, timed out, TLS not trusted); ``why`` is the
    message without the URL."""

    def __init__(self, url: str, why: str) -> None:
        super().__init__(f"cannot reach {url}: {why}")
        self.why = why


class HttpAnswerError(CliError):
    """A server's answer with an error status; ``code`` is the status, the message the server's
    own words (its ``{"error": ...}``), not the request's URL and status line."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


MASTER_HINT = (
    "start a local cluster with `agora up`, or point the CLI at your master with --master HOST:PORT "
    "or AGORA_MASTER (or `agora config set master HOST:PORT`)"
)


def _reason_text(reason: object) -> str:
    """``[Errno 111] Connection refused`` -> ``connection refused``."""
    if isinstance(reason, ConnectionRefusedError):
        return "connection refused (nothing listens there)"
    if isinstance(reason, (TimeoutError, socket.timeout)):
        return "no answer in time"
    if isinstance(reason, socket.gaierror):
        return f"unknown host ({reason.strerror})"
    if isinstance(reason, OSError) and reason.strerror:
        return reason.strerror[:1].lower() + reason.strerror[1:]
    return str(reason)


def unreachable(url: str, exc: BaseException) -> CliError:
    """The error for a request that got no answer; an untrusted TLS certificate says what to do."""
    reason = getattr(exc, "reason", exc)
    if isinstance(reason, ssl.SSLCertVerificationError):
        hint = "the cluster CA given is not the one that signed it" if ca_file() else "give the cluster CA with --ca FILE or AGORA_CA"
        return Unreachable(url, f"its TLS certificate is not trusted ({reason.verify_message}); {hint}")
    return Unreachable(url, _reason_text(reason))


def master_unreachable(base: str, exc: Unreachable) -> Unreachable:
    """``exc`` for the master at ``base``, with what the user can do about it."""
    if "TLS certificate" in exc.why:
        return Unreachable(f"the master at {base}", exc.why)
    return Unreachable(f"the master at {base}", f"{exc.why}; {MASTER_HINT}")


def answer_error(method: str, url: str, code: int, detail: str) -> HttpAnswerError:
    """The error for a server's answer with status ``code``: its own words (``{"error": ...}`` or
    its text) where it gave a reason, what to do for 401/403, the status only as a last resort."""
    text = detail.strip()
    with contextlib.suppress(ValueError, AttributeError, TypeError):
        text = str(json.loads(text)["error"])
    where = urllib.parse.urlsplit(url).netloc or url
    if code == 401:
        return HttpAnswerError(
            f"{where} requires authentication{': ' + text if text else ''}; give a token with --token or AGORA_TOKEN",
            code,
        )
    if code == 403:
        return HttpAnswerError(f"not allowed by {where}{': ' + text if text else ''}", code)
    if text and 400 <= code < 500:
        return HttpAnswerError(text, code)
    try:
        phrase = http.HTTPStatus(code).phrase.lower()
    except ValueError:
        phrase = "error"
    path = urllib.parse.urlsplit(url).path or "/"
    return HttpAnswerError(f"{where} answered {code} ({phrase}) to {method} {path}{': ' + text if text else ''}", code)


def _scheme() -> str:
    """What a bare ``host:port`` means: https once a cluster CA is given."""
    return "https" if ca_file() else "http"


# --- master address and HTTP -----------------------------------------------------------------


MASTER_HELP = "Master host:port, URL or zk://host:port/path (else AGORA_MASTER, the config file, 127.0.0.1:5050)."
_MASTER_KEY = "agora.master"  # in click's ctx.meta: the innermost --master given on the command line


def _remember_master(ctx: Any, _param: Any, value: str | None) -> str | None:
    """Every ``--master`` records its value for the whole invocation (``ctx.meta`` is shared by
    the root, the group and the subcommand), so ``agora --master X job list``, ``agora job
    --master X list`` and ``agora job list --master X`` mean the same; the innermost one wins."""
    if value:
        ctx.meta[_MASTER_KEY] = value
    return value


def master_option(f: Any) -> Any:
    """``--master`` on a command or a group: ``host:port``, a URL or ``zk://host:port/path`` (see
    ``master_url``). The value is passed as ``master`` and also recorded for the invocation."""
    import click

    return click.option("--master", default=None, callback=_remember_master, help=MASTER_HELP)(f)


def _master_param() -> Any:
    """The ``--master`` a ``MasterGroup`` adds to each of its subcommands (recorded, not passed)."""
    import click

    return click.Option(["--master"], default=None, expose_value=False, callback=_remember_master, help=MASTER_HELP)


def _with_master(cmd: Any) -> Any:
    if not any("--master" in getattr(p, "opts", ()) for p in cmd.params):
        cmd.params.append(_master_param())
    return cmd


def master_group_class() -> type[Any]:
    """A click group whose every subcommand (those added later too) takes ``--master``."""
    import click

    class MasterGroup(click.Group):
        def add_command(self, cmd: click.Command, name: str | None = None) -> None:
            super().add_command(_with_master(cmd), name)

    return MasterGroup


def given_master() -> str | None:
    """The innermost ``--master`` of the running invocation, if any."""
    import click

    ctx = click.get_current_context(silent=True)
    return None if ctx is None else ctx.meta.get(_MASTER_KEY)


def master_url(master: str | None) -> str:
    """``host:port`` / ``http://host:port`` / ``zk://host:port/path`` (the leader now) / None
    (-> the invocation's ``--master``, ``AGORA_MASTER``, the config file or the default) → base URL."""
    value = (
        master or given_master() or os.environ.get("AGORA_MASTER") or _file_value("master") or DEFAULT_MASTER
    ).strip()
    if not value:
        value = DEFAULT_MASTER
    if value.startswith(("zk://", "zoo://")):  # HA: the leader's address, looked up in ZooKeeper
        from protocol.detector import DetectorError, resolve_once

        try:
            value = resolve_once(value, timeout=10.0)
        except DetectorError as exc:
            raise CliError(str(exc)) from exc
    if "://" not in value:
        value = f"{_scheme()}://" + value
    return value.rstrip("/")


def _file_value(key: str) -> str | None:
    """``key`` from the config file (``agora config``), after flag and environment, before defaults."""
    from frameworks.cli.config import file_value

    return file_value(key)


def http_get_json(url: str, timeout: float = 5.0) -> Any:
    req = urllib.request.Request(url, headers={"Accept": "application/json"})
    return _do(req, timeout)


def http_post_json(url: str, body: Any, timeout: float = 5.0) -> Any:
    data = json.dumps(body).encode()
    req = urllib.request.Request(
        url,
        data=data,
        method="POST",
        headers={"Content-Type": "application/json", "Accept": "application/json"},
    )
    return _do(req, timeout)


def local_user() -> str | None:
    """The local user name, sent as ``X-Agora-User``: a service without authentication records
    it as who submitted or changed a job (with authentication the principal counts instead)."""
    import getpass

    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return None


def open_url(req: urllib.request.Request, timeout: float) -> Any:
    """Open ``req`` the one way every CLI request goes (master, framework services, agents, the
    event stream): the bearer token (else principal and secret as HTTP Basic) unless ``req``
    carries its own ``Authorization``, the cluster
    CA; no answer becomes ``unreachable``'s error. An ``HTTPError`` (an answer with an error
    status) is the caller's to read and close."""
    if (auth := authorization()) is not None and not req.has_header("Authorization"):
        req.add_header("Authorization", auth)
    if not req.has_header("X-agora-user") and (user := local_user()):
        req.add_header("X-Agora-User", user)  # who the batch service records for a change
    for _ in range(MAX_REDIRECTS + 1):
        try:
            return urllib.request.urlopen(req, timeout=timeout, context=ssl_context())
        except urllib.error.HTTPError as exc:
            # urllib follows a 307 for GET only; a standby master answers every call with one
            # (``Location: //leader:port/path``), so a POST (drain, SUBSCRIBE, submit) is re-sent
            location = exc.headers.get("Location") if exc.code in (307, 308) else None
            if not location:
                raise
            http_error_detail(exc)
            req = _redirected(req, location)
        except (urllib.error.URLError, OSError) as exc:
            raise unreachable(req.full_url, exc) from exc
    raise CliError(f"{req.get_method()} {req.full_url}: more than {MAX_REDIRECTS} redirects")


MAX_REDIRECTS = 4


def _redirected(req: urllib.request.Request, location: str) -> urllib.request.Request:
    """The same request (method, body, headers) to ``location``; never from https to http."""
    target = urllib.parse.urljoin(req.full_url, location)
    if req.full_url.startswith("https:") and not target.startswith("https:"):
        raise CliError(f"{req.full_url} redirected to {target}: refusing to leave https")
    # ``headers`` only: the unredirected ones (Host, Content-Length) belong to the first server
    return urllib.request.Request(target, data=req.data, method=req.get_method(), headers=dict(req.headers))


def http_error_detail(exc: urllib.error.HTTPError) -> str:
    """The body of an error answer (closing it: its response holds the connection)."""
    with exc:
        return exc.read().decode("utf-8", "replace").strip()


def _do(req: urllib.request.Request, timeout: float) -> Any:
    try:
        with open_url(req, timeout) as resp:
            raw = resp.read()
    except urllib.error.HTTPError as exc:
        detail = http_error_detail(exc)
        raise answer_error(req.get_method(), req.full_url, exc.code, detail) from exc
    except OSError as exc:  # the answer broke off while being read
        raise unreachable(req.full_url, exc) from exc
    if not raw:
        return None
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise CliError(f"{req.full_url} did not answer JSON: {raw[:200]!r}") from exc


# --- local resources --------------------------------------------------------------------------


def free_port(host: str = "127.0.0.1") -> int:
    """A port that was free a moment ago (for child processes that need a fixed --port)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def agent_share(agents: int, cpus: float | None = None, mem_mb: float | None = None) -> str:
    """The ``--resources`` string giving each of ``agents`` agents an equal share of this machine
    (all cpus, 80% of the memory by default), at least 1 cpu / 256 MB each."""
    if agents < 1:
        raise CliError("need at least one agent")
    total_cpus = float(cpus if cpus is not None else (psutil.cpu_count() or 1))
    total_mem = float(mem_mb if mem_mb is not None else psutil.virtual_memory().total / 2**20 * 0.8)
    c = max(1.0, round(total_cpus / agents, 1))
    m = max(256, int(total_mem / agents))
    d = max(1024, int(shutil.disk_usage("/").free / 2**20 * 0.5 / agents))
    return f"cpus:{c:g};mem:{m};disk:{d}"


# --- processes ---------------------------------------------------------------------------------


def command_for(script: str, module: str) -> list[str]:
    """The argv prefix for one of our console scripts: the installed script if on PATH next to
    this interpreter, else ``python -m module`` (works from a plain checkout)."""
    here = Path(sys.executable).parent / script
    if here.exists():
        return [str(here)]
    return [sys.executable, "-m", module]


def child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    pp = env.get("PYTHONPATH", "")
    parts = [p for p in pp.split(os.pathsep) if p]
    if str(REPO_ROOT) not in parts:
        parts.insert(0, str(REPO_ROOT))
    env["PYTHONPATH"] = os.pathsep.join(parts)
    env.setdefault("PYTHONUNBUFFERED", "1")
    if extra:
        env.update(extra)
    return env


@attrs.define
class ManagedProcess:
    """A child process in its own session (process group), with its output in ``log_path``."""

    name: str
    argv: list[str]
    popen: subprocess.Popen[bytes]
    log_path: Path | None
    _log: IO[bytes] | None = None

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def returncode(self) -> int | None:
        return self.popen.poll()

    def tail(self, lines: int = 20) -> str:
        if self.log_path is None or not self.log_path.exists():
            return ""
        text = self.log_path.read_text("utf-8", "replace").splitlines()
        return "\n".join(text[-lines:])


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    """Linux: the child gets SIGTERM if the process that started it dies (even by SIGKILL), so
    an ``agora up`` killed hard still leaves no orphans behind."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def start_process(
    name: str,
    argv: Sequence[str],
    log_path: Path | None = None,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
) -> ManagedProcess:
    """Start ``argv`` in a new session; stdout+stderr go to ``log_path`` (or are discarded)."""
    log: IO[bytes] | None = None
    if log_path is not None:
        log_path.parent.mkdir(parents=True, exist_ok=True)
        log = open(log_path, "ab")  # noqa: SIM115 - closed in stop_process
    try:
        popen = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=log if log is not None else subprocess.DEVNULL,
            stderr=subprocess.STDOUT,
            env=env if env is not None else child_env(),
            cwd=str(cwd) if cwd else None,
            start_new_session=True,
            preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
        )
    except OSError as exc:
        if log is not None:
            log.close()
        raise CliError(f"cannot start {name} ({argv[0]}): {exc}") from exc
    return ManagedProcess(name=name, argv=list(argv), popen=popen, log_path=log_path, log=log)


def _group_members(pid: int) -> list[psutil.Process]:
    try:
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    except psutil.Error:
        return []


def stop_process(proc: ManagedProcess, grace: float = 5.0) -> int | None:
    """SIGTERM the process group (and any descendant that left it), wait up to ``grace`` seconds,
    then SIGKILL whatever is left. Returns the exit code. Idempotent."""
    members = _group_members(proc.pid) if proc.alive() else []
    if members:
        _signal_group(proc.pid, signal.SIGTERM)
        for m in members[1:]:
            _signal(m, signal.SIGTERM)
        _, alive = psutil.wait_procs(members, timeout=grace)
        if alive:
            _signal_group(proc.pid, signal.SIGKILL)
            for m in alive:
                _signal(m, signal.SIGKILL)
            psutil.wait_procs(alive, timeout=grace)
    _signal_group(proc.pid, signal.SIGKILL)  # stragglers still in the group
    try:
        code = proc.popen.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        code = None
    if proc._log is not None:
        proc._log.close()
        proc._log = None
    return code


def stop_all(procs: Sequence[ManagedProcess], grace: float = 5.0) -> None:
    """Stop in reverse start order (frameworks, agents, then the master): SIGTERM all first so they
    shut down in parallel, then wait and SIGKILL the rest."""
    live = [p for p in reversed(procs) if p.alive()]
    for p in live:
        _signal_group(p.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    for p in live:
        try:
            p.popen.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
    for p in reversed(procs):
        stop_process(p, grace=1.0)


def _signal_group(pid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _signal(p: psutil.Process, sig: signal.Signals) -> None:
    try:
        p.send_signal(sig)
    except psutil.Error:
        pass


# --- readiness ---------------------------------------------------------------------------------


def wait_until(
    check: Callable[[], bool],
    timeout: float,
    what: str,
    interval: float = 0.05,
    procs: Sequence[ManagedProcess] = (),
) -> None:
    """Poll ``check`` until it is true (a deadline-bounded poll on a condition). Raises
    ``CliError`` naming ``what`` on timeout, or at once if one of ``procs`` exited."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if check():
                return
        except CliError:
            pass
        for p in procs:
            if not p.alive():
                raise CliError(
                    f"{p.name} exited with code {p.returncode()} while waiting for {what}\n{p.tail()}"
                )
        if time.monotonic() >= deadline:
            raise CliError(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(interval)


def master_state(base_url: str, timeout: float = 2.0) -> dict[str, Any]:
    try:
        state = http_get_json(base_url + "/state", timeout=timeout)
    except Unreachable as exc:
        raise master_unreachable(base_url, exc) from exc
    if not isinstance(state, dict):
        raise CliError(f"{base_url}/state did not answer a JSON object")
    return state


def registered_agents(base_url: str) -> int:
    state = master_state(base_url)
    return sum(1 for a in state.get("slaves", []) if a.get("active", True))


def wait_master_ready(
    base_url: str, agents: int = 0, timeout: float = 30.0, procs: Sequence[ManagedProcess] = ()
) -> None:
    """Wait until the master answers ``/state`` and lists at least ``agents`` active agents."""
    wait_until(
        lambda: registered_agents(base_url) >= agents,
        timeout,
        f"the master at {base_url} to list {agents} agent(s)",
        procs=procs,
    )


# --- bundled framework services and shared CLI pieces -----------------------------------------


def framework_url(name: str, explicit: str | None, env_var: str, master: str | None) -> str:
    """A framework service's base URL: ``explicit``, the ``env_var`` environment variable, or the
    active framework called ``name`` in the master's ``/state`` (services publish their API
    address as ``FrameworkInfo.webui_url``)."""
    value = explicit or os.environ.get(env_var) or _file_value(name.removeprefix("agora-"))
    if value:
        return (value if "://" in value else f"{_scheme()}://" + value).rstrip("/")
    for fw in master_state(master_url(master)).get("frameworks", []):
        if fw.get("name") == name and fw.get("webui_url") and fw.get("active", True):
            return str(fw["webui_url"]).rstrip("/")
    kind = name.removeprefix("agora-")
    raise CliError(f"no {kind} framework is registered with the master (give --{kind} or {env_var})")


def json_flag(f: Any) -> Any:
    """A subcommand's own ``--json`` flag (``agora job list --json``), stored in ``ctx.obj``."""
    import click

    def set_json(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
        if value:
            ctx.ensure_object(dict)["json"] = True

    return click.option(
        "--json", "as_json", is_flag=True, expose_value=False, callback=set_json, help="Print JSON instead of tables."
    )(f)


def state_option(codes: dict[str, str], what: str = "jobs") -> Any:
    """``--state``: a state by its name or by the code the ST column shows (``PD`` or ``pending``),
    any case; the command gets the name. Anything else is a usage error listing them."""
    import click

    by_key = {**{name: name for name in codes}, **{code: name for name, code in codes.items()}}
    listing = ", ".join(f"{code}|{name}" for name, code in codes.items())

    class StateType(click.ParamType):
        name = "STATE"

        def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
            found = by_key.get(str(value).upper())
            if found is None:
                self.fail(f"unknown state {value!r}; one of {listing}", param, ctx)
            return found

    return click.option("--state", default=None, type=StateType(), help=f"Only {what} in this state: {listing}.")


def console() -> Any:
    """A rich console; a pipe gets whole rows (rich would cut them to 80 columns)."""
    from rich.console import Console

    return Console(highlight=False, soft_wrap=True, width=None if sys.stdout.isatty() else 400)


def clock_time(t: float | None) -> str:
    return time.strftime("%H:%M:%S", time.localtime(t)) if t else "-"


@attrs.frozen
class ServiceApi:
    """The HTTP API (``<base>/api/v1``) of a bundled framework service as a CLI group's commands use
    it. The base URL is found once per invocation — ``ctx.obj[option]`` (the group's ``--batch`` /
    ``--elastic``), the ``env_var`` environment variable, or the master's ``/state`` (``name``) — and
    kept in ``ctx.obj``; a failure becomes a ``click.ClickException`` carrying the service's own
    ``{"error": ...}`` text."""

    name: str  # the service's FrameworkInfo.name, e.g. "agora-batch"
    option: str  # the ctx.obj key of an explicit address, e.g. "batch"
    env_var: str  # e.g. "AGORA_BATCH"

    def base(self, explicit: str | None, master: str | None) -> str:
        return framework_url(self.name, explicit, self.env_var, master)

    def url(self, ctx: Any) -> str:
        if "url" not in ctx.obj:
            # the master: the innermost --master of the invocation (group or subcommand), else the environment
            ctx.obj["url"] = self._call(lambda: self.base(ctx.obj[self.option], None) + "/api/v1")
        return str(ctx.obj["url"])

    def get(self, ctx: Any, path: str) -> Any:
        return self._call(lambda: http_get_json(self.url(ctx) + path))

    def post(self, ctx: Any, path: str, body: Any) -> Any:
        return self._call(lambda: http_post_json(self.url(ctx) + path, body))

    @staticmethod
    def _call(f: Callable[[], Any]) -> Any:
        return run_cli(f)


def run_cli(f: Callable[[], T]) -> T:
    """``f()``, a command's body: a ``CliError`` becomes click's error message (exit 1)."""
    import click

    try:
        return f()
    except CliError as exc:
        raise click.ClickException(error_text(str(exc))) from exc


def error_text(msg: str) -> str:
    """``... HTTP 404 {"error": "no elastic job 9"}`` -> ``... HTTP 404: no elastic job 9``."""
    head, sep, tail = msg.partition(" {")
    if sep:
        try:
            return f"{head}: {json.loads('{' + tail)['error']}"
        except (ValueError, KeyError, TypeError):
            pass
    return msg


def emit(ctx: Any, data: Any, render: Callable[[Any], None]) -> None:
    """``data`` as indented JSON under ``--json``, else ``render(data)`` (a table)."""
    import click

    if ctx.obj["json"]:
        click.echo(json.dumps(data, indent=2, sort_keys=True))
    else:
        render(data)
