from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from master.service import MasterService

from ..cluster import running_master


@pytest.fixture
async def master(tmp_path: Path) -> AsyncIterator[MasterService]:
    async with running_master(tmp_path / "master") as svc:
        yield svc
