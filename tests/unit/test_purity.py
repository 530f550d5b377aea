"""Pure cores must not do I/O: a module that declares ``__pure__ = True`` may not import, directly or
through any of Agora's own modules it imports (transitively), a module that does I/O: asyncio,
aiohttp, os, time, random, socket, subprocess, threading, ssl, sqlite3 and the like."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("protocol", "master", "agent", "frameworks")
FORBIDDEN = frozenset(
    {
        "asyncio", "aiohttp", "os", "time", "random", "socket", "subprocess", "threading", "uvloop",
        "ssl", "sqlite3", "aiosqlite", "kazoo", "psutil", "pynvml", "shutil", "signal", "select",
        "selectors", "multiprocessing", "tempfile", "requests", "urllib.request", "http.client",
    }
)  # fmt: skip


def _is_pure(tree: ast.Module) -> bool:
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__pure__" for t in node.targets
        ):
            return isinstance(node.value, ast.Constant) and node.value.value is True
    return False


def _imported_names(tree: ast.Module) -> set[str]:
    """Every absolute module name the module imports, and for ``from m import n`` also ``m.n``
    (which is a module when ``n`` is a submodule)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def _forbidden(name: str) -> str | None:
    parts = name.split(".")
    for i in range(1, len(parts) + 1):
        if ".".join(parts[:i]) in FORBIDDEN:
            return ".".join(parts[:i])
    return None


def _source_of(module: str, root: Path = ROOT) -> Path | None:
    """The file of one of Agora's own modules, or None (a third-party module, or a name that is
    not a module, such as a class imported with ``from m import C``)."""
    if module.split(".")[0] not in PACKAGES:
        return None
    base = root.joinpath(*module.split("."))
    for candidate in (base / "__init__.py", base.with_suffix(".py")):
        if candidate.is_file():
            return candidate
    return None


def io_imports(path: Path, root: Path = ROOT) -> dict[str, list[str]]:
    """The forbidden modules ``path`` reaches, each with the chain of Agora modules leading to it."""
    chains: dict[Path, list[str]] = {path: [str(path.relative_to(root))]}
    todo = [path]
    found: dict[str, list[str]] = {}
    while todo:
        current = todo.pop()
        for name in sorted(_imported_names(ast.parse(current.read_text(), str(current)))):
            bad = _forbidden(name)
            if bad is not None:
                found.setdefault(bad, chains[current])
                continue
            source = _source_of(name, root)
            if source is not None and source not in chains:
                chains[source] = [*chains[current], str(source.relative_to(root))]
                todo.append(source)
    return found


def pure_modules() -> list[Path]:
    found = []
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            if _is_pure(ast.parse(path.read_text(), str(path))):
                found.append(path)
    return found


def test_pure_modules_do_no_io_even_transitively() -> None:
    offenders = {
        str(path.relative_to(ROOT)): {bad: " -> ".join(chain) for bad, chain in found.items()}
        for path in pure_modules()
        if (found := io_imports(path))
    }
    assert offenders == {}


def test_checker_catches_an_impure_module(tmp_path: Path) -> None:
    (tmp_path / "protocol").mkdir()
    (tmp_path / "protocol" / "__init__.py").write_text("")
    (tmp_path / "protocol" / "core.py").write_text(
        "from __future__ import annotations\nfrom protocol import helper\n__pure__ = True\n"
    )
    (tmp_path / "protocol" / "helper.py").write_text("import ssl\nfrom urllib.parse import quote\n")
    core = tmp_path / "protocol" / "core.py"
    assert _is_pure(ast.parse(core.read_text()))
    assert io_imports(core, tmp_path) == {"ssl": ["protocol/core.py", "protocol/helper.py"]}


def test_known_cores_are_marked_pure() -> None:
    names = {str(p.relative_to(ROOT)) for p in pure_modules()}
    assert {"protocol/task_states.py", "protocol/recordio.py", "master/core_base.py"} <= names
