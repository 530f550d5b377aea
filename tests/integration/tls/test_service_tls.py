"""Service jobs on a TLS cluster (``start_cluster(tls=True)``: real master, agent and batch
processes with a throwaway CA): the service executor reaches the agent's https executor API and
the batch service's wss channel, both verified with the cluster CA."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from frameworks.cli import common
from frameworks.cli.up import start_cluster
from frameworks.service.client import ServiceClient

pytestmark = pytest.mark.slow


@pytest.fixture
def restore_ca() -> Iterator[None]:
    try:
        yield
    finally:
        common.set_ca(None)  # start_cluster(tls=True) pins its CA for this process' CLI calls


def test_a_service_job_runs_on_a_tls_cluster(tmp_path: Path, restore_ca: None) -> None:
    with start_cluster(1, tmp_path / "cluster", port=0, with_batch=True, with_elastic=False, tls=True,
                       resources="cpus:1;mem:256;disk:100", ready_timeout=60) as cluster:
        assert cluster.ca is not None and (cluster.batch_url or "").startswith("https://")
        client = ServiceClient(cluster.batch_url or "", ca=str(cluster.ca))
        echo = "while read -r x; do echo tls-$x; done"
        assert client.map(echo, ["a", "b"], cpus=0.5, mem=64, timeout=60) == ["tls-a", "tls-b"]
