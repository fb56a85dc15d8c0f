"""Tools in a speculation: OverlayAccess over a real overlay.Overlay."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest

from overlay import Overlay
from protocol.wire.boundary import BoundaryReason
from protocol.wire.chat import ToolCall
from tests.overlay.helpers import journal_of
from tests.worker.tool_calls import body, err, ok
from worker.tools import DirectAccess, OverlayAccess, ToolContext, ToolStop, execute

# Every test runs with ripgrep choosing the files and with the pure-Python walk.
pytestmark = pytest.mark.usefixtures("search_engine")


def snapshot(root: Path) -> dict[str, tuple[bytes, int]]:
    out: dict[str, tuple[bytes, int]] = {}
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            path = Path(dirpath, name)
            out[str(path.relative_to(root))] = (path.read_bytes(), path.stat().st_mtime_ns)
    return out


@pytest.fixture
def world(tmp_path: Path) -> tuple[Path, Overlay, ToolContext]:
    root = tmp_path / "proj"
    (root / "src").mkdir(parents=True)
    (root / "src" / "app.py").write_text("value = 1\n")
    (root / "src" / "keep.py").write_text("untouched = True\n")
    (root / ".gitignore").write_text("*.log\n")
    (root / "README.md").write_text("hello\n")
    overlay = Overlay(root, tmp_path / "ovl" / "123" / "spec1")
    return root, overlay, ToolContext(access=OverlayAccess(overlay))


def test_writes_go_to_the_overlay_and_reads_see_them(
    world: tuple[Path, Overlay, ToolContext],
) -> None:
    root, overlay, ctx = world
    before = snapshot(root)
    ok(ctx, "edit", file_path="src/app.py", old_string="value = 1", new_string="value = 2")
    ok(ctx, "write_file", file_path="src/new/mod.py", content="def needle(): pass\n")
    ok(ctx, "write_file", file_path=str(root / "notes.txt"), content="needle notes\n")
    ok(ctx, "edit", file_path="created.txt", old_string="", new_string="needle created\n")

    assert snapshot(root) == before  # the real tree is never written
    assert set(overlay.written_files()) == {
        "src/app.py",
        "src/new/mod.py",
        "notes.txt",
        "created.txt",
    }
    assert ok(ctx, "read_file", file_path="src/app.py") == "     1\tvalue = 2"
    assert ok(ctx, "read_file", file_path=str(root / "src/new/mod.py")) == (
        "     1\tdef needle(): pass"
    )
    # a second edit builds on the first
    ok(ctx, "edit", file_path="src/app.py", old_string="value = 2", new_string="value = 3")
    assert ok(ctx, "read_file", file_path="src/app.py") == "     1\tvalue = 3"
    assert (root / "src" / "app.py").read_text() == "value = 1\n"


def test_failed_edit_does_not_copy_up(world: tuple[Path, Overlay, ToolContext]) -> None:
    _root, overlay, ctx = world
    err(ctx, "edit", file_path="src/app.py", old_string="nope", new_string="x")
    assert overlay.written_files() == {}


def test_overlay_files_show_up_in_search_tools(world: tuple[Path, Overlay, ToolContext]) -> None:
    root, _overlay, ctx = world
    ok(ctx, "write_file", file_path="src/new/deeper/mod.py", content="needle = 'new'\n")
    ok(ctx, "edit", file_path="src/app.py", old_string="value = 1", new_string="needle = 1")
    ok(ctx, "write_file", file_path="top.py", content="x = 'needle'\n")
    ok(ctx, "write_file", file_path="debug.log", content="needle in ignored file\n")

    assert body(ok(ctx, "grep_search", pattern="needle")) == [
        "src/app.py:1:needle = 1",
        "src/new/deeper/mod.py:1:needle = 'new'",
        "top.py:1:x = 'needle'",
    ]
    assert body(ok(ctx, "grep_search", pattern="needle", path="src/new")) == [
        "src/new/deeper/mod.py:1:needle = 'new'",
    ]
    assert sorted(body(ok(ctx, "glob", pattern="**/*.py"))) == [
        "src/app.py",
        "src/keep.py",
        "src/new/deeper/mod.py",
        "top.py",
    ]
    assert sorted(body(ok(ctx, "glob", pattern="*.py", path="src/new/deeper"))) == [
        "src/new/deeper/mod.py"
    ]
    assert ok(ctx, "list_directory", path=".").splitlines() == [
        "Directory .:",
        "src/",
        ".gitignore",
        "README.md",
        "top.py",
        "[1 gitignored entry not shown.]",
    ]
    assert body(ok(ctx, "list_directory", path="src")) == ["new/", "app.py", "keep.py"]
    assert body(ok(ctx, "list_directory", path="src/new")) == ["deeper/"]
    assert not (root / "src" / "new").exists()
    assert not (root / "top.py").exists()


def test_overlay_gitignore_is_respected(world: tuple[Path, Overlay, ToolContext]) -> None:
    _root, _overlay, ctx = world
    ok(ctx, "edit", file_path=".gitignore", old_string="*.log\n", new_string="*.log\nsrc/keep.py\n")
    assert body(ok(ctx, "glob", pattern="**/*.py")) == ["src/app.py"]


def test_paths_the_gate_already_rewrote_pass_through(
    world: tuple[Path, Overlay, ToolContext],
) -> None:
    root, overlay, ctx = world
    rewritten = overlay.redirect_write(str(root / "src" / "app.py"))  # what the gate does
    assert ctx.access.resolve_read(str(rewritten)) == rewritten
    assert ctx.access.resolve_write(str(rewritten)) == rewritten
    assert ctx.access.logical_path(str(rewritten)) == root / "src" / "app.py"

    out = ok(ctx, "edit", file_path=str(rewritten), old_string="value = 1", new_string="v = 9")
    assert out == "Edited src/app.py: replaced 1 occurrence."  # no overlay path in the output
    assert rewritten.read_text() == "v = 9\n"
    assert ok(ctx, "read_file", file_path=str(rewritten)) == "     1\tv = 9"
    assert ok(ctx, "read_file", file_path="src/app.py") == "     1\tv = 9"
    assert (root / "src" / "app.py").read_text() == "value = 1\n"

    fresh = overlay.redirect_write("brand_new.txt")  # new file: only registered so far
    out = ok(ctx, "write_file", file_path=str(fresh), content="hi\n")
    assert out == "Created brand_new.txt (1 lines, 3 bytes)."
    assert not (root / "brand_new.txt").exists()
    assert body(ok(ctx, "grep_search", pattern="hi", path=str(fresh))) == ["brand_new.txt:1:hi"]
    assert "brand_new.txt" in body(ok(ctx, "list_directory"))


def test_registered_but_unwritten_files_are_not_listed(
    world: tuple[Path, Overlay, ToolContext],
) -> None:
    _root, overlay, ctx = world
    overlay.redirect_write("ghost.txt")
    assert "ghost.txt" not in ok(ctx, "list_directory")
    assert err(ctx, "read_file", file_path="ghost.txt") == "File not found: ghost.txt"


def test_overlay_refuses_writes_outside_root(
    world: tuple[Path, Overlay, ToolContext], tmp_path: Path
) -> None:
    root, overlay, ctx = world
    assert "outside the project root" in err(
        ctx, "write_file", file_path="../escape.txt", content="x"
    )
    (root / "link").symlink_to(tmp_path, target_is_directory=True)
    assert "outside the project root" in err(
        ctx, "write_file", file_path="link/escape.txt", content="x"
    )
    assert not (tmp_path / "escape.txt").exists()
    assert overlay.written_files() == {}


def test_reads_outside_root_stop_the_speculation(
    world: tuple[Path, Overlay, ToolContext], tmp_path: Path
) -> None:
    """design §11: a speculation reads only the project (also through a link inside it)."""
    root, _overlay, ctx = world
    (tmp_path / "elsewhere.txt").write_text("far\n")
    (root / "link.txt").symlink_to(tmp_path / "elsewhere.txt")
    for path in (str(tmp_path / "elsewhere.txt"), "link.txt", "../elsewhere.txt"):
        with pytest.raises(ToolStop) as stop:
            asyncio.run(execute(ToolCall("c", "read_file", json.dumps({"file_path": path})), ctx))
        assert stop.value.reason == BoundaryReason("read_outside_project", "read_file")


def test_apply_after_tools_puts_files_on_disk(world: tuple[Path, Overlay, ToolContext]) -> None:
    root, overlay, ctx = world
    ok(ctx, "edit", file_path="src/app.py", old_string="value = 1", new_string="value = 2")
    ok(ctx, "write_file", file_path="src/new/mod.py", content="m\n")
    overlay.apply_to_real(journal_dir=journal_of(overlay), durable=False)
    overlay.cleanup()
    direct = ToolContext(access=DirectAccess(root))
    assert ok(direct, "read_file", file_path="src/app.py") == "     1\tvalue = 2"
    assert ok(direct, "read_file", file_path="src/new/mod.py") == "     1\tm"


def test_root_spelled_through_a_symlink(tmp_path: Path) -> None:
    real = tmp_path / "real"
    (real / "src").mkdir(parents=True)
    (real / ".gitignore").write_text("*.log\n")
    (real / "src" / "a.py").write_text("needle\n")
    (real / "x.log").write_text("needle\n")
    alias = tmp_path / "alias"
    alias.symlink_to(real, target_is_directory=True)
    overlay = Overlay(alias, tmp_path / "ovl" / "1" / "s")
    ctx = ToolContext(access=OverlayAccess(overlay))
    ok(ctx, "write_file", file_path=str(alias / "src" / "b.py"), content="needle\n")
    # the gate hands over paths in the caller's spelling of the root
    gate_path = overlay.resolve_read("src")
    assert gate_path == alias / "src"
    assert body(ok(ctx, "grep_search", pattern="needle", path=str(gate_path))) == [
        "src/a.py:1:needle",
        "src/b.py:1:needle",
    ]
    assert body(ok(ctx, "grep_search", pattern="needle", path=str(alias))) == [
        "src/a.py:1:needle",
        "src/b.py:1:needle",
    ]
    direct = ToolContext(access=DirectAccess(alias))
    assert body(ok(direct, "glob", pattern="**/*", path=str(alias))) != []
    assert "x.log" not in ok(direct, "glob", pattern="**/*", path=str(alias))
    assert err(direct, "read_file", file_path=str(alias / "nope")) == "File not found: nope"
