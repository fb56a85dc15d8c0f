"""The place a unit of the service works in: a project directory, its own HOME (no
user memories from the real one) and a private temp dir for overlay directories."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest


@dataclass
class Place:
    """A project directory with a private temp dir for overlays and its own HOME."""

    root: Path
    home: Path
    files: dict[str, str] = field(default_factory=dict)


@pytest.fixture
def place(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Place]:
    root = tmp_path / "project"
    files = {"README.md": "# a project\n", "src/app.py": "print('app')\n"}
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    home = tmp_path / "home"
    home.mkdir()
    temp = tmp_path / "tmp"
    temp.mkdir(mode=0o700)
    monkeypatch.setenv("HOME", str(home))  # no user memories from the real home
    monkeypatch.setattr(tempfile, "tempdir", str(temp))  # overlays go below tmp_path
    yield Place(root.resolve(), home, files)
