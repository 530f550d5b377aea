"""The agent's configuration (``agora-agent`` flags), validated up front."""

from __future__ import annotations

import socket
from pathlib import Path

import attrs

from agent.gpus import GpuConfigError, parse_device_list
from protocol.detector import DetectorError, is_zk_url, parse_zk_url
from protocol.resources import ResourceError, Resources, parse_attributes


class ConfigError(ValueError):
    pass


_UNITS = {"": 1, "B": 1, "KB": 1 << 10, "K": 1 << 10, "MB": 1 << 20, "M": 1 << 20, "GB": 1 << 30, "G": 1 << 30}


def parse_size(value: str | int, flag: str) -> int:
    """``10MB``, ``512KB``, ``1GB`` or a number of bytes (Mesos' ``Bytes``: 1 MB = 1024 KB)."""
    if isinstance(value, int):
        return value
    v = value.strip().upper().replace("IB", "B")
    num = v.rstrip("KMGB")
    unit = v[len(num):]
    try:
        n = float(num)
    except ValueError:
        raise ConfigError(f"{flag}: not a size: {value!r} (e.g. 10MB, 512KB, 1048576)") from None
    if unit not in _UNITS or n < 0 or n != n:
        raise ConfigError(f"{flag}: not a size: {value!r} (e.g. 10MB, 512KB, 1048576)")
    return int(n * _UNITS[unit])


_SECONDS = {"": 1.0, "s": 1.0, "secs": 1.0, "m": 60.0, "mins": 60.0, "h": 3600.0, "hrs": 3600.0,
            "d": 86400.0, "days": 86400.0, "w": 604800.0, "weeks": 604800.0}


def parse_duration(value: str | float, flag: str) -> float:
    """``90``, ``90s``, ``30m``, ``2h``, ``1d``, ``1w`` (Mesos' ``1weeks`` style too) in seconds."""
    if isinstance(value, int | float):
        return float(value)
    v = value.strip().lower()
    num = v.rstrip("abcdefghijklmnopqrstuvwxyz")
    unit = v[len(num):]
    try:
        n = float(num)
    except ValueError:
        raise ConfigError(f"{flag}: not a duration: {value!r} (e.g. 3600, 30m, 2h, 1d)") from None
    if unit not in _SECONDS or n < 0 or n != n:
        raise ConfigError(f"{flag}: not a duration: {value!r} (e.g. 3600, 30m, 2h, 1d)")
    return n * _SECONDS[unit]


def _gc_delay(value: str | float) -> float:
    return parse_duration(value, "--gc-delay")


def _reserve_size(value: str | int) -> int:
    return parse_size(value, "--work-dir-reserve")


def _log_size(value: str | int) -> int:
    return parse_size(value, "--log-max-size")


def _master(value: str) -> str:
    v = value.strip()
    if is_zk_url(v):  # high availability: follow the leader found in ZooKeeper
        try:
            parse_zk_url(v)
        except DetectorError as e:
            raise ConfigError(f"--master: {e}") from e
        return v
    for prefix in ("http://", "ws://", "https://", "wss://"):
        if v.startswith(prefix):
            v = v[len(prefix) :]
    v = v.rstrip("/")
    host, sep, port = v.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(f"--master must be host:port, got {value!r}")
    return v


