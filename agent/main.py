"""``agora-agent``: run one agent on this machine."""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
from pathlib import Path

import click
import uvloop

from agent import auth as agent_auth
from agent.config import AgentConfig, ConfigError
from agent.fetch_plan import parse_bytes
from agent.service import AgentService, StartupError
from protocol.config_cli import config_option

log = logging.getLogger("agent")


async def _serve(config: AgentConfig) -> int:
    svc = AgentService(config)
    try:
        await svc.start()
    except StartupError as e:
        click.echo(f"agora-agent: {e}", err=True)
        return 2
    line = f"agora-agent listening on {svc.url}"
    click.echo(line)
    sys.stdout.flush()
    log.info(line)
    for r in svc.recovery_report:
        log.info("recovery: %s", r)
    stop = asyncio.Event()
    retire = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)

    def on_usr1() -> None:
        retire.set()
        stop.set()

    loop.add_signal_handler(signal.SIGUSR1, on_usr1)
    loop.add_signal_handler(signal.SIGHUP, agent_auth.reload_all)  # re-read --http-credentials
    await stop.wait()
    if retire.is_set():  # SIGUSR1: kill every task, then exit (SIGTERM leaves them to recover)
        log.info("SIGUSR1: killing all tasks before exiting")
        if not await svc.kill_all_tasks():
            log.warning("some tasks did not end in time")
    await svc.stop()
    return 0


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@config_option("agent")
@click.option(
    "--master", required=True,
    help="The master, host:port (a redirect to the leader is followed), or zk://host:port/path (HA: follow the leader).",
)
@click.option("--port", default=0, show_default=True, type=int, help="HTTP port (0 picks a free one).")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind (and advertise, unless a wildcard).")
@click.option(
    "--advertise-host",
    default=None,
    help="Host the master and frameworks use to reach this agent (default: --host, or the hostname when --host is 0.0.0.0/::).",
)
@click.option("--work-dir", required=True, type=click.Path(file_okay=False, path_type=Path))
@click.option("--resources", default=None, help='Mesos resources, e.g. "cpus:4;mem:4096;ports:[31000-32000]".')
@click.option("--attributes", default=None, help='e.g. "rack:r1;zone:a".')
@click.option(
    "--nvidia-gpu-devices", default=None,
    help="NVML indices of the GPUs this agent may use, e.g. 0,1 (default: every GPU NVML reports); "
    "without NVML they are declared (tests, dry runs).",
)
@click.option("--gpu-sharing/--no-gpu-sharing", default=False, show_default=True,
              help="Let a task ask for part of one GPU (gpus below 1); otherwise only whole GPUs.")
@click.option("--hostname", default=None, help="Hostname to report (default: this machine's).")
@click.option("--strict/--no-strict", default=False, help="Refuse to start on a corrupt or mismatched checkpoint.")
@click.option("--resource-estimator", default="noop", show_default=True, type=click.Choice(["noop", "fixed", "usage"]))
@click.option("--oversubscribed", default=None, help='With --resource-estimator fixed, e.g. "cpus:4".')
@click.option("--qos-controller", default="noop", show_default=True, type=click.Choice(["noop", "load"]))
@click.option("--qos-threshold", default=None, type=float, help="load controller: overload threshold (load1 per core).")
@click.option("--qos-window", default=None, type=float, help="load controller: seconds the overload must last.")
@click.option(
    "--sync-updates",
    default="terminal",
    show_default=True,
    type=click.Choice(["terminal", "all"]),
    help="Status updates fdatasync'd before they are sent: terminal ones (non-terminal ones are written, "
    "which survives an agent crash), or all (also survives a machine crash; one more fsync per launch).",
)
@click.option("--fsync/--no-fsync", default=True, show_default=True, help="--no-fsync is unsafe (loses updates on power loss); for measurements only.")
@click.option("--gc-delay", "--sandbox-gc-delay", "gc_delay", default="1d", show_default=True,
              help="How long a finished task's sandbox is kept at most (3600, 30m, 2h, 1d, 1w); less the fuller the disk.")
@click.option("--gc-disk-headroom", default=0.1, show_default=True, type=float,
              help="Sandboxes are kept gc-delay x max(0, 1 - headroom - disk use): removed at once when the disk is fuller than 1 - headroom.")
@click.option("--disk-watch-interval", default=15.0, show_default=True, type=float,
              help="Seconds between measures of the tasks' sandboxes (du) and the work dir's file system.")
@click.option("--enforce-disk-limit/--no-enforce-disk-limit", default=True, show_default=True,
              help="Kill a task whose sandbox holds more than its disk resource (REASON_CONTAINER_LIMITATION_DISK).")
@click.option("--work-dir-reserve", default="64MB", show_default=True,
              help="Space held in the work dir and given up when it fills, so checkpoints and status updates go on (0: none).")
@click.option("--allow-root-tasks", is_flag=True, default=False, help="Allow tasks to ask to run as root (uid 0).")
@click.option(
    "--switch-user/--no-switch-user", default=True, show_default=True,
    help="Run a task without CommandInfo.user as its framework's FrameworkInfo.user (when the agent is root and the user exists).",
)
@click.option(
    "--isolation", default="auto", show_default=True, type=click.Choice(["auto", "cgroups-v2", "cgroups-v1", "psutil"]),
    help="auto: cgroup v2 where the agent's cgroup is delegated, else cgroup v1 (memory, cpu, cpuacct), else /proc monitoring.",
)
@click.option("--cgroups-root", default="agora", show_default=True,
              help="cgroup v1: tasks go to <hierarchy>/<root>/agent-<work dir digest>/<task>.")
