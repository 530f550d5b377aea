"""``agora up`` — a local cluster on loopback: one master, N agents, the batch and elastic frameworks.

Each agent gets an equal share of this machine (``--resources``). Everything runs as child
processes in their own process groups, with logs under ``<work-dir>/logs``; Ctrl-C or SIGTERM
stops them all (SIGTERM, then SIGKILL after a grace period) and nothing is left behind.
``--demo`` submits the sample workloads through the batch/elastic frameworks' demo hooks and
exits 0 when they all succeed. ``--tls`` runs it all over TLS with a throwaway CA in
``<work-dir>/tls`` (mTLS for agents; ``export AGORA_CA=...`` is printed for the CLI).
``--queues ml,*`` (``--roles``) are the roles the batch framework subscribes with: it serves only
those queues and refuses a job for any other at submit.
"""

from __future__ import annotations

import contextlib
import errno
import importlib
import importlib.util
import inspect
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

import attrs
import click
import psutil

from frameworks.cli.common import (
    CliError,
    ManagedProcess,
    agent_share,
    child_env,
    command_for,
    free_port,
    master_state,
    set_ca,
    set_token,
    start_process,
    stop_all,
    wait_master_ready,
    wait_until,
)
from protocol.ids import role_error
from protocol.resources import ResourceError, Resources

HOST = "127.0.0.1"


@attrs.define
class LocalCluster:
    """A running local cluster (what ``start_cluster`` returns; ``stop`` is idempotent)."""

    master_url: str
    work_dir: Path
    processes: list[ManagedProcess] = attrs.field(factory=list)
    batch_url: str | None = None
    elastic_url: str | None = None
    ca: Path | None = None  # --tls: the throwaway cluster CA (AGORA_CA for the CLI)
    token: str | None = None  # --auth: the operator's bearer token (AGORA_TOKEN for the CLI)
    user_tokens: dict[str, str] = attrs.field(factory=dict)  # --auth: the example users' tokens
    batch_roles: tuple[str, ...] = ("*",)  # --queues: the roles the batch framework subscribes with

    def stop(self, grace: float = 5.0) -> None:
        """Retire the agents first (SIGUSR1: each kills its tasks, reports them, and exits; a plain
        SIGTERM would leave tasks running for the agent's recovery), then stop everything."""
        agents = [p for p in self.processes if p.name.startswith("agent-") and p.alive()]
        for p in agents:
            with contextlib.suppress(ProcessLookupError):
                p.popen.send_signal(signal.SIGUSR1)
        deadline = time.monotonic() + grace
        for p in agents:
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.popen.wait(timeout=max(0.1, deadline - time.monotonic()))
        stop_all(self.processes, grace=grace)

    def service_tls_args(self) -> list[str]:
        """A framework service's TLS flags on this cluster (none without ``--tls``): the cluster CA,
        and the agents' certificate (localhost, server+client) for its own API and for mTLS."""
        if self.ca is None:
            return []
        d = self.ca.parent
        return ["--ca", str(self.ca), "--tls-cert", str(d / "agent.pem"), "--tls-key", str(d / "agent-key.pem")]

    def dead(self) -> list[ManagedProcess]:
        return [p for p in self.processes if not p.alive()]

    def __enter__(self) -> LocalCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def module_available(package: str) -> bool:
    try:
        return importlib.util.find_spec(f"{package}.__main__") is not None
    except (ImportError, ValueError):
        return False


