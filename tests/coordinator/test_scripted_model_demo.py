"""The shipped demo scenario tells one coherent story, request by request."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import msgspec
import pytest

from coordinator.scripted_model import DEMO_SCENARIO, ScriptedModelServer, load_scenario
from coordinator.scripted_model.scenario import Scenario
from protocol.prompts.prediction import (
    SUGGESTION_PROMPT,
    filter_suggestion,
    parse_suggestion_reply,
    pipelined_prompt,
)
from protocol.wire.chat import Message, ToolCall, ToolResult, to_openai

SYSTEM = "You are specrun's coding agent. Approval mode: auto-edit."
QUERY = "fix the failing test in tests/test_calc.py"


def _without_delays(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            k: _without_delays(v) for k, v in value.items() if k not in ("latency_ms", "chunk_ms")
        }
    if isinstance(value, list):
        return [_without_delays(v) for v in value]
    return value


@pytest.fixture(scope="module")
def server() -> Iterator[ScriptedModelServer]:
    raw = _without_delays(msgspec.to_builtins(load_scenario(DEMO_SCENARIO)))
    fast = msgspec.convert({**raw, "chunk_ms": 0}, Scenario)
    with ScriptedModelServer(fast) as running, httpx.Client() as http:
        running.http = http  # type: ignore[attr-defined]
        yield running


def ask(server: ScriptedModelServer, purpose: str, history: list[Message]) -> Message:
    response = server.http.post(  # type: ignore[attr-defined]
        f"{server.base_url}/chat/completions",
        json={"model": "scripted", "messages": to_openai(SYSTEM, history), "stream": False},
        headers={"X-Specrun-Purpose": purpose},
    )
    assert response.status_code == 200, response.text
    message = response.json()["choices"][0]["message"]
    calls = tuple(
        ToolCall(c["id"], c["function"]["name"], c["function"]["arguments"])
        for c in message.get("tool_calls") or ()
    )
    return Message.assistant(message["content"] or "", calls)


def run_tools(message: Message) -> Message:
    return Message.tool(tuple(ToolResult(c.id, c.name, output="ok") for c in message.tool_calls))


def loop(server: ScriptedModelServer, purpose: str, history: list[Message]) -> list[str]:
    """Drive a turn to its text-only answer; the tool names called on the way."""
    names: list[str] = []
    for _ in range(6):
        answer = ask(server, purpose, history)
        history.append(answer)
        if not answer.tool_calls:
            return names
        names.extend(c.name for c in answer.tool_calls)
        history.append(run_tools(answer))
    raise AssertionError("the scenario loops")


def suggestion(
    server: ScriptedModelServer, purpose: str, history: list[Message], prompt: str
) -> str:
    text = parse_suggestion_reply(ask(server, purpose, [*history, Message.user(prompt)]).text)
    assert filter_suggestion(text) in (None, "empty"), text  # silence is deliberate
    return text


def test_fix_then_tab_tab_tab(server: ScriptedModelServer) -> None:
    history = [Message.user(QUERY, reminders=("## Relevant memory\n(none)",))]
    assert loop(server, "main", history) == ["read_file", "read_file", "edit"]
    assert history[-1].text.startswith("Fixed `add` in src/calc.py")
    edit = history[-3].tool_calls[0].args()
    assert (edit["old_string"], edit["new_string"]) == ("return a - b", "return a + b")

    first = suggestion(server, "suggestion", history, SUGGESTION_PROMPT)
    assert first == "add a test for negative numbers"

    # speculation 1: read the tests, write a new test file (auto-edit: redirected)
    spec = [*history, Message.user(first)]
    assert loop(server, "speculation", spec) == ["read_file", "write_file"]
    assert spec[-3].tool_calls[0].args()["file_path"] == "tests/test_calc_negative.py"
    second = suggestion(server, "pipelined", spec, pipelined_prompt(first, spec[-1].text))
    assert second == "show me the diff"

    # speculation 2: read-only shell
    history = spec
    spec = [*history, Message.user(second)]
    assert loop(server, "speculation", spec) == ["run_shell_command", "run_shell_command"]
    commands = [c.args()["command"] for c in spec[-3].tool_calls]
    assert commands == ["git status --short", "git diff"]
    third = suggestion(server, "pipelined", spec, pipelined_prompt(second, spec[-1].text))
    assert third == "commit this"

    # speculation 3 stops at the shell boundary; typed, the commit runs as a main turn
    history = spec
    commit = ask(server, "speculation", [*history, Message.user(third)])
    assert "git commit" in commit.tool_calls[0].args()["command"]
    history.append(Message.user(third))
    assert loop(server, "main", history) == ["run_shell_command"]
    assert history[-1].text.startswith("Committed the fix")
    assert suggestion(server, "suggestion", history, SUGGESTION_PROMPT) == ""


def test_suggestion_after_the_main_turns(server: ScriptedModelServer) -> None:
    history = [Message.user(QUERY)]
    loop(server, "main", history)
    history.append(Message.user("add a test for negative numbers"))
    loop(server, "main", history)
    assert suggestion(server, "suggestion", history, SUGGESTION_PROMPT) == "show me the diff"
    history.append(Message.user("run the tests"))
    assert loop(server, "main", history) == ["run_shell_command"]
    assert suggestion(server, "suggestion", history, SUGGESTION_PROMPT) == "commit this"


def test_recall_selects_the_testing_memory(server: ScriptedModelServer) -> None:
    manifest = (
        f"Query: {QUERY}\n\nAvailable memories:\n"
        "- [project] /tmp/p/.specrun/memory/testing.md (2025-05-01T10:00:00Z): "
        "Run the tests with python -m pytest -q\n"
        "- [user] /home/me/.specrun/memories/tone.md (2025-05-01T10:00:00Z): Keep answers short\n"
    )
    answer = ask(server, "recall", [Message.user(manifest)])
    assert json.loads(answer.text) == {"selected_memories": ["/tmp/p/.specrun/memory/testing.md"]}
    other = ask(server, "recall", [Message.user("Query: hello\n\nAvailable memories:\n")])
    assert json.loads(other.text) == {"selected_memories": []}


def test_anything_else_gets_the_default(server: ScriptedModelServer) -> None:
    answer = ask(server, "main", [Message.user("write me a poem")])
    assert not answer.tool_calls
    assert "scripted demo model" in answer.text
