"""``agora share`` — each user's fair share in each queue of the batch framework (like ``sshare``):
raw shares, normalised shares, decayed usage (billing units, and cpu-, gpu- and MB-seconds), the
user's part of the queue's usage and the fair-share factor that weighs their pending jobs."""

from __future__ import annotations

from typing import Any

import click
from rich.table import Table

from frameworks.cli.common import console, emit, json_flag, master_option
from frameworks.cli.job import API


@click.command()
@click.option("--batch", envvar="AGORA_BATCH", default=None, help="Batch framework URL (default: ask the master).")
@master_option
@click.option("--user", "-u", default=None, help="Only this user.")
@json_flag
@click.pass_context
def share(ctx: click.Context, batch: str | None, master: str | None, user: str | None) -> None:
    """Each user's fair share per queue: shares, decayed usage, factor (like sshare)."""
    ctx.ensure_object(dict)
    ctx.obj.setdefault("json", False)
    ctx.obj.update(batch=batch, master=master)
    data = API.get(ctx, "/share")
    if user is not None:
        data["users"] = [u for u in data["users"] if u["user"] == user]

    def render(d: dict[str, Any]) -> None:
        table = Table(box=None, header_style="bold")
        for col in ("QUEUE", "USER", "SHARES", "NORM SHARES", "USAGE", "CPU-S", "GPU-S", "NORM USAGE", "FAIRSHARE"):
            table.add_column(col, justify="left" if col in ("QUEUE", "USER") else "right")
        for u in d["users"]:
            table.add_row(
                u["queue"], u["user"] or "-", f"{u['shares']:g}", f"{u['norm_shares']:.3f}", f"{u['usage']:.1f}",
                f"{u['cpu_seconds']:.1f}", f"{u['gpu_seconds']:.1f}", f"{u['norm_usage']:.3f}", f"{u['fairshare']:.3f}",
            )
        console().print(table)
        click.echo(f"usage decays with a half-life of {d['half_life']:g}s")

    emit(ctx, data, render)
