"""Oversubscription (shell): feed the resource estimator and the QoS controller (the plug-ins
of ``agent.estimator`` and ``agent.qos``) with measured usage; report slack on change, evict on
QoS corrections."""

from __future__ import annotations

import logging
import os
from typing import Any

import psutil

from agent import tasks as tk
from agent.ports import Identity, LinkRef, Submit
from protocol.agent_channel import SlackEstimate
from protocol.resources import Resources

log = logging.getLogger(__name__)


class Oversubscription:
    def __init__(self, tracker: tk.TaskTracker, me: Identity, estimator: Any, qos: Any, link: LinkRef,
                 submit: Submit) -> None:
        self.tracker, self.me, self.estimator, self.qos, self.link, self.submit = tracker, me, estimator, qos, link, submit
        self.last_slack: Resources | None = None
        self._cpu_prev: dict[str, tuple[float, float]] = {}

    def reset(self) -> None:
        """A (new) master: the next estimate is sent whatever it is."""
        self.last_slack = None
        if self.estimator is not None:
            self.estimator.reset()

    def step(self, usage: dict[str, Any], now: float) -> None:
        cpu_prev = self._cpu_prev
        cpu_rate = 0.0
        for key, u in usage.items():
            prev = cpu_prev.get(key)
            cpu_prev[key] = (now, u.cpu_seconds)
            _, fid, tid = key.split("/", 2)
            t = self.tracker.get(fid, tid)
            if prev is not None and now > prev[0] and t is not None and not t.spec.revocable:
                cpu_rate += max(0.0, (u.cpu_seconds - prev[1]) / (now - prev[0]))
        for k in list(cpu_prev):
            if k not in usage:
                del cpu_prev[k]
        allocated = Resources.empty()
        revocable = []
        for t in self.tracker.active():
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

                started = t.started_at if t.started_at is not None else now
                revocable.append(RevocableTask(t.spec.task_id, t.spec.framework_id, started, r))
        link = self.link()
        if self.estimator is not None and link is not None and link.registered:
            try:
                est = self.estimator.estimate(self.me.resources, allocated, {"cpus": cpu_rate}, now)
            except Exception:
                log.exception("resource estimator failed")
                est = None
            if est is not None and est != self.last_slack:
                self.last_slack = est
                link.send(SlackEstimate(resources=est.to_mesos()))
        if self.qos is not None and revocable:
            try:
                load1 = os.getloadavg()[0] / (os.cpu_count() or 1)
                evictions = self.qos.corrections(
                    {"load1_per_core": load1, "cpu_percent": psutil.cpu_percent(None)}, revocable, now
                )
            except Exception:
                log.exception("QoS controller failed")
                evictions = []
            for ev in evictions:
                log.warning("QoS eviction of %s/%s: %s", ev.framework_id, ev.task_id, ev.reason)
                self.submit(self.tracker.handle(
                    tk.KillTask(ev.framework_id, ev.task_id, None, tk.KillReason.PREEMPTED, ev.reason), now))
