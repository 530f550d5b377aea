"""Warm service instances: many short tasks through one long-running process per slot.

The worker side is ``frameworks.service.worker`` (``agora_service``, ``service``); see README.md."""

from frameworks.service.worker import Task, agora_service, serve, service

__all__ = ["Task", "agora_service", "serve", "service"]
