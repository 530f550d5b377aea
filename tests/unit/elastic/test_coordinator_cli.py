from __future__ import annotations

from pathlib import Path

import pytest

from frameworks.elastic.coordinator import config_from_args, main, parser

SPEC = """
name = "digits"
[worker]
command = "python -m frameworks.elastic.examples.digits worker"
[scaling]
min_workers = 1
max_workers = 3
[data]
num_shards = 24
epochs = 8
[checkpoint]
dir = "/tmp/x"
interval = 5
[optimizer]
kind = "sgd"
learning_rate = 0.5
"""


def test_spec_then_flags(tmp_path: Path) -> None:
    spec = tmp_path / "job.toml"
    spec.write_text(SPEC)
    cfg, ck_dir, interval = config_from_args(parser().parse_args(["--spec", str(spec), "--epochs", "2"]))
    assert (cfg.job, cfg.num_shards, cfg.epochs, cfg.optimizer, cfg.learning_rate) == (
        "digits",
        24,
        2,
        "sgd",
        0.5,
    )
    assert (ck_dir, interval) == ("/tmp/x", 5.0)


def test_bad_spec_and_bad_settings_exit_cleanly(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "job.toml"
    spec.write_text(SPEC.replace("max_workers = 3", "max_workers = 0"))
    with pytest.raises(SystemExit, match=r"scaling\.max_workers"):
        config_from_args(parser().parse_args(["--spec", str(spec)]))
    assert main(["--num-shards", "0"]) == 2
    assert "num_shards" in capsys.readouterr().err
