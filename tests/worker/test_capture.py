"""What a sandboxed (speculateShell) command wrote, taken into the overlay: never a
protected path, never past the quota, never a set-uid bit (design §11)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from overlay import Overlay
from protocol.wire.boundary import BoundaryReason
from protocol.wire.work import Containment
from tests.overlay.helpers import journal_of
from worker.capture import import_capture
from worker.tools import ToolStop


@pytest.fixture()
def world(tmp_path: Path) -> tuple[Path, Overlay, Path]:
    project = tmp_path / "project"
    project.mkdir()
    (project / "a.txt").write_text("a\n")
    upper = tmp_path / "upper"
    upper.mkdir()
    return project, Overlay(project, tmp_path / "ov" / "spec-1"), upper


def stop_beside_a_fine_file(
    world: tuple[Path, Overlay, Path], rel: str, text: str
) -> BoundaryReason:
    """Why the capture stops when a command wrote ``text`` at ``rel`` beside an ordinary
    file; and the ordinary file is not kept either."""
    _project, overlay, upper = world
    (upper / "b.txt").write_text("fine\n")
    target = upper / rel
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)
    with pytest.raises(ToolStop) as stop:
        import_capture(upper, overlay)
    assert overlay.written_files() == {}
    return stop.value.reason


def test_set_uid_and_set_gid_bits_never_come_out(world: tuple[Path, Overlay, Path]) -> None:
    _project, overlay, upper = world
    tool = upper / "tool"
    tool.write_text("#!/bin/sh\n")
    os.chmod(tool, 0o6755 | stat.S_ISVTX)
    report = import_capture(upper, overlay)
    assert report.copied == ["tool"]
    assert stat.S_IMODE(overlay.written_files()["tool"].stat().st_mode) == 0o755


@pytest.mark.parametrize("rel", [".git/config", "docs/.gitattributes", ".specrun/settings.json"])
def test_a_protected_write_stops_the_speculation_and_keeps_nothing(
    world: tuple[Path, Overlay, Path], rel: str
) -> None:
    reason = stop_beside_a_fine_file(world, rel, "[core]\n\tfsmonitor = evil\n")
    assert reason == BoundaryReason("protected_path", rel)


@pytest.mark.parametrize(
    ("rel", "mode", "reason"),
    [(".husky/pre-push", 0o644, BoundaryReason("runs_later", ".husky/pre-push")),
     ("bin/tool", 0o755, BoundaryReason("runs_later", "bin/tool")),  # given the exec bit
     ("a.txt", 0o755, BoundaryReason("runs_later", "a.txt")),  # the real one was not executable
     ("notes.txt", 0o644, None)],
)
def test_with_runs_later_boundary_a_command_writing_such_a_file_stops(
    world: tuple[Path, Overlay, Path], rel: str, mode: int, reason: BoundaryReason | None
) -> None:
    _project, overlay, upper = world
    target = upper / rel
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("#!/bin/sh\n")
    os.chmod(target, mode)
    assert import_capture(upper, overlay, Containment()).copied == [rel]  # off: kept
    fresh = Overlay(overlay.root, Path(str(overlay.overlay_dir) + "-2"))
    on = Containment(runs_later_boundary=True)
    if reason is None:
        assert import_capture(upper, fresh, on).copied == [rel]
        return
    with pytest.raises(ToolStop) as stop:
        import_capture(upper, fresh, on)
    assert stop.value.reason == reason
    assert fresh.written_files() == {}


def test_the_quota_counts_what_is_already_in_the_overlay(
    world: tuple[Path, Overlay, Path],
) -> None:
    _project, overlay, upper = world
    overlay.redirect_write("a.txt").write_bytes(b"x" * 600)
    (upper / "big.bin").write_bytes(b"y" * 600)
    with pytest.raises(ToolStop) as stop:
        import_capture(upper, overlay, Containment(overlay_quota_bytes=1000))
    assert stop.value.reason == BoundaryReason("quota", "overlay_bytes")
    with pytest.raises(ToolStop) as stop:
        import_capture(upper, overlay, Containment(overlay_quota_files=1))
    assert stop.value.reason == BoundaryReason("quota", "overlay_files")
    assert set(overlay.written_files()) == {"a.txt"}


def _whiteout(path: Path, kind: str) -> None:
    """A whiteout as overlayfs leaves it: a character device 0/0, or an empty file with
    the whiteout extended attribute."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "chardev":
        try:
            os.mknod(path, stat.S_IFCHR | 0o000, os.makedev(0, 0))
        except PermissionError:
            pytest.skip("creating a character device needs CAP_MKNOD")
    else:
        path.write_bytes(b"")
        os.setxattr(path, "user.overlay.whiteout", b"")


