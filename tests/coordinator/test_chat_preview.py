"""The chat's preview (Ctrl-O) and Enter against a real service, in a pseudo-terminal read
through a terminal emulator.

On a speculation that creates, modifies, deletes, changes a mode and writes a file that runs
later, the preview lists the files and shows the diff exactly as ``specrun diff --json``
gives them, scrolled page by page; Esc returns to the prompt with what was typed; Enter on
an empty line fills the line (nothing is sent), a second Enter takes the speculation (an
``enter`` accept, no model turn) and the files on disk are what the preview showed, byte for
byte. A running speculation's preview shows what it wrote so far; reopened after the person
changed a file it wrote, it says Tab would refuse it.
"""

from __future__ import annotations

import difflib
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from coordinator.cli.changes_view import diff_lines, file_line
from coordinator.cli.chat.preview import preview_lines
from protocol.text.inert_text import find_hidden, inert
from protocol.wire.control import DiffReply, DiffRequest, FileChange, FileDiff, SuggestionRequest
from tests.coordinator.e2e import (
    STALL,
    TIDY,
    done_unless_stalled,
    shell_call,
    shell_speculation,
    stepped_scenario,
    tidy_project,
    write_call,
)
from tests.coordinator.pty_screen import ScreenTerminal
from tests.support import (
    Specrun,
    needs_containment,
    running_service,
    wait_until,
)
from worker.contain.landlock import abi

needs_landlock = needs_containment(
    "needs Landlock ABI >= 6 for the full profile" if abi() < 6 else None
)

EVERYTHING = TIDY
LONG = "".join(f"def f{i}(x):\n    return x + {i}\n" for i in range(20))  # 40 lines: pages
ESC = "\x1b"
PAGE_DOWN = "\x1b[6~"
CTRL_O = "\x0f"




STEPS: dict[str, list[dict[str, Any]]] = {
    EVERYTHING: [
        write_call("src/util.py", LONG),
        {"name": "edit", "arguments": {"file_path": "src/calc.py", "old_string": "return a - b",
                                       "new_string": "return a + b"}},
        write_call(".envrc", "export DEBUG=1\n"),
        shell_call("chmod +x tools/run.sh && rm tests/old_test.py"),
    ],
    STALL: [write_call("NOTES.md", "first notes\n")],
}


def scenario() -> dict[str, Any]:
    return stepped_scenario("chat-preview", STEPS, done_unless_stalled, anchored=True)


@pytest.fixture
def service(tmp_path: Path) -> Iterator[Specrun]:
    project = tidy_project(tmp_path / "project")
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(scenario()))
    with running_service(project, "--approval-mode", "auto-edit", "--scenario", str(path),
                         before_start=shell_speculation(project)) as r:
        yield r


@pytest.fixture
def chat(service: Specrun) -> Iterator[ScreenTerminal]:
    # Tall enough for the whole preview on one page (the diff test's 74 lines); scrolling
    # is read page by page when it is longer.
    term = ScreenTerminal(service, "chat", rows=80)
    try:
        term.wait_for("Ctrl-D quits")
        yield term
    finally:
        term.close()


def speculation_of(runner: Specrun) -> dict[str, Any]:
    return runner.query(SuggestionRequest).get("speculation") or {}


def announce(chat: ScreenTerminal, runner: Specrun, text: str, status: str) -> None:
    """Have the model suggest ``text`` and wait for its speculation to reach ``status``."""
    chat.send("hello\r")
    chat.wait_for("Hi.")
    chat.send(f"go {text}\r")
    assert wait_until(lambda: speculation_of(runner).get("status") == status, timeout=60)
    chat.wait_for(f"(?m)^❯ {re.escape(text)}")  # the ghost text in the prompt's line


STATUS = re.compile(r"lines (\d+)-(\d+) of (\d+)( \(end\))?")


def read_preview(chat: ScreenTerminal) -> list[str]:
    """Every line of the open preview, page by page (PgDn until the status says end)."""
    lines: dict[int, str] = {}
    while True:
        match = chat.wait_for(STATUS.pattern)
        first, last = int(match[1]), int(match[2])
        rows = chat.rows()
        for offset in range(last - first + 1):
            lines[first + offset] = rows[offset]
        if match[4]:
            return [lines[n] for n in sorted(lines)]
        chat.send(PAGE_DOWN)
        chat.wait(lambda t, f=first: (m := STATUS.search(t.text())) is not None
                  and int(m[1]) > f, what="the next page")