def start_cluster(
    agents: int,
    work_dir: Path,
    port: int = 5050,
    with_batch: bool = True,
    resources: str | None = None,
    ready_timeout: float = 60.0,
    echo: Callable[[str], None] = lambda _s: None,
    agent_args: tuple[str, ...] = (),
    master_args: tuple[str, ...] = (),
    with_elastic: bool | None = None,
    tls: bool = False,
    auth: bool = False,
    batch_roles: tuple[str, ...] = (),
    batch_args: tuple[str, ...] = (),
) -> LocalCluster:
    """Start master + ``agents`` agents (+ the batch framework if present) and wait until every
    agent is registered. On any failure everything started so far is stopped again.

    ``tls``: a throwaway CA and certificates in ``<work_dir>/tls`` (``frameworks/cli/certs.py``);
    the master serves only HTTPS/WSS and requires agents' client certificates (mTLS), the agents
    and framework services serve HTTPS, and this process' CLI calls pin the CA (``set_ca``).
    ``batch_roles``: the roles (queues) the batch framework subscribes with (default ``*`` only);
    it refuses a job for any other queue. ``batch_args``: more flags for the batch service
    (``--config batch.toml``: users, fair share, limits)."""
    share = resources or agent_share(agents)
    try:
        Resources.parse(share)
    except ResourceError as exc:
        raise CliError(f"bad --resources {share!r}: {exc}") from exc
    if port and not port_free(HOST, port):
        raise CliError(busy_port_message(port))
    work_dir.mkdir(parents=True, exist_ok=True)
    logs = work_dir / "logs"
    port = port or free_port(HOST)
    gpu_args = gpu_split(agents, share, agent_args)
    url = f"{'https' if tls else 'http'}://{HOST}:{port}"
    cluster = LocalCluster(master_url=url, work_dir=work_dir, batch_roles=batch_roles or ("*",))
    tls_master: tuple[str, ...] = ()
    tls_agent: tuple[str, ...] = ()
    from frameworks.cli.authfiles import agent_principal

    # --tls --auth: each agent's certificate names its own principal (its credential on the channel)
    cert_agents = tuple(agent_principal(i) for i in range(agents)) if tls and auth else ()
    per_agent_tls: tuple[tuple[str, ...], ...] = ()
    if tls:
        from frameworks.cli.certs import make_cluster_certs

        certs = make_cluster_certs(work_dir / "tls", agent_principals=cert_agents)
        per_agent_tls = tuple(("--tls-cert", str(c), "--tls-key", str(k)) for c, k in certs.per_agent)
        cluster.ca = certs.ca
        set_ca(str(certs.ca))
        tls_master = ("--tls-cert", str(certs.master_cert), "--tls-key", str(certs.master_key),
                      "--tls-ca", str(certs.ca), "--tls-require-client-cert")
        tls_agent = ("--master-ca", str(certs.ca), "--tls-cert", str(certs.agent_cert),
                     "--tls-key", str(certs.agent_key))
    env = child_env()
    for var in ("AGORA_PRINCIPAL", "AGORA_SECRET"):  # the services' credentials are up's to give
        env.pop(var, None)
    fw_secrets: dict[str, str] = {}  # principal (= framework name) -> secret
    auth_agent: tuple[tuple[str, ...], ...] = ()  # per agent: its credential and endpoint authentication
    fw_agent_creds: dict[str, tuple[str, ...]] = {}  # principal -> what it presents to agents' /files
    service_auth: tuple[str, ...] = ()  # the services' own API: the master's credentials and ACLs
    if auth:  # authentication on everywhere, default-deny ACLs (frameworks/cli/authfiles.py)
        from frameworks.cli.authfiles import make_local_auth

        local = make_local_auth(work_dir / "auth", cert_agents=cert_agents, agents=agents)
        cluster.token = local.operator_token
        cluster.user_tokens = dict(local.user_tokens)
        service_auth = local.service_args()
        set_token(local.operator_token)  # this process' own calls (readiness, demos)
        tls_master = (*tls_master, *local.master_args())
        # one credential per agent (with per-agent certificates the certificate is it), and the
        # agents' own endpoints authenticated too
        auth_agent = tuple(local.agent_args(i, channel=not cert_agents) for i in range(agents))
        fw_secrets = dict(local.framework_secrets)
        fw_agent_creds = {p: ("--agent-http-credential", str(f)) for p, f in local.framework_credentials.items()}
        env.pop("AGORA_TOKEN", None)  # the services authenticate with their own principal
    try:
        master = start_process(
            "master",
            [
                *command_for("agora-master", "master.main"),
                "--ip",
                HOST,
                "--port",
                str(port),
                "--work-dir",
                str(work_dir / "master"),
                *tls_master,
                *master_args,
            ],
            log_path=logs / "master.log",
            env=env,
        )
        cluster.processes.append(master)
        echo(f"master    pid {master.pid}  {url}")
        wait_own_master(master, url, port, work_dir / "master", ready_timeout)
        for i in range(agents):
            agent = start_process(
                f"agent-{i}",
                [
                    *command_for("agora-agent", "agent.main"),
                    "--master",
                    f"{HOST}:{port}",
                    "--port",
                    "0",
                    "--work-dir",
                    str(work_dir / f"agent-{i}"),
                    "--resources",
                    gpu_args[i][0],
                    "--attributes",
                    f"host_index:{i}",
                    *gpu_args[i][1],
                    *tls_agent,
                    *(per_agent_tls[i] if i < len(per_agent_tls) else ()),
                    *(auth_agent[i] if i < len(auth_agent) else ()),
                    *agent_args,
                ],
                log_path=logs / f"agent-{i}.log",
                env=env,
            )
            cluster.processes.append(agent)
            echo(f"agent-{i}   pid {agent.pid}  {gpu_args[i][0]}" + (f"  GPUs {gpu_args[i][1][1]}" if gpu_args[i][1] else ""))
        wait_master_ready(url, agents=agents, timeout=ready_timeout, procs=cluster.processes)
        if with_batch and module_available("frameworks.batch"):
            cluster.batch_url = _start_framework(
                cluster, "batch", "frameworks.batch", BATCH_NAME, port, work_dir, env, ready_timeout, echo,
                fw_secrets.get(BATCH_NAME),
                (*(("--roles", ",".join(batch_roles)) if batch_roles else ()), *fw_agent_creds.get(BATCH_NAME, ()),
                 *service_auth, *batch_args),
            )
        if (with_batch if with_elastic is None else with_elastic) and module_available("frameworks.elastic"):
            cluster.elastic_url = _start_framework(
                cluster, "elastic", "frameworks.elastic", ELASTIC_NAME, port, work_dir, env, ready_timeout, echo,
                fw_secrets.get(ELASTIC_NAME), (*fw_agent_creds.get(ELASTIC_NAME, ()), *service_auth),
            )
    except BaseException:
        cluster.stop(grace=2.0)
        raise
    return cluster


