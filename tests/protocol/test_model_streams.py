"""Recorded-style provider answers replayed byte for byte over loopback HTTP through the
model client. The files in ``streams/`` follow each provider's documented format:
OpenAI, DashScope compatible mode, Ollama's OpenAI compatibility, OpenRouter and
Anthropic's OpenAI SDK compatibility layer (streamed ``.sse`` and non-streamed ``.json``)."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest

from protocol.model import ChatRequest, ChatResult, ModelClient, TextDelta, ThinkingDelta
from protocol.wire.chat import Message
from tests.support import local_http_server

STREAMS = Path(__file__).parent / "streams"


class _Replay(BaseHTTPRequestHandler):
    """Answers every POST with one fixture file, as the provider would have sent it."""

    protocol_version = "HTTP/1.0"

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        path: Path = self.server.fixture  # type: ignore[attr-defined]
        body = path.read_bytes()
        self.send_response(200)
        kind = "text/event-stream" if path.suffix == ".sse" else "application/json"
        self.send_header("Content-Type", kind)
        self.end_headers()
        # Event by event, flushed, so the client sees a stream and not one buffer.
        for piece in body.split(b"\n\n") if path.suffix == ".sse" else [body]:
            self.wfile.write(piece + (b"\n\n" if path.suffix == ".sse" else b""))
            self.wfile.flush()

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def replay() -> Iterator[Callable[[str], str]]:
    with contextlib.ExitStack() as servers:

        def start(name: str) -> str:
            server = servers.enter_context(local_http_server(_Replay, fixture=STREAMS / name))
            return f"http://127.0.0.1:{server.server_port}/v1"

        yield start


REQUEST = ChatRequest(system="s", history=(Message.user("go"),), model="m", purpose="main")


@dataclass
class Seen:
    result: ChatResult
    text: str
    thinking: str


def _stream(base: str) -> Seen:
    async def main() -> Seen:
        async with ModelClient(base, max_retries=0) as client:
            events = [e async for e in client.stream(REQUEST)]
        result = events[-1]
        assert isinstance(result, ChatResult)
        text = "".join(e.text for e in events if isinstance(e, TextDelta))
        thinking = "".join(e.text for e in events if isinstance(e, ThinkingDelta))
        return Seen(result, text, thinking)

    return asyncio.run(asyncio.wait_for(main(), 10))


def _complete(base: str) -> ChatResult:
    async def main() -> ChatResult:
        async with ModelClient(base, max_retries=0) as client:
            return await client.complete(REQUEST)

    return asyncio.run(asyncio.wait_for(main(), 10))


def _calls(result: ChatResult) -> list[tuple[str, str, Any]]:
    # json.loads: every call's arguments must be one valid JSON object, never two glued.
    return [(c.id, c.name, json.loads(c.arguments)) for c in result.message.tool_calls]


def test_openai_parallel_calls_by_index_and_usage_chunk(replay: Callable[[str], str]) -> None:
    seen = _stream(replay("openai_parallel_calls.sse"))
    assert seen.text == seen.result.message.text == "I'll read both files."
    assert _calls(seen.result) == [
        ("call_DdmO9pD3xa9XTPNJ32zg2hcA", "read_file", {"file_path": "a.py"}),
        ("call_ABlRgwOjGmOXXBX0vtgrMYZ3", "read_file", {"file_path": "b.py"}),
    ]
    assert seen.result.finish_reason == "tool_calls" and seen.result.refusal is None
    assert (seen.result.usage.total_tokens, seen.result.usage.cached_tokens) == (470, 384)


def test_ollama_parallel_calls_that_all_say_index_0_stay_apart(
    replay: Callable[[str], str],
) -> None:
    seen = _stream(replay("ollama_parallel_index0.sse"))
    assert _calls(seen.result) == [
        ("call_x7k2m9qa", "read_file", {"file_path": "a.py"}),
        ("call_p3w8n1zc", "read_file", {"file_path": "b.py"}),
    ]
    assert seen.thinking == "Two files to read." and seen.result.message.text == ""
    assert seen.result.usage.total_tokens == 345


def test_ollama_non_streamed_parallel_calls_with_index_0(replay: Callable[[str], str]) -> None:
    result = _complete(replay("ollama_parallel_index0.json"))
    assert _calls(result) == [
        ("call_q1w2e3r4", "read_file", {"file_path": "a.py"}),
        ("call_t5y6u7i8", "read_file", {"file_path": "b.py"}),
    ]


def test_dashscope_reasoning_and_continuations_with_an_empty_id(
    replay: Callable[[str], str],
) -> None:
    seen = _stream(replay("dashscope_reasoning_call.sse"))
    assert seen.thinking == "The user wants the test file. Read it first."
    assert seen.result.message.text == "Let me look at the test."
    assert _calls(seen.result) == [
        ("call_5a0f2c1e8d7b4c3a9e6f1b2d", "read_file", {"file_path": "tests/test_calc.py"}),
    ]
    assert (seen.result.usage.total_tokens, seen.result.usage.cached_tokens) == (1863, 1536)


def test_openrouter_comments_reasoning_and_one_call(replay: Callable[[str], str]) -> None:
    seen = _stream(replay("openrouter_comments_reasoning.sse"))
    assert seen.thinking == "Check the diff first."
    assert seen.result.message.text == "Running git diff."
    assert _calls(seen.result) == [
        ("call_b1c2d3e4f5", "run_shell_command", {"command": "git diff"}),
    ]
    assert seen.result.finish_reason == "tool_calls"
    assert seen.result.usage.total_tokens == 975


def test_anthropic_compatibility_layer_calls(replay: Callable[[str], str]) -> None:
    seen = _stream(replay("anthropic_compat_calls.sse"))
    assert seen.result.message.text == "Reading both tests."
    assert _calls(seen.result) == [
        ("toolu_01T1x1fJ34qAmk2tNTrN7Up6", "read_file", {"file_path": "tests/test_a.py"}),
        ("toolu_01A09q90qw90lq917835lq9", "read_file", {"file_path": "tests/test_b.py"}),
    ]
    assert seen.result.usage.total_tokens == 1300


def test_streamed_refusal_is_a_distinct_outcome(replay: Callable[[str], str]) -> None:
    seen = _stream(replay("openai_refusal.sse"))
    assert seen.result.refusal == "I'm sorry, I can't help with that."
    assert seen.result.finish_reason == "refusal"
    assert seen.result.message.text == "" and seen.text == ""  # never shown as an answer


def test_non_streamed_refusal_is_a_distinct_outcome(replay: Callable[[str], str]) -> None:
    result = _complete(replay("openai_refusal.json"))
    assert result.refusal == "I'm sorry, I can't assist with that request."
    assert result.finish_reason == "refusal"
    assert result.message.tool_calls == ()
