from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import (
    Env,
    Specrun,
    isolated_env,
    make_sample_project,
    processes_with_env,
    wait_until,
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.environ.get("SPECRUN_SLOW"):
        return
    skip = pytest.mark.skip(reason="slow stress run; set SPECRUN_SLOW=1")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def env() -> Iterator[Env]:
    with isolated_env() as e:
        yield e
        leaked = processes_with_env(e.runtime)
        for proc in leaked:
            proc.kill()
        assert not leaked, f"processes left behind: {[p.pid for p in leaked]}"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return make_sample_project(tmp_path / "proj")


@pytest.fixture
def specrun(project: Path, env: Env) -> Iterator[Specrun]:
    runner = Specrun(project, env)
    yield runner
    # A test that started a service and failed before stopping it must not leak it.
    if processes_with_env(env.runtime):
        runner.run("stop")
        wait_until(lambda: not processes_with_env(env.runtime), timeout=10)


@pytest.fixture
def service(specrun: Specrun) -> Iterator[Specrun]:
    """A running service (auto-edit mode, scripted model) stopped at teardown."""
    specrun.run("start", "--approval-mode", "auto-edit", check=True)
    try:
        yield specrun
    finally:
        specrun.run("stop")
        wait_until(lambda: not processes_with_env(specrun.env.runtime), timeout=10)