def split_devices(devices: list[int], agents: int) -> list[list[int]]:
    """Contiguous, near-equal shares of ``devices`` for ``agents`` agents (the first ones get one
    more when they do not divide): 4 over 2 is [0,1] [2,3]; 1 over 2 is [0] []."""
    per, extra = divmod(len(devices), agents)
    out, at = [], 0
    for i in range(agents):
        n = per + (1 if i < extra else 0)
        out.append(devices[at:at + n])
        at += n
    return out


def gpu_split(agents: int, share: str, agent_args: tuple[str, ...]) -> list[tuple[str, tuple[str, ...]]]:
    """Each agent's ``--resources`` and GPU flags: the machine's GPUs (NVML) split between the
    agents (``--nvidia-gpu-devices``), ``gpus:0`` for an agent left without one, so no two agents
    claim the same device. Untouched when ``--resources`` names gpus or ``--agent-opt`` gives
    ``--nvidia-gpu-devices``: the operator decides."""
    names = {t.split(":", 1)[0].split("(", 1)[0].strip() for t in share.split(";") if t.strip()}
    if "gpus" in names or any(a.split("=", 1)[0] == "--nvidia-gpu-devices" for a in agent_args):
        return [(share, ())] * agents
    from agent.nvml import NvmlError, machine_devices

    try:
        devices = machine_devices() or ()
    except NvmlError as exc:
        raise CliError(f"cannot read this machine's GPUs: {exc}") from exc
    if not devices:
        return [(share, ())] * agents
    out: list[tuple[str, tuple[str, ...]]] = []
    for part in split_devices([d.index for d in devices], agents):
        if part:
            out.append((share, ("--nvidia-gpu-devices", ",".join(map(str, part)))))
        else:
            out.append((f"{share.rstrip(';')};gpus:0", ()))
    return out


