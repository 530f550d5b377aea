"""The EDL simulation on a small trace: the real allocator core and the internal slot model give
the same schedule, every job finishes, and elastic beats static gang scheduling."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[3] / "scripts" / "sim" / "edl.py"


@pytest.fixture(scope="module")
def edl() -> ModuleType:
    spec = importlib.util.spec_from_file_location("edl_sim", SCRIPT)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["edl_sim"] = mod
    spec.loader.exec_module(mod)
    return mod


def test_allocator_and_slot_models_agree_and_elastic_wins(edl: ModuleType) -> None:
    cfg = edl.TraceConfig(seed=3, jobs=60, agents=32, max_lo=2, max_hi=32, load=1.1)
    trace = edl.make_trace(cfg)
    results = {}
    for model in ("slots", "allocator"):
        for mode in ("static", "elastic"):
            results[model, mode] = edl.simulate(trace, mode, edl.MODELS[model](cfg), rescale_cost=10.0)
    for mode in ("static", "elastic"):
        a, b = results["slots", mode], results["allocator", mode]
        assert (a.utilization, a.pending_avg, a.jct_avg, a.makespan) == pytest.approx(
            (b.utilization, b.pending_avg, b.jct_avg, b.makespan)
        )
    s, e = results["allocator", "static"], results["allocator", "elastic"]
    assert e.utilization > s.utilization
    assert e.pending_avg < 0.5 * s.pending_avg
    assert 0.0 < e.utilization <= 1.0 and all(0.0 <= u <= 1.0 + 1e-9 for _, u in e.timeline(e.makespan))


def test_main_prints_a_final_json_line(edl: ModuleType, capsys: pytest.CaptureFixture[str]) -> None:
    assert edl.main(["--seed", "2", "--jobs", "40", "--agents", "16", "--model", "slots"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    summary = json.loads(out[-1])
    assert summary["jobs"] == 40 and set(summary) >= {"static", "elastic", "pending_reduction"}
    assert "util(window)" in "\n".join(out)
