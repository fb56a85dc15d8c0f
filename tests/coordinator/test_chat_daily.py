"""`specrun chat` as a daily driver (issue 35), in a real pseudo-terminal against a real
service on the scripted model: Tab on a suggestion whose speculation stopped at a
boundary runs it as a turn that asks here, as Enter would; Ctrl-O with no suggestion
sends nothing; a command that exits non-zero is shown failed with its exit code, on the
terminal and in the JSON."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pexpect
import pytest
import yaml

from tests.coordinator.pty_screen import ScreenTerminal, chats
from tests.support import REPO, Specrun

FIX = "fix the failing test in tests/test_calc.py"
NEG = "add a test for negative numbers"
FAILING = "list the missing file"
SLOW = "take a while"
MARKDOWN = "show me some markdown"


def _scenario(tmp: Path) -> Path:
    """The demo scenario plus a query whose one read-only command exits 2."""
    data: dict[str, Any] = yaml.safe_load((REPO / "coordinator/scenarios/demo.yaml").read_text())
    data["rules"][-1:-1] = [
        {"name": "failing command", "when": {"last_user": FAILING},
         "reply": {"tool_calls": [{"name": "run_shell_command",
                                   "arguments": {"command": "ls no-such-file"}}]}},
        {"name": "failing command, explain",
         "when": {"turn_user": FAILING, "last_tool": "run_shell_command"},
         "reply": {"text": "It is not there."}},
    ]
    data["rules"][0:0] = [
        {"name": "markdown", "when": {"purpose": "main", "last_user": MARKDOWN},
         "reply": {"text": "**bold** and `code`\n\n- one\n- two\n\n"
                           "<img src=x onerror=alert(1)> [link](javascript:alert(1))"}},
    ]
    # a slow answer and a slow prediction after it, to watch the waits counted in seconds
    data["rules"][0:0] = [
        {"name": "slow prediction", "when": {"purpose": "suggestion",
                                             "prompt_contains": "Took a while to say this"},
         "reply": {"json": {"suggestion": "say it faster"}, "latency_ms": 3500}},
        {"name": "slow answer", "when": {"purpose": "main", "last_user": SLOW},
         "reply": {"text": "Took a while to say this.", "latency_ms": 3500}},
    ]
    path = tmp / "scenario.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


@pytest.fixture
def chat_in(specrun: Specrun, tmp_path: Path) -> Iterator[Any]:
    """Starts `specrun chat` in the given approval mode on the scenario above."""
    scenario = str(_scenario(tmp_path))
    with chats(specrun) as open_chat:

        def start(mode: str = "default", *extra: str, cols: int = 120) -> ScreenTerminal:
            return open_chat("chat", "--approval-mode", mode, "--scenario", scenario, *extra,
                             cols=cols)

        yield start


def test_tab_on_a_boundary_suggestion_asks_in_the_chat_as_enter_would(
    chat_in: Any, specrun: Specrun
) -> None:
    term: ScreenTerminal = chat_in("default")
    term.send(FIX + "\r")
    term.wait_for(r"Allow edit\(")
    term.send("y\r")
    term.wait_for("done in")
    # default mode: the speculation of the next prompt stops before its write
    term.wait_for(r"⏸ (speculation )?stopped before write_file")
    term.send("\t")
    term.wait_for(r"Allow write_file\(file_path: tests/test_calc_negative\.py")
    assert "no terminal can ask" not in term.text()
    term.send("y\r")
    term.wait_for(r"Added tests/test_calc_negative\.py")
    assert (specrun.project / "tests/test_calc_negative.py").exists()


def test_ctrl_o_without_a_suggestion_sends_nothing(chat_in: Any) -> None:
    term: ScreenTerminal = chat_in("auto-edit")
    term.send("half typed")
    term.wait_for("❯ half typed")
    term.send("\x0f")  # Ctrl-O
    term.wait_for("there is no suggestion to preview")
    assert "no answer scripted" not in term.text()
    assert "❯ half typed" in term.text()  # still in the line, not sent


def test_a_failed_command_is_shown_failed_with_its_exit_code(
    chat_in: Any, specrun: Specrun
) -> None:
    term: ScreenTerminal = chat_in("auto-edit")
    term.send(FAILING + "\r")
    term.wait_for("done in")
    line = next(row for row in term.rows() if "run_shell_command(" in row)
    assert line.startswith("✗") and "failed, exit 2" in line, line

    events = specrun.json_lines("ask", FAILING)
    tools = [e for e in events if e.get("type") == "tool" and e["status"] != "running"]
    assert [(t["status"], t["exit_code"]) for t in tools] == [("error", 2)], json.dumps(events)


def _user_texts(specrun: Specrun) -> list[str]:
    from coordinator.service.chat.history import HistoryStore

    return [m.text for m in HistoryStore(specrun.project).load() if m.role == "user"]


def test_slash_commands_run_in_the_chat_complete_and_never_reach_the_model(
    chat_in: Any, specrun: Specrun
) -> None:
    term: ScreenTerminal = chat_in("auto-edit")
    term.send("/br")
    term.wait_for(r"/branches +the ranked guesses")  # the completion menu
    term.send("\t")
    term.wait_for("❯ /branches")
    term.send("\r")
    term.wait_for("no suggestion")  # what `specrun suggestion` says with none
    term.send("/help\r")
    term.wait_for(r"/mode \[MODE\] +show or change the approval mode")
    term.send("/mode plan\r")
    term.wait_for("Approval mode plan from the next turn on, was auto-edit")
    assert specrun.json("status")["approval_mode"] == "plan"
    term.send("/nope\r")
    term.wait_for("/nope is not a chat command")
    term.send("/undo\r")  # `specrun undo`, or a sentence saying it is not there yet
    term.send("/stats\r")
    term.wait_for("suggestions shown")
    assert _user_texts(specrun) == []  # nothing went to the model
    term.send("/quit\r")
    term.child.expect(pexpect.EOF, timeout=10)
    term.child.close()
    assert term.child.exitstatus == 0


def test_chat_approval_mode_changes_the_running_service(
    chat_in: Any, specrun: Specrun, tmp_path: Path
) -> None:
    specrun.run("start", "--approval-mode", "default", "--scenario", str(_scenario(tmp_path)),
                check=True)
    term: ScreenTerminal = chat_in("yolo")
    term.wait_for("Approval mode yolo from the next turn on, was default")
    assert specrun.json("status")["approval_mode"] == "yolo"


def _tool_errors(specrun: Specrun) -> list[str]:
    from coordinator.service.chat.history import HistoryStore

    return [r.error or "" for m in HistoryStore(specrun.project).load() if m.role == "tool"
            for r in m.tool_results if r.error]


def test_approvals_offer_once_this_command_for_the_session_and_no_with_a_reason(
    chat_in: Any, specrun: Specrun
) -> None:
    term: ScreenTerminal = chat_in("default")
    term.send("run the tests\r")
    term.wait_for(r"Allow run_shell_command\(command: python -m pytest -q\)\? \(python is not "
                  r"one of the commands specrun knows to be read-only\)")
    term.wait_for(r"a: yes, and allow this command for this session")
    term.send("a\r")
    term.wait_for("pytest: all tests passed")
    term.wait_for("done in")
    term.send("run the tests\r")  # the same command again: not asked
    term.wait_for("Allowed without asking: you allowed this command for this session")
    term.wait(lambda t: t.text().count("done in") >= 2, what="the second turn's end")
    assert term.text().count("Allow run_shell_command") == 1

    term.send("commit this\r")  # another command: asked
    term.wait_for(r"Allow run_shell_command\(command: git add")
    term.send("r\r")
    term.wait_for("Why not")
    term.send("the tests are not finished\r")
    term.wait(lambda t: t.text().count("done in") >= 3, what="the third turn's end")
    assert any("the tests are not finished" in e for e in _tool_errors(specrun))


def test_the_chat_follows_its_service_says_what_keeps_running_and_shows_the_last_turns(
    chat_in: Any, specrun: Specrun, tmp_path: Path
) -> None:
    import os
    import signal
    import time

    term: ScreenTerminal = chat_in("auto-edit")
    term.send("fix the failing test in tests/test_calc.py\r")  # the demo's edit
    term.wait_for("done in")
    term.send(FAILING + "\r")
    term.wait(lambda t: t.text().count("done in") >= 2, what="the second turn's end")
    pid = specrun.service_pid()
    term.send("\x04")  # Ctrl-D: what keeps running, and how to stop it
    term.child.expect(pexpect.EOF, timeout=10)
    said = bytes(term.raw).decode(errors="replace") + (term.child.before or b"").decode(
        errors="replace")
    # the pid is an internal: `specrun --verbose chat` names it (test_chat_wording.py)
    # (naming a speculation that still runs, when one does)
    assert re.search(r"keeps running in the background(, with the speculation of .+ still"
                     r"\s+running)?; `specrun chat` comes back", said, re.S), said[-400:]
    assert f"pid {pid}" not in said
    assert "`specrun stop` stops it" in said

    again: ScreenTerminal = chat_in("auto-edit")  # a reopened chat shows the last turns
    again.wait_for("the last turns of this session")
    again.wait_for(r"✓ edit src/calc\.py")  # an edit as the live turn showed it: a diff
    again.wait_for(r"\+return a \+ b")
    again.wait_for(f"❯ {FAILING}")
    again.wait_for(r"✗ run_shell_command\(command: ls no-such-file\)")

    os.kill(pid, signal.SIGKILL)
    killed = time.monotonic()
    again.wait_for("The service stopped; `specrun start` starts it", timeout=10)
    noticed_s = time.monotonic() - killed
    assert noticed_s < 2.0, noticed_s  # within a second, with room for a loaded machine
    again.send("what does multiply do?\r")  # not sent: said, and kept in the line
    again.wait_for(r"error: The service stopped")
    again.wait_for(r"❯ what does multiply do\?")

    specrun.run("start", "--approval-mode", "auto-edit", "--scenario",
                str(_scenario(tmp_path)), check=True)
    again.wait_for(r"The service was restarted; the chat goes on with it", timeout=10)
    again.send("\r")  # the line put back is sent to the new service
    again.wait_for("no answer scripted")


def test_waits_show_their_seconds_the_answer_and_the_prediction(chat_in: Any) -> None:
    term: ScreenTerminal = chat_in("auto-edit")
    term.send(FAILING + "\r")  # no prediction after a first turn alone (too early)
    term.wait_for("done in")
    term.send(SLOW + "\r")
    term.wait_for(r"thinking… [12] s")  # the model request, counted while it runs
    term.wait_for("Took a while to say this")
    term.wait_for(r"⟳ predicting the next prompt… [12] s")  # then the prediction
    term.wait_for("say it faster", timeout=20)


def test_a_readable_transcript_in_80_columns(chat_in: Any) -> None:
    term: ScreenTerminal = chat_in("auto-edit", cols=80)
    term.send(FIX + "\r")
    term.wait_for("done in")
    rows = term.rows()
    # an edit shows its file and its change as a diff, not its arguments
    assert any(r.startswith("✓ edit src/calc.py") for r in rows), term.text()
    assert "    -return a - b" in rows and "    +return a + b" in rows, term.text()
    # tool output keeps its spacing: no visible \t from read_file's line numbers
    assert not any("\\t" in r for r in rows), term.text()
    # the toolbar's hint fits: the speculation's state and how to take it, not cut
    term.wait_for(r"✓ speculation completed .*: Tab applies it at once")
    bottom = term.rows()[-1]
    assert "Tab" in bottom and not bottom.endswith("…") and len(bottom) <= 79, bottom


def test_slash_undo_takes_the_last_turn_back(chat_in: Any, specrun: Specrun) -> None:
    term: ScreenTerminal = chat_in("auto-edit")
    term.send(FIX + "\r")
    term.wait_for("done in")
    assert "return a + b" in (specrun.project / "src/calc.py").read_text()
    term.send("/undo\r")  # `specrun undo`, in the chat
    term.wait_for("Undid turn 1")
    assert "return a - b" in (specrun.project / "src/calc.py").read_text()
