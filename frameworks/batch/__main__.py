"""``python -m frameworks.batch``: run the batch framework service until SIGINT/SIGTERM."""

from __future__ import annotations

import asyncio
import logging
import signal
from pathlib import Path

import click
import uvloop

from frameworks.batch.service import BatchService


@click.command()
@click.option("--master", default="127.0.0.1:5050", show_default=True, help="Master host:port or URL, or zk://host:port/path (HA: follows the leader).")
@click.option("--ip", "host", default="127.0.0.1", show_default=True, help="Address the HTTP API binds.")
@click.option("--port", default=5052, show_default=True, help="HTTP API port (0 picks a free one).")
@click.option("--work-dir", type=click.Path(path_type=Path), default=Path(".agora/batch"), show_default=True)
@click.option("--roles", default="*", show_default=True, help="Comma-separated roles (queues) to subscribe with.")
@click.option("--gang-timeout", default=30.0, show_default=True, help="Seconds a blocked gang may hold offers.")
@click.option("--name", default="agora-batch", show_default=True, help="Framework name.")
@click.option("--ca", default=None, type=click.Path(dir_okay=False), help="The cluster CA (PEM): the master is https.")
@click.option("--tls-cert", default=None, type=click.Path(dir_okay=False), help="PEM certificate: the API is https.")
@click.option("--tls-key", default=None, type=click.Path(dir_okay=False), help="PEM private key of --tls-cert.")
@click.option("--principal", envvar="AGORA_PRINCIPAL", default=None, help="The framework's principal (master auth on).")
@click.option("--secret", envvar="AGORA_SECRET", default=None, help="Its secret (HTTP Basic), or give --token.")
@click.option("--token", envvar="AGORA_TOKEN", default=None, help="A bearer token for the master (with --principal).")
def main(
    master: str, host: str, port: int, work_dir: Path, roles: str, gang_timeout: float, name: str,
    ca: str | None, tls_cert: str | None, tls_key: str | None,
    principal: str | None, secret: str | None, token: str | None,
) -> None:
    """The Agora batch framework: queues, priorities, gangs, backfill, arrays, dependencies."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    role_list = tuple(r.strip() for r in roles.split(",") if r.strip()) or ("*",)

    async def run() -> None:
        service = BatchService(
            master, work_dir, host=host, port=port, roles=role_list, framework_name=name, gang_timeout=gang_timeout,
            ca=ca, tls_cert=tls_cert, tls_key=tls_key, principal=principal, secret=secret, token=token,
        )
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        async with service:
            print(f"agora-batch listening on {service.url}", flush=True)
            await stop.wait()

    uvloop.run(run())


if __name__ == "__main__":
    main()