def expected_preview(reply: DiffReply) -> tuple[list[str], list[str]]:
    """What the preview must list (its file lines) and show (its diff lines), from the
    service's own answer as `specrun diff --json` prints it; trailing blanks stripped, as
    a screen shows them."""
    files = [f"  {file_line(item)}" for item in reply.files if not item.change.ignored]
    diff: list[str] = []
    for item in reply.files:
        if item.diff and not item.change.ignored:
            diff += [""] + [inert(line, multiline=False).rstrip()
                            for line in diff_lines(item.diff)]
    return files, diff


def in_the_line(term: ScreenTerminal, text: str, ghost: str = "") -> bool:
    """The prompt's line holds ``text`` itself (not as grey ghost text), followed by
    ``ghost`` in grey."""
    for y, row in enumerate(term.rows()):
        at = row.find(f"❯ {text}{ghost}")
        if at >= 0:
            typed = term.screen.buffer[y][at + 2 + len(text) - 1]
            grey = term.screen.buffer[y][at + 2 + len(text)] if ghost else None
            return typed.fg == "default" and (grey is None or grey.fg != "default")
    return False


def read(path: Path) -> str:
    return path.read_text() if path.exists() else ""


@needs_landlock
def test_the_preview_is_what_a_second_enter_then_applies(
    service: Specrun, chat: ScreenTerminal
) -> None:
    import msgspec

    project = service.project
    announce(chat, service, EVERYTHING, "completed")
    preview_json = service.json("diff")
    reply = msgspec.convert(preview_json, DiffReply)
    before = {f.change.path: read(project / f.change.path) for f in reply.files}

    chat.send("tidy")  # typed text the preview must leave alone
    chat.wait(lambda t: in_the_line(t, "tidy", " the project"), what="tidy typed")
    chat.send(CTRL_O)
    shown = read_preview(chat)
    files, diff = expected_preview(reply)
    assert shown[0].startswith(f"What Tab would do with “{EVERYTHING}” (branch 1; completed")
    assert shown[1:1 + len(files)] == files
    assert [line.strip() for line in files] == [
        "created src/util.py  +40 -0", "modified src/calc.py  +1 -1", "created .envrc  +1 -0",
        "mode +x tools/run.sh", "deleted tests/old_test.py  +0 -2"]
    warning = shown[1 + len(files)]
    assert warning.startswith("  ⚠ runs later without a key press")
    assert ".envrc" in warning and "tools/run.sh" in warning
    assert shown[2 + len(files):] == diff  # every diff line, in order, as the service gave it

    chat.send(ESC)  # back to the prompt, the typed text intact
    chat.wait(lambda t: "r refreshes" not in t.text(), what="the preview closed")
    chat.wait(lambda t: in_the_line(t, "tidy", " the project"), what="tidy still typed")
    chat.send("\x7f" * 4)  # back to an empty line
    assert wait_until(lambda: service.query(SuggestionRequest)["typed"] == "", timeout=10)

    chat.send("\r")  # fills the line: nothing is sent
    chat.wait(lambda t: in_the_line(t, EVERYTHING), what="the line filled")
    assert service.json("stats")["accepted_by_method"] == {}
    assert not (project / "src/util.py").exists()

    chat.send("\r")  # sends it: the speculation, as Tab would
    chat.wait_for("saved")
    stats = service.json("stats")
    assert stats["accepted_by_method"] == {"enter": 1}
    assert "exact_match" not in stats["accepted_by_typing"]
    for item in reply.files:
        rel, status = item.change.path, item.change.status
        a = "/dev/null" if status == "created" else f"a/{rel}"
        b = "/dev/null" if status == "deleted" else f"b/{rel}"
        again = "".join(difflib.unified_diff(
            before[rel].splitlines(keepends=True), read(project / rel).splitlines(keepends=True),
            a, b))
        assert item.diff == again, rel  # byte for byte what the second Enter applied
    assert (project / "tools/run.sh").stat().st_mode & 0o100
    assert not (project / "tests/old_test.py").exists()


