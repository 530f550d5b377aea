"""The CLI's settings: flag > environment > file > default, the file's format, ``agora config``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from frameworks.cli import config as cfg
from frameworks.cli.common import CliError, ca_file, framework_url, master_url, set_ca


def test_precedence_flag_env_file_default() -> None:
    env = {"AGORA_MASTER": "env:1"}
    file = {"master": "file:2"}
    assert cfg.resolve("master", "flag:0", env, file) == cfg.Setting("master", "flag:0", "flag")
    assert cfg.resolve("master", None, env, file) == cfg.Setting("master", "env:1", "env AGORA_MASTER")
    assert cfg.resolve("master", None, {}, file) == cfg.Setting("master", "file:2", "file")
    assert cfg.resolve("master", None, {}, {}) == cfg.Setting("master", "127.0.0.1:5050", "default")
    assert cfg.resolve("batch", None, {"AGORA_MASTER": "x"}, {}).value is None
    # an empty environment variable is no setting
    assert cfg.resolve("token", None, {"AGORA_TOKEN": ""}, {"token": "t"}).source == "file"


def test_config_path() -> None:
    assert cfg.config_path({"AGORA_CONFIG": "/etc/a.toml", "HOME": "/h"}) == Path("/etc/a.toml")
    assert cfg.config_path({"XDG_CONFIG_HOME": "/x", "HOME": "/h"}) == Path("/x/agora/config.toml")
    assert cfg.config_path({"HOME": "/h"}) == Path("/h/.config/agora/config.toml")


def test_file_round_trip_and_errors() -> None:
    values = {"master": 'h:1 "quoted" \\ back', "ca": "/etc/ca.pem"}
    assert cfg.parse(cfg.dump(values), "f") == values
    with pytest.raises(CliError, match="bad config file f: unknown key 'colour'"):
        cfg.parse('colour = "red"\n', "f")
    with pytest.raises(CliError, match="master must be a string"):
        cfg.parse("master = 5050\n", "f")
    with pytest.raises(CliError, match="bad config file f:"):
        cfg.parse("master = \n", "f")


@pytest.fixture
def config_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "sub" / "config.toml"
    monkeypatch.setenv("AGORA_CONFIG", str(path))
    for var, _, _ in cfg.KEYS.values():
        monkeypatch.delenv(var, raising=False)
    return path


def test_set_show_and_the_file_reaching_every_command(config_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    r = CliRunner().invoke(cfg.config, ["set", "master", "10.0.0.5:5050"])
    assert r.exit_code == 0, r.output
    CliRunner().invoke(cfg.config, ["set", "batch", "10.0.0.5:8080"])
    CliRunner().invoke(cfg.config, ["set", "token", "s3cret"])
    assert config_file.stat().st_mode & 0o777 == 0o600
    assert master_url(None) == "http://10.0.0.5:5050"
    assert framework_url("agora-batch", None, "AGORA_BATCH", None) == "http://10.0.0.5:8080"
    monkeypatch.setenv("AGORA_MASTER", "env-host:1")
    assert master_url(None) == "http://env-host:1"
    assert master_url("flag-host:2") == "http://flag-host:2"

    r = CliRunner().invoke(cfg.config, ["show", "--json"])
    shown = json.loads(r.output)
    assert shown["path"] == str(config_file)
    assert shown["settings"]["master"] == {"value": "env-host:1", "source": "env AGORA_MASTER"}
    assert shown["settings"]["batch"] == {"value": "10.0.0.5:8080", "source": "file"}
    assert shown["settings"]["elastic"] == {"value": None, "source": "default"}
    text = CliRunner().invoke(cfg.config, ["show"]).output
    assert "s3cret" not in text and "********" in text  # a token is not printed on a terminal

    # the cluster CA from the file: a bare host:port then means https
    set_ca(None)
    CliRunner().invoke(cfg.config, ["set", "ca", "/etc/agora/ca.pem"])
    assert ca_file() == "/etc/agora/ca.pem" and master_url("h:1") == "https://h:1"
    set_ca("/flag/ca.pem")
    assert ca_file() == "/flag/ca.pem"
    set_ca(None)

    r = CliRunner().invoke(cfg.config, ["set", "batch", "", "--json"])
    assert json.loads(r.output) == {"path": str(config_file), "key": "batch", "value": None}
    assert "batch" not in cfg.load()
    assert CliRunner().invoke(cfg.config, ["set", "colour", "red"]).exit_code == 2


def test_a_broken_file_is_a_one_line_error(config_file: Path) -> None:
    config_file.parent.mkdir(parents=True)
    config_file.write_text("master = [\n")
    r = CliRunner().invoke(cfg.config, ["show"])
    assert r.exit_code == 1 and r.output.startswith(f"Error: bad config file {config_file}")
    assert "Traceback" not in r.output
    with pytest.raises(CliError, match="bad config file"):
        master_url(None)


def test_a_relative_ca_is_kept_by_its_absolute_path(config_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``agora config set ca ./ca.pem`` must still find the file when agora runs from elsewhere."""
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(cfg.config, ["set", "ca", "ca.pem"])
    assert r.exit_code == 0, r.output
    monkeypatch.chdir("/")
    assert cfg.file_value("ca") == str(tmp_path / "ca.pem")
