"""Structural rules of the framework services, checked on the source: no module of frameworks/
grows past 800 lines, both services hold the framework host (composition, not a subclass), only
the host builds the API server or the driver, and the edges (the HTTP APIs, views, pages,
metrics, the batch service's warm instances and kept tails) get narrow ports: no module but
the wiring names a service or the host."""

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


def test_both_services_hold_the_host_and_never_subclass_it() -> None:
    for name, cls in (("batch", "BatchService"), ("elastic", "ElasticService")):
        tree = ast.parse((FRAMEWORKS / name / "service.py").read_text())
        (service,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls]
        assert [ast.unparse(b) for b in service.bases] == ["HostedService"], cls  # the accessors, not the host
        source = ast.unparse(service)
        assert "self.host = FrameworkHost(self, self," in source, cls  # the host is given the logic
        # the API server, FrameworkInfo and the driver are the host's to build
        for built in ("web.AppRunner", "web.TCPSite", "FrameworkInfo(", "SchedulerDriver("):
            assert built not in source, (cls, built)


# the modules that may name a service or the host: the host itself, each service (the
# composition root of its framework) and the entry points
WIRING = {"kit/host.py", "batch/service.py", "batch/__main__.py", "elastic/service.py", "elastic/__main__.py"}
NAMES = {"BatchService", "ElasticService", "FrameworkHost"}
MODULES = {"frameworks.batch.service", "frameworks.elastic.service"}


def test_no_edge_module_names_a_service_or_the_host() -> None:
    offenders = []
    for path in modules():
        rel = str(path.relative_to(FRAMEWORKS))
        if rel in WIRING:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                named = node.module in MODULES or bool({a.name for a in node.names} & NAMES)
            else:
                named = isinstance(node, ast.Import) and bool({a.name for a in node.names} & MODULES)
            if named:
                offenders.append(f"{rel}:{node.lineno}")
    assert offenders == [], "edges get a narrow port (batch/ports.py, elastic/ports.py), not the service"


def test_the_apis_are_given_their_ports() -> None:
    for name, api, port in (("batch", "BatchApi", "BatchPort"), ("elastic", "ElasticApi", "ElasticPort")):
        tree = ast.parse((FRAMEWORKS / name / "api.py").read_text())
        (cls,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == api]
        (init,) = [n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"]
        assert [ast.unparse(a.annotation) for a in init.args.args[1:] if a.annotation] == [port], api
