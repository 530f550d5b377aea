"""``agora config`` — the CLI's settings file, and which value wins.

The file is ``$AGORA_CONFIG``, else ``$XDG_CONFIG_HOME/agora/config.toml``, else
``~/.config/agora/config.toml`` (the Mesos CLI keeps ``~/.mesos/config.toml``): flat ``KEY =
"VALUE"`` lines, e.g.::

    master = "10.0.0.5:5050"
    batch = "http://10.0.0.5:8080"
    token = "s3cret"

A setting is taken from, in order: the command's flag (``--master``), its environment variable
(``AGORA_MASTER``), the file, the default. ``resolve`` is that rule as a pure function; ``show``
prints every key with the place its value came from.
"""

from __future__ import annotations

import json
import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs
import click

from frameworks.cli.common import DEFAULT_MASTER, CliError

# key -> (environment variable, default, help)
KEYS: dict[str, tuple[str, str | None, str]] = {
    "master": ("AGORA_MASTER", DEFAULT_MASTER, "master host:port, URL or zk://host:port/path"),
    "batch": ("AGORA_BATCH", None, "batch framework URL (default: ask the master)"),
    "elastic": ("AGORA_ELASTIC", None, "elastic framework URL (default: ask the master)"),
    "token": ("AGORA_TOKEN", None, "bearer token sent to the master and services"),
    "principal": ("AGORA_PRINCIPAL", None, "principal sent with its secret (HTTP Basic) when no token is given"),
    "secret": ("AGORA_SECRET", None, "the principal's secret"),
    "ca": ("AGORA_CA", None, "CA bundle (PEM) to verify https:// URLs"),
}


@attrs.frozen
class Setting:
    key: str
    value: str | None
    source: str  # "flag", "env AGORA_X", "file", "default"


# --- pure ------------------------------------------------------------------------------------


def config_path(env: Mapping[str, str]) -> Path:
    if env.get("AGORA_CONFIG"):
        return Path(env["AGORA_CONFIG"]).expanduser()
    base = env.get("XDG_CONFIG_HOME") or str(Path(env.get("HOME", "~")) / ".config")
    return Path(base).expanduser() / "agora" / "config.toml"


def parse(text: str, where: str) -> dict[str, str]:
    """The file's settings; a syntax error, an unknown key or a non-string value is a ``CliError``
    naming the file (one line, no traceback)."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise CliError(f"bad config file {where}: {exc}") from exc
    out: dict[str, str] = {}
    for k, v in data.items():
        if k not in KEYS:
            raise CliError(f"bad config file {where}: unknown key {k!r} (known: {', '.join(KEYS)})")
        if not isinstance(v, str):
            raise CliError(f"bad config file {where}: {k} must be a string")
        out[k] = v
    return out


def dump(values: Mapping[str, str]) -> str:
    """Settings as TOML (basic strings: JSON's escapes are TOML's)."""
    return "".join(f"{k} = {json.dumps(values[k])}\n" for k in KEYS if k in values)


def resolve(key: str, flag: str | None, env: Mapping[str, str], file: Mapping[str, str]) -> Setting:
    """flag > environment > file > default."""
    var, default, _ = KEYS[key]
    if flag:
        return Setting(key, flag, "flag")
    if env.get(var):
        return Setting(key, env[var], f"env {var}")
    if file.get(key):
        return Setting(key, file[key], "file")
    return Setting(key, default, "default")


# --- shell -----------------------------------------------------------------------------------


def load(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The file's settings ({} when there is no file)."""
    path = config_path(os.environ if env is None else env)
    try:
        text = path.read_text("utf-8")
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise CliError(f"cannot read config file {path}: {exc.strerror or exc}") from exc
    return parse(text, str(path))


def file_value(key: str) -> str | None:
    """``key`` from the config file, or None (what ``common`` asks after flag and environment)."""
    return load().get(key) or None


def setting(key: str, flag: str | None = None) -> str | None:
    return resolve(key, flag, os.environ, load()).value


def _fail(exc: CliError) -> click.ClickException:
    return click.ClickException(str(exc))


@click.group()
def config() -> None:
    """Show or change the CLI's settings (~/.config/agora/config.toml or $AGORA_CONFIG)."""


@config.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def show(as_json: bool) -> None:
    """Every setting, its value and where the value comes from (env, file, default)."""
    try:
        file = load()
    except CliError as exc:
        raise _fail(exc) from exc
    rows = [resolve(k, None, os.environ, file) for k in KEYS]
    path = str(config_path(os.environ))
    if as_json:
        data: dict[str, Any] = {"path": path, "settings": {r.key: {"value": r.value, "source": r.source} for r in rows}}
        click.echo(json.dumps(data, indent=2, sort_keys=True))
        return
    click.echo(f"# {path}")
    for r in rows:
        value = "-" if r.value is None else (r.value if r.key not in ("token", "secret") else "********")
        click.echo(f"{r.key:8} {value:40} ({r.source})")


@config.command(name="set")
@click.argument("key", type=click.Choice(list(KEYS)))
@click.argument("value")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def set_value(key: str, value: str, as_json: bool) -> None:
    """Write KEY = VALUE to the config file (an empty VALUE removes the key)."""
    path = config_path(os.environ)
    try:
        values = load()
    except CliError as exc:
        raise _fail(exc) from exc
    if value:
        # a CA file is kept by its absolute path: the file is read from wherever agora runs next
        values[key] = str(Path(value).expanduser().resolve()) if key == "ca" else value
    else:
        values.pop(key, None)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(dump(values), "utf-8")
        tmp.chmod(0o600)  # it may hold a token
        tmp.replace(path)
    except OSError as exc:
        raise click.ClickException(f"cannot write config file {path}: {exc.strerror or exc}") from exc
    if as_json:
        click.echo(json.dumps({"path": str(path), "key": key, "value": value or None}, sort_keys=True))
    else:
        click.echo(f"{key} = {value!r} in {path}" if value else f"{key} removed from {path}")
