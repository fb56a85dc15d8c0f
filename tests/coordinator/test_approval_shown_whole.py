"""The approval question shows the call the model made, whole: a command's second line
is not folded into a space behind a ``#`` of its first, and a long command is not cut
after 80 characters. Real CLI in a pseudo-terminal, real service, a hostile scripted
model."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pexpect
import pytest

from tests.coordinator.e2e import rules_scenario
from tests.support import Specrun

HIDDEN_LINE = "git status  # just a look\ntouch pwned-by-second-line"
LONG = "echo " + "x" * 100 + " ; touch pwned-by-the-tail"
RULES = [
    {"when": {"purpose": "recall"}, "reply": {"json": {"selected_memories": []}}},
    {"when": {"purpose": "suggestion"}, "reply": {"json": {"suggestion": ""}}},
    {"when": {"last_user": "hidden line"},
     "reply": {"tool_calls": [{"name": "run_shell_command",
                               "arguments": {"command": HIDDEN_LINE}}]}},
    {"when": {"last_user": "long command"},
     "reply": {"tool_calls": [{"name": "run_shell_command", "arguments": {"command": LONG}}]}},
    {"when": {"last_tool": "run_shell_command"}, "reply": {"text": "Done."}},
    {"default": {"text": "Hello."}},
]


@pytest.fixture
def started(specrun: Specrun, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Specrun]:
    monkeypatch.setenv("SPECRUN_RUNTIME_DIR", str(specrun.env.runtime))
    scenario = rules_scenario(tmp_path, RULES)
    specrun.run("start", "--scenario", str(scenario), check=True)
    yield specrun
    specrun.run("stop")


@pytest.mark.parametrize(("prompt", "shown"), [
    ("hidden line", r"git status  # just a look\ntouch pwned-by-second-line"),
    ("long command", LONG),
])
def test_the_question_shows_the_whole_command(started: Specrun, prompt: str, shown: str) -> None:
    child = pexpect.spawn(
        sys.executable,
        ["-m", "coordinator", "--project", str(started.project), "ask", prompt],
        env={**started.env.vars, "TERM": "dumb", "COLUMNS": "400"},
        encoding="utf-8",
        timeout=30,
    )
    try:
        child.expect(r"Allow run_shell_command\(command: ")
        child.expect(r"\n  y: yes, once")
        question = child.before or ""
        assert question.startswith(shown + ")? ("), question
        child.send("n\r")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert not list(started.project.glob("pwned*"))
