"""What a master publishes as its address (MasterInfo, ZooKeeper, its own address in HA): never a
wildcard bind (master/config.py advertised_address)."""

from __future__ import annotations

import pytest

from master.config import ConfigError, MasterConfig, advertised_address

HOSTS = {"node-1": "10.0.0.7", "m.example": "10.0.0.9"}


def resolve(host: str) -> str:
    try:
        return HOSTS[host]
    except KeyError:
        raise OSError(f"[Errno -2] Name or service not known: {host}") from None


def test_a_specific_bind_is_published_as_is() -> None:
    assert advertised_address(MasterConfig(ip="10.1.2.3"), "node-1", resolve) == ("10.1.2.3", "10.1.2.3")
    assert advertised_address(MasterConfig(ip="10.1.2.3", hostname="m.example"), "node-1", resolve) == (
        "10.1.2.3", "m.example",
    )


@pytest.mark.parametrize("wildcard", ["0.0.0.0", "::"])
def test_a_wildcard_bind_publishes_the_hostname_resolved(wildcard: str) -> None:
    cfg = MasterConfig(ip=wildcard, hostname="m.example")
    assert advertised_address(cfg, "node-1", resolve) == ("10.0.0.9", "m.example")
    # no --hostname: the machine's
    assert advertised_address(MasterConfig(ip=wildcard), "node-1", resolve) == ("10.0.0.7", "node-1")


def test_advertise_ip_wins() -> None:
    cfg = MasterConfig(ip="0.0.0.0", hostname="nowhere", advertise_ip="192.168.1.5")
    assert advertised_address(cfg, "node-1", resolve) == ("192.168.1.5", "nowhere")
    assert advertised_address(MasterConfig(ip="10.1.2.3", advertise_ip="1.2.3.4"), "x", resolve)[0] == "1.2.3.4"


def test_an_unresolvable_hostname_with_a_wildcard_bind_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"cannot resolve 'nowhere'.*--advertise-ip"):
        advertised_address(MasterConfig(ip="0.0.0.0", hostname="nowhere"), "node-1", resolve)
    with pytest.raises(ConfigError, match="--advertise-ip"):
        advertised_address(MasterConfig(ip="0.0.0.0", hostname="zero"), "x", lambda h: "0.0.0.0")


def test_advertised_host_for_a_wildcard_is_never_the_wildcard() -> None:
    assert MasterConfig(ip="0.0.0.0").advertised_host != "0.0.0.0"
    assert MasterConfig(ip="127.0.0.1").advertised_host == "127.0.0.1"
