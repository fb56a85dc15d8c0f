"""The model client over real loopback HTTP, against the scripted model and a raw SSE server."""

from __future__ import annotations

import asyncio
import contextlib
import json
import pickle
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Coroutine, Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any, TypeVar

import msgspec
import pytest

from coordinator.scripted_model import ScriptedModelServer
from protocol.model import (
    ChatRequest,
    ChatResult,
    ModelClient,
    ModelError,
    StreamEvent,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
)
from protocol.wire.chat import Message, ToolCall, ToolResult, ToolSpec
from protocol.wire.model_options import ModelOptions
from tests.support import REPO, local_http_server

T = TypeVar("T")
SECRET = "sk-test-9f8e7d6c5b4a"

TOOLS = (
    ToolSpec(
        "read_file",
        "Read a file.",
        {"type": "object", "properties": {"file_path": {"type": "string"}}},
    ),
    ToolSpec(
        "edit", "Edit a file.", {"type": "object", "properties": {"file_path": {"type": "string"}}}
    ),
)


def run(coro: Coroutine[Any, Any, T], timeout: float = 10) -> T:
    return asyncio.run(asyncio.wait_for(coro, timeout))


def request(*history: Message, purpose: Any = "main", **extra: Any) -> ChatRequest:
    return ChatRequest(
        system="You are a coding agent.",
        history=history or (Message.user("hello"),),
        tools=TOOLS,
        model="scripted",
        purpose=purpose,
        **extra,
    )


def fast_client(base_url: str, api_key: str | None = None, **kwargs: Any) -> ModelClient:
    kwargs.setdefault("backoff_s", 0.01)
    kwargs.setdefault("backoff_max_s", 0.05)
    return ModelClient(base_url, api_key, **kwargs)


def failed_call(
    base_url: str, api_key: str | None = None, *, call: str = "chat", **client: Any
) -> ModelError:
    """The ModelError that one ``call`` ("chat", "complete" or "stream", read to its end) of
    the default request raises on a client made with these arguments."""

    async def main() -> None:
        async with fast_client(base_url, api_key, **client) as model:
            if call == "stream":
                await collect(model, request())
            else:
                await getattr(model, call)(request())

    with pytest.raises(ModelError) as caught:
        run(main())
    return caught.value


async def collect(client: ModelClient, req: ChatRequest) -> list[StreamEvent]:
    return [event async for event in client.stream(req)]


@pytest.fixture
def serve() -> Iterator[Callable[..., ScriptedModelServer]]:
    started: list[ScriptedModelServer] = []

    def start(rules: list[dict[str, Any]], **scenario: Any) -> ScriptedModelServer:
        server = ScriptedModelServer({"rules": rules, "chunk_ms": 1, **scenario}).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()
    assert not [t for t in threading.enumerate() if t.name.startswith("scripted-model")]


# --------------------------------------------------------------------- streaming


def test_stream_delivers_text_in_several_deltas_and_a_final_result(
    serve: Callable[..., ScriptedModelServer],
) -> None:
    text = "The bug is in add: it subtracts where it should add the numbers."
    server = serve([{"default": {"text": text}}])

    async def main() -> list[StreamEvent]:
        async with fast_client(server.base_url) as client:
            return await collect(client, request())

    events = run(main())
    deltas = [e.text for e in events if isinstance(e, TextDelta)]
    assert len(deltas) >= 3
    assert "".join(deltas) == text
    result = events[-1]
    assert isinstance(result, ChatResult)
    assert result.message == Message.assistant(text)
    assert result.finish_reason == "stop"
    assert result.request_id and result.request_id.startswith("chatcmpl-")
    assert result.usage.prompt_tokens > 0 and result.usage.completion_tokens > 0
    assert result.usage.total_tokens == result.usage.prompt_tokens + result.usage.completion_tokens
    sent = server.requests[-1]
    assert sent["purpose"] == "main"
    assert sent["headers"]["X-Specrun-Purpose"] == "main"
    assert sent["body"]["stream"] is True
    assert sent["body"]["stream_options"] == {"include_usage": True}