BATCH_NAME = "agora-batch"
ELASTIC_NAME = "agora-elastic"


PORT_HINT = "choose another port with --port N, or --port 0 for any free one"


def busy_port_message(port: int) -> str:
    return f"port {port} on {HOST} is already in use (another Agora or Mesos master?); nothing was started: {PORT_HINT}"


def port_free(host: str, port: int) -> bool:
    """Whether a listening socket could take ``host:port`` now (the way the master binds: with
    SO_REUSEADDR, so a port left in TIME_WAIT by a stopped master counts as free)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                return False
            raise CliError(f"cannot use port {port} on {host}: {exc.strerror}") from exc
    return True


def listens_on(pid: int, port: int) -> bool:
    """Whether process ``pid`` (or one of its children) holds a listening TCP socket on ``port``."""
    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return False
    for p in procs:
        try:
            conns = p.net_connections(kind="tcp")
        except psutil.Error:
            continue
        if any(c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port for c in conns):
            return True
    return False


def wait_own_master(master: ManagedProcess, url: str, port: int, master_dir: Path, timeout: float) -> None:
    """Wait until the master this ``up`` started answers on ``url``, and make sure the one
    answering is that master: its process holds the listening socket and ``/state`` reports its
    work dir. Another master already on the port (ours then exits with "address already in use")
    is a ``CliError`` naming the port, before any agent or framework is started, so nothing of
    this cluster registers with someone else's master."""
    try:
        wait_until(lambda: listens_on(master.pid, port), timeout, f"the master to listen on port {port}", procs=[master])
    except CliError as exc:
        if "address already in use" in master.tail() or "Errno 98" in master.tail():
            raise CliError(busy_port_message(port)) from exc
        raise
    wait_until(lambda: bool(master_state(url)), timeout, f"the master to answer on {url}", procs=[master])
    answered = str((master_state(url).get("flags") or {}).get("work_dir", ""))
    if not answered or Path(answered).resolve() != master_dir.resolve():
        raise CliError(
            f"the master answering on {url} is not the one just started (its work dir is {answered or 'unknown'}, "
            f"not {master_dir}); nothing was registered with it: {PORT_HINT}"
        )


def _start_framework(
    cluster: LocalCluster,
    name: str,
    module: str,
    framework_name: str,
    master_port: int,
    work_dir: Path,
    env: dict[str, str],
    ready_timeout: float,
    echo: Callable[[str], None],
    secret: str | None = None,
    extra: tuple[str, ...] = (),
) -> str:
    """Start a bundled framework service (``python -m module``) and wait until it subscribed. With
    ``secret`` (``up --auth``) it authenticates as ``framework_name``; the secret goes in the
    child's environment (``AGORA_SECRET``), never on its command line where ``ps`` shows it."""
    fport = free_port(HOST)
    tls = cluster.service_tls_args()
    proc = start_process(
        name,
        [
            sys.executable, "-m", module,
            "--master", f"{HOST}:{master_port}",
            "--port", str(fport),
            "--work-dir", str(work_dir / name),
            *tls,
            *(("--principal", framework_name) if secret is not None else ()),
            *extra,
        ],
        log_path=work_dir / "logs" / f"{name}.log",
        env=env if secret is None else {**env, "AGORA_SECRET": secret},
    )
    cluster.processes.append(proc)
    url = f"{'https' if tls else 'http'}://{HOST}:{fport}"
    echo(f"{name:<9} pid {proc.pid}  {url}")
    wait_until(
        lambda: _has_framework(cluster.master_url, framework_name),
        ready_timeout,
        f"the {name} framework to subscribe",
        procs=cluster.processes,
    )
    return url


