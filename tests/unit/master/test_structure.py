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


BOOKS = {
    "framework_book.py": "FrameworkBook", "task_book.py": "TaskBook", "agents.py": "AgentBook",
    "offer_book.py": "OfferBook", "maintenance_rules.py": "MaintenanceRules", "accept.py": "AcceptBook",
    "operator_events.py": "OperatorFeed",
}  # fmt: skip


def test_the_core_is_composed_of_books_not_a_mixin_chain() -> None:
    """Each book is a plain class holding the core as its port; none imports ``master.state``;
    ``MasterState``'s one base is ``CoreData``, which holds records only (``__init__``)."""
    for name, cls in BOOKS.items():
        tree = ast.parse((MASTER / name).read_text())
        (node,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls]
        assert node.bases == [], f"{cls} inherits"
        imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        assert "master.state" not in imported, f"{name} imports master.state"
    state = ast.parse((MASTER / "state.py").read_text())
    (ms,) = [n for n in state.body if isinstance(n, ast.ClassDef) and n.name == "MasterState"]
    assert [b.id for b in ms.bases if isinstance(b, ast.Name)] == ["CoreData"]
    base = ast.parse((MASTER / "core_base.py").read_text())
    (cd,) = [n for n in base.body if isinstance(n, ast.ClassDef) and n.name == "CoreData"]
    assert cd.bases == [] and [f.name for f in cd.body if isinstance(f, ast.FunctionDef)] == ["__init__"]
