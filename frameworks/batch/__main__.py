"""``python -m frameworks.batch``: run the batch framework service until SIGINT/SIGTERM.

The master, TLS and authentication options are the ones every framework service shares
(``frameworks.client.options``)."""

from __future__ import annotations

import logging
import sqlite3
import tomllib
from pathlib import Path

import click

from frameworks.batch.config import BatchConfig, ConfigError, parse_config
from frameworks.batch.logtail import parse_keep
from frameworks.batch.service import BatchService
from frameworks.client.options import ServiceConnection, connection_options, run_service
from protocol.config_cli import apply_config


@click.command()
@connection_options()
@click.option("--ip", "host", default="127.0.0.1", show_default=True, help="Address the HTTP API binds.")
@click.option(
    "--advertise-ip", "advertise", default=None,
    help="Address published in webui_url, where `agora job` finds the API (default: --ip, or this host's name for 0.0.0.0).",
)
@click.option("--port", default=5052, show_default=True, help="HTTP API port (0 picks a free one).")
@click.option("--work-dir", type=click.Path(path_type=Path), default=Path(".agora/batch"), show_default=True)
@click.option("--roles", default="*", show_default=True, help="Comma-separated roles (queues) to subscribe with.")
@click.option("--gang-timeout", default=30.0, show_default=True, help="Seconds a blocked gang may hold offers.")
@click.option("--name", default="agora-batch", show_default=True, help="Framework name.")
@click.option(
    "--config", "config_path", default=None, type=click.Path(dir_okay=False, path_type=Path), is_eager=True,
    callback=lambda ctx, _p, v: _flags_from(ctx, v),
    help="TOML: the service's flags ([batch], a flag on the command line wins), users (principal -> OS account, "
    "shares), fair-share weights, limits, accounting retention.",
)
@click.option(
    "--log-tail", default="64KB", show_default=True, callback=lambda _c, _p, v: _keep(v),
    help="How much of each stream (stdout, stderr) of an ended attempt the service keeps, for `agora job logs` "
    "once the agent has removed the sandbox (0: nothing).",
)
@click.option(
    "--preempt-queues", default="", show_default=True,
    help="Comma-separated queues whose jobs preempt lower-priority preemptible tasks of any user in the queue "
    "(a job's own --preempt evicts only its owner's).",
)
def main(
    conn: ServiceConnection, host: str, advertise: str | None, port: int, work_dir: Path, roles: str,
    gang_timeout: float, name: str, config_path: Path | None, log_tail: int, preempt_queues: str,
) -> None:
    """The Agora batch framework: queues, priorities, gangs, backfill, arrays, dependencies."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    role_list = tuple(r.strip() for r in roles.split(",") if r.strip()) or ("*",)
    config = load_config(config_path) if config_path is not None else None
    run_service(
        lambda: BatchService(
            conn.master, work_dir, host=host, advertise_host=advertise, port=port, roles=role_list, framework_name=name,
            gang_timeout=gang_timeout, config=config, log_tail=log_tail,
            preempt_queues=tuple(q.strip() for q in preempt_queues.split(",") if q.strip()),
            **conn.service_kwargs(),
        ),
        name,  # --name: the line says which service this is
        errors=(sqlite3.Error,),
    )


def _flags_from(ctx: click.Context, path: Path | None) -> Path | None:
    """``--config``'s ``[batch]`` table: values for the other flags (read before them)."""
    if path is not None:
        apply_config(ctx, path, "batch", top_level=False)
    return path


def _keep(value: str) -> int:
    try:
        return parse_keep(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--log-tail") from exc


def load_config(path: Path) -> BatchConfig:
    """``--config``: the TOML file, checked (a usage error naming the file and the key)."""
    try:
        data = tomllib.loads(path.read_text())
    except OSError as exc:
        raise click.BadParameter(f"cannot read {path}: {exc.strerror}", param_hint="--config") from exc
    except (tomllib.TOMLDecodeError, UnicodeError) as exc:
        raise click.BadParameter(f"{path} is not valid TOML: {exc}", param_hint="--config") from exc
    try:
        return parse_config(data)
    except ConfigError as exc:
        raise click.BadParameter(f"{path}: {exc}", param_hint="--config") from exc


if __name__ == "__main__":
    main()
