"""read_file, write_file and edit on real files (main chat access)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.worker.tool_calls import err, ok
from worker.tools import DirectAccess, ToolContext


@pytest.fixture
def ctx(tmp_path: Path) -> ToolContext:
    root = tmp_path / "proj"
    root.mkdir()
    return ToolContext(access=DirectAccess(root))


def root_of(ctx: ToolContext) -> Path:
    return ctx.access.root


# --- read_file --------------------------------------------------------------------------------


def test_read_numbers_lines(ctx: ToolContext) -> None:
    (root_of(ctx) / "a.txt").write_text("alpha\nbeta\n\ngamma\n")
    out = ok(ctx, "read_file", file_path="a.txt")
    assert out == "     1\talpha\n     2\tbeta\n     3\t\n     4\tgamma"
    assert "    12\t" not in out


def test_read_line_number_format_for_two_digits(ctx: ToolContext) -> None:
    (root_of(ctx) / "a.txt").write_text("".join(f"line{i}\n" for i in range(1, 21)))
    out = ok(ctx, "read_file", file_path="a.txt", offset=12, limit=1)
    assert out.splitlines()[0] == "    12\tline12"
    assert "   12\tline12" in out


def test_read_absolute_path_and_crlf(ctx: ToolContext) -> None:
    path = root_of(ctx) / "win.txt"
    path.write_bytes(b"one\r\ntwo\r\n")
    assert ok(ctx, "read_file", file_path=str(path)) == "     1\tone\n     2\ttwo"


def test_read_offset_limit_and_continuation_note(ctx: ToolContext) -> None:
    (root_of(ctx) / "n.txt").write_text("".join(f"{i}\n" for i in range(1, 101)))
    out = ok(ctx, "read_file", file_path="n.txt", offset=10, limit=5)
    lines = out.splitlines()
    assert lines[:5] == [f"{i:>6}\t{i}" for i in range(10, 15)]
    assert lines[5] == "[Showing lines 10-14 of 100 of n.txt. Use offset=15 to read more.]"
    tail = ok(ctx, "read_file", file_path="n.txt", offset=98)
    assert tail.splitlines() == [f"{i:>6}\t{i}" for i in range(98, 101)]


def test_read_default_max_lines(ctx: ToolContext) -> None:
    (root_of(ctx) / "big.txt").write_text("x\n" * 2500)
    out = ok(ctx, "read_file", file_path="big.txt")
    lines = out.splitlines()
    assert len(lines) == 2001
    assert lines[1999] == "  2000\tx"
    assert "Use offset=2001" in lines[-1]
    small = ToolContext(access=ctx.access, read_max_lines=3)
    assert ok(small, "read_file", file_path="big.txt").count("\n") == 3


def test_read_cuts_long_lines(ctx: ToolContext) -> None:
    (root_of(ctx) / "long.txt").write_text("y" * 5000 + "\nshort\n")
    out = ok(ctx, "read_file", file_path="long.txt")
    first = out.splitlines()[0]
    assert first == "     1\t" + "y" * 2000 + " [line cut]"
    assert "[1 line(s) longer than 2000 characters were cut.]" in out


def test_read_output_cap_stops_at_whole_lines(ctx: ToolContext) -> None:
    (root_of(ctx) / "wide.txt").write_text(("z" * 1000 + "\n") * 100)
    out = ok(ctx, "read_file", file_path="wide.txt")
    assert len(out) <= 30_000
    last_line = out.splitlines()[-2]
    assert last_line.endswith("z" * 1000)
    assert "Use offset=" in out.splitlines()[-1]


def test_read_size_cap_needs_a_window(ctx: ToolContext) -> None:
    (root_of(ctx) / "huge.txt").write_text("row\n" * 1000)
    tiny = ToolContext(access=ctx.access, read_max_bytes=100)
    assert "more than the 100-byte limit" in err(tiny, "read_file", file_path="huge.txt")
    out = ok(tiny, "read_file", file_path="huge.txt", offset=500, limit=2)
    assert out.splitlines()[:2] == ["   500\trow", "   501\trow"]
    assert "Use offset=502" in out
    end = ok(tiny, "read_file", file_path="huge.txt", offset=999)
    assert end == "   999\trow\n  1000\trow"
    assert "past the end" in err(tiny, "read_file", file_path="huge.txt", offset=5000)


def test_read_errors(ctx: ToolContext) -> None:
    root = root_of(ctx)
    assert err(ctx, "read_file", file_path="missing.txt") == "File not found: missing.txt"
    (root / "d").mkdir()
    assert "is a directory" in err(ctx, "read_file", file_path="d")
    (root / "bin.dat").write_bytes(b"abc\0def" * 10)
    assert err(ctx, "read_file", file_path="bin.dat") == "bin.dat is a binary file"
    (root / "short.txt").write_text("a\nb\n")
    assert err(ctx, "read_file", file_path="short.txt", offset=3) == (
        "offset 3 is past the end of short.txt (2 lines)"
    )
    assert "at least 1" in err(ctx, "read_file", file_path="short.txt", offset=0)
    assert "at least 1" in err(ctx, "read_file", file_path="short.txt", limit=0)
    (root / "empty.txt").write_text("")
    assert ok(ctx, "read_file", file_path="empty.txt") == "[empty.txt is empty]"


def test_read_nul_after_8kb_is_text(ctx: ToolContext) -> None:
    (root_of(ctx) / "late.txt").write_bytes(b"a" * 9000 + b"\0")
    assert ok(ctx, "read_file", file_path="late.txt").startswith("     1\taaa")


def test_read_invalid_utf8_is_replaced(ctx: ToolContext) -> None:
    (root_of(ctx) / "latin.txt").write_bytes(b"caf\xe9\n")
    assert ok(ctx, "read_file", file_path="latin.txt") == "     1\tcaf\ufffd"


def test_read_outside_root_is_allowed(ctx: ToolContext, tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("hi\n")
    assert ok(ctx, "read_file", file_path=str(outside)) == "     1\thi"
    assert ok(ctx, "read_file", file_path="../outside.txt") == "     1\thi"


# --- write_file -------------------------------------------------------------------------------


def test_write_creates_parents_and_overwrites(ctx: ToolContext) -> None:
    root = root_of(ctx)
    out = ok(ctx, "write_file", file_path="pkg/sub/mod.py", content="x = 1\ny = 2\n")
    assert out == "Created pkg/sub/mod.py (2 lines, 12 bytes)."
    assert (root / "pkg/sub/mod.py").read_text() == "x = 1\ny = 2\n"
    out = ok(ctx, "write_file", file_path=str(root / "pkg/sub/mod.py"), content="z")
    assert out == "Overwrote pkg/sub/mod.py (1 lines, 1 bytes)."
    assert (root / "pkg/sub/mod.py").read_bytes() == b"z"


def test_write_keeps_content_byte_exact(ctx: ToolContext) -> None:
    content = "naïve ☃\r\nline\n\n"
    ok(ctx, "write_file", file_path="u.txt", content=content)
    assert (root_of(ctx) / "u.txt").read_bytes() == content.encode()


def test_write_errors(ctx: ToolContext) -> None:
    (root_of(ctx) / "d").mkdir()
    assert "is a directory" in err(ctx, "write_file", file_path="d", content="x")
    assert err(ctx, "write_file", file_path="a.txt") == (
        "Invalid arguments for write_file: 'content' is required"
    )
    assert "'content' must be a string" in err(ctx, "write_file", file_path="a.txt", content=5)


def test_write_refuses_outside_root(ctx: ToolContext, tmp_path: Path) -> None:
    message = err(ctx, "write_file", file_path="../escape.txt", content="x")
    assert message.startswith("Refusing to write ../escape.txt: it is outside the project root")
    assert not (tmp_path / "escape.txt").exists()
    message = err(ctx, "write_file", file_path=str(tmp_path / "abs.txt"), content="x")
    assert "outside the project root" in message
    assert not (tmp_path / "abs.txt").exists()


def test_write_refuses_through_symlink(ctx: ToolContext, tmp_path: Path) -> None:
    root = root_of(ctx)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (root / "link").symlink_to(elsewhere, target_is_directory=True)
    message = err(ctx, "write_file", file_path="link/x.txt", content="x")
    assert "outside the project root" in message
    assert "resolves to" in message
    assert not (elsewhere / "x.txt").exists()
    (root / "filelink").symlink_to(tmp_path / "target.txt")
    assert "outside the project root" in err(ctx, "write_file", file_path="filelink", content="x")
    assert not (tmp_path / "target.txt").exists()
    # ..foo is a legal name inside the root
    ok(ctx, "write_file", file_path="..foo", content="fine")
    assert (root / "..foo").read_text() == "fine"


# --- edit -------------------------------------------------------------------------------------


def test_edit_replaces_once(ctx: ToolContext) -> None:
    path = root_of(ctx) / "m.py"
    path.write_text("def f():\n    return 1\n")
    out = ok(ctx, "edit", file_path="m.py", old_string="return 1", new_string="return 2")
    assert out == "Edited m.py: replaced 1 occurrence."
    assert path.read_text() == "def f():\n    return 2\n"


def test_edit_ambiguous_and_replace_all(ctx: ToolContext) -> None:
    path = root_of(ctx) / "m.py"
    path.write_text("a = 1\nb = 1\nc = 1\n")
    message = err(ctx, "edit", file_path="m.py", old_string="1", new_string="2")
    assert message == (
        "old_string appears 3 times in m.py; pass replace_all or give more context to make "
        "it unique"
    )
    assert path.read_text() == "a = 1\nb = 1\nc = 1\n"
    out = ok(ctx, "edit", file_path="m.py", old_string="1", new_string="2", replace_all=True)
    assert out == "Edited m.py: replaced 3 occurrences."
    assert path.read_text() == "a = 2\nb = 2\nc = 2\n"
    ok(ctx, "edit", file_path="m.py", old_string="b = 2", new_string="b = 3", replace_all="true")
    assert path.read_text() == "a = 2\nb = 3\nc = 2\n"


def test_edit_errors(ctx: ToolContext) -> None:
    root = root_of(ctx)
    (root / "m.py").write_text("x = 1\n")
    assert "not found in m.py" in err(
        ctx, "edit", file_path="m.py", old_string="y = 1", new_string="y = 2"
    )
    assert err(ctx, "edit", file_path="m.py", old_string="x", new_string="x") == (
        "old_string and new_string are identical; there is nothing to change"
    )
    assert err(ctx, "edit", file_path="nope.py", old_string="a", new_string="b").startswith(
        "File not found: nope.py"
    )
    assert "already exists" in err(ctx, "edit", file_path="m.py", old_string="", new_string="z")
    (root / "b.bin").write_bytes(b"\0\1\2")
    assert "binary file" in err(ctx, "edit", file_path="b.bin", old_string="a", new_string="b")
    (root / "l.txt").write_bytes(b"caf\xe9")
    assert "not valid UTF-8" in err(ctx, "edit", file_path="l.txt", old_string="c", new_string="d")
    assert "'replace_all' must be true or false" in err(
        ctx, "edit", file_path="m.py", old_string="x", new_string="y", replace_all="maybe"
    )
    assert (root / "m.py").read_text() == "x = 1\n"


def test_edit_creates_missing_file_from_empty_old_string(ctx: ToolContext) -> None:
    out = ok(ctx, "edit", file_path="new/dir/f.txt", old_string="", new_string="hello\n")
    assert out == "Created new/dir/f.txt (6 bytes)."
    assert (root_of(ctx) / "new/dir/f.txt").read_text() == "hello\n"
    (root_of(ctx) / "blank.txt").write_text("")
    ok(ctx, "edit", file_path="blank.txt", old_string="", new_string="filled")
    assert (root_of(ctx) / "blank.txt").read_text() == "filled"


def test_edit_keeps_crlf(ctx: ToolContext) -> None:
    path = root_of(ctx) / "w.txt"
    path.write_bytes(b"one\r\ntwo\r\nthree\r\n")
    ok(ctx, "edit", file_path="w.txt", old_string="one\ntwo", new_string="uno\ndos")
    assert path.read_bytes() == b"uno\r\ndos\r\nthree\r\n"


def test_edit_refuses_outside_root(ctx: ToolContext, tmp_path: Path) -> None:
    outside = tmp_path / "o.txt"
    outside.write_text("a")
    assert "outside the project root" in err(
        ctx, "edit", file_path=str(outside), old_string="a", new_string="b"
    )
    assert outside.read_text() == "a"


# --- odd file names ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["üñí códe ☃.py", "新文件.txt", "new\nline.txt", "tab\there.txt"])
def test_odd_names_round_trip(ctx: ToolContext, name: str) -> None:
    ok(ctx, "write_file", file_path=name, content="v1\n")
    ok(ctx, "edit", file_path=name, old_string="v1", new_string="v2")
    assert ok(ctx, "read_file", file_path=name) == "     1\tv2"
    assert (root_of(ctx) / name).read_text() == "v2\n"
    missing = err(ctx, "read_file", file_path=name + ".missing")
    if "\n" in name or "\t" in name:
        assert json.dumps(name + ".missing") in missing  # quoted, stays on one line
        assert "\n" not in missing