@needs_landlock
def test_a_running_speculation_shows_what_it_wrote_so_far_and_a_conflict_when_reopened(
    service: Specrun, chat: ScreenTerminal
) -> None:
    announce(chat, service, STALL, "running")
    # its write's event is on its way to the coordinator
    assert wait_until(lambda: service.query(DiffRequest)["files"], timeout=30)
    chat.send(CTRL_O)
    shown = read_preview(chat)
    assert "still running: what it wrote so far" in shown[0]
    assert "  created NOTES.md  +1 -0" in shown and "+first notes" in shown
    chat.send("q")
    chat.wait(lambda t: "r refreshes" not in t.text(), what="the preview closed")
    chat.wait_for(f"(?m)^❯ {re.escape(STALL)}")

    (service.project / "NOTES.md").write_text("my own notes\n")  # meanwhile, by hand
    chat.send(CTRL_O)  # reopened: asked again, the conflict said before Tab
    shown = read_preview(chat)
    assert any(line.startswith("  ⚠ Tab would refuse all of it now: NOTES.md changed")
               for line in shown), shown
    chat.send(ESC)
    chat.wait(lambda t: "r refreshes" not in t.text(), what="the preview closed")


# -- the preview's lines, from a reply -------------------------------------------------------


def texts(reply: DiffReply | str) -> list[str]:
    return ["".join(text for _, text in line) for line in preview_lines(reply)]


def test_files_warnings_and_conflicts_come_before_the_diff() -> None:
    reply = DiffReply(1, 0, "tidy", "completed", files=(
        FileDiff(FileChange("a.py", "modified", conflict="modified"),
                 "--- a/a.py\n+++ b/a.py\n@@ -1 +1 @@\n-x\n+y\n", added=1, removed=1),
        FileDiff(FileChange(".envrc", "created", runs_later=True), "+++ b/.envrc\n+ok\n",
                 added=1),
        FileDiff(FileChange("build/out.o", "created", ignored=True)),
    ))
    assert texts(reply) == [
        "What Tab would do with “tidy” (branch 1; completed: Tab applies this)",
        "  modified a.py — conflict: the real file was modified since  +1 -1",
        "  created .envrc  +1 -0",
        "  ⚠ runs later without a key press (check before you commit, build or open): .envrc",
        "  …and 1 file ignored by git",
        "  ⚠ Tab would refuse all of it now: a.py changed in the project since the "
        "speculation read it",
        "", "--- a/a.py", "+++ b/a.py", "@@ -1 +1 @@", "-x", "+y",
        "", "+++ b/.envrc", "+ok",
    ]
    styles = [line[0][0] if line else "" for line in preview_lines(reply)[-9:]]
    assert styles == ["", "class:preview.file", "class:preview.file", "class:preview.hunk",
                      "class:preview.removed", "class:preview.added", "",
                      "class:preview.file", "class:preview.added"]


def test_a_refused_report_or_an_error_is_one_sentence() -> None:
    refused = DiffReply(1, 0, "tidy", "completed", refused="The worker's report\x1b[2K lies.")
    assert texts(refused)[1:] == ["  The worker's report\\x1b[2K lies."]
    assert texts("There is no suggestion\x1b]52;c;x\x07.") == [
        "There is no suggestion\\x1b]52;c;x\\x07."]


def test_hostile_names_and_lines_reach_the_screen_escaped() -> None:
    name = "notes\x1b[1A\u202egnp.sh"
    reply = DiffReply(1, 0, "x\u200by", "running", files=(
        FileDiff(FileChange(name, "created"), f"+++ b/{name}\n+Clip\x1b]52;c;x\x07\r\n",
                 added=1),))
    for line in texts(reply):
        assert find_hidden(line) is None, line
        assert "\n" not in line  # one screen line each: the scrolling counts them
    assert any("Clip\\x1b]52;c;x\\x07\\r" in line for line in texts(reply))


@needs_landlock
def test_esc_closes_the_preview_however_soon_after_opening(
    service: Specrun, chat: ScreenTerminal
) -> None:
    # The chat's own prompt waits half a second (its ttimeoutlen) after the last key it read
    # (Ctrl-O) before it flushes its input. An Esc the preview is still holding for its own
    # 0.1 s wait was taken by that late flush when both apps read through one input: the
    # preview then never saw it. Sent 0.45 s after Ctrl-O, the Esc lands in that window.
    announce(chat, service, EVERYTHING, "completed")
    for attempt in range(4):
        opened = time.monotonic()
        chat.send(CTRL_O)
        chat.wait_for(STATUS.pattern)
        time.sleep(max(0.0, opened + 0.45 - time.monotonic()))
        chat.send(ESC)
        chat.wait(lambda t: "r refreshes" not in t.text(), timeout=10,
                  what=f"the preview closed by Esc (attempt {attempt + 1})")
