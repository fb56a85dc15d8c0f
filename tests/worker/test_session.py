"""The carry layer's merge (``worker.contain.session.carry_over``): what a command left
besides file contents is stacked as overlayfs would stack it, and a link an earlier
command left never leads the helper (unconfined, with the user's rights) outside it."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from worker.contain.session import OPAQUE_XATTR, carry_over


def _whiteout(path: Path) -> None:
    os.mknod(path, stat.S_IFCHR | 0o600, os.makedev(0, 0))


@pytest.fixture
def layers(tmp_path: Path) -> tuple[Path, Path, Path]:
    upper, carry, outside = tmp_path / "upper", tmp_path / "carry", tmp_path / "outside"
    for path in (upper, carry, outside):
        path.mkdir()
    return upper, carry, outside


def test_links_directories_and_deletions_are_stacked(layers: tuple[Path, Path, Path]) -> None:
    upper, carry, _outside = layers
    (upper / "libz.so").symlink_to("libz.so.1")
    (upper / "empty").mkdir(mode=0o750)
    (upper / "libz.so.1").write_text("content goes to the overlay, not here")
    _whiteout(upper / "old.txt")
    (carry / "libz.so.1").symlink_to("elsewhere")  # an earlier command's link, now a file
    carry_over(upper, carry)
    assert os.readlink(carry / "libz.so") == "libz.so.1"
    assert stat.S_IMODE((carry / "empty").stat().st_mode) == 0o750
    assert not os.path.lexists(carry / "libz.so.1")  # the overlay's file shows through
    info = os.lstat(carry / "old.txt")
    assert stat.S_ISCHR(info.st_mode) and info.st_rdev == 0


def test_a_directory_made_again_hides_what_was_below(layers: tuple[Path, Path, Path]) -> None:
    upper, carry, _outside = layers
    (carry / "build").mkdir()
    (carry / "build" / "stale.so").symlink_to("x")
    (upper / "build").mkdir()
    try:
        os.setxattr(upper / "build", "user.overlay.opaque", b"y")
    except OSError:
        pytest.skip("this file system takes no user xattrs")
    (upper / "build" / "new.so").symlink_to("y")
    carry_over(upper, carry)
    assert sorted(os.listdir(carry / "build")) == ["new.so"]
    assert os.getxattr(carry / "build", OPAQUE_XATTR) == b"y"


def test_a_left_link_never_leads_outside(layers: tuple[Path, Path, Path]) -> None:
    """An earlier command left ``d -> <outside>``; the next replaced it with a directory
    holding a link and a deletion: the merge replaces the link, never writes through it."""
    upper, carry, outside = layers
    (outside / "victim").write_text("mine\n")
    (carry / "d").symlink_to(outside)
    (upper / "d").mkdir()
    (upper / "d" / "victim").symlink_to("/etc/passwd")
    _whiteout(upper / "d" / "gone")
    carry_over(upper, carry)
    assert (outside / "victim").read_text() == "mine\n"
    assert sorted(os.listdir(outside)) == ["victim"]
    assert (carry / "d").is_dir() and not (carry / "d").is_symlink()
    assert os.readlink(carry / "d" / "victim") == "/etc/passwd"