def test_tool_calls_are_assembled_from_fragments(serve: Callable[..., ScriptedModelServer]) -> None:
    args_a = {"file_path": "src/calc.py", "offset": 10, "note": 'ünïcode and "quotes"'}
    args_b = {"file_path": "src/calc.py", "old_string": "a - b", "new_string": "a + b"}
    server = serve(
        [
            {
                "default": {
                    "text": "Reading and fixing.",
                    "tool_calls": [
                        {"name": "read_file", "arguments": args_a},
                        {"name": "edit", "arguments": args_b, "id": "call_given"},
                    ],
                }
            }
        ]
    )

    async def main() -> list[StreamEvent]:
        async with fast_client(server.base_url) as client:
            return await collect(client, request())

    events = run(main())
    announced = [e for e in events if isinstance(e, ToolCallDelta)]
    assert [(e.index, e.name) for e in announced] == [(0, "read_file"), (1, "edit")]
    result = events[-1]
    assert isinstance(result, ChatResult)
    calls = result.message.tool_calls
    assert [c.name for c in calls] == ["read_file", "edit"]
    assert [json.loads(c.arguments) for c in calls] == [args_a, args_b]
    assert calls[1].id == "call_given" and calls[0].id == announced[0].id
    assert result.message.text == "Reading and fixing."
    assert result.finish_reason == "tool_calls"


def test_thinking_is_reported_but_not_kept(serve: Callable[..., ScriptedModelServer]) -> None:
    server = serve([{"default": {"thinking": "hmm, the sign is wrong", "text": "Fixed."}}])

    async def main() -> list[StreamEvent]:
        async with fast_client(server.base_url) as client:
            return await collect(client, request())

    events = run(main())
    assert (
        "".join(e.text for e in events if isinstance(e, ThinkingDelta)) == "hmm, the sign is wrong"
    )
    result = events[-1]
    assert isinstance(result, ChatResult)
    assert result.message.text == "Fixed."


def test_complete_is_the_non_streaming_path(serve: Callable[..., ScriptedModelServer]) -> None:
    server = serve(
        [
            {
                "default": {
                    "thinking": "secret thoughts",
                    "text": "Done.",
                    "tool_calls": [{"name": "read_file", "arguments": {"file_path": "a"}}],
                }
            }
        ]
    )

    async def main() -> ChatResult:
        async with fast_client(server.base_url) as client:
            return await client.complete(request(purpose="suggestion"))

    result = run(main())
    assert result.message.text == "Done."
    assert [(c.name, c.arguments) for c in result.message.tool_calls] == [
        ("read_file", '{"file_path":"a"}')
    ]
    assert result.usage.prompt_tokens > 0
    sent = server.requests[-1]
    assert sent["purpose"] == "suggestion"
    assert sent["body"]["stream"] is False
    assert "stream_options" not in sent["body"]


def test_usage_reports_cached_tokens_for_a_shared_prefix(
    serve: Callable[..., ScriptedModelServer],
) -> None:
    server = serve([{"default": {"text": "ok"}}])
    history = (
        Message.user("explain the project " * 30),
        Message.assistant("it is a calculator " * 30),
    )

    async def main() -> tuple[ChatResult, ChatResult]:
        async with fast_client(server.base_url) as client:
            first = await client.chat(request(*history, Message.user("tail a")))
            second = await client.chat(
                request(*history, Message.user("tail b"), purpose="speculation")
            )
            return first, second

    first, second = run(main())
    assert first.usage.cached_tokens == 0
    assert 0 < second.usage.cached_tokens < second.usage.prompt_tokens


def test_chat_passes_deltas_to_the_callback(serve: Callable[..., ScriptedModelServer]) -> None:
    server = serve([{"default": {"text": "one two three four five six seven"}}])
    seen: list[StreamEvent] = []

    async def main() -> ChatResult:
        async def on_event(event: StreamEvent) -> None:
            seen.append(event)

        async with fast_client(server.base_url) as client:
            return await client.chat(request(), on_event)

    result = run(main())
    assert "".join(e.text for e in seen if isinstance(e, TextDelta)) == result.message.text
    assert not any(isinstance(e, ChatResult) for e in seen)


