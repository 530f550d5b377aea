"""Structural rules of the framework services, checked on the source: no module of frameworks/
grows past 800 lines, both services run on the framework host, and only the host builds the
API server or the driver."""

from __future__ import annotations

import ast
from pathlib import Path

FRAMEWORKS = Path(__file__).resolve().parents[3] / "frameworks"
MAX_LINES = 800


def modules() -> list[Path]:
    return sorted(p for p in FRAMEWORKS.rglob("*.py") if "__pycache__" not in p.parts)


def test_no_module_over_800_lines() -> None:
    long = {
        str(p.relative_to(FRAMEWORKS.parent)): n
        for p in modules()
        if (n := len(p.read_text().splitlines())) > MAX_LINES
    }
    assert long == {}


def test_both_services_are_configurations_of_the_host() -> None:
    for name, cls in (("batch", "BatchService"), ("elastic", "ElasticService")):
        tree = ast.parse((FRAMEWORKS / name / "service.py").read_text())
        (service,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls]
        assert [ast.unparse(b) for b in service.bases] == ["FrameworkHost"], cls
        source = ast.unparse(service)
        # the API server, FrameworkInfo and the driver are the host's to build
        for built in ("web.AppRunner", "web.TCPSite", "FrameworkInfo(", "SchedulerDriver("):
            assert built not in source, (cls, built)
