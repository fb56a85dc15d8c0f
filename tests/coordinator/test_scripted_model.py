"""The embedded scripted model: scenario files, rule matching, the HTTP surface."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from coordinator.scripted_model import (
    DEMO_SCENARIO,
    NO_MATCH_TEXT,
    ScenarioError,
    ScriptedModelServer,
    load_scenario,
    parse_scenario,
    scenario_from_obj,
)
from protocol.model import ChatRequest, ModelClient
from protocol.prompts.prediction import (
    SUGGESTION_PROMPT,
    filter_alternatives,
    parse_alternatives_reply,
    parse_suggestion_reply,
    pipelined_prompt,
    suggestion_prompt,
    suggestion_response_format,
    suggestion_schema,
)
from protocol.wire.chat import Message, ToolCall, ToolResult, to_openai
from tests.support import wait_until

ROOT = Path(__file__).resolve().parents[2]


HTTP = httpx.Client()  # one pooled client: a new one costs ~20 ms


@pytest.fixture(autouse=True, scope="module")
def close_http() -> Iterator[None]:
    yield
    HTTP.close()


def _scripted_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("scripted-model")]


@pytest.fixture(autouse=True)
def no_leaked_threads() -> Iterator[None]:
    yield
    deadline = time.monotonic() + 2
    while _scripted_threads() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not _scripted_threads(), "a scripted model server or connection thread leaked"


ServerFactory = Callable[..., ScriptedModelServer]


@pytest.fixture
def serve() -> Iterator[ServerFactory]:
    started: list[ScriptedModelServer] = []

    def start(scenario: Any, **kwargs: Any) -> ScriptedModelServer:
        server = ScriptedModelServer(scenario, **kwargs).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


def body(*history: Message, system: str | None = "You are a coding agent.", **extra: Any) -> dict:
    return {"model": "scripted", "messages": to_openai(system, history), **extra}


def post(
    server: ScriptedModelServer, payload: Any, purpose: str | None = "main", **headers: str
) -> httpx.Response:
    if purpose is not None:
        headers["X-Specrun-Purpose"] = purpose
    return HTTP.post(f"{server.base_url}/chat/completions", json=payload, headers=headers)


def answer_text(response: httpx.Response) -> str:
    assert response.status_code == 200, response.text
    return response.json()["choices"][0]["message"]["content"] or ""


def tool_names(response: httpx.Response) -> list[str]:
    calls = response.json()["choices"][0]["message"].get("tool_calls") or []
    return [c["function"]["name"] for c in calls]


# --------------------------------------------------------------------- matching


def test_first_matching_rule_wins_and_default_catches_the_rest(serve: ServerFactory) -> None:
    server = serve(
        {
            "rules": [
                {"when": {"last_user": "hello"}, "reply": {"text": "first"}},
                {"when": {"last_user": "hel"}, "reply": {"text": "second"}},
                {"default": {"text": "fallback"}},
            ]
        }
    )
    assert answer_text(post(server, body(Message.user("hello there")))) == "first"
    assert answer_text(post(server, body(Message.user("help")))) == "second"
    assert answer_text(post(server, body(Message.user("bye")))) == "fallback"
    assert [r["rule"] for r in server.requests] == [0, 1, 2]


def test_times_limits_a_rule(serve: ServerFactory) -> None:
    server = serve(
        {
            "rules": [
                {"when": {"last_user": "go"}, "times": 2, "reply": {"text": "limited"}},
                {"default": {"text": "after"}},
            ]
        }
    )
    replies = [answer_text(post(server, body(Message.user("go")))) for _ in range(3)]
    assert replies == ["limited", "limited", "after"]


def test_times_holds_under_concurrent_requests(serve: ServerFactory) -> None:
    server = serve(
        {
            "rules": [
                {"when": {"last_user": "go"}, "times": 5, "reply": {"text": "won"}},
                {"default": {"text": "lost"}},
            ]
        }
    )
    with ThreadPoolExecutor(8) as pool:
        replies = list(
            pool.map(lambda _: answer_text(post(server, body(Message.user("go")))), range(16))
        )
    assert replies.count("won") == 5
    assert replies.count("lost") == 11


def test_no_matching_rule_answers_a_marked_text(serve: ServerFactory) -> None:
    server = serve({"rules": [{"when": {"purpose": "recall"}, "reply": {"text": "x"}}]})
    assert answer_text(post(server, body(Message.user("anything")))) == NO_MATCH_TEXT
    assert server.requests[-1]["rule"] is None
    assert server.requests[-1]["outcome"] == "no_match"


def test_purpose_matches_the_header(serve: ServerFactory) -> None:
    server = serve(
        {
            "rules": [
                {"when": {"purpose": "suggestion"}, "reply": {"text": "run the tests"}},
                {"when": {"purpose": "recall"}, "reply": {"json": {"selected_memories": []}}},
                {"default": {"text": "main answer"}},
            ]
        }
    )
    history = body(Message.user("fix it"))
    assert answer_text(post(server, history, "suggestion")) == "run the tests"
    assert json.loads(answer_text(post(server, history, "recall"))) == {"selected_memories": []}
    assert answer_text(post(server, history, "main")) == "main answer"
    assert answer_text(post(server, history, None)) == "main answer"
    assert [r["purpose"] for r in server.requests] == ["suggestion", "recall", "main", None]


def test_last_user_sees_the_whole_content_including_reminders(serve: ServerFactory) -> None:
    server = serve(
        {
            "rules": [
                {
                    "when": {"last_user": "(?s)^<system-reminder>.*fix the bug"},
                    "reply": {"text": "A"},
                },
                {"default": {"text": "B"}},
            ]
        }
    )
    with_reminder = Message.user("fix the bug", reminders=("## Relevant memory\nnone",))
    assert answer_text(post(server, body(with_reminder))) == "A"
    assert answer_text(post(server, body(Message.user("fix the bug")))) == "B"


def _tool_turn(
    name: str, *, reminders: tuple[str, ...] = (), query: str = "fix the failing test"
) -> tuple[Message, ...]:
    call = ToolCall(id="call_7", name=name, arguments='{"file_path": "src/calc.py"}')
    return (
        Message.user(query),
        Message.assistant("Looking.", (call,)),
        Message.tool(
            (ToolResult("call_7", name, output="def add(a, b): ..."),), reminders=reminders
        ),
    )


def test_last_tool_resolves_the_name_through_the_call_id(serve: ServerFactory) -> None:
    server = serve(
        {
            "rules": [
                {"when": {"last_user": "fix the failing test"}, "reply": {"text": "query"}},
                {"when": {"last_tool": "read_file"}, "reply": {"text": "after read"}},
                {"when": {"last_tool": "edit"}, "reply": {"text": "after edit"}},
            ]
        }
    )
    assert answer_text(post(server, body(*_tool_turn("read_file")))) == "after read"
    assert answer_text(post(server, body(*_tool_turn("edit")))) == "after edit"
    # specrun appends reminders after tool results as a user message: still a tool turn
    reminded = _tool_turn("read_file", reminders=("memory text",))
    assert answer_text(post(server, body(*reminded))) == "after read"


def test_last_tool_matches_any_result_of_a_parallel_group(serve: ServerFactory) -> None:
    server = serve({"rules": [{"when": {"last_tool": "glob"}, "reply": {"text": "yes"}}]})
    calls = (ToolCall("c1", "glob", "{}"), ToolCall("c2", "read_file", "{}"))
    history = (
        Message.user("look around"),
        Message.assistant("", calls),
        Message.tool(
            (ToolResult("c1", "glob", output="a"), ToolResult("c2", "read_file", output="b"))
        ),
    )
    assert answer_text(post(server, body(*history))) == "yes"


def test_turn_user_follows_the_query_through_tool_turns(serve: ServerFactory) -> None:
    server = serve(
        {
            "rules": [
                {"when": {"turn_user": "commit", "last_tool": "read_file"}, "reply": {"text": "C"}},
                {"when": {"turn_user": "fix", "last_tool": "read_file"}, "reply": {"text": "F"}},
            ]
        }
    )
    assert answer_text(post(server, body(*_tool_turn("read_file")))) == "F"
    commit = _tool_turn("read_file", query="commit this")
    assert answer_text(post(server, body(*_tool_turn("read_file"), *commit))) == "C"


def test_prompt_and_system_contains(serve: ServerFactory) -> None:
    server = serve(
        {
            "rules": [
                {"when": {"system_contains": "PLAN MODE"}, "reply": {"text": "planning"}},
                {
                    "when": {"purpose": "recall", "prompt_contains": "deploy"},
                    "reply": {"json": {"selected_memories": ["/m/deploy.md"]}},
                },
                {"default": {"text": "plain"}},
            ]
        }
    )
    assert answer_text(post(server, body(Message.user("hi"), system="PLAN MODE on"))) == "planning"
    recall = body(Message.user("Query: how do we deploy?"))
    assert json.loads(answer_text(post(server, recall, "recall")))["selected_memories"] == [
        "/m/deploy.md"
    ]
    assert answer_text(post(server, recall, "main")) == "plain"  # AND: purpose differs
    assert answer_text(post(server, body(Message.user("Deploy")), "recall")) == "plain"  # case


def test_select_memories_picks_manifest_paths(serve: ServerFactory) -> None:
    server = serve({"rules": [{"default": {"select_memories": ["pytest"]}}]})
    manifest = (
        "Query: fix the tests\n\nAvailable memories:\n"
        "- [project] /p/.specrun/memory/testing.md (2025-01-02T03:04:05Z): How we run pytest\n"
        "- [user] /home/u/.specrun/memories/style.md (2025-01-02T03:04:05Z): Code style\n"
    )
    reply = json.loads(answer_text(post(server, body(Message.user(manifest)), "recall")))
    assert reply == {"selected_memories": ["/p/.specrun/memory/testing.md"]}


# --------------------------------------------------------------------- replies


def test_tool_calls_get_unique_ids_and_json_arguments(serve: ServerFactory) -> None:
    server = serve(
        {
            "rules": [
                {
                    "default": {
                        "text": "Reading.",
                        "tool_calls": [
                            {"name": "read_file", "arguments": {"file_path": "a.py"}},
                            {"name": "read_file", "arguments": {"file_path": "b.py"}},
                            {"name": "glob", "id": "call_fixed"},
                        ],
                    }
                }
            ]
        }
    )
    first, second = (post(server, body(Message.user("x"))).json() for _ in range(2))
    calls = first["choices"][0]["message"]["tool_calls"]
    assert [json.loads(c["function"]["arguments"]) for c in calls] == [
        {"file_path": "a.py"},
        {"file_path": "b.py"},
        {},
    ]
    ids = [c["id"] for c in calls] + [
        c["id"] for c in second["choices"][0]["message"]["tool_calls"]
    ]
    assert ids.count("call_fixed") == 2
    generated = [i for i in ids if i != "call_fixed"]
    assert len(set(generated)) == len(generated) == 4
    assert first["choices"][0]["finish_reason"] == "tool_calls"


def test_fail_answers_the_status_then_falls_through_to_the_reply(serve: ServerFactory) -> None:
    server = serve(
        {
            "rules": [
                {
                    "when": {"last_user": "x"},
                    "times": 1,
                    "fail": {"status": 429, "times": 2, "retry_after": 1.5},
                    "reply": {"text": "finally"},
                },
                {"default": {"text": "later"}},
            ]
        }
    )
    first = post(server, body(Message.user("x")))
    assert first.status_code == 429
    assert first.headers["retry-after"] == "1.5"
    assert "error" in first.json()
    assert post(server, body(Message.user("x"))).status_code == 429
    assert (
        answer_text(post(server, body(Message.user("x")))) == "finally"
    )  # fails don't use `times`
    assert answer_text(post(server, body(Message.user("x")))) == "later"
    assert [r["status"] for r in server.requests] == [429, 429, 200, 200]
    assert [r["outcome"] for r in server.requests] == ["fail", "fail", "reply", "reply"]


def test_streaming_sends_text_in_several_chunks_then_usage_and_done(serve: ServerFactory) -> None:
    server = serve({"rules": [{"default": {"text": "one two three four five six seven eight"}}]})
    payload = body(Message.user("x"), stream=True, stream_options={"include_usage": True})
    with HTTP.stream("POST", f"{server.base_url}/chat/completions", json=payload) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        events = [line[6:] for line in response.iter_lines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    pieces = [c["choices"][0]["delta"].get("content") for c in chunks if c["choices"]]
    pieces = [p for p in pieces if p]
    assert len(pieces) >= 3
    assert "".join(pieces) == "one two three four five six seven eight"
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] > 0


def test_usage_is_deterministic_and_reports_a_shared_prefix_as_cached(serve: ServerFactory) -> None:
    server = serve(
        {
            "rules": [
                {
                    "when": {"last_user": "pinned"},
                    "reply": {"text": "x", "usage": {"prompt_tokens": 7}},
                },
                {"default": {"text": "ok"}},
            ]
        }
    )
    history = (Message.user("a long question " * 20), Message.assistant("a long answer " * 20))
    first = post(server, body(*history, Message.user("tail one"))).json()["usage"]
    second = post(server, body(*history, Message.user("tail two"))).json()["usage"]
    assert first["prompt_tokens"] == second["prompt_tokens"] > 100
    assert first["prompt_tokens_details"]["cached_tokens"] == 0
    assert 100 < second["prompt_tokens_details"]["cached_tokens"] < second["prompt_tokens"]
    pinned = post(server, body(Message.user("pinned"))).json()["usage"]
    assert pinned["prompt_tokens"] == 7


def test_models_endpoint_lists_the_scenario_models(serve: ServerFactory) -> None:
    server = serve({"models": ["qwen-fast", "qwen-main"], "rules": []})
    response = HTTP.get(f"{server.base_url}/models")
    assert [m["id"] for m in response.json()["data"]] == ["qwen-fast", "qwen-main"]
    assert HTTP.get(f"{server.base_url}/nothing").status_code == 404


def test_bad_request_bodies_get_a_400(serve: ServerFactory) -> None:
    server = serve({"rules": [{"default": {"text": "x"}}]})
    assert post(server, {"model": "m"}).status_code == 400
    raw = HTTP.post(f"{server.base_url}/chat/completions", content=b"{nope")
    assert raw.status_code == 400
    assert server.requests[-1]["body"] == "{nope"


# --------------------------------------------------------------------- request log


def test_request_log_is_one_json_line_per_request_without_authorization(
    serve: ServerFactory, tmp_path: Path
) -> None:
    log = tmp_path / "logs" / "requests.jsonl"
    server = serve({"rules": [{"default": {"text": "x"}}]}, request_log=log)
    post(server, body(Message.user("hi")), "speculation", Authorization="Bearer sk-SECRET")
    HTTP.get(f"{server.base_url}/models")
    lines = log.read_text().splitlines()
    assert len(lines) == 2
    entries = [json.loads(line) for line in lines]
    first = entries[0]
    assert first["purpose"] == "speculation"
    assert first["rule"] == 0
    assert first["body"]["messages"][-1] == {"role": "user", "content": "hi"}
    assert isinstance(first["time"], float)
    assert "sk-SECRET" not in log.read_text()
    assert first["headers"] and all(k.lower() != "authorization" for k in first["headers"])
    assert entries[1]["path"] == "/v1/models"
    assert server.requests == entries


# --------------------------------------------------------------------- stop / stall


def test_stop_returns_promptly_with_a_stalled_stream_and_idle_connections(
    serve: ServerFactory,
) -> None:
    server = serve({"rules": [{"default": {"text": "slow start", "latency_ms": 10_000}}]})
    keep_alive = httpx.Client()
    keep_alive.get(f"{server.base_url}/models")  # leaves an idle pooled connection
    payload = body(Message.user("x"), stream=True)
    errors: list[BaseException] = []

    def consume() -> None:
        try:
            with httpx.stream("POST", f"{server.base_url}/chat/completions", json=payload) as r:
                for _ in r.iter_bytes():
                    pass
        except httpx.HTTPError as exc:
            errors.append(exc)

    reader = threading.Thread(target=consume)
    reader.start()
    # the stream's request has arrived (its answer then takes 10 s): stop it mid-wait
    assert wait_until(lambda: any(r["path"].endswith("/completions") for r in server.requests))
    started = time.monotonic()
    server.stop()
    assert time.monotonic() - started < 1.0
    reader.join(2)
    assert not reader.is_alive()
    keep_alive.close()


def test_a_bound_server_starts_no_thread_and_serves_once_started() -> None:
    # The service binds it before it forks its fork server: a thread then would make
    # that fork unsafe.
    server = ScriptedModelServer({"rules": [{"default": {"text": "bound"}}]}).bind()
    try:
        assert server.port > 0 and not _scripted_threads()
        server.start()
        assert answer_text(post(server, body(Message.user("hi")))) == "bound"
    finally:
        server.stop()


def test_stop_of_a_server_bound_and_never_started_returns_and_frees_the_port() -> None:
    server = ScriptedModelServer({"rules": []}).bind()
    port = server.port
    stopper = threading.Thread(target=server.stop)
    stopper.start()
    stopper.join(5)
    assert not stopper.is_alive(), "stop waited for a serving loop that never ran"
    with pytest.raises(httpx.ConnectError):
        HTTP.get(f"http://127.0.0.1:{port}/v1/models")


def test_stall_ends_when_the_client_goes_away(serve: ServerFactory) -> None:
    server = serve({"rules": [{"stall": True, "default": {"text": "never finished"}}]})
    payload = body(Message.user("x"), stream=True)
    with httpx.stream("POST", f"{server.base_url}/chat/completions", json=payload) as response:
        first = next(response.iter_lines())
        assert first.startswith("data: ")
    deadline = time.monotonic() + 2
    while len(_scripted_threads()) > 1 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert [t.name for t in _scripted_threads()] == ["scripted-model"]


def test_server_is_a_context_manager_and_restartable(serve: ServerFactory) -> None:
    with ScriptedModelServer({"rules": [{"default": {"text": "x"}}]}) as server:
        assert server.base_url.startswith("http://127.0.0.1:")
        assert server.base_url.endswith("/v1")
        assert answer_text(post(server, body(Message.user("q")))) == "x"
    assert not server.running
    server.stop()  # idempotent
    with server:  # a restart begins with fresh counters
        assert answer_text(post(server, body(Message.user("q")))) == "x"
        assert [r["rule"] for r in server.requests] == [0]


# --------------------------------------------------------------------- scenario files


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _error(tmp_path: Path, text: str, name: str = "fix.yaml") -> str:
    with pytest.raises(ScenarioError) as caught:
        load_scenario(_write(tmp_path, name, text))
    message = str(caught.value)
    assert message.startswith(f"scenario {tmp_path / name}: "), message
    return message.split(": ", 1)[1]


def test_wrong_type_names_the_field_and_the_value(tmp_path: Path) -> None:
    text = """
