"""The applied-set computation at the overlay level: what Tab does to each file, the same
answer before the apply (``preview``) and from it (``ApplyResult.changes``)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from overlay import ConflictError, Overlay
from overlay.changes import describe_mode_change
from tests.overlay.helpers import journal_of


@pytest.mark.parametrize(
    ("before", "after", "text"),
    [
        (0o644, 0o755, "+x"),
        (0o644, 0o744, "u+x"),
        (0o755, 0o644, "-x"),
        (0o664, 0o644, "g-w"),
        (0o644, 0o751, "+x o-r"),
        (0o755, 0o4755, "+setuid"),
        (0o644, 0o644, ""),
    ],
)
def test_mode_changes_are_named_like_chmod(before: int, after: int, text: str) -> None:
    assert describe_mode_change(before, after) == text


def _kinds(changes: list) -> dict[str, tuple[str, str, str | None]]:  # type: ignore[type-arg]
    return {c.rel: (c.kind, c.mode_change, c.conflict) for c in changes}


def test_preview_and_apply_say_the_same_per_file(root: Path, ovdir: Path) -> None:
    ov = Overlay(root, ovdir)
    ov.redirect_write("new.txt").write_text("new\n")
    ov.redirect_write("src/app.py").write_text("changed\n")
    same = ov.redirect_write("src/util.py")  # copied up, content left as it was
    tool = ov.redirect_write("README.md")
    os.chmod(tool, 0o755)  # same content, made executable
    assert ov.record_deletion("tests/test_app.py")
    ov.redirect_write("never.txt")  # registered, never written
    expected = {
        "new.txt": ("created", "", None),
        "src/app.py": ("modified", "", None),
        "README.md": ("mode", "+x", None),
        "tests/test_app.py": ("deleted", "", None),
    }
    assert same.read_text() == (root / "src/util.py").read_text()
    assert _kinds(ov.preview()) == expected
    result = ov.apply_to_real(journal_dir=journal_of(ov), durable=False)
    assert _kinds(result.changes) == expected
    assert result.unchanged == ["src/util.py"] and result.skipped == ["never.txt"]
    assert (root / "new.txt").read_text() == "new\n"
    assert (root / "src/app.py").read_text() == "changed\n"
    assert os.stat(root / "README.md").st_mode & 0o111 == 0o111
    assert not (root / "tests/test_app.py").exists()
    assert not [p for p in root.rglob("*") if "specrun" in p.name]  # no stage/backup left


def test_a_conflict_shows_in_the_preview_and_refuses_the_apply(root: Path, ovdir: Path) -> None:
    ov = Overlay(root, ovdir)
    ov.redirect_write("src/app.py").write_text("speculated\n")
    ov.record_deletion("src/util.py")
    (root / "src/app.py").write_text("the person's edit\n")
    (root / "src/util.py").write_text("also edited\n")
    assert _kinds(ov.preview()) == {
        "src/app.py": ("modified", "", "modified"),
        "src/util.py": ("deleted", "", "modified"),
    }
    with pytest.raises(ConflictError) as refused:
        ov.apply_to_real(journal_dir=journal_of(ov), durable=False)
    assert set(refused.value.paths) == {"src/app.py", "src/util.py"}
    assert (root / "src/util.py").read_text() == "also edited\n"


def test_a_yielding_entry_that_conflicts_is_skipped_and_the_rest_applies(
    root: Path, ovdir: Path
) -> None:
    ov = Overlay(root, ovdir)
    ov.redirect_write("cache/x.pyc").write_text("speculated cache\n")
    ov.redirect_write("src/app.py").write_text("speculated\n")
    (root / "cache").mkdir()
    (root / "cache/x.pyc").write_text("the person's cache\n")
    result = ov.apply_to_real(journal_dir=journal_of(ov), durable=False, yielding={"cache/x.pyc"})
    assert result.yielded == ["cache/x.pyc"] and result.applied == ["src/app.py"]
    assert (root / "cache/x.pyc").read_text() == "the person's cache\n"
    assert (root / "src/app.py").read_text() == "speculated\n"


def test_a_deletion_waits_for_the_whole_apply(root: Path, ovdir: Path) -> None:
    """A deletion is part of the all-or-nothing apply: when another entry conflicts, the
    file the speculation deleted stays."""
    ov = Overlay(root, ovdir)
    ov.record_deletion("README.md")
    ov.redirect_write("src/sub/new.txt").write_text("y\n")
    (root / "src" / "sub").write_text("a file where a directory must go\n")
    with pytest.raises(ConflictError):
        ov.apply_to_real(journal_dir=journal_of(ov), durable=False)
    assert (root / "README.md").read_text() == "# demo\n"
