"""Oversubscription (shell): feed the resource estimator and the QoS controller (the plug-ins
of ``agent.estimator`` and ``agent.qos``) with measured usage; report slack on change, evict on
QoS corrections."""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING, Any

import psutil

from agent import tasks as tk
from protocol.agent_channel import SlackEstimate
from protocol.resources import Resources

if TYPE_CHECKING:
    from agent.service import AgentService

log = logging.getLogger(__name__)


def step(svc: AgentService, usage: dict[str, Any], cpu_prev: dict[str, tuple[float, float]], now: float) -> None:
    cpu_rate = 0.0
    for key, u in usage.items():
        prev = cpu_prev.get(key)
        cpu_prev[key] = (now, u.cpu_seconds)
        _, fid, tid = key.split("/", 2)
        t = svc.tracker.get(fid, tid)
        if prev is not None and now > prev[0] and t is not None and not t.spec.revocable:
            cpu_rate += max(0.0, (u.cpu_seconds - prev[1]) / (now - prev[0]))
    for k in list(cpu_prev):
        if k not in usage:
            del cpu_prev[k]
    allocated = Resources.empty()
    revocable = []
    for t in svc.tracker.active():
        info = t.spec.info
        if info is None:
            continue
        try:
            r = Resources.from_mesos(info.resources)
        except ValueError:
            continue
        allocated = allocated + r.non_revocable()
        if t.spec.revocable:
            from agent.qos import RevocableTask

            revocable.append(
                RevocableTask(t.spec.task_id, t.spec.framework_id, t.started_at if t.started_at is not None else now, r)
            )
    if svc.estimator is not None and svc.channel is not None and svc.channel.registered:
        try:
            est = svc.estimator.estimate(svc.resources, allocated, {"cpus": cpu_rate}, now)
        except Exception:
            log.exception("resource estimator failed")
            est = None
        if est is not None and est != svc.last_slack:
            svc.last_slack = est
            svc.channel.send(SlackEstimate(resources=est.to_mesos()))
    if svc.qos is not None and revocable:
        try:
            load1 = os.getloadavg()[0] / (os.cpu_count() or 1)
            evictions = svc.qos.corrections(
                {"load1_per_core": load1, "cpu_percent": psutil.cpu_percent(None)}, revocable, now
            )
        except Exception:
            log.exception("QoS controller failed")
            evictions = []
        for ev in evictions:
            log.warning("QoS eviction of %s/%s: %s", ev.framework_id, ev.task_id, ev.reason)
            svc.submit(
                svc.tracker.handle(
                    tk.KillTask(ev.framework_id, ev.task_id, None, tk.KillReason.PREEMPTED, ev.reason), now
                )
            )
