"""``--role_sorter`` / ``--framework_sorter`` (Mesos' flag names; ``--role-sorter`` too): ``drf``
(the default) or ``age``; an unknown value stops the start with a clear error; the allocator the
master builds gets the named sorters."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from master.allocator.sorter import SORTERS, AgeSorter, DRFSorter, sorter_named
from master.config import ConfigError, allocator_config, load
from master.main import main


def test_both_spellings_parse_into_the_config() -> None:
    ctx = main.make_context("agora-master", ["--framework_sorter=age", "--role-sorter", "drf"])
    assert (ctx.params["framework_sorter"], ctx.params["role_sorter"]) == ("age", "drf")
    ctx = main.make_context("agora-master", ["--framework-sorter", "drf", "--role_sorter=age"])
    assert (ctx.params["framework_sorter"], ctx.params["role_sorter"]) == ("drf", "age")
    ctx = main.make_context("agora-master", [])
    assert (ctx.params["framework_sorter"], ctx.params["role_sorter"]) == (None, None)


def test_the_default_is_drf_and_age_is_taken() -> None:
    cfg = load(None)
    assert (cfg.role_sorter, cfg.framework_sorter) == ("drf", "drf")
    ac = allocator_config(cfg, "m1")
    assert (ac.role_sorter, ac.framework_sorter) == (DRFSorter, DRFSorter)
    ac = allocator_config(load(None, framework_sorter="age"), "m1")
    assert (ac.role_sorter, ac.framework_sorter, ac.offer_id_prefix) == (DRFSorter, AgeSorter, "m1")
    assert sorted(SORTERS) == ["age", "drf"]


def test_an_unknown_sorter_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"^--role_sorter: unknown sorter 'random' \(one of: age, drf\)$"):
        load(None, role_sorter="random")
    with pytest.raises(ConfigError, match=r"^--framework_sorter: unknown sorter 'DRF' \(one of: age, drf\)$"):
        load(None, framework_sorter="DRF")
    with pytest.raises(ValueError, match=r"^unknown sorter '' \(one of: age, drf\)$"):
        sorter_named("")


def test_the_toml_file_names_them_too(tmp_path: Path) -> None:
    path = tmp_path / "master.toml"
    path.write_text('[master]\nrole_sorter = "age"\nframework-sorter = "age"\n')
    cfg = load(path)
    assert (cfg.role_sorter, cfg.framework_sorter) == ("age", "age")
    path.write_text('role_sorter = "fifo"\n')
    with pytest.raises(ConfigError, match=r"^--role_sorter: unknown sorter 'fifo'"):
        load(path)


def test_the_command_refuses_to_start_with_an_unknown_sorter(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["--port", "0", "--work-dir", str(tmp_path), "--framework_sorter", "random"])
    assert result.exit_code == 2
    assert "Error: --framework_sorter: unknown sorter 'random' (one of: age, drf)" in result.output
