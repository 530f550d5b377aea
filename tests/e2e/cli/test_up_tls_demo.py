"""`agora up --tls --demo` when no elastic framework runs: the elastic demo starts its own service
with the cluster's CA and certificate (it used to drop https and the CA, so it never subscribed)."""

from __future__ import annotations

from pathlib import Path

from frameworks.cli.common import set_ca
from frameworks.cli.up import start_cluster
from frameworks.elastic import demo


def test_the_elastic_demos_own_service_subscribes_to_a_tls_cluster(tmp_path: Path) -> None:
    c = start_cluster(1, tmp_path / "c", port=0, resources="cpus:1;mem:512", ready_timeout=60, with_batch=False,
                      with_elastic=False, tls=True)
    try:
        assert c.master_url.startswith("https://") and demo.find_service(c.master_url) is None
        proc, url = demo.start_service(c.master_url, tmp_path / "elastic", service_args=c.service_tls_args())
        try:
            assert url.startswith("https://127.0.0.1:")
            assert demo.find_service(c.master_url) == url  # subscribed, and its https API answers
        finally:
            demo.stop_process(proc)
    finally:
        c.stop(grace=5)
        set_ca(None)
