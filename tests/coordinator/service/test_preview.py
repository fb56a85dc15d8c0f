"""The per-file diff of a preview: text, binary, too large, no final newline; a symlink in
the overlay is never followed."""

from __future__ import annotations

from pathlib import Path

from coordinator.service.preview import MAX_DIFF_BYTES, file_diff
from protocol.control import FileChange


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
