"""The allocator's seams stay seams: outside ``sorter.py`` no module reads a sorter's private
state or builds a ``DRFSorter`` itself (the sorter comes from ``AllocatorConfig``'s factories),
and every module of the seams is pure."""

from __future__ import annotations

import ast
from pathlib import Path

ALLOCATOR = Path(__file__).resolve().parents[3] / "master" / "allocator"


def _private_slots() -> set[str]:
    tree = ast.parse((ALLOCATOR / "sorter.py").read_text())
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__slots__" for t in node.targets):
            assert isinstance(node.value, ast.Tuple)
            out |= {e.value for e in node.value.elts if isinstance(e, ast.Constant) and str(e.value).startswith("_")}
    return out


def test_no_module_reads_a_sorters_internals_or_builds_one_itself() -> None:
    private = _private_slots()
    assert {"_keys", "_clients", "_totals"} <= private
    offenders: list[str] = []
    for path in sorted(ALLOCATOR.glob("*.py")):
        if path.name == "sorter.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Attribute) and node.attr in private
                    and not (isinstance(node.value, ast.Name) and node.value.id == "self")):  # (its own state)
                offenders.append(f"{path.name}:{node.lineno} reads .{node.attr}")
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "DRFSorter":
                offenders.append(f"{path.name}:{node.lineno} builds a DRFSorter")
    assert offenders == []


def test_the_seam_modules_are_pure() -> None:
    root = ALLOCATOR.parents[1]
    for rel in ("master/allocator/sorter.py", "master/allocator/eligibility.py", "master/allocator/victims.py",
                "protocol/placement.py"):
        assert "\n__pure__ = True\n" in (root / rel).read_text(), rel


def test_the_take_backs_and_why_not_offered_ask_the_eligibility_chain() -> None:
    """``handlers.py`` (the take-backs of held offers that lost GPU or constraint eligibility)
    and ``allocator.py`` (``why_not_offered``) call no eligibility predicate directly: they run
    the chain's checks (``HELD_GPU``, ``HELD_CONSTRAINTS``) through ``why_not``."""
    offenders: list[str] = []
    for name in ("handlers.py", "allocator.py"):
        for node in ast.walk(ast.parse((ALLOCATOR / name).read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in {
                    "gpu_blocked", "excluded"}:
                offenders.append(f"{name}:{node.lineno} calls {node.func.id}")
    assert offenders == []