def _has_framework(url: str, name: str = BATCH_NAME) -> bool:
    return any(f.get("name") == name for f in master_state(url).get("frameworks", []) or [])


def _run_demos(cluster: LocalCluster, echo: Callable[[str], None]) -> bool:
    """Run every demo hook that exists; True when all of them succeed (and at least one ran)."""
    ran = 0
    ok = True
    for module in ("frameworks.batch.demo", "frameworks.elastic.demo"):
        try:
            mod = importlib.import_module(module)
        except ModuleNotFoundError:
            continue
        except ImportError as exc:
            echo(f"demo: {module} cannot be imported: {exc}")
            ok = False
            continue
        run_demo: Any = getattr(mod, "run_demo", None)
        if run_demo is None:
            continue
        ran += 1
        echo(f"demo: {module} ...")
        kwargs: dict[str, Any] = {}
        with contextlib.suppress(TypeError, ValueError):
            params = inspect.signature(run_demo).parameters
            if "echo" in params:
                kwargs["echo"] = echo
            if "service_args" in params:  # a service the demo starts itself must speak the cluster's TLS
                kwargs["service_args"] = tuple(cluster.service_tls_args())
        try:
            good = bool(run_demo(cluster.master_url, cluster.batch_url, **kwargs))
        except Exception as exc:  # a demo hook's failure is reported, not a traceback
            echo(f"demo: {module} failed: {exc!r}")
            good = False
        echo(f"demo: {module} {'succeeded' if good else 'FAILED'}")
        ok = ok and good
    if ran == 0:
        echo("demo: no demo workload is available yet (frameworks.batch.demo / frameworks.elastic.demo)")
        return False
    return ok


