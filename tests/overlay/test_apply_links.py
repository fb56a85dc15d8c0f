"""Symlinks a speculation's commands left, applied at Tab as links (overlay.apply)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from overlay import ConflictError, Overlay, OverlayError
from tests.overlay.helpers import applied, reported_record, snapshot, strays


def _tab(root: Path, ovdir: Path, ov: Overlay) -> Overlay:
    """The coordinator's side: the overlay rebuilt from the worker's report."""
    return Overlay.from_record(root, ovdir, reported_record(ov))


def test_a_link_is_created_as_a_link_never_followed(root: Path, ovdir: Path) -> None:
    ov = Overlay(root, ovdir)
    ov.record_link("lib/libz.so", "libz.so.1")
    ov.record_link("README.link", "README.md")
    result = applied(_tab(root, ovdir, ov), durable=False)
    assert sorted(result.applied) == ["README.link", "lib/libz.so"]
    assert [(c.rel, c.kind, c.link) for c in result.changes] == [
        ("lib/libz.so", "created", "libz.so.1"), ("README.link", "created", "README.md")]
    assert os.readlink(root / "lib/libz.so") == "libz.so.1"
    assert (root / "README.link").read_text() == (root / "README.md").read_text()
    assert strays(root) == []


def test_a_link_replaces_a_file_and_keeps_nothing_of_it(root: Path, ovdir: Path) -> None:
    ov = Overlay(root, ovdir)
    ov.redirect_write("README.md").write_text("written first\n")
    ov.record_link("README.md", "docs/index.md")  # then a command made it a link
    [change] = applied(_tab(root, ovdir, ov), durable=False).changes
    assert (change.kind, change.link, change.mode_after) == ("modified", "docs/index.md", None)
    assert os.readlink(root / "README.md") == "docs/index.md"
    assert strays(root) == []


def test_a_file_written_over_a_link_is_a_file_again(root: Path, ovdir: Path) -> None:
    ov = Overlay(root, ovdir)
    ov.record_link("out.txt", "README.md")
    ov.redirect_write("out.txt").write_text("a file after all\n")
    assert ov.links() == {}
    applied(_tab(root, ovdir, ov), durable=False)
    assert not (root / "out.txt").is_symlink()
    assert (root / "out.txt").read_text() == "a file after all\n"


@pytest.mark.parametrize("meanwhile", ["file", "link", "changed"])
def test_something_new_at_the_links_path_is_a_conflict(
    root: Path, ovdir: Path, meanwhile: str
) -> None:
    ov = Overlay(root, ovdir)
    rel = "README.md" if meanwhile == "changed" else "new.link"
    ov.record_link(rel, "elsewhere")
    if meanwhile == "file":
        (root / rel).write_text("made by the person meanwhile\n")
    elif meanwhile == "link":
        (root / rel).symlink_to("other")
    else:
        (root / rel).write_text("edited by the person meanwhile\n")
    before = snapshot(root)
    # a link now at the path is refused as the report is read (its path resolves elsewhere)
    with pytest.raises(OverlayError if meanwhile == "link" else ConflictError):
        applied(_tab(root, ovdir, ov), durable=False)
    assert snapshot(root) == before


def test_a_deleted_link_is_nothing_at_tab(root: Path, ovdir: Path) -> None:
    ov = Overlay(root, ovdir)
    ov.record_link("gone.link", "README.md")
    assert ov.record_deletion("gone.link")
    assert ov.links() == {} and reported_record(ov) == {}


def test_a_record_with_a_bad_link_is_refused(root: Path, ovdir: Path) -> None:
    record = {"x": {"overlay_path": str(ovdir / "x"), "size": None, "mtime_ns": None,
                    "sha256": None, "link": ""}}
    with pytest.raises(OverlayError, match="a bad link"):
        Overlay.from_record(root, ovdir, record)
