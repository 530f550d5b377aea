"""The master's web UI (server-rendered HTML at ``/`` and ``/ui/...``); see README.md."""

from master.webui.handlers import WebUI, add_webui

__all__ = ["WebUI", "add_webui"]