class _Signals:
    """SIGINT/SIGTERM: the first one interrupts (KeyboardInterrupt) whatever is running; during
    the cleanup that follows further signals are only recorded, so stopping is never cut short."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self.interrupt = True

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        self.signum = signum
        if self.interrupt:
            self.interrupt = False
            raise KeyboardInterrupt


@click.command()
@click.option("--agents", "-n", default=2, show_default=True, type=click.IntRange(1, 64), help="Number of agents.")
@click.option(
    "--work-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Directory for state and logs (default: a fresh temporary directory).",
)
@click.option("--port", default=5050, show_default=True, type=click.IntRange(0, 65535), help="Master port (0 = any free).")
@click.option("--resources", default=None, help="Per-agent resources (default: an equal share of this machine).")
@click.option("--no-batch", is_flag=True, help="Do not start the batch framework.")
@click.option("--no-elastic", is_flag=True, help="Do not start the elastic training framework.")
@click.option("--demo", is_flag=True, help="Submit the sample workloads, exit 0 when they all succeed.")
@click.option("--timeout", "ready_timeout", default=60.0, show_default=True, help="Seconds to wait for readiness.")
@click.option("--master-opt", "master_opts", multiple=True,
              help='Extra agora-master flags, e.g. --master-opt "--heartbeat-interval 5" (repeatable).')
@click.option("--tls", is_flag=True, help="TLS everywhere: a throwaway CA and certificates in <work-dir>/tls, mTLS for agents.")
@click.option("--auth", is_flag=True,
              help="Authentication on everywhere: throwaway credentials and default-deny ACLs in <work-dir>/auth.")
@click.option("--queues", "--roles", "queues", default="*", show_default=True,
              help="Comma-separated queues (roles) the batch framework serves, e.g. --queues 'ml,*'; "
                   "a job for any other queue is refused at submit.")
@click.option("--batch-opt", "batch_opts", multiple=True,
              help='Extra batch service flags, e.g. --batch-opt "--config batch.toml" (users, fair share, limits).')
@click.option("--agent-opt", "agent_opts", multiple=True,
              help='Extra agora-agent flags, e.g. --agent-opt "--resource-estimator fixed --oversubscribed cpus:2".')
def up(
    agents: int,
    work_dir: Path | None,
    port: int,
    resources: str | None,
    no_batch: bool,
    no_elastic: bool,
    demo: bool,
    ready_timeout: float,
    master_opts: tuple[str, ...],
    agent_opts: tuple[str, ...],
    batch_opts: tuple[str, ...],
    tls: bool,
    auth: bool,
    queues: str,
) -> None:
    """Start a local cluster (master, agents, the batch and elastic frameworks) and keep it running
    until Ctrl-C. Port 5050 taken: it stops before starting anything (--port 0 picks a free one)."""
    roles = tuple(r.strip() for r in queues.split(",") if r.strip())
    for r in roles:
        if (err := role_error(r)) is not None:
            raise click.BadParameter(f"{r!r}: {err}", param_hint="--queues")
    sig = _Signals()
    old = {s: signal.signal(s, sig) for s in (signal.SIGINT, signal.SIGTERM)}
    wd = work_dir or Path(tempfile.mkdtemp(prefix="agora-"))
    cluster: LocalCluster | None = None
    code = 0
    error: str | None = None
    try:
        cluster = start_cluster(
            agents, wd, port, with_batch=not no_batch, with_elastic=not no_elastic, resources=resources,
            ready_timeout=ready_timeout, echo=click.echo,
            master_args=tuple(a for o in master_opts for a in shlex.split(o)),
            agent_args=tuple(a for o in agent_opts for a in shlex.split(o)),
            batch_args=tuple(a for o in batch_opts for a in shlex.split(o)),
            tls=tls,
            auth=auth,
            batch_roles=roles,
        )
        _print_endpoints(cluster, agents)
        if demo:
            code = 0 if _run_demos(cluster, click.echo) else 1
        else:
            click.echo("Press Ctrl-C to stop.")
            while True:
                dead = cluster.dead()
                if dead:
                    for p in dead:
                        click.echo(f"{p.name} exited with code {p.returncode()}; stopping\n{p.tail()}", err=True)
                    code = 1
                    break
                time.sleep(0.2)
    except KeyboardInterrupt:
        code = 130 if demo else 0
    except CliError as exc:
        error = str(exc)
    finally:
        sig.interrupt = False
        if cluster is not None:
            click.echo("stopping ...")
            cluster.stop()
            click.echo("stopped.")
        for s, h in old.items():
            signal.signal(s, h)
    if error is not None:
        raise click.ClickException(error)
    if code:
        sys.exit(code)


def _print_endpoints(cluster: LocalCluster, agents: int) -> None:
    wd = cluster.work_dir
    click.echo("")
    click.echo(f"Agora is up: {agents} agent(s) registered.")
    click.echo(f"  master / web UI   {cluster.master_url}/")
    click.echo(f"  scheduler API     {cluster.master_url}/api/v1/scheduler")
    click.echo(f"  state / metrics   {cluster.master_url}/state  {cluster.master_url}/metrics")
    if cluster.batch_url:
        click.echo(f"  batch framework   {cluster.batch_url}   (agora job submit ...; queues {','.join(cluster.batch_roles)})")
    if cluster.elastic_url:
        click.echo(f"  elastic framework {cluster.elastic_url}   (agora elastic submit ...)")
    click.echo(f"  work dir, logs    {wd}  {wd / 'logs'}")
    click.echo(f"  export AGORA_MASTER={cluster.master_url.removeprefix('http://')}")
    if cluster.ca is not None:
        click.echo(f"  export AGORA_CA={cluster.ca}")
    if cluster.token is not None:
        click.echo(f"  export AGORA_TOKEN={cluster.token}   (operator; credentials and ACLs in {wd / 'auth'})")
        for user, tok in cluster.user_tokens.items():
            click.echo(f"  export AGORA_TOKEN={tok}   ({user}: a user of the batch and elastic services; "
                       f"{wd / 'auth' / (user + '.token')}; in a browser: {user} / the token)")
