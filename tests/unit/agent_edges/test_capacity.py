"""Capacity probing and --resources overrides (Mesos semantics: given names replace probed ones)."""

from __future__ import annotations

from pathlib import Path

import psutil
import pytest

from agent.capacity import CapacityError, apply_overrides, capacity, mem_reserve_mb, probe
from protocol.resources import Resources

PROBED = Resources.parse("cpus:8;mem:15000;disk:50000;gpus:2;ports:[31000-32000]")


def test_probe_reads_the_machine(tmp_path: Path) -> None:
    got = probe(tmp_path / "not" / "yet" / "created")
    assert got.scalar("cpus") == psutil.cpu_count()
    total_mb = psutil.virtual_memory().total // (1024 * 1024)
    assert got.scalar("mem") == total_mb - mem_reserve_mb(total_mb)
    assert 0 < got.scalar("disk") <= psutil.disk_usage(str(tmp_path)).total // (1024 * 1024)
    assert got.ports() == ((31000, 32000),)
    assert "gpus" not in got.names()


def test_mem_reserve() -> None:
    assert mem_reserve_mb(16384) == 1024
    assert mem_reserve_mb(1500) == 750
    assert probe("/", mem_reserve=0).scalar("mem") == psutil.virtual_memory().total // (
        1024 * 1024
    )


def test_overrides_replace_by_name() -> None:
    got = apply_overrides(PROBED, "cpus:4;mem:4096")
    assert got == Resources.parse("cpus:4;mem:4096;disk:50000;gpus:2;ports:[31000-32000]")


def test_reserved_override_replaces_all_of_that_name() -> None:
    got = apply_overrides(PROBED, "cpus(ml):2")
    assert got.scalar("cpus") == 2
    assert got.reserved("ml") == Resources.parse("cpus(ml):2")
    assert got.unreserved().scalar("cpus") == 0


def test_zero_override_removes_a_probed_resource() -> None:
    got = apply_overrides(PROBED, "gpus:0;ports:[5000-5001]")
    assert "gpus" not in got.names()
    assert got.ports() == ((5000, 5001),)


def test_new_names_are_added_and_none_keeps_probe() -> None:
    assert apply_overrides(PROBED, "fpgas:1").scalar("fpgas") == 1
    assert apply_overrides(PROBED, None) is PROBED
    assert apply_overrides(PROBED, Resources.of(cpus=1)).scalar("cpus") == 1


@pytest.mark.parametrize("flag", ["cpus:abc", "cpus:-1", "cpus:4;;mem", "cpus(:2"])
def test_bad_flag_is_a_typed_error(flag: str) -> None:
    with pytest.raises(CapacityError, match="bad --resources"):
        apply_overrides(PROBED, flag)


def test_capacity_combines(tmp_path: Path) -> None:
    got = capacity(tmp_path, "cpus:3;gpus:1")
    assert got.scalar("cpus") == 3 and got.scalar("gpus") == 1 and got.scalar("disk") > 0


def test_revocable_override_refused() -> None:
    with pytest.raises(CapacityError, match="revocable"):
        apply_overrides(PROBED, "cpus{REV}:2")