def test_list_models(serve: Callable[..., ScriptedModelServer]) -> None:
    server = serve([], models=["qwen3-coder-plus", "qwen3-coder-flash"])

    async def main() -> list[str]:
        async with fast_client(server.base_url) as client:
            return await client.list_models()

    assert run(main()) == ["qwen3-coder-plus", "qwen3-coder-flash"]


# --------------------------------------------------------------------- request body


def test_enable_thinking_false_is_sent_when_requested(
    serve: Callable[..., ScriptedModelServer],
) -> None:
    server = serve([{"default": {"text": "x"}}])

    async def main() -> None:
        async with fast_client(server.base_url) as client:
            await client.chat(request(enable_thinking=False, temperature=0.0, max_tokens=64))
            await client.chat(request())

    run(main())
    forked, plain = (r["body"] for r in server.requests)
    assert forked["enable_thinking"] is False
    assert forked["chat_template_kwargs"] == {"enable_thinking": False}
    assert forked["temperature"] == 0.0 and forked["max_tokens"] == 64
    assert "enable_thinking" not in plain and "temperature" not in plain


def test_json_schema_becomes_response_format() -> None:
    client = ModelClient("http://127.0.0.1:9/v1")
    schema = {"type": "object", "properties": {"suggestion": {"type": "string"}}}
    body = client.build_body(
        request(json_schema=schema, json_schema_name="suggestion"), stream=False
    )
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "suggestion", "schema": schema},
    }
    run(client.aclose())


def test_openai_host_gets_no_thinking_switch() -> None:
    client = ModelClient("https://api.openai.com/v1", SECRET)
    body = client.build_body(request(enable_thinking=False), stream=True)
    assert "enable_thinking" not in body and "chat_template_kwargs" not in body
    run(client.aclose())


def test_same_prefix_serializes_to_identical_bytes(
    serve: Callable[..., ScriptedModelServer],
) -> None:
    server = serve([{"default": {"text": "x"}}])
    call = ToolCall("call_1", "read_file", '{"file_path": "src/calc.py"}')
    prefix = (
        Message.user("fix the failing test", reminders=("## Relevant memory\nuse pytest",)),
        Message.assistant("Reading.", (call,)),
        Message.tool((ToolResult("call_1", "read_file", output="def add(a, b): return a - b"),)),
        Message.assistant("Fixed `add`."),
    )

    async def main() -> None:
        async with fast_client(server.base_url) as client:
            await client.chat(request(*prefix, Message.user("thanks")))
            await client.chat(
                request(
                    *prefix,
                    Message.user("run the tests"),
                    purpose="speculation",
                    enable_thinking=False,
                )
            )
            await client.complete(
                request(*prefix, Message.user("[SUGGESTION MODE]"), purpose="suggestion")
            )

    run(main())
    bodies = [r["body"] for r in server.requests]
    k = len(bodies[0]["messages"]) - 1
    encoded = [msgspec.json.encode(b["messages"][:k]) for b in bodies]
    assert encoded[0] == encoded[1] == encoded[2]
    assert len({msgspec.json.encode(b["tools"]) for b in bodies}) == 1
    assert [b["messages"][k]["content"] for b in bodies] == [
        "thanks",
        "run the tests",
        "[SUGGESTION MODE]",
    ]
    # the client's own serialization is deterministic too
    client = ModelClient(server.base_url)
    req = request(*prefix)
    assert msgspec.json.encode(client.build_body(req, stream=True)) == msgspec.json.encode(
        client.build_body(req, stream=True)
    )
    run(client.aclose())


