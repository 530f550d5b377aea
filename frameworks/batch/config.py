"""The batch service's configuration file (``--config batch.toml``): users, fair share, limits,
accounting. Pure: ``parse_config`` takes the TOML document as a mapping and checks every key
(an unknown one is an error naming it, so a typo never silently does nothing)::

    [batch]                        # the service's flags (protocol/config_file.py); a flag given
    master = "10.0.0.1:5050"       # on the command line wins
    ip = "0.0.0.0"
    work-dir = "/var/lib/agora/batch"

    [users]
    default_os_user = "nobody"     # tasks of a principal not mapped below; absent: the service's user
    [users.os_user]                # principal -> the OS account its tasks run as (never guessed)
    alice = "alice"
    [users.shares]                 # fair-share shares (default 1 each)
    alice = 2

    [fairshare]                    # Slurm's multifactor priority (see fairshare.py)
    half_life = 604800             # seconds: usage loses half its weight in this time
    weight_fairshare = 10000
    weight_priority = 1000
    weight_age = 100
    weight_size = 0
    max_age = 604800               # seconds of waiting that give the whole age factor
    [fairshare.billing]            # what one unit of each resource costs per second
    cpus = 1.0
    mem = 0.25                     # per GB
    gpus = 2.0

    [limits]                       # see limits.py
    on_limit = "wait"              # or "refuse": a submission over a limit is refused
    [limits.user."*"]              # every user, each on its own
    max_running_jobs = 10
    [limits.user.alice]            # one user (replaces "*" for the keys it gives)
    max_gpus = 16
    [limits.queue.gpu]             # a queue, all its users together
    max_gpus = 32
    [limits.queue_user.gpu]        # each user within queue gpu
    max_gpus = 4

    [accounting]
    retention_days = 90            # finished jobs and their accounting rows older than this are purged
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import attrs

from frameworks.batch.fairshare import FairShareConfig
from frameworks.batch.limits import LIMIT_KEYS, Limits, LimitSet, OnLimit

__pure__ = True


class ConfigError(ValueError):
    """A configuration that cannot be used; the message names the key."""


@attrs.frozen
class UsersConfig:
    os_user: Mapping[str, str] = attrs.field(factory=dict)  # principal -> OS account
    default_os_user: str | None = None  # None: the service's own user (FrameworkInfo.user)
    shares: Mapping[str, float] = attrs.field(factory=dict)

    def run_as(self, owner: str | None, verified: bool) -> str | None:
        """The OS account a job of ``owner`` runs as: the mapped one when the owner was
        authenticated (``verified``; a claimed name never picks an account), else the default."""
        if verified and owner is not None and owner in self.os_user:
            return self.os_user[owner]
        return self.default_os_user


@attrs.frozen
class BatchConfig:
    users: UsersConfig = attrs.field(factory=UsersConfig)
    fairshare: FairShareConfig = attrs.field(factory=FairShareConfig)
    limits: Limits = attrs.field(factory=Limits)
    retention_days: float | None = None  # None: keep everything


def _table(data: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(data, Mapping):
        raise ConfigError(f"{where}: expected a table")
    return data


def _known(data: Mapping[str, Any], where: str, keys: set[str]) -> None:
    unknown = sorted(set(data) - keys)
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {', '.join(unknown)} (known: {', '.join(sorted(keys))})")


def _name(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value.strip() or len(value) > 128:
        raise ConfigError(f"{where}: expected a name")
    return value


def _number(value: Any, where: str, *, positive: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ConfigError(f"{where}: expected a number, got {value!r}")
    if value < 0 or (positive and value == 0):
        raise ConfigError(f"{where}: must be {'positive' if positive else 'zero or more'}, got {value!r}")
    return float(value)


def _users(data: Mapping[str, Any]) -> UsersConfig:
    _known(data, "users", {"os_user", "default_os_user", "shares"})
    os_user = {
        _name(k, "users.os_user"): _name(v, f"users.os_user.{k}")
        for k, v in _table(data.get("os_user", {}), "users.os_user").items()
    }
    default = data.get("default_os_user")
    shares = {
        _name(k, "users.shares"): _number(v, f"users.shares.{k}", positive=True)
        for k, v in _table(data.get("shares", {}), "users.shares").items()
    }
    return UsersConfig(os_user, None if default is None else _name(default, "users.default_os_user"), shares)


def _fairshare(data: Mapping[str, Any]) -> FairShareConfig:
    fields = {"half_life", "weight_fairshare", "weight_priority", "weight_age", "weight_size", "max_age", "billing"}
    _known(data, "fairshare", fields)
    out: dict[str, Any] = {}
    for key in fields - {"billing"}:
        if key in data:
            out[key] = _number(data[key], f"fairshare.{key}", positive=key in ("half_life", "max_age"))
    if "billing" in data:
        billing = _table(data["billing"], "fairshare.billing")
        _known(billing, "fairshare.billing", {"cpus", "mem", "gpus"})
        base = FairShareConfig()
        out["billing_cpus"] = _number(billing.get("cpus", base.billing_cpus), "fairshare.billing.cpus")
        out["billing_mem_gb"] = _number(billing.get("mem", base.billing_mem_gb), "fairshare.billing.mem")
        out["billing_gpus"] = _number(billing.get("gpus", base.billing_gpus), "fairshare.billing.gpus")
    return FairShareConfig(**out)


def _limit_set(data: Any, where: str) -> LimitSet:
    table = _table(data, where)
    _known(table, where, set(LIMIT_KEYS))
    values: dict[str, float] = {}
    for key, value in table.items():
        number = _number(value, f"{where}.{key}")
        if key in ("max_running_jobs", "max_pending_jobs") and number != int(number):
            raise ConfigError(f"{where}.{key}: expected a whole number, got {value!r}")
        values[key] = number
    return LimitSet(**values)


def _limits(data: Mapping[str, Any]) -> Limits:
    _known(data, "limits", {"on_limit", "user", "queue", "queue_user"})
    on = data.get("on_limit", "wait")
    if on not in ("wait", "refuse"):
        raise ConfigError(f"limits.on_limit: expected 'wait' or 'refuse', got {on!r}")
    scopes: dict[str, dict[str, LimitSet]] = {}
    for scope in ("user", "queue", "queue_user"):
        table = _table(data.get(scope, {}), f"limits.{scope}")
        scopes[scope] = {
            _name(name, f"limits.{scope}"): _limit_set(value, f"limits.{scope}.{name}") for name, value in table.items()
        }
    return Limits(OnLimit(on), scopes["user"], scopes["queue"], scopes["queue_user"])


def parse_config(data: Mapping[str, Any]) -> BatchConfig:
    """The configuration from a parsed TOML document (``ConfigError`` naming what is wrong)."""
    root = _table(data, "config")
    _known(root, "config", {"batch", "users", "fairshare", "limits", "accounting"})  # [batch]: the flags (__main__)
    accounting = _table(root.get("accounting", {}), "accounting")
    _known(accounting, "accounting", {"retention_days"})
    retention = accounting.get("retention_days")
    return BatchConfig(
        users=_users(_table(root.get("users", {}), "users")),
        fairshare=_fairshare(_table(root.get("fairshare", {}), "fairshare")),
        limits=_limits(_table(root.get("limits", {}), "limits")),
        retention_days=None if retention is None else _number(retention, "accounting.retention_days", positive=True),
    )
