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
