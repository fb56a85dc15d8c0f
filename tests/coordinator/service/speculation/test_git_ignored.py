"""Which written paths the project's git ignores, asked of a real git: a path matching a
pattern is ignored unless git tracks it, nested .gitignore files and negations count,
and outside a repository nothing is ignored."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from coordinator.service.speculation.git_ignored import git_ignored

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def _git(root: Path, *argv: str) -> None:
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null",
           "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@invalid",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@invalid"}  # fmt: skip
    subprocess.run(["git", "-c", "init.defaultBranch=main", *argv], cwd=root, env=env,
                   check=True, capture_output=True)  # fmt: skip


def test_ignored_means_a_pattern_matches_and_git_does_not_track_it(tmp_path: Path) -> None:
    _git(tmp_path, "init", "-q")
    (tmp_path / ".gitignore").write_text("build/\n*.log\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / ".gitignore").write_text("cache/\n!keep.log\n")
    (tmp_path / "build").mkdir()
    (tmp_path / "build" / "tracked.txt").write_text("kept in git although build/ is ignored\n")
    _git(tmp_path, "add", "-f", "build/tracked.txt")
    _git(tmp_path, "add", ".gitignore", "sub/.gitignore")
    _git(tmp_path, "commit", "-qm", "first")
    paths = [
        "src/app.py",  # no pattern
        "build/out.o",  # build/
        "build/tracked.txt",  # build/, but tracked
        "run.log",  # *.log
        "sub/keep.log",  # re-included by the nested .gitignore
        "sub/cache/x",  # the nested .gitignore's cache/
    ]
    assert git_ignored(tmp_path, paths) == {"build/out.o", "run.log", "sub/cache/x"}
    assert git_ignored(tmp_path, ["src/app.py", "README.md"]) == frozenset()


def test_nothing_is_ignored_outside_a_repository(tmp_path: Path) -> None:
    (tmp_path / ".gitignore").write_text("*.log\n")
    assert git_ignored(tmp_path, ["run.log"]) == frozenset()
