"""One real local cluster (master, 2 agents, batch framework as processes) for the `agora task`,
`agora agent` and `agora job logs/history` tests; the CLI reads an empty config file of its own."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from frameworks.cli.up import LocalCluster, start_cluster

AGENT_RESOURCES = "cpus:2;mem:2048;disk:1024"


@pytest.fixture(scope="package")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    work: Path = tmp_path_factory.mktemp("cli-cluster")
    c = start_cluster(2, work, port=0, resources=AGENT_RESOURCES, ready_timeout=60, with_elastic=False,
                      batch_roles=("*", "ml"))
    try:
        assert c.batch_url is not None
        yield c
    finally:
        c.stop(grace=5)
