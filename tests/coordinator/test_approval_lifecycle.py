"""An approval question never wedges the service: Ctrl-C at the approval prompt cancels the
turn, a client that is killed counts as a no, an unanswered question times out, and
another `ask` meanwhile gets an immediate clear answer. Real CLI in a pseudo-terminal,
real service."""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pexpect
import pytest

from coordinator.service.chat.history import HistoryStore
from protocol.wire.control import ApprovalNeeded, AskRequest, ErrorReply, TurnEnded
from tests.coordinator.e2e import Driver, rules_scenario
from tests.support import Specrun

EDIT = {
    "name": "edit",
    "arguments": {"file_path": "src/calc.py", "old_string": "a - b", "new_string": "a + b"},
}
RULES = [
    {"when": {"purpose": "recall"}, "reply": {"json": {"selected_memories": []}}},
    {"when": {"purpose": "suggestion"}, "reply": {"json": {"suggestion": ""}}},
    {"when": {"last_user": "fix it"}, "reply": {"tool_calls": [EDIT]}},
    {"when": {"last_tool": "edit"}, "reply": {"text": "Done with the edit."}},
    {"default": {"text": "Hello."}},
]


@pytest.fixture
def started(specrun: Specrun, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """start(**settings): a default-mode service on RULES with these project settings."""
    monkeypatch.setenv("SPECRUN_RUNTIME_DIR", str(specrun.env.runtime))
    scenario = rules_scenario(tmp_path, RULES)

    def start(**settings: Any) -> Specrun:
        specrun.env.own_settings(specrun.project).write_text(json.dumps(settings))
        specrun.run("start", "--scenario", str(scenario), check=True)
        return specrun

    yield start
    specrun.run("stop")


def _ask_in_terminal(specrun: Specrun, text: str) -> pexpect.spawn:
    """`specrun ask TEXT` on a terminal, stopped at its approval question."""
    child = pexpect.spawn(
        sys.executable,
        ["-m", "coordinator", "--project", str(specrun.project), "ask", text],
        env={**specrun.env.vars, "TERM": "dumb", "COLUMNS": "200"},
        encoding="utf-8",
        timeout=30,
    )
    child.expect(r"Allow edit\(")
    child.expect(r"\[y/a/n/r\]")
    return child


def _next_ask_answers(specrun: Specrun) -> None:
    """The wedge's symptom was the next ask hanging: it must complete, promptly."""
    began = time.monotonic()
    lines = specrun.json_lines("ask", "hello", timeout=20)
    assert lines[-1]["type"] == "turn_ended" and lines[-1]["reason"] == "completed", lines
    assert time.monotonic() - began < 15


def _last_edit_result(project: Path) -> str:
    history = HistoryStore(project).load()
    results = [r for m in history for r in m.tool_results if r.name == "edit"]
    assert results, history
    return results[-1].error or results[-1].output or ""


def test_ctrl_c_at_the_approval_prompt_cancels_the_turn(started: Any) -> None:
    specrun = started()
    child = _ask_in_terminal(specrun, "fix it")
    child.sendintr()
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 1
    assert "turn aborted" in (child.before or "")
    _next_ask_answers(specrun)
    assert "return a - b" in (specrun.project / "src/calc.py").read_text()
    assert "cancelled" in _last_edit_result(specrun.project)


def test_a_killed_client_counts_as_a_no_and_ends_the_turn(started: Any) -> None:
    specrun = started()
    child = _ask_in_terminal(specrun, "fix it")
    child.kill(9)  # no Ctrl-C handler runs: only the service can notice
    child.close(force=True)
    _next_ask_answers(specrun)
    assert "return a - b" in (specrun.project / "src/calc.py").read_text()
    assert "client that was asked for approval is gone" in _last_edit_result(specrun.project)


def test_an_unanswered_approval_times_out_and_another_ask_is_told_at_once(
    started: Any,
) -> None:
    specrun = started(approvalTimeoutS=3)
    asker, other = Driver(specrun.project), Driver(specrun.project)
    try:
        request = AskRequest(
            req_id=asker.client.next_id(), text="fix it", can_confirm=True, client_pid=os.getpid()
        )
        asker.client.send(request)
        replies = asker.client.replies(request.req_id, timeout_s=30)
        for reply in replies:
            if isinstance(reply, ApprovalNeeded):
                break
        began = time.monotonic()
        busy = other.ask("something else")
        assert time.monotonic() - began < 1.0
        assert isinstance(busy[-1], ErrorReply) and busy[-1].code == "busy", busy
        assert "waiting for approval of edit" in busy[-1].message
        end = list(replies)[-1]
        assert isinstance(end, TurnEnded) and end.reason == "aborted", end
        assert "within 3 s" in end.message and "counts as declined" in end.message
        assert time.monotonic() - began < 10
    finally:
        asker.close()
        other.close()
    assert "within 3 s" in _last_edit_result(specrun.project)
    _next_ask_answers(specrun)
