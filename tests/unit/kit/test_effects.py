"""One effect vocabulary: the batch and elastic cores speak the kit's effects, not copies."""

from __future__ import annotations

import ast
from pathlib import Path

import attrs
import pytest

from frameworks.batch import core as batch_core
from frameworks.client.demand import Demand
from frameworks.elastic import effects as elastic_effects
from frameworks.kit import effects as kit
from protocol.resources import Resources

SHARED = ("Launch", "Kill", "Decline", "Persist", "Revive", "DeclareDemand")


@pytest.mark.parametrize("name", SHARED)
def test_both_frameworks_use_the_kit_classes(name: str) -> None:
    assert getattr(batch_core, name) is getattr(kit, name)
    assert getattr(elastic_effects, name) is getattr(kit, name)
    assert batch_core.Suppress is kit.Suppress


def test_effects_are_values() -> None:
    launch = kit.Launch("o1", "a1", ("t1", "t2"))
    assert launch == kit.Launch("o1", "a1", ("t1", "t2")) and hash(launch) == hash(
        kit.Launch("o1", "a1", ("t1", "t2"))
    )
    assert launch != kit.Launch("o1", "a1", ("t1",))
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        launch.offer_id = "o2"  # type: ignore[misc]
    demand = kit.DeclareDemand((("job-1", Demand(shape=Resources.of(cpus=1.0), count=2)),))
    assert demand.demands[0][1].count == 2
    assert kit.Revive() == kit.Revive() and kit.Suppress() == kit.Suppress()
    assert kit.Kill("t", None, "why") != kit.Kill("t", "a", "why")


def test_no_framework_defines_its_own_copy() -> None:
    """The shared effects are defined once, in frameworks/kit/effects.py."""
    root = Path(__file__).resolve().parents[3] / "frameworks"
    home = root / "kit" / "effects.py"
    copies = [
        f"{path.relative_to(root)}: {node.name}"
        for path in sorted(root.rglob("*.py"))
        if path != home
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ClassDef) and node.name in (*SHARED, "Suppress")
    ]
    assert copies == []
