"""Assembling streamed chunks and parsing whole answers, without a server."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from protocol.model import ChatRequest, ChatResult, TextDelta, ThinkingDelta, ToolCallDelta
from protocol.model.assemble import StreamAssembler, ThinkSplitter, parse_completion, parse_usage
from protocol.model.request import build_body
from protocol.wire.chat import Message, ToolSpec


def feed_all(chunks: list[dict[str, Any]]) -> tuple[list[Any], ChatResult]:
    assembler = StreamAssembler()
    events: list[Any] = []
    for chunk in chunks:
        events.extend(assembler.feed(chunk))
    events.extend(assembler.finish())
    return events, assembler.result()


def delta(**fields: Any) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": fields, "finish_reason": None}]}


def call(**fields: Any) -> dict[str, Any]:
    return delta(tool_calls=[fields])


def test_openai_style_fragments_by_index() -> None:
    events, result = feed_all(
        [
            call(
                index=0, id="c0", type="function", function={"name": "read_file", "arguments": ""}
            ),
            call(index=0, function={"arguments": '{"file_'}),
            call(index=1, id="c1", function={"name": "glob", "arguments": '{"pattern"'}),
            call(index=0, function={"arguments": 'path": "a.py"}'}),
            call(index=1, function={"arguments": ': "*.py"}'}),
        ]
    )
    assert [e for e in events if isinstance(e, ToolCallDelta)] == [
        ToolCallDelta(0, "c0", "read_file"),
        ToolCallDelta(1, "c1", "glob"),
    ]
    assert [(c.id, c.name, json.loads(c.arguments)) for c in result.message.tool_calls] == [
        ("c0", "read_file", {"file_path": "a.py"}),
        ("c1", "glob", {"pattern": "*.py"}),
    ]
    assert result.finish_reason == "tool_calls"


def test_fragments_without_index_continue_the_latest_call() -> None:
    _, result = feed_all(
        [
            call(id="x1", function={"name": "edit", "arguments": '{"a"'}),
            call(function={"arguments": ": 1}"}),
            call(id="x2", function={"name": "edit", "arguments": "{}"}),
            call(function={"name": "glob", "arguments": '{"p": 2}'}),  # a new named call
        ]
    )
    assert [(c.id, c.name, c.arguments) for c in result.message.tool_calls][:2] == [
        ("x1", "edit", '{"a": 1}'),
        ("x2", "edit", "{}"),
    ]
    third = result.message.tool_calls[2]
    assert third.name == "glob" and third.arguments == '{"p": 2}' and third.id.startswith("call_")


def test_repeated_id_without_index_is_the_same_call() -> None:
    _, result = feed_all(
        [
            call(id="r1", function={"name": "read_file", "arguments": '{"file_path":'}),
            call(id="r1", function={"arguments": ' "x"}'}),
        ]
    )
    assert [(c.id, c.arguments) for c in result.message.tool_calls] == [
        ("r1", '{"file_path": "x"}')
    ]


def test_unnamed_calls_are_dropped_and_empty_arguments_become_an_object() -> None:
    _, result = feed_all(
        [
            call(index=0, id="a", function={"arguments": '{"orphan": true}'}),
            call(index=1, id="b", function={"name": "list_directory"}),
        ]
    )
    assert [(c.name, c.arguments) for c in result.message.tool_calls] == [("list_directory", "{}")]


def test_whitespace_only_text_is_not_kept() -> None:
    _, result = feed_all([delta(content="\n\n"), delta(content="  ")])
    assert result.message == Message.assistant()
    assert result.finish_reason == "stop"


def test_reasoning_content_is_thinking() -> None:
    events, result = feed_all(
        [delta(reasoning_content="let me see"), delta(content="Answer"), delta(reasoning="more")]
    )
    assert [type(e) for e in events] == [ThinkingDelta, TextDelta, ThinkingDelta]
    assert result.message.text == "Answer"


@given(st.lists(st.integers(min_value=1, max_value=40), max_size=12))
def test_inline_think_block_split_anywhere(cuts: list[int]) -> None:
    content = "  <think>\nweigh a - b against a + b\n</think>\n\nThe fix is `a + b`."
    pieces, at = [], 0
    for size in cuts:
        pieces.append(content[at : at + size])
        at += size
    pieces.append(content[at:])
    splitter = ThinkSplitter()
    out: list[tuple[bool, str]] = []
    for piece in pieces:
        out.extend(splitter.feed(piece))
    out.extend(splitter.flush())
    thinking = "".join(t for is_thinking, t in out if is_thinking)
    text = "".join(t for is_thinking, t in out if not is_thinking)
    assert thinking == "\nweigh a - b against a + b\n"
    assert text == "The fix is `a + b`."


@given(st.text(alphabet="<>/thinkabc \n", max_size=30))
def test_text_without_a_leading_think_block_is_untouched(text: str) -> None:
    if text.lstrip().startswith("<think>"):
        return
    splitter = ThinkSplitter()
    out = [*splitter.feed(text), *splitter.flush()]
    assert all(not is_thinking for is_thinking, _ in out)
    assert "".join(t for _, t in out) == text


def test_unclosed_think_block_is_all_thinking() -> None:
    splitter = ThinkSplitter()
    out = [*splitter.feed("<think>still going"), *splitter.flush()]
    assert "".join(t for thinking, t in out if thinking) == "still going"
    assert not [t for thinking, t in out if not thinking]


def test_usage_variants() -> None:
    assert parse_usage(None) is None
    usage = parse_usage({"prompt_tokens": 10, "completion_tokens": 5})
    assert usage is not None and usage.total_tokens == 15 and usage.cached_tokens == 0
    cached = parse_usage(
        {"prompt_tokens": 10, "completion_tokens": 1, "prompt_tokens_details": {"cached_tokens": 8}}
    )
    assert cached is not None and cached.cached_tokens == 8
    deepseek = parse_usage({"prompt_tokens": 10, "prompt_cache_hit_tokens": 6})
    assert deepseek is not None and deepseek.cached_tokens == 6


def test_parse_completion() -> None:
    payload = {
        "id": "chatcmpl-1",
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": "<think>hidden</think>Visible.",
                    "tool_calls": [
                        {
                            "id": "t1",
                            "type": "function",
                            "function": {"name": "glob", "arguments": "{}"},
                        },
                        {
                            "id": "t2",
                            "type": "function",
                            "function": {"name": "edit", "arguments": {"a": 1}},
                        },
                    ],
                },
                "finish_reason": "tool_calls",
            }
        ],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
    }
    result = parse_completion(payload)
    assert result.message.text == "Visible."
    assert [(c.id, c.name, c.arguments) for c in result.message.tool_calls] == [
        ("t1", "glob", "{}"),
        ("t2", "edit", '{"a":1}'),
    ]
    assert result.request_id == "chatcmpl-1" and result.usage.total_tokens == 5


def test_build_body_key_order_and_options() -> None:
    tool = ToolSpec("glob", "Find files.", {"type": "object"})
    req = ChatRequest(
        system="S",
        history=(Message.user("q"),),
        tools=(tool,),
        model="m",
        purpose="speculation",
        temperature=0.2,
        enable_thinking=False,
        max_tokens=10,
    )
    body = build_body(req, stream=True)
    assert list(body) == [
        "model",
        "messages",
        "tools",
        "stream",
        "stream_options",
        "temperature",
        "max_tokens",
        "enable_thinking",
    ]
    assert body["messages"] == [
        {"role": "system", "content": "S"},
        {"role": "user", "content": "q"},
    ]
    no_tools = build_body(
        ChatRequest(system=None, history=(), model="m", purpose="main"), stream=False
    )
    assert no_tools == {"model": "m", "messages": [], "stream": False}


def test_cache_markers_skip_a_message_without_content() -> None:
    from protocol.wire.chat import ToolCall

    req = ChatRequest(
        system="S",
        history=(Message.user("q"), Message.assistant("", (ToolCall("c", "glob", "{}"),))),
        model="m",
        purpose="main",
    )
    body = build_body(req, stream=True, cache_markers=True)
    assert body["messages"][-1] == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "c", "type": "function", "function": {"name": "glob", "arguments": "{}"}}
        ],
    }
    assert body["messages"][0]["content"][0]["cache_control"] == {"type": "ephemeral"}
