"""``python -m frameworks.elastic``: run the elastic framework service until SIGINT/SIGTERM."""

from __future__ import annotations

import asyncio
import logging
import signal
from pathlib import Path

import click
import uvloop

from frameworks.elastic.service import ElasticService
from frameworks.elastic.service_core import ServiceError
from frameworks.elastic.store import StoreError
from protocol.tls import TlsError


@click.command()
@click.option("--master", default="127.0.0.1:5050", show_default=True, help="Master host:port or URL, or zk://host:port/path (HA: follows the leader).")
@click.option(
    "--ip", "host", default="127.0.0.1", show_default=True, help="Address the HTTP API and coordinators bind."
)
@click.option(
    "--advertise-ip",
    "advertise",
    default=None,
    help="Address workers and clients are given (default: --ip, or this host's name when binding 0.0.0.0).",
)
@click.option("--port", default=5053, show_default=True, help="HTTP API port (0 picks a free one).")
@click.option(
    "--work-dir", type=click.Path(path_type=Path), default=Path(".agora/elastic"), show_default=True
)
@click.option("--roles", default="*", show_default=True, help="Comma-separated roles to subscribe with.")
@click.option("--name", default="agora-elastic", show_default=True, help="Framework name.")
@click.option(
    "--heartbeat-timeout", default=3.0, show_default=True, help="Seconds before a silent worker is dropped."
)
@click.option(
    "--max-worker-failures", default=10, show_default=True, help="Failures in a row before a job fails."
)
@click.option(
    "--failover-timeout",
    default=7 * 24 * 3600.0,
    show_default=True,
    help="Seconds the master keeps our tasks while we are away.",
)
@click.option("--ca", default=None, type=click.Path(dir_okay=False), help="The cluster CA (PEM): the master is https.")
@click.option("--tls-cert", default=None, type=click.Path(dir_okay=False), help="PEM certificate: the API is https.")
@click.option("--tls-key", default=None, type=click.Path(dir_okay=False), help="PEM private key of --tls-cert.")
@click.option("--principal", envvar="AGORA_PRINCIPAL", default=None, help="The framework's principal (master auth on).")
@click.option("--secret", envvar="AGORA_SECRET", default=None, help="Its secret (HTTP Basic), or give --token.")
@click.option("--token", envvar="AGORA_TOKEN", default=None, help="A bearer token for the master (with --principal).")
def main(
    master: str,
    host: str,
    advertise: str | None,
    port: int,
    work_dir: Path,
    roles: str,
    name: str,
    heartbeat_timeout: float,
    max_worker_failures: int,
    failover_timeout: float,
    ca: str | None,
    tls_cert: str | None,
    tls_key: str | None,
    principal: str | None,
    secret: str | None,
    token: str | None,
) -> None:
    """The Agora elastic deep-learning framework: training jobs that grow and shrink."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    role_list = tuple(r.strip() for r in roles.split(",") if r.strip()) or ("*",)

    async def run() -> None:
        service = ElasticService(
            master,
            work_dir,
            host=host,
            advertise_host=advertise,
            port=port,
            roles=role_list,
            framework_name=name,
            heartbeat_timeout=heartbeat_timeout,
            max_worker_failures=max_worker_failures,
            failover_timeout=failover_timeout,
            ca=ca,
            tls_cert=tls_cert,
            tls_key=tls_key,
            principal=principal,
            secret=secret,
            token=token,
        )
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        async with service:
            print(f"agora-elastic listening on {service.url}", flush=True)
            await stop.wait()

    try:
        uvloop.run(run())
    except (StoreError, ServiceError, OSError, TlsError) as exc:  # a clear message, not a traceback
        raise click.ClickException(f"agora-elastic: {exc}") from exc


if __name__ == "__main__":
    main()
