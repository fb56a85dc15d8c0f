"""What `specrun chat` says, read off a real pseudo-terminal of 80 and of 120 columns
(issue 35, item 6): the branches are numbered as `specrun accept --branch N` takes them
(branch 1 is the top guess), every hint and toolbar line fits the terminal whole (a hint
cut at the edge, or broken mid-word by the terminal, says nothing), and no pid or overlay
path shows unless the chat was started with `specrun --verbose`."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.coordinator.pty_screen import ScreenTerminal, chats
from tests.support import Specrun, demo_scenario_data

FIX = "fix the failing test in tests/test_calc.py"
BANNER_HINT = (
    "The grey text is the predicted next prompt: Tab or → accept it, Enter puts it in the "
    "line (Enter again sends it); Ctrl-O shows what Tab would change (files, then the diff; "
    "Esc closes); typing its beginning keeps it, ↓/↑ show other guesses when there are some; "
    "type anything else to send that instead. Ctrl-C aborts a turn, Ctrl-D quits.")


@pytest.fixture
def chat_at(specrun: Specrun, tmp_path: Path) -> Iterator[Any]:
    """Starts `specrun [--verbose] chat` (approval mode default: the fix's edit asks) with
    three ranked guesses, in a terminal ``cols`` wide."""
    scenario = tmp_path / "scenario.yaml"
    scenario.write_text(yaml.safe_dump(demo_scenario_data(), sort_keys=False))
    specrun.env.own_settings(specrun.project).write_text(json.dumps({"speculationBranches": 3}))

    with chats(specrun) as open_chat:

        def start(cols: int, *before: str) -> ScreenTerminal:
            return open_chat(*before, "chat", "--approval-mode", "default",
                             "--scenario", str(scenario), cols=cols)

        yield start


def _toolbar(term: ScreenTerminal) -> str:
    rows = [row for row in term.rows() if row.startswith(" ↓↑ ")]
    return rows[-1] if rows else ""


def _whole(line: str, cols: int) -> bool:
    """Drawn whole: not cut with an ellipsis, and short of the edge (a row that fills
    every column is one the terminal broke, or the toolbar cut)."""
    return "…" not in line and len(line) < cols


def _toolbar_reads(term: ScreenTerminal, pattern: str) -> str:
    term.wait(lambda t: re.fullmatch(pattern, _toolbar(t)) is not None, timeout=30,
              what=f"the toolbar to read {pattern!r}")
    return _toolbar(term)


@pytest.mark.parametrize("cols", [80, 120])
def test_branches_are_numbered_from_one_and_every_hint_fits_whole(
    chat_at: Any, specrun: Specrun, cols: int
) -> None:
    term = chat_at(cols)
    term.wait(lambda t: any(row.startswith("❯") for row in t.rows()), what="the prompt")
    # the banner's hint, wrapped between words: its rows joined give it back word for word
    assert BANNER_HINT in " ".join(term.rows()), term.text()

    term.send(FIX + "\r")
    term.wait_for(r"\[y/a/n/r\]")
    # the answers on offer: whole words on whole lines, however wide the terminal
    answers = [row for row in term.rows() if re.match(r"  [yn]: ", row)]
    assert answers and all(_whole(row, cols) for row in answers), term.text()
    said = " ".join(" ".join(answers).split())
    assert ("y: yes, once · a: yes, and allow edit for this session" in said
            and "n: no · r: no, and tell the model why" in said), said
    term.send("y\r")
    term.wait_for("done in")

    # the top guess stops before `python -m pytest -q`; the toolbar names it whole
    top = _toolbar_reads(term, r" ↓↑ branch 1 of 3 · ⏸ .*")
    assert _whole(top, cols) and "python -m pytest -q" in top, top
    term.send("\x1b[B")  # Down: branch 2 (stopped before its file write: mode default)
    second = _toolbar_reads(term, r" ↓↑ branch 2 of 3 · ⏸ .*")
    assert _whole(second, cols) and "write_file" in second, second
    term.send("\x1b[B")  # Down: branch 3, completed
    third = _toolbar_reads(term, r" ↓↑ branch 3 of 3 · ✓ .*")
    assert _whole(third, cols) and "Tab applies it" in third, third
    # what `specrun accept --branch 3` would take is the one the toolbar calls branch 3
    listed = specrun.run("suggestion", check=True).stdout
    assert "❯ show me the diff  (branch 3)" in listed, listed
    assert any(row.startswith("❯ show me the diff") for row in term.rows()), term.text()

    term.send("\x04")  # Ctrl-D: what keeps running, and no pid in the sentence
    term.wait_for("Left the chat")
    left = " ".join(term.text().split())
    assert ("Left the chat. The specrun service keeps running in the background; `specrun "
            "chat` comes back to this conversation, `specrun stop` stops it.") in " ".join(
                term.rows()), term.text()  # between words only, and no pid
    assert "pid" not in left


def test_verbose_chat_names_the_service_pid(chat_at: Any, specrun: Specrun) -> None:
    term = chat_at(80, "--verbose")
    pid = specrun.json("status")["pid"]
    term.send("/status\r")
    term.wait_for(rf"pid {pid}, up ")  # its slash commands run with --verbose too
    term.send("\x04")
    term.wait_for(rf"\(pid {pid}\)")
