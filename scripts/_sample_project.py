"""The demo's sample project, copied for a benchmark or a stress run (one place for its
path and for how a copy is made: without bytecode caches, as a fresh git repository)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

SAMPLE_PROJECT = Path(__file__).resolve().parent.parent / "coordinator/cli/demo/sample_project"


def copy_sample_project(dest: Path, *, git: bool = True) -> Path:
    """``dest`` as a copy of the sample project; with ``git`` also ``git init`` there."""
    shutil.copytree(SAMPLE_PROJECT, dest, ignore=shutil.ignore_patterns("__pycache__"))
    if git:
        subprocess.run(["git", "init", "-q"], cwd=dest, check=True)
    return dest
