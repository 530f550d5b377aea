"""The master's web UI (server-rendered HTML at ``/`` and ``/ui/...``); see README.md."""

from master.webui.handlers import webui_routes

__all__ = ["webui_routes"]