@pytest.mark.parametrize("kind", ["chardev", "xattr"])
def test_deletions_become_deletion_entries(
    world: tuple[Path, Overlay, Path], kind: str
) -> None:
    project, overlay, upper = world
    (project / "d/sub").mkdir(parents=True)
    (project / "d/one.txt").write_text("1\n")
    (project / "d/sub/two.txt").write_text("2\n")
    (project / "link.txt").symlink_to("a.txt")
    overlay.redirect_write("d/written.txt").write_text("written in the speculation\n")
    _whiteout(upper / "a.txt", kind)  # a file
    _whiteout(upper / "d", kind)  # a directory: every file below it
    _whiteout(upper / "link.txt", kind)  # a symlink: never its target
    report = import_capture(upper, overlay)
    assert report.deleted == ["a.txt", "d/one.txt", "d/sub/two.txt", "d/written.txt"]
    assert sorted(overlay.deleted_files()) == ["a.txt", "d/one.txt", "d/sub/two.txt"]
    assert "d/written.txt" not in overlay.written_files()  # created, then deleted: no entry
    assert "link.txt (deleted; a symlink: not applied at Tab)" in report.skipped
    assert "deleted are kept as deletions" in report.note()
    result = overlay.apply_to_real(journal_dir=journal_of(overlay), durable=False)
    assert sorted(result.applied) == ["a.txt", "d/one.txt", "d/sub/two.txt"]
    assert not (project / "a.txt").exists() and (project / "link.txt").is_symlink()


def test_an_opaque_directory_deletes_what_it_no_longer_holds(
    world: tuple[Path, Overlay, Path],
) -> None:
    project, overlay, upper = world
    (project / "build").mkdir()
    (project / "build/old.o").write_text("old\n")
    (project / "build/keep.o").write_text("old\n")
    (upper / "build").mkdir()
    os.setxattr(upper / "build", "user.overlay.opaque", b"y")
    (upper / "build/keep.o").write_text("rebuilt\n")
    report = import_capture(upper, overlay)
    assert report.deleted == ["build/old.o"] and report.copied == ["build/keep.o"]


def test_deleting_a_protected_path_stops_the_speculation(
    world: tuple[Path, Overlay, Path],
) -> None:
    project, overlay, upper = world
    (project / ".git").mkdir()
    (project / ".git/config").write_text("[core]\n")
    _whiteout(upper / ".git", "xattr")
    with pytest.raises(ToolStop) as stop:
        import_capture(upper, overlay)
    assert stop.value.reason == BoundaryReason("protected_path", ".git/config")
    assert overlay.deleted_files() == []


@pytest.mark.parametrize(
    ("rel", "shown"),
    [("notes\x1b[2K.md", "$'notes\\x1b[2K.md'"),
     ("\u202etxt.sh", "$'\\u202etxt.sh'"),
     ("dir\x1b]52;c;aGk=\x07/inside.txt", "$'dir\\x1b]52;c;aGk=\\x07'"),  # a directory
     ("zero\u200bwidth.py", "$'zero\\u200bwidth.py'")],
)
def test_a_name_with_hidden_characters_stops_at_bad_path_and_keeps_nothing(
    world: tuple[Path, Overlay, Path], rel: str, shown: str
) -> None:
    reason = stop_beside_a_fine_file(world, rel, "hidden\n")
    assert reason == BoundaryReason("bad_path", shown)


def test_odd_but_legal_names_are_kept(world: tuple[Path, Overlay, Path]) -> None:
    _project, overlay, upper = world
    for name in ("my notes.md", "-rf.txt", "café.py"):
        (upper / name).write_text("ok\n")
    report = import_capture(upper, overlay)
    assert sorted(report.copied) == ["-rf.txt", "café.py", "my notes.md"]
