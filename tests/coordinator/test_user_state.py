"""specrun's per-user state directory: outside the project, 0700, links refused."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from coordinator.user_state import UserStateError, project_key, project_state_dir


@pytest.fixture
def state_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "state"
    monkeypatch.setenv("XDG_STATE_HOME", str(home))
    return home


def test_a_project_gets_a_private_directory_outside_it(tmp_path: Path, state_home: Path) -> None:
    project = tmp_path / "calc"
    project.mkdir()
    where = project_state_dir(project, "undo")
    assert where.is_relative_to(state_home / "specrun" / "projects")
    assert not where.is_relative_to(project)
    assert where.name == "undo" and where.parent.name.startswith("calc-")
    for level in (where, where.parent, state_home / "specrun"):
        assert stat.S_IMODE(os.lstat(level).st_mode) == 0o700


def test_the_key_follows_the_real_path(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "alias").symlink_to(real)
    assert project_key(tmp_path / "alias") == project_key(real)
    other = tmp_path / "other" / "real"
    other.mkdir(parents=True)
    assert project_key(other) != project_key(real)


def test_a_link_in_the_way_is_refused(tmp_path: Path, state_home: Path) -> None:
    project = tmp_path / "p"
    project.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (state_home / "specrun" / "projects").mkdir(parents=True)
    (state_home / "specrun" / "projects" / project_key(project)).symlink_to(elsewhere)
    with pytest.raises(UserStateError, match="symbolic link"):
        project_state_dir(project)
    assert list(elsewhere.iterdir()) == []


def test_a_relative_xdg_state_home_is_ignored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", "relative/state")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    where = project_state_dir(tmp_path)
    assert where.is_relative_to(tmp_path / "home" / ".local" / "state" / "specrun")
