"""Master configuration: defaults, a TOML file, then command-line flags (flags win).

Every timeout is configurable so tests can compress them.
"""

from __future__ import annotations

import socket
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

if TYPE_CHECKING:
    from master.allocator import AllocatorConfig


class ConfigError(ValueError):
    pass


@attrs.frozen
class MasterConfig:
    ip: str = "127.0.0.1"
    port: int = 5050
    work_dir: str = "./agora-master"
    hostname: str | None = None  # advertised; defaults to ip (the machine's hostname for a wildcard ip)
    advertise_ip: str | None = None  # MasterInfo.address.ip (Mesos' --advertise_ip); see advertised_address
    # scheduler API
    heartbeat_interval: float = 15.0
    extra_heartbeat_after_burst: bool = True  # mesoshttp delivers an event only when the next arrives
    default_refuse_seconds: float = 5.0
    max_body_bytes: int = 4 * 1024 * 1024
    max_framework_queue: int = 10_000  # events buffered per framework stream before it is closed
    # disconnected frameworks that never ran a task kept per principal (the oldest beyond is removed)
    abandoned_frameworks_per_principal: int = 16
    # agent channel
    ping_interval: float = 5.0
    ping_timeout: float = 15.0  # no pong for this long -> unreachable
    max_frame_bytes: int = 4 * 1024 * 1024
    agent_reregister_timeout: float = 60.0  # after a master restart
    agent_removal_rate: float = 1.0  # unreachable markings per second (token bucket)
    agent_removal_burst: int = 5
    agent_unreachable_gc: float = 14 * 24 * 3600.0  # unreachable this long -> removed for good
    # limits
    max_connections: int = 1000  # schedulers, operators, not-yet-upgraded connections
    # agent channel connections, counted apart; 0 = from the process' open-file limit (raised to
    # its hard limit at start): that limit minus 256 spare descriptors minus max_connections
    # (counted as at most a tenth of the limit)
    max_agent_connections: int = 0
    read_timeout: float = 30.0  # per connection, for a request body (and, if shorter, its head)
    header_timeout: float = 10.0  # per connection, for a complete request head (slowloris)
    # untrusted connections (not yet a framework's accepted call, nor authenticated) of one client
    # address (0: a quarter of max_connections), and the part of max_connections they may never
    # hold (-1: a tenth); see protocol/admission.py
    max_connections_per_address: int = 0
    reserved_connections: int = -1
    # per principal (framework principal, else framework id); a call costs one token
    # (ACKNOWLEDGE_MANY: one per 100 entries). 5,000/s is about what one master serves on one
    # connection, so one framework is not throttled below the master's own pace.
    rate_limit_qps: float = 5000.0
    rate_limit_burst: float = 10000.0
    # allocation
    allocation_batch: float = 0.005
    offer_timeout: float | None = None
    # while another framework starves (no offer at all), an offer unused this long is taken back
    # for it (master/allocator/starvation.py); 0 = never
    offer_hold_bound: float = 3.0
    # the order the allocator serves roles in, and frameworks inside a role (Mesos'
    # --role_sorter/--framework_sorter): "drf" (weighted dominant resource fairness) or "age"
    # (first come, first served); master/allocator/sorter.py SORTERS
    role_sorter: str = "drf"
    framework_sorter: str = "drf"
    # logging
    log_level: str = "INFO"
    log_dir: str | None = None  # also log to <log_dir>/agora-master.log, served as /master/log (Mesos' --log_dir)
    # authentication and authorization (master/auth.py, protocol/acls.py); the Mesos flag names
    credentials: str | None = None  # JSON file: Mesos {"credentials": [...]} plus Agora "tokens"
    acls: str | None = None  # Mesos ACL JSON; default deny when any authentication is on
    authenticate_frameworks: bool = False  # the scheduler API
    authenticate_agents: bool = False  # the agent channel
    authenticate_http_readwrite: bool = False  # the operator API (/api/v1)
    authenticate_http_readonly: bool = False  # GET views (/state, /metrics, web UI)
    # the web UI's credential towards agents run with --authenticate-http (an agent's --credential
    # format: {"principal", "secret"} / {"principal", "token"} / "principal secret"; master/auth.py)
    agent_http_credential: str | None = None
    # high availability (master/ha.py): contend for leadership in ZooKeeper, registry kept there
    zk: str | None = None  # zk://host:port[,host:port...]/path (Mesos' --zk); None = SQLite, one master
    zk_session_timeout: float = 10.0  # a leader cut off from ZooKeeper this long exits
    # TLS (protocol/tls.py): with a certificate and key the master serves only HTTPS/WSS
    tls_cert: str | None = None
    tls_key: str | None = None
    tls_ca: str | None = None  # client certificates presented must chain to this CA
    tls_require_client_cert: bool = False  # agents must present one (mTLS); needs tls_ca

    @property
    def advertised_host(self) -> str:
        """``--hostname``, else the ip unless a wildcard, else this machine's hostname."""
        return _advertised_hostname(self, socket.gethostname())

    @property
    def scheme(self) -> str:
        return "https" if self.tls_cert else "http"

    def replace(self, **changes: Any) -> MasterConfig:
        return attrs.evolve(self, **changes)


WILDCARD_IPS = frozenset({"0.0.0.0", "::", ""})


