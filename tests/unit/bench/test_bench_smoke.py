"""The benchmarks must not rot: each runs at a tiny size and ends with one JSON line.

The helpers of ``scripts/bench/common.py`` are checked directly; each benchmark script is run as
a subprocess (it starts and stops its own master/agents/simulated agents) with sizes that take
seconds, and its last stdout line must be a JSON object naming the benchmark.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[3]
BENCH = REPO / "scripts" / "bench"


def _load(name: str) -> ModuleType:
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    spec = importlib.util.spec_from_file_location(f"scripts.bench.{name}", BENCH / f"{name}.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


common = _load("common")


def test_percentile_interpolates_and_handles_edges() -> None:
    assert math.isnan(common.percentile([], 50))
    assert common.percentile([3.0], 99) == 3.0
    assert common.percentile([1.0, 2.0, 3.0, 4.0], 50) == pytest.approx(2.5)
    assert common.percentile(list(range(101)), 99) == pytest.approx(99.0)
    lat = common.latency_ms([0.001, 0.002, 0.003])
    assert lat["p50_ms"] == pytest.approx(2.0) and lat["n"] == 3


def test_spread_and_aggregate_take_median_min_max() -> None:
    s = common.spread([5.0, 1.0, 3.0])
    assert (s.median, s.min, s.max, s.n) == (3.0, 1.0, 5.0, 3)
    agg = common.aggregate(
        [{"rate": 10.0, "name": "a"}, {"rate": 30.0, "name": "b"}, {"rate": 20.0, "name": "c"}]
    )
    assert set(agg) == {"rate"}
    assert agg["rate"].median == 20.0
    assert "[" in str(agg["rate"])


def test_emit_json_is_one_parseable_line(capsys: pytest.CaptureFixture[str]) -> None:
    common.emit_json("unit", {"figure": common.spread([1.0, 2.0]), "path": Path("/x")})
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1
    data = json.loads(out[0])
    assert data["bench"] == "unit" and data["figure"]["median"] == 1.5 and data["machine"]["cores"] >= 1


def test_print_table_aligns_columns(capsys: pytest.CaptureFixture[str]) -> None:
    common.print_table("t", ["figure", "median"], [("rate", 1234.5), ("p99", 0.25)])
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0] == "t" and lines[1].startswith("figure") and "1,234" in lines[3]


def _run(script: str, *args: str, within: float = 100.0, env: dict[str, str] | None = None) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, str(BENCH / script), *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=within,
        env=env,
    )
    assert proc.returncode == 0, (
        f"{script} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    )
    last = proc.stdout.strip().splitlines()[-1]
    data: dict[str, Any] = json.loads(last)
    return data


def test_raw_spawn_mode_measures_processes() -> None:
    data = _run("e2e.py", "--raw-only", "--tasks", "20", "--raw-concurrency", "4", within=60)
    assert data["tasks"] == 20 and data["rate"] > 0


@pytest.mark.slow
def test_service_smoke() -> None:
    data = _run(
        "service.py", "--tasks", "500", "--latency-tasks", "50", "--dask-tasks", "0", "--raw-tasks", "50",
        "--instances", "1", "--runs", "1",
    )
    assert data["bench"] == "service"
    assert data["figures"]["service_rate"]["median"] > 0 and data["figures"]["latency_p50_ms"]["median"] > 0


@pytest.mark.slow
def test_submit_smoke() -> None:
    data = _run("submit.py", "--jobs", "3", "--runs", "1")
    assert data["bench"] == "submit" and data["figures"]["submit_to_running_p50_ms"]["median"] > 0


@pytest.mark.slow
def test_scaling_smoke() -> None:
    data = _run("scaling.py", "--max-agents", "2", "--tasks", "30", "--slots", "4", "--runs", "1")
    assert data["bench"] == "scaling" and [s["agents"] for s in data["sizes"]] == [1, 2]
    assert all(s["native_rate"]["median"] > 0 for s in data["sizes"])


@pytest.mark.slow
def test_e2e_smoke() -> None:
    data = _run("e2e.py", "--tasks", "30", "--agents", "1", "--slots", "8", "--runs", "1")
    assert data["bench"] == "e2e"
    assert data["figures"]["native_rate"]["median"] > 0
    assert data["figures"]["batch_rate"]["median"] > 0


@pytest.mark.slow
def test_master_smoke() -> None:
    data = _run(
        "master.py",
        "--agents", "10", "--tasks", "200", "--runs", "1",
        "--scale-agents", "20", "--scale-tasks", "200", "--hold-seconds", "0.5", "--latency-tasks", "5",
    )  # fmt: skip
    assert data["bench"] == "master"
    assert data["throughput"]["rate"]["median"] > 0
    assert data["scale"]["rss_peak_mb"]["median"] > 0


def test_master_stages_smoke() -> None:
    data = _run("master_stages.py", "--agents", "5", "--tasks", "80", "--warm", "40", "--runs", "1", within=60)
    assert data["bench"] == "master_stages"
    assert data["total_us_per_task"]["median"] > 0 and data["us_per_task"]["status.core"]["median"] > 0


@pytest.mark.slow
def test_allocator_smoke() -> None:
    data = _run(
        "allocator.py",
        "--agents", "40", "--frameworks", "4", "--rounds", "1", "--quota-agents", "20",
        "--small-roles", "4", "--large-roles", "2", "--add-agents", "40",
    )  # fmt: skip
    assert isinstance(data, dict)


def test_all_script_parses_and_rejects_unknown_arguments() -> None:
    script = BENCH / "all"
    assert subprocess.run(["bash", "-n", str(script)], timeout=30).returncode == 0
    helped = subprocess.run(["bash", str(script), "--help"], capture_output=True, text=True, timeout=30)
    assert helped.returncode == 0 and "--quick" in helped.stdout
    bad = subprocess.run(["bash", str(script), "--bogus"], capture_output=True, text=True, timeout=30)
    assert bad.returncode == 2 and "unknown argument" in bad.stderr


@pytest.mark.slow
def test_e2e_and_reuse_complete_on_a_machine_with_gpus(tmp_path: Path) -> None:
    """On a GPU machine (two H100s through a fake NVML) the benchmarks' agents would probe gpus:2
    and their frameworks, lacking GPU_RESOURCES, got no offer: e2e.py and reuse.py waited without
    a word. Now they keep GPUs out of their agents (and declare the capability) and complete."""
    from agent.nvml import FAKE_ENV, FakeNvml

    fake = FakeNvml.write(tmp_path / "nvml.json", [
        {"uuid": f"GPU-{i}", "name": "NVIDIA H100 80GB HBM3", "memory_mb": 81559} for i in range(2)
    ])
    env = {**os.environ, FAKE_ENV: str(fake)}
    assert common.without_gpus("cpus:1;mem:256") == "cpus:1;mem:256;gpus:0"
    assert common.without_gpus("cpus:1;gpus(ml):1") == "cpus:1;gpus(ml):1"
    data = _run("e2e.py", "--tasks", "20", "--agents", "1", "--slots", "4", "--runs", "1", "--timeout", "30",
                within=90, env=env)
    assert data["figures"]["native_rate"]["median"] > 0 and data["figures"]["batch_rate"]["median"] > 0
    assert data["figures"]["native_failed"]["median"] == 0
    data = _run("reuse.py", "--agent", "real", "--tasks", "10", "--runs", "1", "--mesos-interval", "0",
                "--within", "30", within=90, env=env)
    assert data["bench"] == "reuse" and set(data["modes"]) == {"reusable", "classic"}


@pytest.mark.slow
def test_agent_launch_bench_smoke() -> None:
    # it ends as soon as its tasks are done (its minimal master closes the agent's channel at once)
    proc = subprocess.run([sys.executable, "-m", "agent.bench_launch", "--tasks", "5", "--batch", "5", "--lone", "2"],
                          cwd=REPO, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "agora agent pipeline:" in proc.stdout and "lone tasks (2, one at a time)" in proc.stdout
