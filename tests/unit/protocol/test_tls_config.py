"""The TLS flags of the master, the agent, the client transport and the CLI: combinations that
cannot work are refused up front, with the flag (and the file) named."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.config import AgentConfig
from agent.config import ConfigError as AgentConfigError
from agent.service import AgentService, StartupError
from frameworks.cli import common
from frameworks.client.transport import HttpTransport, base_url
from master.config import ConfigError, load
from master.service import MasterService


def test_master_tls_flags_go_together(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="--tls-cert and --tls-key go together"):
        load(None, tls_cert="c.pem")
    with pytest.raises(ConfigError, match="need --tls-cert"):
        load(None, tls_ca="ca.pem")
    with pytest.raises(ConfigError, match="--tls-require-client-cert needs --tls-ca"):
        load(None, tls_cert="c.pem", tls_key="k.pem", tls_require_client_cert=True)
    cfg = load(None, tls_cert="c.pem", tls_key="k.pem", tls_ca="ca.pem", tls_require_client_cert="true")
    assert cfg.scheme == "https" and cfg.tls_require_client_cert is True
    assert load(None).scheme == "http"


def test_master_tls_in_the_toml_file(tmp_path: Path) -> None:
    f = tmp_path / "master.toml"
    f.write_text('[master]\ntls-cert = "/etc/agora/m.pem"\ntls-key = "/etc/agora/m-key.pem"\n')
    cfg = load(f)
    assert (cfg.tls_cert, cfg.tls_key, cfg.scheme) == ("/etc/agora/m.pem", "/etc/agora/m-key.pem", "https")


async def test_master_with_a_missing_certificate_does_not_start(tmp_path: Path) -> None:
    cfg = load(None, port=0, work_dir=str(tmp_path / "m"), tls_cert=str(tmp_path / "none.pem"), tls_key="k.pem")
    svc = MasterService(cfg)
    with pytest.raises(OSError, match=r"--tls-cert .*none\.pem: no such file"):
        await svc.start()
    await svc.stop()
    assert not (tmp_path / "m").exists()  # refused before the registry was opened


def test_agent_tls_config(tmp_path: Path) -> None:
    with pytest.raises(AgentConfigError, match="--tls-cert and --tls-key go together"):
        AgentConfig(master="127.0.0.1:5050", work_dir=tmp_path, tls_cert=tmp_path / "c.pem")
    cfg = AgentConfig(master="https://m.example:5050/", work_dir=tmp_path, master_tls=True)
    assert cfg.master == "m.example:5050" and cfg.tls_to_master
    cfg = AgentConfig(master="m.example:5050", work_dir=tmp_path, master_ca=tmp_path / "ca.pem")
    assert cfg.tls_to_master and cfg.master_ca == tmp_path / "ca.pem"
    assert not AgentConfig(master="m:1", work_dir=tmp_path).tls_to_master


async def test_agent_with_a_missing_master_ca_does_not_start(tmp_path: Path) -> None:
    cfg = AgentConfig(master="127.0.0.1:1", work_dir=tmp_path / "a", master_ca=tmp_path / "ca.pem",
                      resources="cpus:1;mem:64", isolation="psutil")
    svc = AgentService(cfg)
    with pytest.raises(StartupError, match=r"--master-ca .*ca\.pem: no such file"):
        await svc.start()
    await svc.stop()


async def test_transport_keeps_https_across_scheme_relative_redirects(tmp_path: Path) -> None:
    assert base_url("//standby:5050/api/v1/scheduler", "https") == "https://standby:5050"
    assert base_url("http://m:5050/x", "https") == "http://m:5050"  # an explicit scheme is kept
    t = HttpTransport("https://m:5050")
    assert t.scheme == "https"
    await t.close()


def test_cli_scheme_follows_the_ca(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AGORA_CA", raising=False)
    monkeypatch.delenv("AGORA_MASTER", raising=False)
    common.set_ca(None)
    assert common.master_url("m:5050") == "http://m:5050"
    monkeypatch.setenv("AGORA_CA", str(tmp_path / "ca.pem"))
    assert common.master_url("m:5050") == "https://m:5050"
    with pytest.raises(common.CliError, match=r"--ca .*ca\.pem: no such file"):
        common.ssl_context()
    monkeypatch.delenv("AGORA_CA")
    common.set_ca(str(tmp_path / "other.pem"))
    try:
        assert common.ca_file() == str(tmp_path / "other.pem")
        assert common.master_url("https://m:5050/") == "https://m:5050"
    finally:
        common.set_ca(None)
