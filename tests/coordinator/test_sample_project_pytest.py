"""The demo's sample project runs under plain `pytest`, which is what a real model types,
as well as under `python -m pytest` (which puts the working directory on sys.path). Its
test of `add` fails on purpose: the demo's bug."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from coordinator.service.model_endpoint import SAMPLE_PROJECT

PYTEST = Path(sys.executable).parent / "pytest"


@pytest.mark.parametrize("command", [[str(PYTEST)], [sys.executable, "-m", "pytest"]],
                         ids=["pytest", "python -m pytest"])
def test_the_sample_projects_tests_import_its_code(tmp_path: Path, command: list[str]) -> None:
    project = tmp_path / "calc"
    shutil.copytree(SAMPLE_PROJECT, project, ignore=shutil.ignore_patterns("__pycache__"))
    done = subprocess.run([*command, "-q", "-p", "no:cacheprovider"], cwd=project,
                          capture_output=True, text=True, timeout=60, check=False)
    assert "1 failed, 1 passed" in done.stdout, done.stdout + done.stderr
    assert "ModuleNotFoundError" not in done.stdout
