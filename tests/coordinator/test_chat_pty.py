"""`specrun chat` in a pseudo-terminal: the ghost text appears, Tab accepts, typing something
else dismisses (its worker is killed), Ctrl-C aborts a running turn, Ctrl-D leaves; typing
the beginning of the suggestion keeps its speculation and the first letter that diverges
kills it; Down shows the next ranked alternative; a prompt typed out in full is an accept."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pexpect
import psutil
import pytest
import yaml

from protocol.wire.control import SuggestionRequest
from tests.support import REPO, Specrun, demo_scenario_data, wait_until

FIX = "fix the failing test in tests/test_calc.py"
NEG = "add a test for negative numbers"
DIFF = "show me the diff"
CPR_REQUEST = "\x1b\\[6n"  # prompt_toolkit asks the terminal where the cursor is


class Terminal:
    """A pexpect child that answers cursor-position requests like a real terminal."""

    def __init__(self, child: pexpect.spawn) -> None:
        self.child = child

    def expect(self, pattern: str, timeout: float = 30) -> None:
        while True:
            if self.child.expect([pattern, CPR_REQUEST], timeout=timeout) == 0:
                return
            self.child.send("\x1b[1;1R")

    def send(self, text: str) -> None:
        self.child.send(text)


def _scenario(tmp: Path) -> Path:
    """The demo scenario plus one query whose answer never finishes (for Ctrl-C)."""
    data: dict[str, Any] = demo_scenario_data()  # at test pace
    data["rules"].insert(0, {"name": "stall", "when": {"last_user": "take your time"},
                             "reply": {"text": "Thinking it over very slowly"}, "stall": True})
    path = tmp / "scenario.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


@pytest.fixture
def terminal(specrun: Specrun, tmp_path: Path) -> Iterator[Terminal]:
    env = {**specrun.env.vars, "TERM": "xterm-256color", "COLUMNS": "120", "LINES": "40"}
    child = pexpect.spawn(
        sys.executable,
        ["-m", "coordinator", "--project", str(specrun.project), "chat", "--approval-mode",
         "auto-edit", "--scenario", str(_scenario(tmp_path))],
        env=env, cwd=str(REPO), encoding="utf-8", dimensions=(40, 120), timeout=30,
    )
    try:
        yield Terminal(child)
    finally:
        if child.isalive():
            child.terminate(force=True)
        child.close()
        specrun.run("stop")


def _suggestion(specrun: Specrun) -> dict[str, Any]:
    return specrun.json("suggestion")  # type: ignore[no-any-return]


def test_chat_ghost_tab_typing_ctrl_c_ctrl_d(terminal: Terminal, specrun: Specrun) -> None:
    terminal.expect("Ctrl-D quits")  # the banner: the chat started the service itself
    assert specrun.json("status")["approval_mode"] == "auto-edit"

    terminal.send(FIX + "\r")
    terminal.expect("done in")
    terminal.expect(NEG)  # grey ghost text after the prompt
    terminal.expect("speculation completed")  # the bottom toolbar's marker
    assert not (specrun.project / "tests/test_calc_negative.py").exists()

    terminal.send("\t")  # Tab accepts: files and transcript at once
    terminal.expect("saved")
    assert (specrun.project / "tests/test_calc_negative.py").exists()

    terminal.expect(DIFF)  # the pipelined suggestion is the next ghost text
    assert wait_until(
        lambda: (specrun.query(SuggestionRequest).get("speculation") or {}).get("worker_pid")
    )
    pid = _suggestion(specrun)["speculation"]["worker_pid"]
    terminal.send("what does multiply do?\r")  # typing something else dismisses it
    terminal.expect("no answer scripted")
    terminal.expect("done in")
    stats = specrun.json("stats")
    assert stats["suggestions_ignored"] == 1 and stats["accepted_by_method"] == {"tab": 1}
    assert wait_until(lambda: not _alive(pid), timeout=5)

    terminal.send("take your time\r")
    terminal.expect("Thinking it over")
    terminal.send("\x03")  # Ctrl-C aborts the running turn
    terminal.expect("turn aborted")
    assert specrun.json("status")["pid"] > 0  # the service keeps running

    terminal.send("\x04")  # Ctrl-D leaves
    terminal.child.expect(pexpect.EOF, timeout=10)
    terminal.child.close()
    assert terminal.child.exitstatus == 0


def test_enter_fills_then_sends_right_arrow_accepts_and_approvals_are_asked(
    terminal: Terminal, specrun: Specrun
) -> None:
    terminal.expect("Enter puts it in the line")  # the banner says what Enter does
    terminal.send(FIX + "\r")
    terminal.expect("speculation completed")
    terminal.send("\r")  # fills the line with the suggestion; nothing is sent
    terminal.send("\r")  # sends it: its speculation is applied, as Tab would
    terminal.expect("Sent the suggestion: using its speculation")
    terminal.expect("saved")
    stats = specrun.json("stats")
    assert stats["accepted_by_method"] == {"enter": 1}
    assert "exact_match" not in stats["accepted_by_typing"]
    terminal.expect(DIFF)
    terminal.expect("speculation completed")
    terminal.send("\x1b[C")  # Right arrow
    terminal.expect("saved")
    assert specrun.json("stats")["accepted_by_method"] == {"enter": 1, "right": 1}
    # a shell command that writes needs a yes, asked inline
    terminal.send("commit this\r")
    terminal.expect(r"Allow run_shell_command\(command: git add")
    terminal.expect(r"\[y/a/n/r\]")
    terminal.send("n\r")
    terminal.expect("refused")
    terminal.expect("done in")
    assert "Fix add()" not in _git_log(specrun.project)


def test_enter_accepts_at_once_with_enter_accepts(
    chats: list[Terminal], specrun: Specrun, tmp_path: Path
) -> None:
    terminal = _chat(specrun, tmp_path, settings={"enterAccepts": True})
    chats.append(terminal)
    terminal.expect("Tab, → or Enter accept it")
    terminal.send(FIX + "\r")
    terminal.expect("speculation completed")
    terminal.send("\r")
    terminal.expect("saved")
    assert specrun.json("stats")["accepted_by_method"] == {"enter": 1}
    assert (specrun.project / "tests/test_calc_negative.py").exists()


def _git_log(project: Path) -> str:
    import subprocess

    return subprocess.run(["git", "log", "--oneline"], cwd=project, capture_output=True,
                          text=True).stdout


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


# -- issue 17: typing keeps a speculation, several ranked alternatives ---------------------


def _slow_negative_test(data: dict[str, Any]) -> None:
    """The speculation of NEG answers its first request after 3 s, so that it is still
    running while the test types."""
    rules: list[dict[str, Any]] = data["rules"]
    first = next(r for r in rules if r.get("name") == "negative test, read the tests")
    slow = {**first, "name": "slow negative test", "when": {**first["when"],
                                                          "purpose": "speculation"},
            "reply": {**first["reply"], "latency_ms": 3000}}
    rules.insert(rules.index(first), slow)


def _chat(specrun: Specrun, tmp: Path, settings: dict[str, Any] | None = None,
          change: Any = None) -> Terminal:
    data: dict[str, Any] = demo_scenario_data()  # at test pace
    if change is not None:
        change(data)
    scenario = tmp / "scenario.yaml"
    scenario.write_text(yaml.safe_dump(data, sort_keys=False))
    if settings:
        specrun.env.own_settings(specrun.project).write_text(json.dumps(settings))
    env = {**specrun.env.vars, "TERM": "xterm-256color", "COLUMNS": "120", "LINES": "40"}
    child = pexpect.spawn(
        sys.executable,
        ["-m", "coordinator", "--project", str(specrun.project), "chat", "--approval-mode",
         "auto-edit", "--scenario", str(scenario)],
        env=env, cwd=str(REPO), encoding="utf-8", dimensions=(40, 120), timeout=30,
    )
    return Terminal(child)


@pytest.fixture
def chats(specrun: Specrun) -> Iterator[list[Terminal]]:
    started: list[Terminal] = []
    try:
        yield started
    finally:
        for terminal in started:
            if terminal.child.isalive():
                terminal.child.terminate(force=True)
            terminal.child.close()
        specrun.run("stop")


def _speculation(specrun: Specrun) -> dict[str, Any]:
    return specrun.query(SuggestionRequest).get("speculation") or {}


def _quit(terminal: Terminal) -> None:
    terminal.send("\x04")
    terminal.child.expect(pexpect.EOF, timeout=10)
    terminal.child.close()
    assert terminal.child.exitstatus == 0


def test_typing_the_beginning_keeps_the_speculation_and_diverging_aborts_it(
    specrun: Specrun, tmp_path: Path, chats: list[Terminal]
) -> None:
    terminal = _chat(specrun, tmp_path, change=_slow_negative_test)
    chats.append(terminal)
    terminal.expect("Ctrl-D quits")
    terminal.send(FIX + "\r")
    terminal.expect("done in")
    terminal.expect(NEG)
    assert wait_until(lambda: _speculation(specrun).get("worker_pid"))
    running = _speculation(specrun)
    assert running["status"] == "running"

    # its beginning, in another case and with a doubled space: the speculation stays
    terminal.send("Add a  test")
    # the chat tells the service at once; wait until the service has acted on it
    assert wait_until(lambda: specrun.query(SuggestionRequest)["typed"] == "Add a  test")
    kept = _speculation(specrun)
    assert (kept["id"], kept["status"]) == (running["id"], "running")
    assert _alive(running["worker_pid"])
    assert specrun.query(SuggestionRequest)["text"] == NEG

    # the rest stays grey after the cursor: Tab takes it once it completed
    terminal.expect("speculation completed", timeout=30)
    terminal.send("\t")
    terminal.expect("saved")
    assert (specrun.project / "tests/test_calc_negative.py").exists()
    stats = specrun.json("stats")
    assert stats["accepted_by_method"] == {"tab": 1}
    assert stats["accepted_by_typing"] == {"prefix_kept": 1}

    # the pipelined suggestion: the first letter that is not how it begins kills it,
    # before anything is submitted
    terminal.expect(DIFF)
    assert wait_until(lambda: _speculation(specrun).get("worker_pid"))
    pid = _speculation(specrun)["worker_pid"]
    terminal.send("show me th")
    assert wait_until(lambda: specrun.query(SuggestionRequest)["typed"] == "show me th")
    assert specrun.query(SuggestionRequest)["text"] == DIFF
    terminal.send("x")
    assert wait_until(lambda: specrun.query(SuggestionRequest)["text"] is None, timeout=5)
    assert wait_until(lambda: not _alive(pid), timeout=5)
    terminal.send("\x15")  # Ctrl-U: the line is cleared, nothing was sent
    assert specrun.json("stats")["suggestions_accepted"] == 1
    _quit(terminal)


def test_down_shows_the_next_alternative_and_a_typed_prompt_is_an_accept(
    specrun: Specrun, tmp_path: Path, chats: list[Terminal]
) -> None:
    terminal = _chat(specrun, tmp_path, settings={"speculationBranches": 3})
    chats.append(terminal)
    terminal.expect("Ctrl-D quits")
    terminal.send(FIX + "\r")
    terminal.expect("done in")
    terminal.expect("run the tests")  # the top guess is the grey text
    # the toolbar numbers it as `accept --branch` does: "↓↑ branch 1 of 3 · ⏸ stopped…"
    terminal.expect("branch 1 of 3")
    reply = specrun.query(SuggestionRequest)
    assert [b["text"] for b in reply["branches"]] == ["run the tests", NEG, DIFF]

    terminal.send("\x1b[B")  # Down: the second guess becomes the grey text
    terminal.expect("negative numbers")
    assert wait_until(lambda: specrun.query(SuggestionRequest)["branches"][1]["speculation"]
                      ["status"] == "completed", timeout=30)
    terminal.send("\x0f")  # Ctrl-O previews the alternative shown, not the top one
    terminal.expect("“add a test for negative numbers”")
    terminal.expect(r"\(branch 2; completed")
    terminal.expect(r"created tests/test_calc_negative\.py")
    terminal.send("\x1b")  # Esc: back to the prompt, the same alternative shown
    terminal.expect("branch 2 of 3")
    terminal.send("\t")  # Tab takes the alternative shown
    terminal.expect("saved")
    assert (specrun.project / "tests/test_calc_negative.py").exists()
    stats = specrun.json("stats")
    assert stats["accepted_by_rank"] == {"1": 1} and stats["accepted_by_method"] == {"tab": 1}

    # the pipelined suggestion, typed out by hand (other case, final period) and sent:
    # the service uses its speculation and says so
    terminal.expect(DIFF)
    terminal.send("Show me the diff.\r")
    terminal.expect("You typed a predicted prompt")
    terminal.expect("saved")
    stats = specrun.json("stats")
    assert stats["accepted_by_typing"] == {"exact_match": 1}
    assert stats["accepted_by_method"] == {"tab": 1, "typed": 1}
    _quit(terminal)
