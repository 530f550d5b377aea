"""`python -m frameworks.cli` and `python -m frameworks.cli.main` are the `agora` command."""

from __future__ import annotations

import subprocess
import sys

import pytest

from protocol.version import AGORA_VERSION


@pytest.mark.parametrize("module", ["frameworks.cli", "frameworks.cli.main"])
def test_module_runs_the_cli(module: str) -> None:
    out = subprocess.run([sys.executable, "-m", module, "--version"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == f"agora {AGORA_VERSION}"
    helped = subprocess.run([sys.executable, "-m", module, "job", "--help"], capture_output=True, text=True,
                            timeout=60)
    assert helped.returncode == 0, helped.stderr
    assert "Submit and manage batch jobs." in helped.stdout
