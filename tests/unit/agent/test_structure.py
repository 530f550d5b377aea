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


def _class(module: str, name: str) -> ast.ClassDef:
    tree = ast.parse((AGENT / module).read_text())
    (cls,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name]
    return cls


def _fields(cls: ast.ClassDef) -> dict[str, str]:
    return {ast.unparse(n.target): ast.unparse(n.annotation) for n in cls.body if isinstance(n, ast.AnnAssign)}


def test_the_executor_glue_and_recovery_are_given_narrow_ports() -> None:
    glue = _class("executors.py", "ExecutorGlue")
    (init,) = [n for n in glue.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"]
    assert [ast.unparse(a.annotation) for a in init.args.args[1:] if a.annotation] == ["ExecutorSpawnPort", "StatusPort"]
    assert list(_fields(_class("recovery.py", "RecoveryParts")).values()) == [
        "StatusPort", "RecoveryProcesses", "RecoveryStart",
    ]
    # the master link's side sees the cores through the same port, not the tracker and manager
    link = _class("master_link.py", "MasterLink")
    (init,) = [n for n in link.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"]
    annotations = [ast.unparse(a.annotation) for a in init.args.args[1:] if a.annotation]
    assert "StatusPort" in annotations
    assert not any(c in a for a in annotations for c in ("TaskTracker", "StatusUpdateManager", "Identity"))


# the service's parts by their concrete classes: a port names a protocol of what its users call
CONCRETE = {"TaskTracker", "StatusUpdateManager", "Checkpoint", "Isolator", "Launcher", "Fetcher", "UsageBook",
            "LogWriterClient", "AgentService", "GpuBook", "TaskProcesses", "Journal", "Oversubscription", "SandboxGC",
            "Reserve", "MonitorIsolator", "CgroupV2Isolator"}


def _names(cls: ast.ClassDef) -> set[str]:
    """Every name the fields' annotations use."""
    return {
        n.id for a in cls.body if isinstance(a, ast.AnnAssign) for n in ast.walk(a.annotation) if isinstance(n, ast.Name)
    }


def test_the_ports_name_protocols_not_the_services_parts() -> None:
    for name in ("StatusPort", "ExecutorSpawnPort", "RecoveryProcesses", "ProcessPort", "MonitorPort"):
        assert _names(_class("ports.py", name)) & CONCRETE == set(), name
    # the read-only views are handed the GPU book to read (``/state``'s gpus)
    assert _names(_class("ports.py", "AgentView")) & CONCRETE == {"GpuBook"}
    # recovery reads the whole checkpoint back: it is its to read
    assert _names(_class("recovery.py", "RecoveryStart")) & CONCRETE == {"Checkpoint"}


def _init_annotations(module: str, name: str) -> list[str]:
    (init,) = [n for n in _class(module, name).body if isinstance(n, ast.FunctionDef) and n.name == "__init__"]
    return [ast.unparse(a.annotation) for a in init.args.args[1:] if a.annotation]


def test_the_task_processes_and_the_monitor_are_given_narrow_ports() -> None:
    assert _init_annotations("processes.py", "TaskProcesses") == ["StatusPort", "ProcessPort"]
    assert _init_annotations("monitor.py", "Monitor") == ["AgentConfig", "StatusPort", "MonitorPort"]
    # each port's fields are protocols (or callables returning one), the metrics, a worker pool
    ports = ast.parse((AGENT / "ports.py").read_text())
    protocols = {
        n.name for n in ports.body if isinstance(n, ast.ClassDef) and any(ast.unparse(b) == "Protocol" for b in n.bases)
    }
    allowed = protocols | {"Metrics", "Callable", "None", "concurrent"}
    for port in ("ProcessPort", "MonitorPort"):
        names = _names(_class("ports.py", port))
        assert names <= allowed, (port, names - allowed)
        assert names & protocols, port
    # neither module imports the service's concrete parts to be handed them (the task processes own
    # their launcher; a psutil-only isolator's cgroups are freed inline)
    for module in ("processes.py", "monitor.py"):
        imported = {
            a.asname or a.name for n in ast.parse((AGENT / module).read_text()).body
            if isinstance(n, ast.ImportFrom) for a in n.names
        }
        assert imported & (CONCRETE - {"Launcher", "MonitorIsolator"}) == set(), module