@click.option("--cgroups-enable-cfs/--no-cgroups-enable-cfs", default=True, show_default=True,
              help="Hard CPU limit (CFS quota: cpus x 100 ms per 100 ms) besides the CPU weight.")
@click.option("--pids-max", default=4096, show_default=True, type=int,
              help="cgroups: at most this many processes and threads per task (a fork bomb stops there); 0: no limit.")
@click.option("--log-max-size", default="10MB", show_default=True,
              help="Rotate a task's stdout/stderr at this size (10MB, 512KB, bytes); 0: plain files, no rotation.")
@click.option("--log-max-files", default=5, show_default=True, type=int,
              help="Files kept per stream (stdout, stdout.1, ...): a task's window is this times --log-max-size.")
@click.option("--usage-report-interval", default=10.0, show_default=True, type=float,
              help="Seconds between reports of the tasks' usage (CPU, memory, disk) to the master; 0: none.")
@click.option("--ping-timeout", default=15.0, show_default=True, type=float, help="Reconnect after this long without a frame.")
@click.option(
    "--executor-reregister-timeout", default=20.0, show_default=True, type=float,
    help="After a restart, how long a live custom executor (of a checkpointing framework) may take to SUBSCRIBE again before its tasks are reported LOST and it is killed.",
)
@click.option("--default-grace", default=3.0, show_default=True, type=float, help="Kill grace period when none is given.")
@click.option(
    "--status-update-retry-interval-min", "--resend-initial", "resend_initial", default=10.0, show_default=True,
    type=float, help="Seconds before an unacknowledged status update is first sent again (Mesos' "
    "--status_update_retry_interval_min); the wait doubles after each resend.",
)
@click.option(
    "--status-update-retry-interval-max", "--resend-max", "resend_max", default=600.0, show_default=True,
    type=float, help="Cap of the status update resend interval (Mesos' --status_update_retry_interval_max).",
)
@click.option("--monitor-interval", default=0.5, show_default=True, type=float, help="Usage sampling period.")
@click.option("--fetcher-cache-dir", default=None, type=click.Path(file_okay=False, path_type=Path),
              help="Where the fetcher caches URIs asked with cache=true (default: <work-dir>/fetcher-cache; emptied at start).")
@click.option("--fetcher-cache-size", default="2GB", show_default=True,
              help="Most bytes the fetcher cache keeps (least recently used entries are evicted), e.g. 512MB.")
@click.option("--fetcher-stall-timeout", default=60.0, show_default=True, type=float,
              help="A download that receives no data for this many seconds fails the task.")
@click.option("--fetcher-progress-interval", default=10.0, show_default=True, type=float,
              help="Seconds between the TASK_STARTING updates that report a long fetch's progress (0: none).")
@click.option("--frameworks-home", default=None, help="Absolute directory that relative local URI paths are taken from.")
@click.option("--log-level", default="INFO", show_default=True)
@click.option("--master-ca", default=None, type=click.Path(path_type=Path), help="The master's CA (PEM), pinned: the channel is wss://.")
@click.option("--tls-cert", default=None, type=click.Path(path_type=Path), help="PEM certificate: the client certificate for mTLS and this agent's HTTPS server.")
@click.option("--tls-key", default=None, type=click.Path(path_type=Path), help="PEM private key of --tls-cert.")
@click.option("--credential", default=None, type=click.Path(path_type=Path),
              help="This agent's credential for the master: JSON {\"principal\", \"secret\"} (or \"token\").")
@click.option("--token", default=None, envvar="AGORA_AGENT_TOKEN", help="A bearer token for the master instead of --credential.")
@click.option("--authenticate-http/--no-authenticate-http", default=False, show_default=True,
              help="The agent's endpoints (/files, /state, /metrics) need credentials from --http-credentials.")
@click.option("--http-credentials", default=None, type=click.Path(path_type=Path),
              help="Credentials accepted by the agent's endpoints (the master's --credentials format).")
@click.option("--acls", default=None, type=click.Path(path_type=Path),
              help="Mesos ACL JSON for the endpoints (access_sandboxes: who reads whose /files); needs --authenticate-http.")
def main(**kw: object) -> None:
    """Run an Agora agent."""
    level = str(kw.pop("log_level")).upper()
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s %(message)s", stream=sys.stderr)
    sys.exit(uvloop.run(_serve(config_from(kw))))


def config_from(params: dict[str, object]) -> AgentConfig:
    """The agent's configuration from the command's parsed flags (``--log-level`` apart)."""
    kw = {k: v for k, v in params.items() if k != "log_level"}
    if kw.get("hostname") is None:
        kw.pop("hostname", None)
    kw["master_tls"] = str(kw["master"]).strip().lower().startswith(("https://", "wss://"))
    try:
        kw["fetcher_cache_size"] = parse_bytes(str(kw["fetcher_cache_size"]))
        return AgentConfig(**kw)  # type: ignore[arg-type]
    except (ConfigError, TypeError, ValueError) as e:
        raise click.UsageError(str(e)) from e


def run(argv: list[str]) -> None:
    """Run the CLI with ``argv`` (for launching an agent from a pre-imported process, e.g. a
    multiprocessing forkserver in tests: no interpreter start-up per agent)."""
    main.main(args=argv, prog_name="agora-agent")


if __name__ == "__main__":  # pragma: no cover
    main()
