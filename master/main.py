"""``agora-master``: start the master.

    agora-master --ip 127.0.0.1 --port 5050 --work-dir DIR [--config FILE.toml]

Flags override the TOML file. ``--port 0`` picks a free port; the bound address is printed as one
line ``agora-master listening on http://IP:PORT`` (``https://`` with ``--tls-cert``; and logged). SIGINT/SIGTERM stop it cleanly.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
import signal
import sys

import click

from master.auth import AuthConfigError, load_auth, reload_auth
from master.config import ConfigError, MasterConfig, load
from master.registry import RegistryError
from master.service import MasterService

# The master allocates many short-lived objects per task (decoded messages, events, effects) and
# holds many long-lived ones (task records, the imported code). With CPython's default thresholds
# (700, 10, 10) the cyclic collector took ~20% of the master's CPU in ``scripts/bench/master.py``
# (mostly full collections rescanning the long-lived heap). After startup the heap is frozen (never
# rescanned) and young collections run every 20,000 net allocations: ~4% then. Reference counting
# still frees everything acyclic at once; only cyclic garbage lives a little longer.
GC_THRESHOLDS = (20_000, 50, 100)


def tune_gc() -> None:
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


def new_master(cfg: MasterConfig) -> MasterService:
    """The master, wired: ``MasterService`` gives each edge its port (``master/ports.py``). The
    one place outside ``master/service.py`` that names it (``serve``; ``master.bench`` starts one
    in-process through here)."""
    return MasterService(cfg)


async def serve(cfg: MasterConfig) -> int:
    svc = new_master(cfg)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    reloads: set[asyncio.Task[bool]] = set()  # SIGHUP re-reads in flight (kept from the collector)

    def reload_in_background() -> None:
        task = loop.create_task(reload_auth(svc))
        reloads.add(task)
        task.add_done_callback(reloads.discard)

    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    with contextlib.suppress(NotImplementedError):  # re-read --credentials / --acls (master/auth.py)
        loop.add_signal_handler(signal.SIGHUP, reload_in_background)
    try:
        await svc.start()
    except (OSError, RegistryError) as e:
        click.echo(f"agora-master: cannot start: {e}", err=True)
        return 1
    tune_gc()
    click.echo(f"agora-master listening on {svc.url}", nl=True)
    sys.stdout.flush()
    waiter = loop.create_task(stop.wait())
    stopped = loop.create_task(svc.wait_stopped())
    await asyncio.wait({waiter, stopped}, return_when=asyncio.FIRST_COMPLETED)
    waiter.cancel()
    stopped.cancel()
    await svc.stop()
    if svc.failed is not None:
        click.echo(f"agora-master: stopped on an error: {svc.failed}", err=True)
        return 1
    return 0


def add_log_file(log_dir: str) -> logging.Handler:
    """Also log to ``<log_dir>/agora-master.log`` (what ``/files/read?path=/master/log`` serves)."""
    from master.mesos_endpoints import LOG_FILE

    os.makedirs(log_dir, exist_ok=True)
    handler = logging.FileHandler(os.path.join(log_dir, LOG_FILE))
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.getLogger().addHandler(handler)
    return handler


AUTH_META = "agora.auth"


def _auth_flag(ctx: click.Context, param: click.Parameter, value: object) -> object:
    """Authentication options are collected in ``ctx.meta`` (they override the TOML file)."""
    assert param.name is not None
    ctx.meta.setdefault(AUTH_META, {})[param.name] = value
    return value


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--credentials", default=None, expose_value=False, callback=_auth_flag,
              help="JSON credentials: Mesos {\"credentials\": [...]} plus Agora bearer \"tokens\".")
@click.option("--acls", default=None, expose_value=False, callback=_auth_flag,
              help="Mesos ACL JSON (default deny when authentication is on).")
@click.option("--authenticate-frameworks/--no-authenticate-frameworks", default=None, expose_value=False,
              callback=_auth_flag, help="Schedulers must authenticate (HTTP Basic or Bearer).")
@click.option("--authenticate-agents/--no-authenticate-agents", default=None, expose_value=False,
              callback=_auth_flag, help="Agents must authenticate on the agent channel.")
@click.option("--authenticate-http-readwrite/--no-authenticate-http-readwrite", default=None, expose_value=False,
              callback=_auth_flag, help="The operator API (/api/v1) needs credentials.")
@click.option("--authenticate-http-readonly/--no-authenticate-http-readonly", default=None, expose_value=False,
              callback=_auth_flag, help="GET views (/state, /metrics, web UI) need credentials.")
@click.option("--agent-http-credential", default=None, expose_value=False, callback=_auth_flag,
              help="Credential file the web UI presents to agents run with --authenticate-http.")
@click.option("--ip", default=None, help="Address to bind (default 127.0.0.1).")
@click.option("--port", type=int, default=None, help="Port to bind; 0 picks a free one (default 5050).")
@click.option("--work-dir", default=None, help="Directory for the registry (SQLite).")
@click.option("--hostname", default=None, help="Hostname to advertise (default: the ip; for 0.0.0.0 the machine's).")
@click.option("--advertise-ip", default=None,
              help="IP published in MasterInfo (ZooKeeper; default: the ip, for 0.0.0.0 --hostname resolved).")
@click.option("--config", "config_file", default=None, type=click.Path(dir_okay=False), help="TOML file.")
@click.option("--heartbeat-interval", type=float, default=None, help="Seconds between scheduler HEARTBEATs.")
@click.option("--ping-interval", type=float, default=None, help="Seconds between agent pings.")
@click.option("--ping-timeout", type=float, default=None, help="No pong for this long marks an agent unreachable.")
@click.option("--agent-reregister-timeout", type=float, default=None, help="Re-registration window after restart.")
@click.option("--role-sorter", "--role_sorter", "role_sorter", default=None,
              help="Order roles are served in: drf (weighted DRF, default) or age (first come, first served).")
@click.option("--framework-sorter", "--framework_sorter", "framework_sorter", default=None,
              help="Order frameworks of a role are served in: drf (default) or age.")
@click.option("--log-level", default=None, help="DEBUG, INFO, WARNING...")
@click.option("--log-dir", default=None,
              help="Also write the log to DIR/agora-master.log, served at /files/read?path=/master/log (Mesos' --log_dir).")
@click.option("--zk", default=None, help="HA: zk://host:port[,...]/path; masters contend, the registry lives there.")
@click.option("--zk-session-timeout", type=float, default=None, help="HA: ZooKeeper session timeout (default 10 s).")
@click.option("--tls-cert", default=None, help="PEM certificate (chain): serve only HTTPS/WSS.")
@click.option("--tls-key", default=None, help="PEM private key of --tls-cert.")
@click.option("--tls-ca", default=None, help="CA (PEM) that client certificates must chain to.")
@click.option(
    "--tls-require-client-cert/--no-tls-require-client-cert", default=None,
    help="mTLS: agents must present a certificate from --tls-ca.",
)
def main(
    ip: str | None,
    port: int | None,
    work_dir: str | None,
    hostname: str | None,
    advertise_ip: str | None,
    config_file: str | None,
    heartbeat_interval: float | None,
    ping_interval: float | None,
    ping_timeout: float | None,
    agent_reregister_timeout: float | None,
    role_sorter: str | None,
    framework_sorter: str | None,
    log_level: str | None,
    log_dir: str | None,
    zk: str | None,
    zk_session_timeout: float | None,
    tls_cert: str | None,
    tls_key: str | None,
    tls_ca: str | None,
    tls_require_client_cert: bool | None,
) -> None:
    """Run the Agora master."""
    try:
        cfg = load(
            config_file,
            ip=ip,
            port=port,
            work_dir=work_dir,
            hostname=hostname,
            advertise_ip=advertise_ip,
            heartbeat_interval=heartbeat_interval,
            ping_interval=ping_interval,
            ping_timeout=ping_timeout,
            agent_reregister_timeout=agent_reregister_timeout,
            role_sorter=role_sorter,
            framework_sorter=framework_sorter,
            log_level=log_level,
            log_dir=log_dir,
            zk=zk,
            zk_session_timeout=zk_session_timeout,
            tls_cert=tls_cert,
            tls_key=tls_key,
            tls_ca=tls_ca,
            tls_require_client_cert=tls_require_client_cert,
        )
    except ConfigError as e:
        raise click.UsageError(str(e)) from e
    auth_flags = {k: v for k, v in click.get_current_context().meta.get(AUTH_META, {}).items() if v is not None}
    try:
        cfg = cfg.replace(**auth_flags)
        load_auth(cfg)  # the credentials and ACL files must be usable before anything starts
    except AuthConfigError as e:
        raise click.UsageError(str(e)) from e
    logging.basicConfig(
        level=getattr(logging, cfg.log_level.upper(), logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    if cfg.log_dir:
        try:
            add_log_file(cfg.log_dir)
        except OSError as e:
            raise click.UsageError(f"--log-dir {cfg.log_dir}: {e}") from e
    import uvloop

    sys.exit(uvloop.run(serve(cfg)))


if __name__ == "__main__":  # pragma: no cover
    main()