@attrs.frozen
class AgentConfig:
    master: str = attrs.field(converter=_master)  # "host:port"
    work_dir: Path = attrs.field(converter=Path)
    host: str = "127.0.0.1"
    advertise_host: str | None = None  # how the master and frameworks reach us; see advertised_host
    port: int = 0
    hostname: str = attrs.field(factory=socket.gethostname)
    resources: str | None = None  # Mesos resource string; None: probe the machine
    attributes: str | None = None
    strict: bool = False
    resource_estimator: str = "noop"
    oversubscribed: str | None = None
    qos_controller: str = "noop"
    qos_threshold: float | None = None  # load controller: overload threshold (its default if None)
    qos_window: float | None = None  # load controller: seconds the overload must last
    isolation: str = "auto"  # auto | cgroups-v2 | cgroups-v1 | psutil
    cgroups_root: str = "agora"  # cgroup v1: tasks under <hierarchy>/<cgroups_root>/agent-<work dir digest>/
    cgroups_enable_cfs: bool = True  # a hard CPU limit (CFS quota) besides the CPU weight
    pids_max: int = 4096  # cgroups: at most this many processes/threads per task (0: no limit)
    usage_report_interval: float = 10.0  # seconds between USAGE_REPORTs to the master (0: none)
    # task stdout/stderr: rotated by the agent's log writer at this size, this many files kept per
    # stream (0: plain files, no rotation)
    log_max_size: int = attrs.field(default=10 << 20, converter=_log_size)
    log_max_files: int = 5
    ping_timeout: float = 15.0  # until the master's REGISTERED says otherwise
    registration_timeout: float = 10.0
    default_grace: float = 3.0
    executor_shutdown_grace: float = 5.0
    executor_reregister_timeout: float = 20.0  # after a restart, how long a live custom executor may take to SUBSCRIBE again
    monitor_interval: float = 0.5
    estimate_interval: float = 2.0
    # status update resends (Mesos' --status_update_retry_interval_min/max): 10 s, doubling, to 10 min
    resend_initial: float = 10.0
    resend_max: float = 600.0
    reconnect_initial: float = 0.1
    reconnect_max: float = 5.0
    fsync: bool = True
    sync_updates: str = "terminal"  # "terminal": fdatasync terminal updates before sending; "all": every update
    allow_root_tasks: bool = False  # let a task ask for CommandInfo.user = root (uid 0)
    switch_user: bool = True  # run a task without CommandInfo.user as its FrameworkInfo.user (Mesos --switch_user)
    # retention and disk (agent/disk.py): a finished sandbox stays gc_delay seconds at most, less the
    # fuller the disk (gc_disk_headroom); sandboxes measured every disk_watch_interval, a task past
    # its disk killed (enforce_disk_limit); work_dir_reserve bytes held for checkpoints
    gc_delay: float = attrs.field(default=86400.0, converter=_gc_delay)
    gc_disk_headroom: float = 0.1
    disk_watch_interval: float = 15.0
    enforce_disk_limit: bool = True
    work_dir_reserve: int = attrs.field(default=64 << 20, converter=_reserve_size)
    # GPUs (agent/gpus.py, docs/gpus.md): the NVML indices this agent may use (Mesos'
    # --nvidia_gpu_devices; None: every device NVML reports), and whether a task may take a
    # share of one device (gpus below 1) instead of whole devices only
    nvidia_gpu_devices: str | None = None
    gpu_sharing: bool = False
    # the fetcher (agent/fetcher.py): CommandInfo.uris into the sandbox before the task starts
    fetcher_cache_dir: Path | None = attrs.field(default=None, converter=attrs.converters.optional(Path))  # <work-dir>/fetcher-cache
    fetcher_cache_size: int = 2 << 30  # bytes the cache keeps (Mesos' --fetcher_cache_size, 2 GB)
    fetcher_stall_timeout: float = 60.0  # a download with no data for this long fails
    fetcher_progress_interval: float = 10.0  # a TASK_STARTING with the progress this often during a fetch
    frameworks_home: str | None = None  # where relative local URIs are taken from (Mesos' --frameworks_home)

    # TLS (protocol/tls.py): the master's CA (pinned; implies wss://), and this agent's certificate:
    # its client certificate for mTLS and the one its own HTTPS server (files, executor API) serves
    master_tls: bool = False  # --master https://... (the system trust store unless master_ca)
    master_ca: Path | None = attrs.field(default=None, converter=attrs.converters.optional(Path))
    tls_cert: Path | None = attrs.field(default=None, converter=attrs.converters.optional(Path))
    tls_key: Path | None = attrs.field(default=None, converter=attrs.converters.optional(Path))
    # authentication (agent/auth.py): this agent's credential on the channel (a Mesos credential
    # file or a bearer token), and whether its own HTTP endpoints require credentials
    credential: Path | None = attrs.field(default=None, converter=attrs.converters.optional(Path))
    token: str | None = None
    authenticate_http: bool = False
    http_credentials: Path | None = attrs.field(default=None, converter=attrs.converters.optional(Path))
    acls: Path | None = attrs.field(default=None, converter=attrs.converters.optional(Path))  # access_sandboxes

    @property
    def tls_to_master(self) -> bool:
        return self.master_tls or self.master_ca is not None

    @property
    def advertised_host(self) -> str:
        """The host the agent registers with (the master, its web UI and frameworks reach the agent's
        HTTP endpoint there): ``advertise_host`` if given, else the bind address ``host`` — unless
        that is a wildcard (``0.0.0.0``, ``::``), which nobody can connect to from elsewhere; then
        the machine's ``hostname``."""
        if self.advertise_host:
            return self.advertise_host
        if self.host in ("0.0.0.0", "::", ""):
            return self.hostname
        return self.host

    def __attrs_post_init__(self) -> None:
        if self.sync_updates not in ("terminal", "all"):
            raise ConfigError(f"--sync-updates must be terminal or all, not {self.sync_updates!r}")
        if not 0 <= self.port < 65536:
            raise ConfigError(f"--port out of range: {self.port}")
        if self.resources is not None:
            try:
                Resources.parse(self.resources)
            except ResourceError as e:
                raise ConfigError(f"--resources: {e}") from e
        if self.attributes:
            try:
                parse_attributes(self.attributes)
            except (ValueError, ResourceError) as e:
                raise ConfigError(f"--attributes: {e}") from e
        if self.nvidia_gpu_devices is not None:
            try:
                parse_device_list(self.nvidia_gpu_devices)
            except GpuConfigError as e:
                raise ConfigError(str(e)) from e
        if self.oversubscribed is not None:
            try:
                Resources.parse(self.oversubscribed)
            except ResourceError as e:
                raise ConfigError(f"--oversubscribed: {e}") from e
        if self.isolation not in ("auto", "cgroups-v2", "cgroups-v1", "psutil"):
            raise ConfigError("--isolation must be auto, cgroups-v2, cgroups-v1 or psutil")
        if self.fetcher_cache_size < 0 or self.fetcher_stall_timeout <= 0 or self.fetcher_progress_interval < 0:
            raise ConfigError("--fetcher-cache-size must be >= 0, --fetcher-stall-timeout > 0, --fetcher-progress-interval >= 0")
        if self.frameworks_home is not None and not self.frameworks_home.startswith("/"):
            raise ConfigError(f"--frameworks-home must be an absolute path, not {self.frameworks_home!r}")
        if not 0.0 <= self.gc_disk_headroom <= 1.0:
            raise ConfigError("--gc-disk-headroom must be between 0 and 1")
        if self.disk_watch_interval <= 0:
            raise ConfigError("--disk-watch-interval must be > 0")
        if self.work_dir_reserve < 0:
            raise ConfigError("--work-dir-reserve must be >= 0")
        if self.log_max_size < 0:
            raise ConfigError("--log-max-size must be >= 0 (0: no rotation)")
        if self.log_max_size and self.log_max_size < 4096:
            raise ConfigError("--log-max-size must be at least 4KB (or 0: no rotation)")
        if self.log_max_files < 1:
            raise ConfigError("--log-max-files must be >= 1")
        if self.pids_max < 0:
            raise ConfigError("--pids-max must be >= 0 (0: no limit)")
        if self.usage_report_interval < 0:
            raise ConfigError("--usage-report-interval must be >= 0 (0: no reports)")
        root = self.cgroups_root.strip("/")
        if not root or any(p in ("", ".", "..") for p in root.split("/")) or any(c.isspace() for c in root):
            raise ConfigError(f"--cgroups-root must be a relative cgroup path without whitespace, not {self.cgroups_root!r}")
        for name in ("ping_timeout", "executor_reregister_timeout", "monitor_interval", "estimate_interval", "resend_initial", "reconnect_initial"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"{name} must be > 0")
        if self.resend_max < self.resend_initial or self.reconnect_max < self.reconnect_initial:
            raise ConfigError("a backoff maximum must be >= its initial value")
        if self.credential is not None and self.token:
            raise ConfigError("give --credential or --token, not both")
        if self.authenticate_http and self.http_credentials is None:
            raise ConfigError("--authenticate-http needs --http-credentials")
        if self.acls is not None and not self.authenticate_http:
            raise ConfigError("--acls needs --authenticate-http (the ACLs decide for authenticated principals)")
        if (self.tls_cert is None) != (self.tls_key is None):
            raise ConfigError("--tls-cert and --tls-key go together")
