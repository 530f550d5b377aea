"""``scripts/bench/summarize.py`` pools the runs of several benchmark JSON lines."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[3]


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_summarize", REPO / "scripts" / "bench" / "summarize.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


summarize = _load()


def _write(path: Path, *objs: object) -> Path:
    path.write_text("some table line\n" + "\n".join(json.dumps(o) for o in objs) + "\n")
    return path


def test_runs_of_several_files_are_pooled_per_benchmark(tmp_path: Path) -> None:
    a = _write(
        tmp_path / "a.jsonl",
        {"bench": "e2e", "runs": [{"native_ratio": 0.4, "native_failed": 0}, {"native_ratio": 0.6, "native_failed": 0}]},
        {"bench": "master", "runs": {"throughput": [{"rate": 5000.0}], "scale": [{"rss_peak_mb": 500.0}]}},
        {"bench": "reuse", "modes": {"reusable": {"runs": [{"p50_ms": 4.0}, {"p50_ms": 6.0}]}}},
        {"bench": "allocator", "decline_s": 0.09, "sizes": {"agents": 10}},
    )
    b = _write(
        tmp_path / "b.jsonl",
        {"bench": "e2e", "runs": [{"native_ratio": 0.5, "native_failed": 1}]},
        {"bench": "master", "runs": {"throughput": [{"rate": 7000.0}, {"rate": 6000.0}], "scale": []}},
        {"bench": "allocator", "decline_s": 0.07},
    )
    pooled = summarize.pool(summarize.read_lines([a, b]))
    assert pooled["e2e"]["native_ratio"] == {"median": 0.5, "min": 0.4, "max": 0.6, "n": 3}
    assert pooled["e2e"]["native_failed"]["max"] == 1.0
    assert pooled["master.throughput"]["rate"] == {"median": 6000.0, "min": 5000.0, "max": 7000.0, "n": 3}
    assert pooled["master.scale"]["rss_peak_mb"]["n"] == 1
    assert pooled["reuse.reusable"]["p50_ms"]["median"] == 5.0
    assert pooled["allocator"]["decline_s"] == {"median": 0.08, "min": 0.07, "max": 0.09, "n": 2}
    assert "sizes" not in pooled["allocator"]


def test_cli_prints_tables_and_refuses_missing_or_empty_input(tmp_path: Path, capsys) -> None:
    f = _write(tmp_path / "r.jsonl", {"bench": "e2e", "runs": [{"native_ratio": 0.5}]})
    assert summarize.main([str(f)]) == 0
    out = capsys.readouterr().out
    assert "e2e  (1 run(s))" in out and "native_ratio" in out
    assert summarize.main([str(tmp_path / "nope.jsonl")]) == 2
    empty = tmp_path / "empty.txt"
    empty.write_text("no json here\n")
    assert summarize.main([str(empty)]) == 1
