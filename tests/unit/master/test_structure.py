"""Structural rules of the master package, checked on the source (a reviewer's checklist that
cannot drift): edges never name the service, the core's records change state only through
their tables, and no module of master/ or protocol/ grows past 800 lines."""

from __future__ import annotations

import ast
from pathlib import Path

MASTER = Path(__file__).resolve().parents[3] / "master"
WIRING = {"main.py", "service.py"}  # the process and its wiring
MAX_LINES = 800


def modules() -> list[Path]:
    return sorted(p for p in MASTER.rglob("*.py") if "__pycache__" not in p.parts)


def test_only_the_wiring_imports_the_service() -> None:
    offenders = []
    for path in modules():
        if path.parent == MASTER and path.name in WIRING:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module == "master.service":
                offenders.append(f"{path.relative_to(MASTER.parent)}:{node.lineno}")
    assert offenders == [], "edges get a port (master/ports.py), not MasterService"


def test_no_direct_state_assignment_in_the_core() -> None:
    """``x.state = ...`` / ``x.phase = ...`` only as ``LIFECYCLE.move(...)`` or inside the
    records' ``move`` / ``resync`` (``master/records.py``); test support and the service (its
    ``self.state = MasterState(...)``) are not the core."""
    allowed = {"records.py", "testing.py", "testing_agent.py", "service.py"}
    offenders = []
    for path in modules():
        if path.name in allowed:
            continue
        tree = ast.parse(path.read_text())
        inits = {id(n) for f in ast.walk(tree) if isinstance(f, ast.FunctionDef) and f.name == "__init__" for n in ast.walk(f)}
        for node in ast.walk(tree):
            if not isinstance(node, ast.Assign) or id(node) in inits:  # a record's first state
                continue
            value = node.value
            if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr == "move":
                continue  # through a table
            for t in node.targets:
                for el in t.elts if isinstance(t, ast.Tuple) else [t]:
                    if isinstance(el, ast.Attribute) and el.attr in ("state", "phase"):
                        offenders.append(f"{path.relative_to(MASTER.parent)}:{node.lineno}")
    assert offenders == []


def test_no_module_over_800_lines() -> None:
    """In ``master/`` and ``protocol/`` (the codec is split by concern: ``protocol/codec*.py``)."""
    files = [*modules(), *sorted((MASTER.parent / "protocol").rglob("*.py"))]
    big = {str(p.relative_to(MASTER.parent)): n for p in files if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert big == {}
