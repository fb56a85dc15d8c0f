"""Which project a command acts on when no --project is given."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from coordinator.cli.context import find_project_root
from tests.support import Env


def test_the_nearest_repository_or_state_dir_upwards(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (tmp_path / "repo" / ".git").mkdir(parents=True)
    (tmp_path / "repo" / "src" / "deep").mkdir(parents=True)
    assert find_project_root(tmp_path / "repo" / "src" / "deep", home) == tmp_path / "repo"
    (tmp_path / "plain" / ".specrun").mkdir(parents=True)
    (tmp_path / "plain" / "sub").mkdir()
    assert find_project_root(tmp_path / "plain" / "sub", home) == tmp_path / "plain"
    (tmp_path / "nothing").mkdir()
    assert find_project_root(tmp_path / "nothing", home) == tmp_path / "nothing"


def test_the_home_state_dir_holds_user_settings_and_marks_no_project(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / ".specrun").mkdir(parents=True)
    (home / ".specrun" / "settings.json").write_text('{"fastModel": "tiny"}\n')
    (home / "calc" / "src").mkdir(parents=True)
    assert find_project_root(home / "calc" / "src", home) == home / "calc" / "src"
    assert find_project_root(home, home) == home  # run in home itself: home, as before
    (home / ".git").mkdir()  # a dotfiles repository does make home a project, as for git
    assert find_project_root(home / "calc", home) == home


def test_user_settings_do_not_turn_home_into_the_project(env: Env) -> None:
    """`specrun config set --user ...`, then the README's walkthrough: a copy of the sample
    project in home, without a repository of its own."""
    calc = env.home / "calc"
    calc.mkdir()
    run = [sys.executable, "-m", "coordinator"]
    subprocess.run([*run, "config", "set", "--user", "fastModel", "tiny"], cwd=calc,
                   env=env.vars, check=True, capture_output=True)
    assert (env.home / ".specrun" / "settings.json").exists()
    status = subprocess.run([*run, "status"], cwd=calc, env=env.vars, capture_output=True,
                            text=True)
    assert status.returncode == 2
    assert f"running for {calc.resolve()};" in status.stderr, status.stderr
