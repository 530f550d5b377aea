"""What the agent offers and with what it estimates (shell, at start): its resources (probed,
or ``--resources``), attributes, GPU devices (NVML, ``--nvidia-gpu-devices``, ``gpus`` in
``--resources``), the resource estimator and the QoS controller."""

from __future__ import annotations

import logging
from typing import Any

import attrs

from agent import nvml
from agent.capacity import capacity, mentioned_names
from agent.config import AgentConfig
from agent.gpus import GpuBook, GpuConfigError, choose_devices, gpu_attributes, parse_device_list
from agent.recovery import StartupError
from protocol.resources import Resources, parse_attributes

log = logging.getLogger(__name__)


@attrs.frozen
class Plugins:
    resources: Resources
    attributes: dict[str, str | float]
    gpus: GpuBook
    estimator: Any
    qos: Any


def build(cfg: AgentConfig) -> Plugins:
    """Capacity and GPUs first: a bad device selection stops the start (``StartupError``)."""
    resources = capacity(cfg.work_dir, cfg.resources)
    attributes: dict[str, str | float] = parse_attributes(cfg.attributes) if cfg.attributes else {}
    resources, gpus = _gpus(cfg, resources, attributes)
    estimator: Any = None
    qos: Any = None
    try:
        from agent.estimator import make_estimator
        from agent.qos import make_qos

        opts: dict[str, Any] = {}
        if cfg.resource_estimator == "fixed":
            opts["oversubscribed"] = cfg.oversubscribed or ""
        estimator = make_estimator(cfg.resource_estimator, **opts)
        qopts: dict[str, Any] = {}
        if cfg.qos_controller == "load":
            qopts = {"threshold": cfg.qos_threshold, "window": cfg.qos_window}
        qos = make_qos(cfg.qos_controller, **qopts)
    except ImportError:  # pragma: no cover - plug-ins ship with the agent
        estimator = qos = None
    return Plugins(resources, attributes, gpus, estimator, qos)


def _gpus(cfg: AgentConfig, resources: Resources, attributes: dict[str, str | float]) -> tuple[Resources, GpuBook]:
    """The GPU devices this agent uses: the ``gpus`` resource, the ``gpu_*`` attributes and the book."""
    given = resources.scalar("gpus") if cfg.resources and "gpus" in mentioned_names(cfg.resources) else None
    requested = parse_device_list(cfg.nvidia_gpu_devices) if cfg.nvidia_gpu_devices is not None else None
    try:
        known = nvml.machine_devices()
    except nvml.NvmlError as e:
        if requested is not None or given:
            raise StartupError(str(e)) from e
        log.warning("%s: this agent uses no GPUs", e)
        known = None
    try:
        devices = choose_devices(known, requested, given)
    except GpuConfigError as e:
        raise StartupError(str(e)) from e
    if given is None and devices:
        resources = resources.without("gpus") + Resources.of(gpus=len(devices))
    for name, value in gpu_attributes(devices).items():
        attributes.setdefault(name, value)  # the operator's --attributes win
    if devices:
        log.info("GPUs: %s", ", ".join(f"{d.index} ({d.model or 'declared'}, {d.uuid})" for d in devices))
    return resources, GpuBook(devices, sharing=cfg.gpu_sharing)
