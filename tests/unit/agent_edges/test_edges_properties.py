"""Properties (hypothesis, modest example counts): estimates are bounded, QoS is rate-limited,
sandbox path resolution never leaves the root."""

from __future__ import annotations

import itertools
import os
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent.estimator import make_estimator
from agent.files import SandboxFiles, _Refused
from agent.qos import RevocableTask, make_qos
from protocol.resources import Resources

TOTAL = Resources.of(cpus=16, mem=65536)
cpus = st.floats(min_value=0, max_value=16, allow_nan=False).map(lambda v: round(v, 3))
usage = st.one_of(st.floats(allow_nan=True, allow_infinity=True), cpus)


@settings(max_examples=60, deadline=None)
@given(
    steps=st.lists(st.tuples(cpus, usage, st.floats(min_value=0, max_value=100)), min_size=1, max_size=15),
    margin=st.floats(min_value=0, max_value=0.9),
)
def test_usage_estimate_is_revocable_nonnegative_and_within_allocation(
    steps: list[tuple[float, float, float]], margin: float
) -> None:
    est = make_estimator("usage", half_life=5.0, safety_margin=margin, granularity=0.1)
    now = 0.0
    last = None
    for alloc, used, dt in steps:
        now += dt
        got = est.estimate(TOTAL, Resources.of(cpus=alloc), {"cpus": used}, now)
        if got is None:
            assert last is not None  # "unchanged" only after a first report
            continue
        assert got == got.revocable()
        assert got.names() <= {"cpus"}
        assert 0 <= got.scalar("cpus") <= alloc
        assert got != last
        last = got


@settings(max_examples=60, deadline=None)
@given(
    loads=st.lists(
        st.tuples(st.floats(min_value=0, max_value=4, allow_nan=False), st.floats(min_value=0, max_value=10)),
        max_size=30,
    ),
    ntasks=st.integers(min_value=0, max_value=5),
    cooldown=st.floats(min_value=0.5, max_value=20),
)
def test_load_qos_evicts_known_tasks_at_most_once_per_cooldown(
    loads: list[tuple[float, float]], ntasks: int, cooldown: float
) -> None:
    q = make_qos("load", threshold=1.0, window=3.0, cooldown=cooldown)
    tasks = [RevocableTask(f"t{i}", "fw", float(i)) for i in range(ntasks)]
    now = 0.0
    evicted: list[tuple[float, str]] = []
    for load, dt in loads:
        now += dt
        out = q.corrections({"load1_per_core": load}, tasks, now)
        assert len(out) <= 1
        for e in out:
            assert load > 1.0
            assert e.task_id in {t.task_id for t in tasks}
            evicted.append((now, e.task_id))
    assert len({t for _, t in evicted}) == len(evicted)  # never the same task twice
    times = [t for t, _ in evicted]
    assert all(b - a >= cooldown for a, b in itertools.pairwise(times))


segment = st.sampled_from(
    ["..", ".", "", "a", "sub", "link-out", "link-in", "etc", "passwd", "x y", "%2e%2e"]
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(parts=st.lists(segment, max_size=6), absolute=st.booleans())
def test_resolution_never_leaves_the_root(tmp_path: Path, parts: list[str], absolute: bool) -> None:
    root = tmp_path / "root"
    if not root.exists():
        (root / "a" / "sub").mkdir(parents=True)
        (root / "a" / "link-out").symlink_to("/etc")
        (root / "a" / "link-in").symlink_to(root / "a" / "sub")
    files = SandboxFiles(root)
    requested = "/".join(parts)
    if absolute:
        requested = str(root) + "/" + requested
    try:
        real = files.resolve(requested)
    except _Refused as e:
        assert e.status in (400, 403, 404)
        return
    real_root = os.path.realpath(root)
    assert real == real_root or real.startswith(real_root + "/")
