"""What a sandboxed (speculateShell) command wrote, taken into the overlay: never a
protected path, never past the quota, never a set-uid bit (design §11)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from overlay import Overlay
from protocol.work import Containment
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
    _project, overlay, upper = world
    (upper / "b.txt").write_text("fine\n")
    target = upper / rel
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("[core]\n\tfsmonitor = evil\n")
    with pytest.raises(ToolStop) as stop:
        import_capture(upper, overlay)
    assert stop.value.reason == f"protected_path:{rel}"
    assert overlay.written_files() == {}


def test_the_quota_counts_what_is_already_in_the_overlay(
    world: tuple[Path, Overlay, Path],
) -> None:
    _project, overlay, upper = world
    overlay.redirect_write("a.txt").write_bytes(b"x" * 600)
    (upper / "big.bin").write_bytes(b"y" * 600)
    with pytest.raises(ToolStop) as stop:
        import_capture(upper, overlay, Containment(overlay_quota_bytes=1000))
    assert stop.value.reason == "quota:overlay_bytes"
    with pytest.raises(ToolStop) as stop:
        import_capture(upper, overlay, Containment(overlay_quota_files=1))
    assert stop.value.reason == "quota:overlay_files"
    assert set(overlay.written_files()) == {"a.txt"}


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
    _project, overlay, upper = world
    (upper / "b.txt").write_text("fine\n")
    target = upper / rel
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("hidden\n")
    with pytest.raises(ToolStop) as stop:
        import_capture(upper, overlay)
    assert stop.value.reason == f"bad_path:{shown}"
    assert overlay.written_files() == {}


def test_odd_but_legal_names_are_kept(world: tuple[Path, Overlay, Path]) -> None:
    _project, overlay, upper = world
    for name in ("my notes.md", "-rf.txt", "café.py"):
        (upper / name).write_text("ok\n")
    report = import_capture(upper, overlay)
    assert sorted(report.copied) == ["-rf.txt", "café.py", "my notes.md"]
