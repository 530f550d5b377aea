"""Pure cores must not do I/O: a module that declares ``__pure__ = True`` may not import
asyncio, aiohttp, os, time, random, socket, subprocess or threading (STYLE.md principle 1)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("protocol", "master", "agent", "frameworks")
FORBIDDEN = {"asyncio", "aiohttp", "os", "time", "random", "socket", "subprocess", "threading", "uvloop"}


def _is_pure(tree: ast.Module) -> bool:
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__pure__" for t in node.targets
        ):
            return isinstance(node.value, ast.Constant) and node.value.value is True
    return False


def _imported_roots(tree: ast.Module) -> set[str]:
    roots: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            roots.add(node.module.split(".")[0])
    return roots


def pure_modules() -> list[Path]:
    found = []
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            if _is_pure(ast.parse(path.read_text(), str(path))):
                found.append(path)
    return found


def test_pure_modules_do_no_io() -> None:
    offenders = {}
    for path in pure_modules():
        bad = _imported_roots(ast.parse(path.read_text())) & FORBIDDEN
        if bad:
            offenders[str(path.relative_to(ROOT))] = sorted(bad)
    assert offenders == {}


def test_checker_catches_an_impure_module(tmp_path: Path) -> None:
    src = "from __future__ import annotations\nimport time\n__pure__ = True\n"
    tree = ast.parse(src)
    assert _is_pure(tree)
    assert _imported_roots(tree) & FORBIDDEN == {"time"}


def test_known_cores_are_marked_pure() -> None:
    names = {str(p.relative_to(ROOT)) for p in pure_modules()}
    assert {"protocol/task_states.py", "protocol/recordio.py"} <= names
