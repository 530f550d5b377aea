"""``python -m frameworks.elastic``: run the elastic framework service until SIGINT/SIGTERM.

The master, TLS and authentication options are the ones every framework service shares
(``frameworks.client.options``)."""

from __future__ import annotations

import logging
from pathlib import Path

import click

from frameworks.client.options import ServiceConnection, connection_options, run_service
from frameworks.elastic.jobs import ServiceError
from frameworks.elastic.service import ElasticService
from frameworks.elastic.store import StoreError
from protocol.config_cli import config_option


@click.command()
@config_option("elastic")
@connection_options()
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
def main(
    conn: ServiceConnection,
    host: str,
    advertise: str | None,
    port: int,
    work_dir: Path,
    roles: str,
    name: str,
    heartbeat_timeout: float,
    max_worker_failures: int,
    failover_timeout: float,
) -> None:
    """The Agora elastic deep-learning framework: training jobs that grow and shrink."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    role_list = tuple(r.strip() for r in roles.split(",") if r.strip()) or ("*",)
    run_service(
        lambda: ElasticService(
            conn.master,
            work_dir,
            host=host,
            advertise_host=advertise,
            port=port,
            roles=role_list,
            framework_name=name,
            heartbeat_timeout=heartbeat_timeout,
            max_worker_failures=max_worker_failures,
            failover_timeout=failover_timeout,
            **conn.service_kwargs(),
        ),
        name,  # --name: the line says which service this is
        errors=(StoreError, ServiceError),
    )


if __name__ == "__main__":
    main()
