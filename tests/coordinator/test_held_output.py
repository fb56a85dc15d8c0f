"""Build output and caches a speculation's commands wrote are held back at Tab.

The chain without a service: a sandboxed command's upper layer imported into the overlay
(``worker.capture``), the worker's report (``worker.speculation.written_files``), and the
coordinator's applied set (``SpeculationFiles``) over a real git repository. What git
ignores and a command wrote is not applied (``applyIgnoredOutput`` applies it); what the
command wrote that git tracks or would track is; an ignored file the model wrote with a file
tool is applied, also when a command had written it before.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from coordinator.service.speculation.applied_set import SpeculationFiles, held_summary
from coordinator.settings import Settings
from overlay import Overlay
from worker.capture import import_capture
from worker.speculation import written_files


def _project(root: Path) -> Path:
    root.mkdir()
    (root / ".gitignore").write_text("build/\ntarget/\n.env\n")
    (root / "app.c").write_text("int main(void) { return 0; }\n")
    (root / "build").mkdir()
    (root / "build/old.o").write_text("the person's build\n")
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    subprocess.run(["git", "add", "-A"], cwd=root, check=True)
    return root


def _command_wrote(upper: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = upper / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    os.chmod(upper / "build/app", 0o755)


@pytest.fixture()
def speculation(tmp_path: Path) -> tuple[Path, Overlay]:
    root = _project(tmp_path / "project")
    ov = Overlay(root, tmp_path / "speculation" / str(os.getpid()) / "spec-1")
    upper = tmp_path / "upper"
    _command_wrote(
        upper,
        {
            "build/app": "#!/bin/sh\necho planted\n",
            "build/CMakeCache.txt": "cache\n",
            "target/debug/.fingerprint/x": "fp\n",
            "NOTES.txt": "ran\n",
            ".env": "FROM=command\n",
        },
    )
    import_capture(upper, ov)
    ov.record_deletion("build/old.o")  # as a command's whiteout is recorded
    # then the model writes .env with its file tool: its own edit, applied
    Path(ov.redirect_write(".env")).write_text("FROM=tool\n")
    return root, ov


def test_ignored_command_output_is_held_back(speculation: tuple[Path, Overlay]) -> None:
    root, ov = speculation
    files = SpeculationFiles(root, str(ov.overlay_dir), written_files(ov), Settings())
    applied = files.apply(durable=False)
    assert (root / "NOTES.txt").read_text() == "ran\n"
    assert (root / ".env").read_text() == "FROM=tool\n"
    assert os.listdir(root / "build") == ["old.o"]  # neither written nor deleted
    assert not (root / "target").exists()
    assert sorted(applied.held) == [
        "build/CMakeCache.txt", "build/app", "build/old.o", "target/debug/.fingerprint/x"
    ]
    assert held_summary(applied.held) == ("build/", "target/")
    assert sorted(c.path for c in applied.changes) == [".env", "NOTES.txt"]


def test_the_preview_shows_what_tab_applies(speculation: tuple[Path, Overlay]) -> None:
    root, ov = speculation
    files = SpeculationFiles(root, str(ov.overlay_dir), written_files(ov), Settings())
    preview = files.preview()
    assert sorted(c.path for c in preview.changes) == [".env", "NOTES.txt"]
    assert len(preview.held) == 4


def test_apply_ignored_output_applies_them(speculation: tuple[Path, Overlay]) -> None:
    root, ov = speculation
    settings = Settings(apply_ignored_output=True)
    applied = SpeculationFiles(root, str(ov.overlay_dir), written_files(ov), settings).apply(
        durable=False
    )
    assert (root / "build/app").read_text() == "#!/bin/sh\necho planted\n"
    assert (root / "target/debug/.fingerprint/x").read_text() == "fp\n"
    assert not (root / "build/old.o").exists()
    assert applied.held == ()


def test_held_summary_names_the_largest_places_first() -> None:
    held = ("a.lock", "node_modules/.cache/x", "node_modules/.cache/y", "build/z")
    assert held_summary(held) == ("node_modules/", "a.lock", "build/")
    assert held_summary(held, limit=1) == ("node_modules/",)
