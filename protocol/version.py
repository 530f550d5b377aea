"""Agora's own version: what ``agora --version``, the web UI and the agents report.

The master's ``/version`` and ``/state`` ``version`` keep the Mesos API version it speaks
(``master.http_api.VERSION``), which Mesos clients read to decide what they may ask; this one is
the product's (``pyproject.toml``'s ``version``, checked by tests/unit/protocol/test_version.py).
"""

AGORA_VERSION = "0.1.0"
