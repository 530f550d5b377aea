"""``--config FILE.toml`` for ``agora-agent`` and the framework services (batch, elastic): the file
gives values for the command's own flags, and a flag given on the command line (or its
environment variable) wins, as with ``agora-master --config``.

A key is a long flag without its dashes (``work-dir``, ``log-max-size``; ``work_dir`` reads the
same); an on/off flag takes ``true``/``false`` (``cgroups-enable-cfs = false`` is
``--no-cgroups-enable-cfs``); a flag that may be repeated takes a list. The keys sit in the
command's table (``[agent]``, ``[batch]``, ``[elastic]``) or, for the agent and elastic, at the
top level. An unknown key is an error naming it (a typo never silently does nothing).

Pure: ``flag_defaults`` maps the parsed document onto the command's flags; ``config_option`` in
``protocol/config_cli.py`` reads the file and hands the result to click as its ``default_map``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import attrs

__pure__ = True


class ConfigFileError(ValueError):
    """A config file that cannot be used; the message names the key."""


@attrs.frozen
class Flag:
    """One option of the command: its parameter name and its long flags (``--x``, ``--no-x``)."""

    name: str
    flags: tuple[str, ...]
    multiple: bool = False


def _key(flag: str) -> str:
    return flag.lstrip("-").replace("_", "-")


def flag_defaults(
    doc: Mapping[str, Any], table: str, flags: Iterable[Flag], *, top_level: bool, other_tables: Iterable[str] = ()
) -> dict[str, Any]:
    """``{parameter name: value}`` from the document: the ``[table]`` table, else (with
    ``top_level``) the top-level keys; ``other_tables`` are top-level tables the command reads
    itself (the batch service's ``[users]``, ``[limits]`` ...), not flags."""
    others = set(other_tables)
    section: Mapping[str, Any]
    if table in doc:
        section = doc[table]
        if not isinstance(section, Mapping):
            raise ConfigFileError(f"[{table}] must be a table")
        stray = [k for k in doc if k != table and k not in others] if top_level else []
        if stray:
            raise ConfigFileError(f"unknown key {stray[0]!r}: with a [{table}] table every flag goes in it")
    elif top_level:
        section = {k: v for k, v in doc.items() if k not in others}
    else:
        section = {}
    by_key: dict[str, Flag] = {}
    for f in flags:
        by_key.setdefault(_key(f.name), f)
        for long in f.flags:
            if long.startswith("--") and not long.startswith("--no-"):
                by_key[_key(long)] = f
    out: dict[str, Any] = {}
    for k, v in section.items():
        flag = by_key.get(_key(str(k)))
        if flag is None or "--config" in flag.flags:
            raise ConfigFileError(f"unknown key {k!r} (the keys are the command's long flags without '--')")
        if isinstance(v, Mapping):
            raise ConfigFileError(f"{k}: a value, not a table")
        if flag.multiple:
            if not isinstance(v, list):
                raise ConfigFileError(f"{k}: a list (the flag may be given many times)")
        elif isinstance(v, list):
            raise ConfigFileError(f"{k}: one value, not a list")
        if flag.name in out:
            raise ConfigFileError(f"{k}: given twice (under two of its names)")
        out[flag.name] = v
    return out
