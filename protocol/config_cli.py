"""The click side of ``--config FILE.toml`` (``protocol/config_file.py``): an eager option that
reads the file before the other flags are parsed and gives its values to click as defaults, so a
flag on the command line (or in its environment variable) wins."""

from __future__ import annotations

import tomllib
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

import click

from protocol.config_file import ConfigFileError, Flag, flag_defaults

F = TypeVar("F", bound=Callable[..., Any])


def read_toml(path: Path) -> dict[str, Any]:
    """The parsed file, or a usage error naming it."""
    try:
        return tomllib.loads(path.read_text())
    except OSError as exc:
        raise click.BadParameter(f"cannot read {path}: {exc.strerror}", param_hint="--config") from exc
    except (tomllib.TOMLDecodeError, UnicodeError) as exc:
        raise click.BadParameter(f"{path} is not valid TOML: {exc}", param_hint="--config") from exc


def apply_config(
    ctx: click.Context, path: Path, table: str, *, top_level: bool, other_tables: Iterable[str] = ()
) -> None:
    """Make the file's values for ``ctx.command``'s flags the defaults of this invocation."""
    flags = [
        Flag(str(p.name), tuple(p.opts) + tuple(p.secondary_opts), bool(getattr(p, "multiple", False)))
        for p in ctx.command.params
        if isinstance(p, click.Option) and p.name
    ]
    try:
        values = flag_defaults(read_toml(path), table, flags, top_level=top_level, other_tables=other_tables)
    except ConfigFileError as exc:
        raise click.BadParameter(f"{path}: {exc}", param_hint="--config") from exc
    ctx.default_map = {**(ctx.default_map or {}), **values}


def config_option(table: str, *, top_level: bool = True, help: str | None = None) -> Callable[[F], F]:
    """``--config FILE.toml``: flag values from the file's ``[table]`` (or its top level)."""

    def load(ctx: click.Context, _param: click.Parameter, value: Path | None) -> None:
        if value is not None:
            apply_config(ctx, value, table, top_level=top_level)

    return click.option(
        "--config", type=click.Path(dir_okay=False, path_type=Path), is_eager=True, expose_value=False,
        callback=load,
        help=help or f"TOML file of flag values (keys: the long flags without '--', top level or [{table}]); "
        "a flag on the command line wins.",
    )