rules:
  - when: {last_user: a}
    reply: {text: a}
  - default: {text: b}
  - when: {last_user: c}
    reply: {text: c, latency_ms: fast}
"""
    assert _error(tmp_path, text) == ("rules[2].reply.latency_ms: expected an integer, got 'fast'")


def test_unknown_key_lists_the_known_ones(tmp_path: Path) -> None:
    problem = _error(tmp_path, "rules:\n  - when: {last_usr: x}\n    reply: {text: a}\n")
    assert problem.startswith("rules[0].when: unknown field `last_usr` (expected one of: purpose,")
    assert "last_user" in problem


def test_bad_yaml_gives_the_line(tmp_path: Path) -> None:
    problem = _error(tmp_path, "rules:\n  - when: {last_user: [x}\n")
    assert problem.startswith("YAML syntax error at line 2")


def test_bad_regex_names_the_condition(tmp_path: Path) -> None:
    problem = _error(tmp_path, "rules:\n  - when: {last_user: 'fix ('}\n    reply: {text: a}\n")
    assert problem.startswith("rules[0].when.last_user: not a valid regular expression")


def test_missing_reply_and_other_rule_shapes(tmp_path: Path) -> None:
    assert _error(tmp_path, "rules:\n  - when: {purpose: main}\n").startswith(
        "rules[0]: missing `reply`"
    )
    assert _error(tmp_path, "rules:\n  - when: {purpose: main}\n    default: {text: a}\n") == (
        "rules[0]: a `default` rule matches anything; drop its `when`"
    )
    assert _error(tmp_path, "rules:\n  - reply: {latency_ms: 5}\n").startswith(
        "rules[0].reply: give at least one of"
    )
    assert _error(tmp_path, "rules:\n  - reply: {text: a, json: {}}\n") == (
        "rules[0].reply: `text` and `json` exclude each other"
    )


def test_more_validation_messages(tmp_path: Path) -> None:
    assert _error(tmp_path, "rules:\n  - when: {purpose: chat}\n    reply: {text: a}\n") == (
        "rules[0].when.purpose: expected one of main, suggestion, speculation, pipelined, "
        "recall, compaction, got 'chat'"
    )
    assert _error(tmp_path, "rules:\n  - reply: {tool_calls: [{arguments: {}}]}\n") == (
        "rules[0].reply.tool_calls[0]: missing required field `name`"
    )
    assert _error(tmp_path, "rules:\n  - {reply: {text: a}, fail: {status: 200}}\n") == (
        "rules[0].fail.status: expected an integer >= 400, got 200"
    )
    assert _error(tmp_path, "- a\n- b\n") == (
        "expected a mapping with `rules` at the top level, got a list"
    )
    assert _error(tmp_path, "") == "the file is empty; expected a mapping with `rules`"
    assert _error(tmp_path, "rules: {}\n") == "rules: expected a list, got a mapping"
    assert _error(tmp_path, '{"rules": [', name="s.json").startswith("not valid JSON")


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match="cannot read the file"):
        load_scenario(tmp_path / "absent.yaml")


def test_json_and_in_memory_scenarios() -> None:
    scenario = parse_scenario('{"name": "j", "rules": [{"default": {"text": "x"}}]}', json=True)
    assert scenario.name == "j"
    with pytest.raises(ScenarioError, match=r"^scenario <dict>: rules\[0\]: missing"):
        scenario_from_obj({"rules": [{}]})


def test_the_shipped_demo_scenario_loads() -> None:
    scenario = load_scenario(DEMO_SCENARIO)
    assert scenario.name == "demo"
    assert scenario.rules[-1].default is not None


# --------------------------------------------------------------------- command line


def test_module_entry_serves_until_sigterm(tmp_path: Path) -> None:
    log = tmp_path / "req.jsonl"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "coordinator.scripted_model",
            "--port",
            "0",
            "--request-log",
            str(log),
        ],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
        cwd=ROOT,
    )
    try:
        assert process.stdout is not None
        base_url = process.stdout.readline().strip()
        assert base_url.startswith("http://127.0.0.1:") and base_url.endswith("/v1")
        assert httpx.get(f"{base_url}/models").json()["data"][0]["id"] == "scripted"
        process.send_signal(signal.SIGTERM)
        assert process.wait(5) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert json.loads(log.read_text().splitlines()[0])["path"] == "/v1/models"


def test_module_entry_reports_a_bad_scenario(tmp_path: Path) -> None:
    bad = _write(tmp_path, "bad.yaml", "rules:\n  - reply: {text: 5}\n")
    result = subprocess.run(
        [sys.executable, "-m", "coordinator.scripted_model", "--scenario", str(bad)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        cwd=ROOT,
        timeout=10,
    )
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.strip() == (
        f"error: scenario {bad}: rules[0].reply.text: expected a string, got 5"
    )


# ------------------------------------------------------- ranked alternative suggestions

GUESSES = ["run the tests", "commit this", "show me the diff", "push it"]
ALTERNATIVE_RULES = {
    "rules": [
        {"when": {"purpose": "suggestion"}, "reply": {"suggestions": GUESSES}},
        {"when": {"purpose": "pipelined"}, "reply": {"json": {"suggestion": "commit this"}}},
        {"when": {"purpose": "recall"}, "reply": {"text": "  'try it out'  "}},
        {"when": {"purpose": "speculation"}, "reply": {"json": {"suggestion": ""}}},
        {"when": {"last_user": "odd"}, "reply": {"json": ["not", "converted"]}},
        {"default": {"text": "main answer", "tool_calls": [{"name": "read_file"}]}},
    ]
}


def ask_suggestion(
    server: ScriptedModelServer, n: int, purpose: str = "suggestion", *, schema: bool = True
) -> str:
    history = (
        Message.user("fix it"),
        Message.assistant("Fixed."),
        Message.user(suggestion_prompt(n)),
    )
    extra = {"response_format": suggestion_response_format(n)} if schema else {}
    return answer_text(post(server, body(*history, **extra), purpose))


def test_alternatives_come_as_the_structured_list_cut_to_n(serve: ServerFactory) -> None:
    server = serve(ALTERNATIVE_RULES)
    assert json.loads(ask_suggestion(server, 3)) == {"suggestions": GUESSES[:3]}
    assert json.loads(ask_suggestion(server, 2)) == {"suggestions": GUESSES[:2]}
    assert json.loads(ask_suggestion(server, 6)) == {"suggestions": GUESSES}
    assert [r["alternatives"] for r in server.requests] == [3, 2, 6]
    reply = ask_suggestion(server, 3)
    kept, suppressed = filter_alternatives(parse_alternatives_reply(reply, 3))
    assert (kept, suppressed) == (GUESSES[:3], [])


def test_a_single_suggestion_request_gets_the_first_of_the_list(serve: ServerFactory) -> None:
    server = serve(ALTERNATIVE_RULES)
    assert json.loads(ask_suggestion(server, 1)) == {"suggestion": "run the tests"}
    assert "alternatives" not in server.requests[-1]
    empty = serve({"rules": [{"default": {"suggestions": []}}]})
    assert json.loads(ask_suggestion(empty, 1)) == {"suggestion": ""}
    assert json.loads(ask_suggestion(empty, 3)) == {"suggestions": []}


def test_without_a_schema_the_prompt_says_how_many(serve: ServerFactory) -> None:
    # a client's raw-text retry: no response_format, the prompt's marker line still asks for 2
    server = serve(ALTERNATIVE_RULES)
    assert json.loads(ask_suggestion(server, 2, schema=False)) == {"suggestions": GUESSES[:2]}
    assert server.requests[-1]["alternatives"] == 2
    assert json.loads(ask_suggestion(server, 1, schema=False)) == {"suggestion": "run the tests"}


def test_the_schema_limit_wins_and_a_schema_without_one_falls_back_to_the_prompt(
    serve: ServerFactory,
) -> None:
    server = serve(ALTERNATIVE_RULES)
    history = (Message.user(suggestion_prompt(3)),)

    def format_with(**items: object) -> dict:
        prop = {"type": "array", "items": {"type": "string"}, **items}
        schema = {"type": "object", "properties": {"suggestions": prop}}
        return {"type": "json_schema", "json_schema": {"name": "x", "schema": schema}}

    two = body(*history, response_format=format_with(maxItems=2))
    assert json.loads(answer_text(post(server, two, "suggestion")))["suggestions"] == GUESSES[:2]
    unbounded = body(*history, response_format=format_with())
    assert (
        json.loads(answer_text(post(server, unbounded, "suggestion")))["suggestions"]
        == (GUESSES[:3])
    )
    no_marker = body(Message.user("guess"), response_format=format_with())
    assert json.loads(answer_text(post(server, no_marker, "suggestion")))["suggestions"] == (
        GUESSES
    )
    assert [r["alternatives"] for r in server.requests] == [2, 3, None]


def test_one_scripted_suggestion_answers_as_a_one_element_list(serve: ServerFactory) -> None:
    server = serve(ALTERNATIVE_RULES)
    # json: {suggestion: X}, as every existing scenario scripts it
    assert json.loads(ask_suggestion(server, 3, "pipelined")) == {"suggestions": ["commit this"]}
    # a plain text, trimmed and unquoted like a single reply
    assert json.loads(ask_suggestion(server, 3, "recall")) == {"suggestions": ["try it out"]}
    # an empty suggestion is an empty list
    assert json.loads(ask_suggestion(server, 3, "speculation")) == {"suggestions": []}
    # a single-suggestion request still gets exactly what the scenario says
    assert json.loads(ask_suggestion(server, 1, "pipelined")) == {"suggestion": "commit this"}
    assert ask_suggestion(server, 1, "recall") == "  'try it out'  "


def test_other_replies_are_left_as_written(serve: ServerFactory) -> None:
    server = serve(ALTERNATIVE_RULES)
    odd = body(Message.user(f"odd\n{suggestion_prompt(3)}"))
    assert json.loads(answer_text(post(server, odd, "main"))) == ["not", "converted"]
    response = post(server, body(Message.user(suggestion_prompt(3))), "main")
    assert answer_text(response) == "main answer"  # text with tool calls: not a suggestion
    assert tool_names(response) == ["read_file"]
    unmatched = serve({"rules": [{"when": {"purpose": "recall"}, "reply": {"text": "x"}}]})
    assert answer_text(post(unmatched, body(Message.user(suggestion_prompt(3))))) == NO_MATCH_TEXT


def test_a_main_request_that_mentions_the_marker_earlier_is_not_asking(
    serve: ServerFactory,
) -> None:
    server = serve({"rules": [{"default": {"json": {"suggestion": "commit this"}}}]})
    earlier = body(
        Message.user(suggestion_prompt(3)), Message.assistant("ok"), Message.user("and now?")
    )
    assert json.loads(answer_text(post(server, earlier, "main"))) == {"suggestion": "commit this"}
    assert "alternatives" not in server.requests[-1]


def test_alternatives_through_the_model_client_streamed_and_not(serve: ServerFactory) -> None:
    server = serve(ALTERNATIVE_RULES)
    history = (Message.user("fix it"), Message.assistant("Fixed."))

    async def run() -> tuple[list[str], list[str], str]:
        async with ModelClient(server.base_url, max_retries=0, timeout_s=10.0) as client:
            three = ChatRequest(
                system="sys",
                history=(*history, Message.user(suggestion_prompt(3))),
                model="scripted",
                purpose="suggestion",
                enable_thinking=False,
                json_schema=suggestion_schema(3),
                json_schema_name="next_user_inputs",
            )
            whole = await client.complete(three)
            streamed = await client.chat(three)
            pipelined = ChatRequest(
                system="sys",
                history=(*history, Message.user(pipelined_prompt("run the tests", "ok", 2))),
                model="scripted",
                purpose="pipelined",
                enable_thinking=False,
            )
            raw = await client.complete(pipelined)  # no schema: the raw-text retry
            return (
                parse_alternatives_reply(whole.message.text, 3),
                parse_alternatives_reply(streamed.message.text, 3),
                raw.message.text,
            )

    whole, streamed, raw = asyncio.run(run())
    assert whole == streamed == GUESSES[:3]
    assert parse_alternatives_reply(raw, 2) == ["commit this"]
    sent = server.requests[0]["body"]
    assert (
        sent["response_format"]["json_schema"]["schema"]["properties"]["suggestions"]["maxItems"]
        == 3
    )


def test_suggestions_field_validation(tmp_path: Path) -> None:
    assert _error(tmp_path, "rules:\n  - reply: {suggestions: [a], text: b}\n") == (
        "rules[0].reply: `text` and `suggestions` exclude each other"
    )
    assert _error(tmp_path, "rules:\n  - reply: {suggestions: [a], tool_calls: [{name: x}]}\n") == (
        "rules[0].reply: `suggestions` and `tool_calls` exclude each other"
    )
    assert _error(tmp_path, "rules:\n  - reply: {suggestions: a}\n") == (
        "rules[0].reply.suggestions: expected a list, got 'a'"
    )
    assert _error(tmp_path, "rules:\n  - reply: {suggestions: [1]}\n") == (
        "rules[0].reply.suggestions[0]: expected a string, got 1"
    )
    scenario = parse_scenario("rules:\n  - default: {suggestions: []}\n")
    assert scenario.rules[0].answer.suggestions == []


def test_single_suggestion_requests_are_unchanged(serve: ServerFactory) -> None:
    # the request shape every existing scenario was written for
    server = serve(ALTERNATIVE_RULES)
    history = (Message.user(SUGGESTION_PROMPT),)
    single = body(*history, response_format=suggestion_response_format(1))
    assert parse_suggestion_reply(answer_text(post(server, single, "pipelined"))) == "commit this"
    assert "alternatives" not in server.requests[-1]


# -- playing a context window --------------------------------------------------------------


@pytest.mark.parametrize("style", ["openai", "vllm", "dashscope", "llamacpp"])
def test_a_window_refuses_longer_requests_as_that_provider_does(style: str) -> None:
    from protocol.model.tokens import estimate_json_tokens

    short = [{"role": "user", "content": "hi"}]
    long = [{"role": "user", "content": "word " * 400}]
    rules = [{"default": {"text": "ok"}}]
    scenario = {"context_window": 300, "overflow_style": style, "rules": rules}
    with ScriptedModelServer(scenario) as server:
        url = f"{server.base_url}/chat/completions"
        fits = httpx.post(url, json={"model": "scripted", "messages": short}, timeout=5)
        refused = httpx.post(url, json={"model": "scripted", "messages": long}, timeout=5)
        outcomes = [r["outcome"] for r in server.requests]
    assert fits.status_code == 200
    usage = fits.json()["usage"]
    assert usage["prompt_tokens"] == estimate_json_tokens(short[0])  # specrun's own count
    answer = {"role": "assistant", "content": "ok"}
    assert usage["completion_tokens"] == estimate_json_tokens(answer)
    assert refused.status_code == 400
    body = refused.json()
    error = body.get("error", body)
    assert {
        "openai": error.get("code") == "context_length_exceeded",
        "vllm": "maximum context length is 300 tokens" in error.get("message", ""),
        "dashscope": "Range of input length should be [1, 300]" in error.get("message", ""),
        "llamacpp": error.get("type") == "exceed_context_size_error" and error["n_ctx"] == 300,
    }[style]
    assert outcomes == ["reply", "context_overflow"]
