from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.overlay.helpers import make_tree


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A small real project."""
    project = tmp_path / "project"
    project.mkdir()
    make_tree(
        project,
        {
            "README.md": "# demo\n",
            "src/app.py": "print('app')\n",
            "src/util.py": "def util():\n    return 1\n",
            "tests/test_app.py": "def test_app():\n    assert True\n",
        },
    )
    return project


@pytest.fixture
def ovdir(tmp_path: Path) -> Path:
    """An overlay directory laid out like the real one: <base>/<pid>/<speculation id>."""
    return tmp_path / "speculation" / str(os.getpid()) / "spec-1"