def test_dashscope_cache_markers_and_header(serve: Callable[..., ScriptedModelServer]) -> None:
    server = serve([{"default": {"text": "x"}}])
    history = (Message.user("first"), Message.assistant("answer"), Message.user("second"))

    async def main() -> None:
        async with fast_client(server.base_url, dashscope=True) as client:
            await client.chat(request(*history, enable_thinking=False))
            await client.complete(request(*history))
        async with fast_client(server.base_url, dashscope=True, cache_sharing=False) as client:
            await client.chat(request(*history))

    run(main())
    streamed, single, off = server.requests
    marker = {"type": "ephemeral"}
    for entry in (streamed, single):
        assert entry["headers"]["X-DashScope-CacheControl"] == "enable"
        assert entry["body"]["messages"][0] == {
            "role": "system",
            "content": [
                {"type": "text", "text": "You are a coding agent.", "cache_control": marker}
            ],
        }
    body = streamed["body"]
    assert body["messages"][-1]["content"] == [
        {"type": "text", "text": "second", "cache_control": marker}
    ]
    assert body["messages"][1] == {"role": "user", "content": "first"}
    assert body["tools"][-1]["cache_control"] == marker
    assert "cache_control" not in body["tools"][0]
    assert body["enable_thinking"] is False and "chat_template_kwargs" not in body
    # non-streaming: only the system message is marked
    assert single["body"]["messages"][-1] == {"role": "user", "content": "second"}
    assert single["body"]["tools"]
    assert all("cache_control" not in t for t in single["body"]["tools"])
    # cache sharing off: no header, no markers
    assert "X-DashScope-CacheControl" not in off["headers"]
    assert off["body"]["messages"][0] == {"role": "system", "content": "You are a coding agent."}


def test_dashscope_is_detected_from_the_host() -> None:
    assert ModelClient("https://dashscope.aliyuncs.com/compatible-mode/v1").dashscope
    assert ModelClient("https://dashscope-intl.aliyuncs.com/compatible-mode/v1").dashscope
    assert not ModelClient("http://127.0.0.1:8000/v1").dashscope
    assert not ModelClient("https://dashscope.aliyuncs.com/v1", dashscope=False).dashscope


# --------------------------------------------------------------------- retries and errors


def test_retries_server_errors_then_succeeds(serve: Callable[..., ScriptedModelServer]) -> None:
    server = serve([{"fail": {"status": 500, "times": 2}, "default": {"text": "recovered"}}])

    async def main() -> ChatResult:
        async with fast_client(server.base_url, max_retries=3) as client:
            return await client.chat(request())

    assert run(main()).message.text == "recovered"
    assert [r["status"] for r in server.requests] == [500, 500, 200]


def test_non_streaming_retries_too(serve: Callable[..., ScriptedModelServer]) -> None:
    server = serve([{"fail": {"status": 502, "times": 1}, "default": {"text": "ok"}}])

    async def main() -> ChatResult:
        async with fast_client(server.base_url) as client:
            return await client.complete(request())

    assert run(main()).message.text == "ok"
    assert len(server.requests) == 2


def test_429_honours_retry_after(serve: Callable[..., ScriptedModelServer]) -> None:
    server = serve(
        [{"fail": {"status": 429, "times": 1, "retry_after": 0.3}, "default": {"text": "ok"}}]
    )

    async def main() -> float:
        async with fast_client(server.base_url) as client:
            started = time.monotonic()
            await client.chat(request())
            return time.monotonic() - started

    elapsed = run(main())
    assert 0.3 <= elapsed < 2.0
    first, second = server.requests
    assert second["time"] - first["time"] >= 0.29


def test_retry_after_is_capped(serve: Callable[..., ScriptedModelServer]) -> None:
    server = serve(
        [{"fail": {"status": 429, "times": 1, "retry_after": 60}, "default": {"text": "ok"}}]
    )

    async def main() -> float:
        async with fast_client(server.base_url, retry_after_cap_s=0.1) as client:
            started = time.monotonic()
            await client.chat(request())
            return time.monotonic() - started

    assert run(main()) < 2.0


def test_gives_up_after_max_retries_with_a_typed_error(
    serve: Callable[..., ScriptedModelServer],
) -> None:
    server = serve(
        [{"fail": {"status": 503, "times": 100, "message": "overloaded"}, "default": {"text": "x"}}]
    )

    error = failed_call(server.base_url, max_retries=2)
    assert error.kind == "server" and error.status == 503 and error.attempts == 3
    assert str(error) == (
        f"The model endpoint {server.base_url} failed with HTTP 503: overloaded "
        "(gave up after 3 attempts)."
    )
    assert len(server.requests) == 3


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (400, "bad_request"),
        (401, "auth"),
        (403, "auth"),
        (404, "bad_request"),
        (422, "bad_request"),
    ],
)
def test_client_errors_are_not_retried(
    serve: Callable[..., ScriptedModelServer], status: int, kind: str
) -> None:
    server = serve([{"fail": {"status": status, "times": 5}, "default": {"text": "x"}}])

    error = failed_call(server.base_url, SECRET)
    assert error.kind == kind and error.status == status
    assert server.base_url in str(error)
    assert len(server.requests) == 1


