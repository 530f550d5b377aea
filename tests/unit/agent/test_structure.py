"""Structural rules of the agent package, checked on the source: only the entry points name the
service (every other module gets its narrow dependencies, agent/ports.py), the service stays a
composition root, and no module grows past 800 lines."""

from __future__ import annotations

import ast
from pathlib import Path

AGENT = Path(__file__).resolve().parents[3] / "agent"
# the process (main.py), the composition root itself, and the launch benchmark that runs one
WIRING = {"main.py", "service.py", "bench_launch.py"}
MAX_LINES = 800


def modules() -> list[Path]:
    return sorted(p for p in AGENT.rglob("*.py") if "__pycache__" not in p.parts)


def test_only_the_entry_points_import_the_service() -> None:
    offenders = []
    for path in modules():
        if path.name in WIRING:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module == "agent.service":
                offenders.append(f"{path.relative_to(AGENT.parent)}:{node.lineno}")
    assert offenders == [], "modules get narrow dependencies (agent/ports.py), not AgentService"


def test_the_service_is_a_composition_root() -> None:
    assert len((AGENT / "service.py").read_text().splitlines()) < 400


def test_no_module_over_800_lines() -> None:
    big = {str(p.relative_to(AGENT.parent)): n for p in modules() if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert big == {}
