"""Per-task usage figures (protocol.usage): samples, the final figures, the terminal status's
labels and back, and the one-line text the CLI and the web UI print."""

from __future__ import annotations

from protocol.mesos_common import Label
from protocol.usage import TaskUsage, from_labels, usage_from_json, usage_text

MB = 1024 * 1024


def test_samples_keep_cpu_monotonic_and_the_peak() -> None:
    u = TaskUsage().sampled(1.0, 10 * MB, 1.0).sampled(0.5, 30 * MB, 2.0).sampled(2.0, 5 * MB, 3.0)
    assert u == TaskUsage(cpu_seconds=2.0, mem_rss_bytes=5 * MB, mem_peak_bytes=30 * MB, timestamp=3.0)
    u = u.with_disk(7 * MB, 4.0).ended(2.5, 40 * MB, 5.0)
    assert u == TaskUsage(cpu_seconds=2.5, mem_rss_bytes=0, mem_peak_bytes=40 * MB, disk_used_bytes=7 * MB, timestamp=5.0)
    assert TaskUsage(cpu_seconds=3.0, mem_peak_bytes=9).ended(None, None, 1.0) == TaskUsage(3.0, 0, 9, None, 1.0)


def test_final_figures_travel_as_labels() -> None:
    u = TaskUsage(cpu_seconds=1.23456, mem_peak_bytes=42 * MB, disk_used_bytes=3 * MB)
    assert u.labels() == (Label("cpu_seconds", "1.235"), Label("mem_peak_bytes", str(42 * MB)),
                          Label("disk_used_bytes", str(3 * MB)))
    back = from_labels((Label("exit_code", "0"), *u.labels()), timestamp=9.0)
    assert back == TaskUsage(cpu_seconds=1.235, mem_peak_bytes=42 * MB, disk_used_bytes=3 * MB, timestamp=9.0)
    assert TaskUsage(cpu_seconds=1.0).labels() == (Label("cpu_seconds", "1.000"), Label("mem_peak_bytes", "0"))


def test_labels_without_usage_or_malformed_are_none() -> None:
    assert from_labels([Label("exit_code", "0")]) is None
    assert from_labels([Label("cpu_seconds", "fast")]) is None
    assert from_labels([Label("cpu_seconds", "nan")]) is None
    assert from_labels([Label("cpu_seconds", "-1")]) is None
    assert from_labels([Label("mem_peak_bytes", "12"), Label("disk_used_bytes", "x")]) is None
    assert from_labels([Label("mem_peak_bytes", "12")]) == TaskUsage(mem_peak_bytes=12)


def test_json_and_text() -> None:
    u = TaskUsage(cpu_seconds=1.25, mem_rss_bytes=12 * MB, mem_peak_bytes=20 * MB, disk_used_bytes=MB, timestamp=3.5)
    assert u.to_json() == {"cpu_seconds": 1.25, "mem_rss_bytes": 12 * MB, "mem_peak_bytes": 20 * MB,
                           "disk_used_bytes": MB, "timestamp": 3.5}
    assert usage_from_json(u.to_json()) == u
    assert usage_from_json({"cpu_seconds": "x"}) is None and usage_from_json(None) is None
    assert usage_text(u, running=True) == "cpu 1.25 s, mem 12.0 MB (peak 20.0 MB), disk 1.0 MB"
    assert usage_text(TaskUsage(cpu_seconds=0.5, mem_peak_bytes=MB), running=False) == "cpu 0.50 s, peak mem 1.0 MB"
