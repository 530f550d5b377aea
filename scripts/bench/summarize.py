"""Pool the per-run figures of several benchmark runs into median [min..max].

``scripts/bench/all`` leaves one JSON line per benchmark in ``$OUT/results.jsonl``; each line
keeps its individual runs. Give this script any number of such files (or single JSON-line
outputs) and it pools the runs of each benchmark, so three ``all`` runs of three runs each give
figures over nine runs — the form ``docs/benchmarks.md`` reports::

    .venv/bin/python scripts/bench/summarize.py /tmp/agora-bench-*/results.jsonl
    .venv/bin/python scripts/bench/summarize.py --json OUT/results.jsonl     # one JSON object

Per benchmark: ``e2e`` pools ``runs``; ``master`` pools ``runs.throughput`` and ``runs.scale``;
``reuse`` pools each mode's ``runs``; any other benchmark (the allocator) pools its top-level
numbers, one value per file.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

Row = Mapping[str, Any]


def runs_of(obj: Mapping[str, Any]) -> Iterator[tuple[str, Row]]:
    """(group, one run's figures) for every run recorded in one benchmark's JSON line."""
    bench = str(obj.get("bench", "?"))
    runs = obj.get("runs")
    if bench == "e2e" and isinstance(runs, list):
        for r in runs:
            yield "e2e", r
    elif bench == "master" and isinstance(runs, Mapping):
        for phase in ("throughput", "scale"):
            for r in runs.get(phase) or []:
                yield f"master.{phase}", r
    elif bench == "reuse" and isinstance(obj.get("modes"), Mapping):
        for mode, summary in obj["modes"].items():
            for r in summary.get("runs") or []:
                yield f"reuse.{mode}", r
    else:
        yield bench, {k: v for k, v in obj.items() if _number(v)}


def _number(v: object) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def pool(lines: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, dict[str, float]]]:
    """group -> figure -> {median, min, max, n} over every run of every line."""
    values: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for obj in lines:
        for group, row in runs_of(obj):
            for k, v in row.items():
                if _number(v):
                    values[group][k].append(float(v))
    return {
        g: {
            k: {"median": statistics.median(vs), "min": min(vs), "max": max(vs), "n": len(vs)}
            for k, vs in sorted(figs.items())
        }
        for g, figs in sorted(values.items())
    }


def read_lines(paths: Iterable[Path]) -> Iterator[dict[str, Any]]:
    """Every JSON object line (with a ``bench`` key) of the given files; other lines are skipped."""
    for p in paths:
        for line in p.read_text().splitlines():
            line = line.strip()
            if not line.startswith("{"):
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(obj, dict) and "bench" in obj:
                yield obj


def _fmt(v: float) -> str:
    if abs(v) >= 100:
        return f"{v:,.0f}"
    if abs(v) >= 10:
        return f"{v:.1f}"
    return f"{v:.3g}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("files", nargs="+", type=Path, help="results.jsonl files or benchmark outputs")
    ap.add_argument("--json", action="store_true", help="print one JSON object instead of tables")
    args = ap.parse_args(argv)
    missing = [str(p) for p in args.files if not p.is_file()]
    if missing:
        print(f"summarize: no such file: {', '.join(missing)}", file=sys.stderr)
        return 2
    pooled = pool(read_lines(args.files))
    if not pooled:
        print("summarize: no benchmark JSON lines in the given files", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(pooled, separators=(",", ":")))
        return 0
    for group, figs in pooled.items():
        n = max(f["n"] for f in figs.values())
        print(f"\n{group}  ({n} run(s))")
        width = max(len(k) for k in figs)
        for k, f in figs.items():
            print(f"  {k:<{width}}  {_fmt(f['median']):>10}  [{_fmt(f['min'])}..{_fmt(f['max'])}]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
