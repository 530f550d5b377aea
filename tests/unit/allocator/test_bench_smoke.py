"""The allocator benchmark script runs (tiny sizes) and ends with its JSON line."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[3] / "scripts" / "bench" / "allocator.py"


def test_bench_runs_small(capsys: pytest.CaptureFixture[str]) -> None:
    spec = importlib.util.spec_from_file_location("bench_allocator", SCRIPT)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    argv = ["--agents", "60", "--frameworks", "6", "--rounds", "3", "--quota-agents", "30",
            "--small-roles", "20", "--large-roles", "5", "--add-agents", "50"]
    assert mod.main(argv) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    figures = json.loads(last)
    assert figures["bench"] == "allocator"
    assert figures["decline_offers_per_pass"] == 60
    assert figures["quota_roles_unsatisfied"] == 0
    assert figures["add_agents_cpu_s"] >= 0
    assert figures["decline_pass_cpu_min_s"] <= figures["decline_pass_cpu_s"] <= figures["decline_pass_cpu_max_s"]