def test_wrong_base_url_gets_a_hint(serve: Callable[..., ScriptedModelServer]) -> None:
    server = serve([{"default": {"text": "x"}}])
    base = server.base_url.removesuffix("/v1") + "/api"

    error = failed_call(base, call="complete")
    assert error.kind == "bad_request"
    assert str(error) == (
        f"The model endpoint {base} rejected the request (HTTP 404): No route for POST "
        "/api/chat/completions; is the base URL right (it usually ends in /v1)?"
    )


def test_an_unknown_model_gets_a_model_hint(serve: Callable[..., ScriptedModelServer]) -> None:
    """OpenAI answers an unknown model with a 404 whose body names the model: the base URL
    is right then, and a hint to check it sent people the wrong way."""
    message = "The model `gpt-typo` does not exist or you do not have access to it."
    server = serve([{"fail": {"status": 404, "times": 5, "message": message},
                     "default": {"text": "x"}}])

    error = failed_call(server.base_url)
    assert error.kind == "bad_request" and error.status == 404
    assert str(error).endswith(f"(HTTP 404): {message.rstrip('.')}; is the model name right?")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_a_password_in_the_base_url_is_never_in_a_message() -> None:
    base = f"http://proxyuser:pr0xy-pa55@127.0.0.1:{_free_port()}/v1"

    error = failed_call(base, SECRET, max_retries=0)
    assert error.kind == "connect"
    assert "pr0xy-pa55" not in str(error) + error.endpoint
    assert "http://proxyuser:***@127.0.0.1:" in str(error)


def test_a_password_that_also_spells_part_of_the_url_hides_only_the_password() -> None:
    port = _free_port()
    error = failed_call(f"http://gw:v1@127.0.0.1:{port}/v1", SECRET, max_retries=0)
    assert error.endpoint == f"http://gw:***@127.0.0.1:{port}/v1"


def test_refused_connection_is_a_clear_typed_error() -> None:
    base = f"http://127.0.0.1:{_free_port()}/v1"

    error = failed_call(base, SECRET, max_retries=1)
    assert type(error) is ModelError and error.kind == "connect" and error.attempts == 2
    assert str(error) == (
        f"The model endpoint {base} refused the connection (gave up after 2 attempts); "
        "is the server running?"
    )


def test_stalled_stream_times_out_and_the_server_still_stops(
    serve: Callable[..., ScriptedModelServer],
) -> None:
    server = serve([{"stall": True, "default": {"text": "never ends"}}])

    error = failed_call(server.base_url, timeout_s=0.3, call="stream")
    assert error.kind == "timeout"
    assert str(error) == (
        f"The model endpoint {server.base_url} stopped sending for 0.3 s, "
        "so the request was given up."
    )
    assert len(server.requests) == 1  # timeouts are not retried
    started = time.monotonic()
    server.stop()
    assert time.monotonic() - started < 1.0


def test_slow_first_token_times_out_on_the_non_streaming_path(
    serve: Callable[..., ScriptedModelServer],
) -> None:
    server = serve([{"default": {"text": "late", "latency_ms": 5000}}])
    # Nothing comes before the whole answer: the first-byte wait plus the between-bytes one.
    quick = ModelOptions(first_byte_timeout_s=0.1, first_byte_s_per_1k_tokens=0.0)

    error = failed_call(server.base_url, timeout_s=0.1, options=quick, call="complete")
    assert error.kind == "timeout"
    assert "sent nothing for 0.2 s after a request with about" in str(error)


def test_total_timeout_caps_a_slow_stream(serve: Callable[..., ScriptedModelServer]) -> None:
    server = serve([{"default": {"text": "a b c d e f g h i j k l m n o p", "chunk_ms": 100}}])

    error = failed_call(server.base_url, total_timeout_s=0.3)
    assert error.kind == "timeout"
    assert "0.3 s limit" in str(error)


