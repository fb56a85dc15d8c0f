"""The speculation base is private to its user, and nothing in it is used through a link
or when another user owns it (design §11, private state)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from overlay import (
    ForeignDirectoryError,
    Overlay,
    OverlayError,
    ensure_private_base,
    make_private_dir,
    mark_owner,
    sweep,
)

DEAD_PID = str(2**22 + 1)


def test_the_base_is_created_private(tmp_path: Path) -> None:
    base = ensure_private_base(tmp_path / "base")
    assert base.stat().st_mode & 0o777 == 0o700
    assert ensure_private_base(base) == base  # checked again, still fine


def test_a_symlinked_base_is_refused(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.mkdir(mode=0o700)
    (tmp_path / "base").symlink_to(victim)
    with pytest.raises(ForeignDirectoryError, match="not a plain directory"):
        ensure_private_base(tmp_path / "base")


def test_a_base_others_can_enter_is_refused(tmp_path: Path) -> None:
    base = tmp_path / "base"
    base.mkdir()
    base.chmod(0o1777)
    with pytest.raises(ForeignDirectoryError, match="not private"):
        ensure_private_base(base)


@pytest.mark.skipif(os.geteuid() != 0, reason="making a directory another user's needs root")
def test_another_users_base_is_refused_and_left_alone(tmp_path: Path) -> None:
    base = tmp_path / "base"
    base.mkdir(mode=0o700)
    (base / "123").mkdir()
    os.chown(base, 65534, 65534)
    with pytest.raises(ForeignDirectoryError, match="owner uid 65534"):
        ensure_private_base(base)
    assert (base / "123").is_dir()


def test_per_pid_and_overlay_dirs_are_never_followed(tmp_path: Path) -> None:
    base = ensure_private_base(tmp_path / "base")
    victim = tmp_path / "victim"
    victim.mkdir(mode=0o700)
    (victim / "precious.txt").write_text("keep me\n")
    # A pid above the kernel's hard limit (2**22): never a live process, however busy the
    # machine (4242 once was one, and the sweep rightly kept its entry).
    (base / DEAD_PID).symlink_to(victim)
    with pytest.raises(ForeignDirectoryError):
        make_private_dir(base / DEAD_PID / "tmp")
    project = tmp_path / "project"
    project.mkdir()
    (project / "a.txt").write_text("a\n")
    overlay = Overlay(project, base / DEAD_PID / "spec-1")
    with pytest.raises(OverlayError, match="not a directory owned by this user"):
        overlay.redirect_write("a.txt")
    assert sorted(p.name for p in victim.iterdir()) == ["precious.txt"]
    sweep(base)  # a dead pid's entry that is a link: the link goes, never its target
    assert (victim / "precious.txt").read_text() == "keep me\n"
    assert not (base / DEAD_PID).exists()


def test_an_existing_overlay_dir_is_not_reused_by_a_new_speculation(tmp_path: Path) -> None:
    base = ensure_private_base(tmp_path / "base")
    own = make_private_dir(base / "4243")
    make_private_dir(own / "spec-1")
    with pytest.raises(FileExistsError):
        make_private_dir(own / "spec-1")


def test_the_owner_mark_is_not_written_through_a_link(tmp_path: Path) -> None:
    base = ensure_private_base(tmp_path / "base")
    own = make_private_dir(base / "4244")
    target = tmp_path / "target.txt"
    target.write_text("unchanged\n")
    (own / "owner").symlink_to(target)
    with pytest.raises(OSError):
        mark_owner(own, 1)
    assert target.read_text() == "unchanged\n"