def advertised_address(cfg: MasterConfig, machine_hostname: str, resolve: Callable[[str], str]) -> tuple[str, str]:
    """(ip, hostname) a master publishes -- in its ``MasterInfo`` (ZooKeeper's ``json.info_``
    node, which standbys redirect to and pymesos connects to) and as its own address when it
    compares itself to the leader. Nobody can connect to a wildcard bind (``--ip 0.0.0.0``), so:
    the hostname is ``--hostname``, else the ip unless a wildcard, else ``machine_hostname``; the
    ip is ``--advertise-ip``, else the bound ip unless a wildcard, else ``resolve(hostname)``.
    ``ConfigError`` when that cannot be resolved (give ``--advertise-ip``)."""
    wildcard = cfg.ip in WILDCARD_IPS
    host = _advertised_hostname(cfg, machine_hostname)
    if cfg.advertise_ip:
        return cfg.advertise_ip, host
    if not wildcard:
        return cfg.ip, host
    try:
        ip = resolve(host)
    except (OSError, UnicodeError) as e:
        raise ConfigError(f"--ip {cfg.ip or '0.0.0.0'}: cannot resolve {host!r} to advertise ({e}); give --advertise-ip") from e
    if ip in WILDCARD_IPS:
        raise ConfigError(f"--ip {cfg.ip}: {host!r} resolves to {ip}; give --advertise-ip")
    return ip, host


def _advertised_hostname(cfg: MasterConfig, machine_hostname: str) -> str:
    return cfg.hostname or (machine_hostname if cfg.ip in WILDCARD_IPS else cfg.ip)


def allocator_config(cfg: MasterConfig, offer_id_prefix: str) -> AllocatorConfig:
    """The allocator's configuration from the master's (the sorters by name: ``--role_sorter``,
    ``--framework_sorter``; ``load`` has checked the names)."""
    from master.allocator import AllocatorConfig
    from master.allocator.sorter import sorter_named

    return AllocatorConfig(
        offer_id_prefix=offer_id_prefix,
        default_refuse_seconds=cfg.default_refuse_seconds,
        offer_timeout=cfg.offer_timeout,
        offer_hold_bound=cfg.offer_hold_bound if cfg.offer_hold_bound > 0 else None,
        batch_window=cfg.allocation_batch,
        role_sorter=sorter_named(cfg.role_sorter),
        framework_sorter=sorter_named(cfg.framework_sorter),
    )


_FIELDS = {f.name: f for f in attrs.fields(MasterConfig)}


def _coerce(name: str, value: Any) -> Any:
    f = _FIELDS[name]
    tp = str(f.type)
    try:
        if value is None:
            if "None" in tp:
                return None
            raise ConfigError(f"{name} may not be empty")
        if tp.startswith("float"):
            if isinstance(value, bool):
                raise TypeError
            return float(value)
        if tp.startswith("int"):
            if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
                raise TypeError
            return int(value)
        if tp.startswith("bool"):
            if isinstance(value, str):
                if value.lower() in {"1", "true", "yes", "on"}:
                    return True
                if value.lower() in {"0", "false", "no", "off"}:
                    return False
                raise TypeError
            return bool(value)
        return str(value)
    except (TypeError, ValueError) as e:
        raise ConfigError(f"bad value for {name}: {value!r}") from e


def load(path: str | Path | None = None, **overrides: Any) -> MasterConfig:
    """Defaults, then the TOML file (top level or a ``[master]`` table), then ``overrides``
    (flags; ``None`` means not given)."""
    values: dict[str, Any] = {}
    if path is not None:
        try:
            data = tomllib.loads(Path(path).read_text())
        except (OSError, tomllib.TOMLDecodeError) as e:
            raise ConfigError(f"cannot read config {path}: {e}") from e
        table = data.get("master", data)
        if not isinstance(table, dict):
            raise ConfigError("[master] must be a table")
        for k, v in table.items():
            key = k.replace("-", "_")
            if key not in _FIELDS:
                raise ConfigError(f"unknown config key {k!r} in {path}")
            values[key] = _coerce(key, v)
    for k, v in overrides.items():
        if v is None:
            continue
        if k not in _FIELDS:
            raise ConfigError(f"unknown option {k!r}")
        values[k] = _coerce(k, v)
    cfg = MasterConfig(**values)
    if not 0 <= cfg.port <= 65535:
        raise ConfigError(f"port out of range: {cfg.port}")
    for name in ("heartbeat_interval", "ping_interval", "ping_timeout", "read_timeout", "header_timeout", "agent_removal_rate"):
        if getattr(cfg, name) <= 0:
            raise ConfigError(f"{name} must be > 0")
    if cfg.zk is not None:
        from protocol.detector import DetectorError, parse_zk_url

        try:
            parse_zk_url(cfg.zk)
        except DetectorError as e:
            raise ConfigError(f"--zk: {e}") from e
        if cfg.zk_session_timeout <= 0:
            raise ConfigError("zk_session_timeout must be > 0")
    from master.allocator.sorter import sorter_named

    for name in ("role_sorter", "framework_sorter"):
        try:
            sorter_named(getattr(cfg, name))
        except ValueError as e:
            raise ConfigError(f"--{name}: {e}") from e
    if (cfg.tls_cert is None) != (cfg.tls_key is None):
        raise ConfigError("--tls-cert and --tls-key go together")
    if (cfg.tls_ca or cfg.tls_require_client_cert) and not cfg.tls_cert:
        raise ConfigError("--tls-ca and --tls-require-client-cert need --tls-cert and --tls-key")
    if cfg.tls_require_client_cert and not cfg.tls_ca:
        raise ConfigError("--tls-require-client-cert needs --tls-ca (the CA agents' certificates come from)")
    return cfg