def test_cancelling_a_stream_closes_the_response(serve: Callable[..., ScriptedModelServer]) -> None:
    server = serve(
        [
            {
                "when": {"last_user": "stall"},
                "stall": True,
                "reply": {"text": "first words and then nothing"},
            },
            {"default": {"text": "still works"}},
        ]
    )

    async def main() -> str:
        async with fast_client(server.base_url) as client:
            first = asyncio.Event()

            async def consume() -> None:
                async for _ in client.stream(request(Message.user("stall"))):
                    first.set()

            task = asyncio.create_task(consume())
            await asyncio.wait_for(first.wait(), 5)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            # the server notices the closed connection and ends its stalled handler
            deadline = time.monotonic() + 2
            while time.monotonic() < deadline:
                if len([t for t in threading.enumerate() if t.name == "scripted-model-conn"]) == 0:
                    break
                await asyncio.sleep(0.02)
            else:
                raise AssertionError("the stalled handler did not notice the disconnect")
            return (await client.chat(request(Message.user("again")))).message.text

    assert run(main()) == "still works"


def test_api_key_is_sent_but_never_shown(
    serve: Callable[..., ScriptedModelServer], caplog: pytest.LogCaptureFixture
) -> None:
    echo = f"Incorrect API key provided: {SECRET}."
    server = serve(
        [{"fail": {"status": 401, "times": 5, "message": echo}, "default": {"text": "x"}}]
    )
    seen: dict[str, str] = {}

    class Spy(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            seen["auth"] = self.headers.get("Authorization", "")
            self.send_response(503)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    async def main(spy_url: str) -> list[ModelError]:
        errors = []
        for base in (server.base_url, spy_url):
            client = fast_client(base, SECRET, max_retries=1)
            assert SECRET not in repr(client)
            try:
                await client.chat(request())
            except ModelError as exc:
                errors.append(exc)
            finally:
                await client.aclose()
        return errors

    with local_http_server(Spy) as spy, caplog.at_level("DEBUG"):
        auth_error, server_error = run(main(f"http://127.0.0.1:{spy.server_port}/v1"))
    assert seen["auth"] == f"Bearer {SECRET}"
    assert auth_error.kind == "auth" and server_error.kind == "server"
    for error in (auth_error, server_error):
        assert SECRET not in str(error) and SECRET not in repr(error)
        assert SECRET not in str(error.__cause__ or "")
    assert "***" in str(auth_error)
    assert SECRET not in caplog.text
    assert "X-Specrun-Purpose" not in str(auth_error)


def test_no_authorization_header_without_a_key(serve: Callable[..., ScriptedModelServer]) -> None:
    server = serve([{"default": {"text": "x"}}])

    async def main() -> None:
        async with fast_client(server.base_url, api_key=None) as client:
            await client.chat(request())

    run(main())
    # the request log drops Authorization anyway; check the client's own headers
    client = ModelClient(server.base_url)
    assert "Authorization" not in client._headers("main", stream=True)
    assert ModelClient(server.base_url, SECRET)._headers("main", stream=True)["Authorization"] == (
        f"Bearer {SECRET}"
    )


def test_model_error_survives_pickling() -> None:
    error = ModelError(
        "rate_limit", "The model endpoint x is rate limiting.", status=429, retry_after=2.0
    )
    copy = pickle.loads(pickle.dumps(error))
    assert (copy.kind, copy.status, copy.retry_after, str(copy)) == (
        "rate_limit",
        429,
        2.0,
        str(error),
    )
    assert copy.retryable


# --------------------------------------------------------------------- raw servers


class _RawSSE(BaseHTTPRequestHandler):
    """Answers every POST with the server's canned SSE ``data:`` payloads, then closes."""

    protocol_version = "HTTP/1.0"

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(200)
        self.send_header("Content-Type", self.server.content_type)  # type: ignore[attr-defined]
        self.end_headers()
        for item in self.server.payloads:  # type: ignore[attr-defined]
            data = item if isinstance(item, str) else json.dumps(item)
            self.wfile.write(f"data: {data}\n\n".encode())
            self.wfile.flush()

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def raw_sse() -> Iterator[Callable[..., str]]:
    with contextlib.ExitStack() as servers:

        def start(payloads: list[Any], content_type: str = "text/event-stream") -> str:
            server = servers.enter_context(
                local_http_server(_RawSSE, payloads=payloads, content_type=content_type)
            )
            return f"http://127.0.0.1:{server.server_port}/v1"

        yield start


def _chunk(
    delta: dict[str, Any] | None = None, finish: str | None = None, **extra: Any
) -> dict[str, Any]:
    choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
    return {"id": "chatcmpl-raw", "choices": choices, **extra}


def test_calls_without_index_in_one_chunk_and_inline_think_blocks(
    raw_sse: Callable[..., str],
) -> None:
    base = raw_sse(
        [
            _chunk({"role": "assistant", "content": "<th"}),
            _chunk({"content": "ink>\nplan the edit</thi"}),
            _chunk({"content": "nk>\n\nEditing "}),
            _chunk({"content": "now."}),
            _chunk(
                {
                    "tool_calls": [
                        {
                            "id": "a1",
                            "type": "function",
                            "function": {"name": "read_file", "arguments": '{"file_path":"x"}'},
                        },
                        {
                            "id": "a2",
                            "type": "function",
                            "function": {"name": "edit", "arguments": {"file_path": "y"}},
                        },
                    ]
                }
            ),
            _chunk({}, "tool_calls"),
            _chunk(
                None,
                usage={
                    "prompt_tokens": 120,
                    "completion_tokens": 30,
                    "total_tokens": 150,
                    "prompt_tokens_details": {"cached_tokens": 96},
                },
            ),
            "[DONE]",
        ]
    )

    async def main() -> list[StreamEvent]:
        async with fast_client(base) as client:
            return await collect(client, request())

    events = run(main())
    assert (
        "".join(e.text for e in events if isinstance(e, ThinkingDelta)).strip() == "plan the edit"
    )
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Editing now."
    result = events[-1]
    assert isinstance(result, ChatResult)
    assert result.message.text == "Editing now."
    assert [(c.id, c.name, json.loads(c.arguments)) for c in result.message.tool_calls] == [
        ("a1", "read_file", {"file_path": "x"}),
        ("a2", "edit", {"file_path": "y"}),
    ]
    assert (result.usage.prompt_tokens, result.usage.cached_tokens, result.usage.total_tokens) == (
        120,
        96,
        150,
    )
    assert result.request_id == "chatcmpl-raw"


def test_error_event_mid_stream_is_a_server_error(raw_sse: Callable[..., str]) -> None:
    base = raw_sse([_chunk({"content": "Hel"}), {"error": {"message": "upstream overloaded"}}])

    error = failed_call(base, call="stream")
    assert error.kind == "server"
    assert "upstream overloaded" in str(error)


def test_truncated_stream_is_a_protocol_error(raw_sse: Callable[..., str]) -> None:
    base = raw_sse([_chunk({"content": "Hello"}), _chunk({"content": " wor"})])

    error = failed_call(base, call="stream")
    assert error.kind == "protocol"
    assert "ended the stream before the answer was complete" in str(error)


def test_garbage_and_wrong_content_type_are_protocol_errors(raw_sse: Callable[..., str]) -> None:
    async def attempt(base: str) -> ModelError:
        async with fast_client(base) as client:
            try:
                await client.chat(request())
            except ModelError as exc:
                return exc
        raise AssertionError("no error")

    not_json = run(attempt(raw_sse(["{not json"])))
    assert not_json.kind == "protocol" and "not JSON" in str(not_json)
    wrong_type = run(
        attempt(raw_sse([_chunk({"content": "x"}, "stop")], content_type="application/json"))
    )
    assert wrong_type.kind == "protocol" and "event stream" in str(wrong_type)


def test_loading_the_client_leaves_httpx_cli_and_its_renderers_out() -> None:
    """httpx's command-line client would load click, rich and pygments (~30 ms of every
    service and fork server start); the model client keeps it out, httpx stays whole."""
    code = (
        "import sys\n"
        "import protocol.model, httpx\n"
        "assert not {'click', 'rich', 'pygments'} & set(sys.modules), sorted(sys.modules)\n"
        "assert callable(httpx.main) and httpx.Client and httpx.AsyncClient\n"
    )
    subprocess.run([sys.executable, "-c", code], cwd=REPO, check=True, timeout=60)
