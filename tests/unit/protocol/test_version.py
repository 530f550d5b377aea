"""Agora's version constant is the package's, and the master's /version stays Mesos'."""

from __future__ import annotations

import tomllib

from frameworks.cli.common import REPO_ROOT
from master.http_api import VERSION as MESOS_API_VERSION
from protocol.version import AGORA_VERSION


def test_agora_version_is_the_packages() -> None:
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    assert project["version"] == AGORA_VERSION
    assert MESOS_API_VERSION.startswith("1.") and MESOS_API_VERSION != AGORA_VERSION
