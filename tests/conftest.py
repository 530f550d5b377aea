"""Suite-wide: after the run, remove the cgroups that agents of *this* run left behind.

An agent keeps its tasks' cgroups when it stops (its tasks outlive it by design); a test that
then kills those tasks itself leaves empty cgroups under ``<hierarchy>/agora*/agent-<digest>``.
Other test runs (CI jobs, other checkouts) share the machine and its cgroup hierarchies, so the
sweep touches only the agent cgroups this run made: an agent's cgroup is named after its work
dir (``agent.cgroup_probe.agent_cgroup_name``), and every agent of this run had its work dir
under this run's own temporary directory (``tmp_path``), so the names of the directories there
are exactly this run's agent cgroups (``tests.cgroup_env.sweep_own_cgroups``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cgroup_env import sweep_own_cgroups

_own_tmp: list[Path] = []


@pytest.fixture(autouse=True, scope="session")
def _this_runs_tmp(tmp_path_factory: pytest.TempPathFactory) -> None:
    _own_tmp.append(tmp_path_factory.getbasetemp())


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    sweep_own_cgroups(Path("/sys/fs/cgroup"), _own_tmp)
