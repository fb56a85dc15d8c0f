"""Which file a main-chat write tool's checkpoint takes: where the worker will write it
(links followed, relative to the project), and nothing for .git/, .specrun/ or a path
outside the project."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest

from coordinator.service.undo.checkpoints import Checkpoints
from coordinator.settings import Settings
from protocol.wire.chat import ToolCall


def _write(path: str) -> ToolCall:
    return ToolCall("c1", "write_file", json.dumps({"file_path": path, "content": "x"}))


@pytest.fixture
def checkpoints(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Checkpoints:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    root = tmp_path / "project"
    (root / "src").mkdir(parents=True)
    (root / ".git").mkdir()
    (root / ".git" / "config").write_text("[core]\n")
    (root / "src" / "a.py").write_text("a\n")
    os.symlink("src/a.py", root / "alias.py")
    (tmp_path / "outside.txt").write_text("o\n")
    return Checkpoints(root, Settings())


def test_a_turn_takes_the_files_its_write_tools_will_write(checkpoints: Checkpoints) -> None:
    root = checkpoints.root
    checkpoints.begin_turn("s1", 1, "edit")
    for path in ("src/a.py", str(root / "src" / "new.py"), "alias.py", ".git/config",
                 "../outside.txt", "src/../src/a.py", ""):
        asyncio.run(checkpoints.before_write(_write(path)))
    asyncio.run(checkpoints.before_write(
        ToolCall("c2", "read_file", json.dumps({"file_path": "README.md"}))))
    turn = checkpoints._turn
    assert turn is not None
    # The link is taken as the file it leads to, once; git's and outside files never.
    assert [f.path for f in turn.files] == ["src/a.py", "src/new.py"]
    (root / "src" / "a.py").write_text("b\n")
    closed = asyncio.run(checkpoints.end_turn())
    assert closed is not None and [f.path for f in closed.files] == ["src/a.py"]


def test_a_turn_that_wrote_nothing_leaves_no_checkpoint(checkpoints: Checkpoints) -> None:
    checkpoints.begin_turn("s1", 1, "look")
    assert asyncio.run(checkpoints.end_turn()) is None
    assert checkpoints.store is not None and checkpoints.store.all() == []


def test_an_unusable_state_directory_turns_undo_off_with_a_sentence(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "state").write_text("a file where the state directory goes\n")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    checkpoints = Checkpoints(tmp_path, Settings())
    assert checkpoints.store is None
    assert "specrun" in checkpoints.unavailable
    checkpoints.begin_turn("s1", 1, "x")
    asyncio.run(checkpoints.before_write(_write("a.txt")))
    assert asyncio.run(checkpoints.end_turn()) is None
