"""git_tree_scan: every .git and .gitattributes found, unchanged directories not listed again."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from worker.shell import git_tree_scan
from worker.shell.git_tree_scan import git_entries


@pytest.fixture(autouse=True)
def _cold() -> Iterator[None]:
    git_tree_scan.forget()
    yield
    git_tree_scan.forget()


MARGIN_NS = 20_000_000


@pytest.fixture()
def short_margin(monkeypatch: pytest.MonkeyPatch) -> None:
    """A racy margin of 20 ms instead of 2 s, so a test need not wait for its directories
    to age: each waits (``settle``) until the file system's clock is past the margin."""
    monkeypatch.setattr(git_tree_scan, "RACY_NS", MARGIN_NS)


def settle(root: Path) -> None:
    """Wait until the file system's clock is ``MARGIN_NS`` past every directory's last
    change (watched on a probe file's ctime): listings made from now on are kept, and a
    later change gets a later timestamp."""
    newest = max(os.lstat(d).st_ctime_ns for d, _dirs, _files in os.walk(root))
    probe = root.parent / "clock-probe"
    while True:
        probe.write_text("")
        if os.lstat(probe).st_ctime_ns - newest > MARGIN_NS:
            return
        time.sleep(0.002)


def tree(root: Path, dirs: int = 30, files: int = 5) -> Path:
    for d in range(dirs):
        sub = root / f"a{d % 3}" / f"b{d}"
        sub.mkdir(parents=True)
        for f in range(files):
            (sub / f"f{f}.txt").write_text("x\n")
    return root


def rel(root: Path, paths: tuple[str, ...]) -> set[str]:
    return {os.path.relpath(p, root) for p in paths}


def test_finds_every_entry_and_not_inside_git_or_through_symlinks(tmp_path: Path) -> None:
    root = tree(tmp_path / "p")
    (root / ".git" / "sub").mkdir(parents=True)
    (root / ".git" / "sub" / ".gitattributes").write_text("* filter=x\n")  # git's own dir
    (root / "a1" / "b4" / ".gitattributes").write_text("")
    (root / "a2" / "b5" / "nested" / ".git").mkdir(parents=True)
    (root / "a0" / "wt").mkdir()
    (root / "a0" / "wt" / ".git").write_text("gitdir: /elsewhere\n")
    (root / "a0" / ".gitattributes").mkdir()  # a directory of that name is walked too
    (root / "a0" / ".gitattributes" / ".gitattributes").write_text("")
    outside = tmp_path / "outside"
    (outside / "deep").mkdir(parents=True)
    (outside / "deep" / ".gitattributes").write_text("")
    (root / "link").symlink_to(outside)
    found = git_entries(str(root))
    assert rel(root, found.repositories) == {".git", "a2/b5/nested/.git", "a0/wt/.git"}
    assert rel(root, found.attributes) == {
        "a1/b4/.gitattributes", "a0/.gitattributes", "a0/.gitattributes/.gitattributes"
    }


def test_a_symlinked_root_is_scanned_as_its_target(tmp_path: Path) -> None:
    root = tree(tmp_path / "p", dirs=3)
    (root / "a1" / "b1" / ".gitattributes").write_text("")
    (tmp_path / "link").symlink_to(root)
    found = git_entries(str(tmp_path / "link"))
    assert rel(root, found.attributes) == {"a1/b1/.gitattributes"}


def test_a_missing_root_holds_nothing(tmp_path: Path) -> None:
    assert git_entries(str(tmp_path / "absent")).directories == 0


@pytest.mark.usefixtures("short_margin")
def test_unchanged_directories_are_not_listed_again(tmp_path: Path) -> None:
    root = tree(tmp_path / "p")
    settle(root)
    first = git_entries(str(root))
    assert first.listed == first.directories == 1 + 3 + 30
    again = git_entries(str(root))
    assert (again.listed, again.directories) == (0, first.directories)


@pytest.mark.usefixtures("short_margin")
def test_a_new_entry_deep_in_a_remembered_tree_is_found(tmp_path: Path) -> None:
    root = tree(tmp_path / "p")
    settle(root)
    git_entries(str(root))
    (root / "a2" / "b29" / ".gitattributes").write_text("* filter=x\n")
    found = git_entries(str(root))
    assert found.listed == 1  # only the directory that changed
    assert rel(root, found.attributes) == {"a2/b29/.gitattributes"}
    settle(root)
    git_entries(str(root))
    (root / "a1" / "b1" / "new" / "deeper").mkdir(parents=True)
    (root / "a1" / "b1" / "new" / "deeper" / ".git").write_text("gitdir: x\n")
    found = git_entries(str(root))
    assert found.listed == 3  # b1 changed, and the two new directories
    assert rel(root, found.repositories) == {"a1/b1/new/deeper/.git"}
    os.rename(root / "a1" / "b1" / "new", root / "a0" / "b0" / "moved")
    found = git_entries(str(root))
    assert rel(root, found.repositories) == {"a0/b0/moved/deeper/.git"}
    os.unlink(root / "a2" / "b29" / ".gitattributes")
    assert git_entries(str(root)).attributes == ()


@pytest.mark.usefixtures("short_margin")
def test_an_mtime_put_back_does_not_hide_a_change(tmp_path: Path) -> None:
    """``touch -d`` can restore a directory's mtime after adding a file; its ctime moves."""
    root = tree(tmp_path / "p")
    target = root / "a1" / "b7"
    settle(root)
    before = os.stat(target)
    git_entries(str(root))
    assert git_entries(str(root)).listed == 0
    (target / ".gitattributes").write_text("* filter=x\n")
    os.utime(target, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert os.stat(target).st_mtime_ns == before.st_mtime_ns
    assert rel(root, git_entries(str(root)).attributes) == {"a1/b7/.gitattributes"}


def test_a_directory_changed_just_now_is_listed_every_time(tmp_path: Path) -> None:
    """Within the racy margin a change could leave the times as they were: no memory."""
    root = tree(tmp_path / "p", dirs=3)
    first = git_entries(str(root))
    assert git_entries(str(root)).listed == first.directories


@pytest.mark.usefixtures("short_margin")
def test_only_a_few_trees_are_remembered(tmp_path: Path) -> None:
    roots = [tree(tmp_path / f"p{i}", dirs=2) for i in range(git_tree_scan.MAX_ROOTS + 1)]
    settle(tmp_path)
    for root in roots:
        git_entries(str(root))
    assert git_entries(str(roots[-1])).listed == 0
    assert git_entries(str(roots[0])).listed > 0  # the oldest was dropped
