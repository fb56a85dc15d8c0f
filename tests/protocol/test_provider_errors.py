"""Real providers' error answers, served byte for byte over loopback HTTP, through the
model client: each gives the right kind, the right retry decision and one clear sentence
(no traceback, no key, inert text). The bodies follow what each provider documents or
was seen to send: OpenAI, Azure OpenAI, OpenRouter, DashScope, vLLM, llama.cpp, Ollama,
LM Studio, Groq, DeepSeek, Anthropic-style gateways and proxies' HTML pages."""

from __future__ import annotations

import asyncio
import email.utils
import gzip
import json
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest

from protocol.model import ChatRequest, ChatResult, ModelClient, ModelError, RetryWait
from protocol.text.inert_text import inert
from protocol.wire.chat import Message
from tests.support import local_http_server

KEY = "sk-test-9f8e7d6c5b4a"


def _json(payload: Any) -> bytes:
    return json.dumps(payload).encode()


def _openai(code: str, kind: str | None, message: str) -> bytes:
    return _json({"error": {"message": message, "type": kind, "param": None, "code": code}})


def _sse(*events: Any) -> bytes:
    return b"".join(
        e if isinstance(e, bytes) else b"data: " + _json(e) + b"\n\n" for e in events
    )


def _chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {"id": "c1", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


DONE = b"data: [DONE]\n\n"
HTML = {"content-type": "text/html; charset=UTF-8"}

# name: (status, headers, body)
ANSWERS: dict[str, tuple[int, dict[str, str], bytes]] = {
    "openai_quota": (429, {}, _openai(
        "insufficient_quota", "insufficient_quota",
        "You exceeded your current quota, please check your plan and billing details.")),
    "openai_key": (401, {}, _openai(
        "invalid_api_key", "invalid_request_error",
        f"Incorrect API key provided: {KEY}. You can find your API key at "
        "https://platform.openai.com/account/api-keys.")),
    "openai_model": (404, {}, _openai(
        "model_not_found", "invalid_request_error",
        "The model `gpt-9` does not exist or you do not have access to it.")),
    "openai_context": (400, {}, _openai(
        "context_length_exceeded", "invalid_request_error",
        "This model's maximum context length is 128000 tokens. However, your messages "
        "resulted in 130000 tokens.")),
    "azure_filter": (400, {}, _json({"error": {
        "message": "The response was filtered due to the prompt triggering Azure OpenAI's "
                   "content management policy.",
        "type": None, "param": "prompt", "code": "content_filter", "status": 400,
        "innererror": {"code": "ResponsibleAIPolicyViolation"}}})),
    "openrouter_credits": (402, {}, _json({"error": {
        "code": 402, "message": "This request requires more credits, or fewer max_tokens."}})),
    "deepseek_balance": (402, {}, _openai(
        "invalid_request_error", "unknown_error", "Insufficient Balance")),
    "dashscope_arrearage": (400, {}, _json({"error": {
        "code": "Arrearage", "type": "Arrearage",
        "message": "Access denied, please make sure your account is in good standing."},
        "request_id": "r1"})),
    "dashscope_inspection": (400, {}, _json({"error": {
        "code": "data_inspection_failed", "type": "data_inspection_failed",
        "message": "Input data may contain inappropriate content."}})),
    "dashscope_context": (400, {}, _json({"error": {
        "code": "invalid_parameter_error", "type": "invalid_request_error",
        "message": "<400> InternalError.Algo.InvalidParameter: Range of input length "
                   "should be [1, 30720]"}})),
    "vllm_model": (404, {}, _json({
        "object": "error", "message": "The model `foo` does not exist.",
        "type": "NotFoundError", "param": None, "code": 404})),
    "llamacpp_context": (400, {}, _json({"error": {
        "code": 400, "message": "the request exceeds the available context size, try "
        "increasing it", "type": "exceed_context_size_error", "n_ctx": 4096}})),
    "ollama_model": (404, {}, _json({"error": {
        "message": 'model "llama3" not found, try pulling it first', "type": "api_error",
        "param": None, "code": None}})),
    "lmstudio_no_model": (400, {}, _json({
        "error": "No models loaded. Please load a model in the developer page."})),
    "anthropic_key": (401, {}, _json({
        "type": "error", "error": {"type": "authentication_error",
                                   "message": "invalid x-api-key"}})),
    "anthropic_context": (400, {}, _json({
        "type": "error", "error": {
            "type": "invalid_request_error",
            "message": "prompt is too long: 201234 tokens > 200000 maximum"}})),
    "cloudflare_403": (403, HTML, b"<!DOCTYPE html><html><head><title>Attention Required! | "
                                  b"Cloudflare</title></head><body>blocked</body></html>"),
    "cloudflare_502": (502, HTML, b"<!DOCTYPE html><html><head><title>api.example.com | 502: "
                                  b"Bad gateway</title></head><body>cloudflare</body></html>"),
    "html_200": (200, HTML, b"<html><body>Welcome to nginx!</body></html>"),
    "json_error_200": (200, {}, _json({"error": {"code": 502,
                                                 "message": "Provider returned error"}})),
}

STREAMS: dict[str, bytes] = {
    "openrouter_error_first": _sse(
        b": OPENROUTER PROCESSING\n\n",
        {"id": "g", "provider": "X", "error": {"code": 502, "message": "Provider returned error"},
         "choices": [{"index": 0, "delta": {"content": ""}, "finish_reason": "error"}]},
        DONE),
    "openrouter_429_first": _sse(
        b": OPENROUTER PROCESSING\n\n",
        {"error": {"code": 429, "message": "Rate limit exceeded: free-models-per-min."},
         "choices": []}),
    "openrouter_credits_in_stream": _sse(
        {"error": {"code": 402, "message": "Insufficient credits"}, "choices": []}),
    "openrouter_error_after_text": _sse(
        _chunk({"content": "Hel"}),
        {"error": {"code": 502, "message": "Provider disconnected"},
         "choices": [{"index": 0, "delta": {}, "finish_reason": "error"}]},
        DONE),
    "anthropic_event_error": _sse(
        b'event: error\ndata: {"type": "error", "error": {"type": "overloaded_error", '
        b'"message": "Overloaded"}}\n\n'),
    "only_done": _sse({"id": "c", "choices": []}, DONE),
    "vllm_error_in_stream": _sse(
        {"object": "error", "message": "This model's maximum context length is 4096 tokens. "
         "However, you requested 5000 tokens.", "type": "BadRequestError", "param": None,
         "code": 400},
        DONE),
}

# name: (kind, requests made with max_retries=2, words the sentence has)
EXPECTED: dict[str, tuple[str, int, tuple[str, ...]]] = {
    "openai_quota": ("quota", 1, ("out of credit or quota", "HTTP 429", "waiting will not help")),
    "openai_key": ("auth", 1, ("rejected the API key", "HTTP 401")),
    "openai_model": ("bad_request", 1, ("HTTP 404", "is the model name right?")),
    "openai_context": ("context_length", 1, ("context window",)),
    "azure_filter": ("content_filter", 1, ("content filter", "refused the request")),
    "openrouter_credits": ("quota", 1, ("out of credit or quota", "HTTP 402")),
    "deepseek_balance": ("quota", 1, ("Insufficient Balance",)),
    "dashscope_arrearage": ("quota", 1, ("good standing",)),
    "dashscope_inspection": ("content_filter", 1, ("inappropriate content",)),
    "dashscope_context": ("context_length", 1, ("context window",)),
    "vllm_model": ("bad_request", 1, ("is the model name right?",)),
    "llamacpp_context": ("context_length", 1, ("4096 tokens",)),
    "ollama_model": ("bad_request", 1, ("try pulling it first", "is the model name right?")),
    "lmstudio_no_model": ("bad_request", 1, ("No models loaded",)),
    "anthropic_key": ("auth", 1, ("invalid x-api-key",)),
    "anthropic_context": ("context_length", 1, ("context window",)),
    "cloudflare_403": ("bad_request", 1, ("HTML page", "proxy or firewall")),
    "cloudflare_502": ("server", 3, ("HTTP 502", "HTML error page", "gave up after 3 attempts")),
    "json_error_200": ("server", 3, ("Provider returned error",)),
    "openrouter_error_first": ("server", 3, ("in its stream", "Provider returned error")),
    "openrouter_429_first": ("rate_limit", 3, ("rate limiting", "free-models-per-min")),
    "openrouter_credits_in_stream": ("quota", 1, ("out of credit or quota",)),
    "openrouter_error_after_text": ("server", 1, ("Provider disconnected",)),
    "anthropic_event_error": ("server", 3, ("Overloaded",)),
    "only_done": ("protocol", 1, ("without an answer",)),
    "vllm_error_in_stream": ("context_length", 1, ("4096 tokens", "context window")),
    "html_200": ("protocol", 1, ("HTML page", "is the base URL right")),
}


class _Provider(BaseHTTPRequestHandler):
    """Answers ``/<name>/v1/chat/completions`` with the answer or stream named ``name``."""

    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        name = self.path.split("/")[1]
        hits: dict[str, int] = self.server.hits  # type: ignore[attr-defined]
        hits[name] = hits.get(name, 0) + 1
        answers: dict[str, tuple[int, dict[str, str], bytes]] = self.server.answers  # type: ignore[attr-defined]
        if name in answers:
            status, headers, body = answers[name]
            headers = {"content-type": "application/json", **headers}
        else:
            status, headers, body = 200, {"content-type": "text/event-stream"}, STREAMS[name]
        self.send_response(status)
        for header, value in headers.items():
            self.send_header(header, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def provider() -> Iterator[Any]:
    with local_http_server(_Provider, hits={}, answers=dict(ANSWERS)) as server:
        yield server


REQUEST = ChatRequest(system="s", history=(Message.user("go"),), model="m", purpose="main")


def _client(base: str, **options: Any) -> ModelClient:
    options = {"backoff_s": 0.01, "backoff_max_s": 0.02, "max_retries": 2, **options}
    return ModelClient(base, KEY, **options)


def _outcome(base: str, req: ChatRequest = REQUEST, **options: Any) -> tuple[Any, list[Any]]:
    """The result or ModelError of one streamed request, and the events before it."""

    async def main() -> tuple[Any, list[Any]]:
        events: list[Any] = []
        async with _client(base, **options) as client:
            try:
                async for event in client.stream(req):
                    events.append(event)
            except ModelError as exc:
                return exc, events
        return events[-1], events[:-1]

    return asyncio.run(asyncio.wait_for(main(), 30))


@pytest.mark.parametrize("name", list(EXPECTED))
def test_each_provider_error_has_its_kind_retry_decision_and_one_sentence(
    provider: Any, name: str
) -> None:
    kind, requests, words = EXPECTED[name]
    error, _ = _outcome(f"http://127.0.0.1:{provider.server_port}/{name}/v1")
    assert isinstance(error, ModelError), error
    text = str(error)
    assert error.kind == kind, text
    assert provider.hits[name] == requests, text
    for word in words:
        assert word in text, (word, text)
    assert KEY not in text and "Traceback" not in text
    assert "\n" not in text and inert(text) == text
    assert text.endswith((".", "?"))


def _wait_for(headers: dict[str, str], provider: Any, **options: Any) -> tuple[Any, list[Any]]:
    provider.answers["limited"] = (429, headers, _openai("rate_limit_exceeded", "requests",
                                                         "Rate limit reached."))
    return _outcome(f"http://127.0.0.1:{provider.server_port}/limited/v1", **options)


@pytest.mark.parametrize(("headers", "asked"), [
    ({"retry-after": "7"}, 7.0),
    ({"retry-after-ms": "1500", "retry-after": "2"}, 1.5),
    ({"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "1m30s",
      "x-ratelimit-remaining-tokens": "900", "x-ratelimit-reset-tokens": "6m0s"}, 90.0),
    ({"x-ratelimit-reset-tokens": "250ms"}, 0.25),
])
def test_the_wait_the_server_asks_for_is_announced_and_honoured_up_to_the_cap(
    provider: Any, headers: dict[str, str], asked: float
) -> None:
    # The cap (0.3 s) keeps the test short: a longer ask is waited for the cap, once.
    error, events = _wait_for(headers, provider, retry_after_cap_s=0.3, max_retries=1)
    assert isinstance(error, ModelError) and error.kind == "rate_limit"
    (wait,) = events
    assert isinstance(wait, RetryWait)
    assert wait.reason == "rate_limit" and wait.status == 429
    assert (wait.attempt, wait.attempts) == (2, 2)
    assert wait.delay_s == pytest.approx(min(asked, 0.3), abs=0.01)
    assert wait.text.startswith("The model endpoint is rate-limiting requests (HTTP 429)")
    assert "retrying in" in wait.text and "(attempt 2 of 2)." in wait.text
    if asked > 0.3:
        assert "asks to wait" in wait.text
    assert provider.hits["limited"] == 2


def test_an_http_date_retry_after_is_read(provider: Any) -> None:
    when = email.utils.formatdate(time.time() + 120, usegmt=True)
    error, events = _wait_for({"retry-after": when}, provider, retry_after_cap_s=0.2)
    (wait,) = events
    assert isinstance(wait, RetryWait) and wait.asked_s is not None
    assert 100 < wait.asked_s <= 121
    # Asked twice for longer than the cap: no third attempt, and the sentence says why.
    assert isinstance(error, ModelError) and error.attempts == 2 and not error.retryable
    assert "it asks to wait " in str(error)
    assert "longer than specrun waits (0.2 s) (gave up after 2 attempts)" in str(error)
    assert provider.hits["limited"] == 2


@pytest.mark.parametrize("purpose", ["suggestion", "speculation", "pipelined", "recall"])
def test_a_background_request_does_not_retry_a_rate_limit_and_holds_the_next(
    provider: Any, purpose: Any
) -> None:
    base = f"http://127.0.0.1:{provider.server_port}/limited/v1"
    provider.answers["limited"] = (429, {"retry-after": "30"}, b"{}")
    background = ChatRequest(system="s", history=(Message.user("go"),), model="m",
                             purpose=purpose)

    async def main() -> tuple[ModelError, ModelError]:
        errors = []
        async with _client(base) as client:
            for _ in range(2):
                try:
                    await client.chat(background)
                except ModelError as exc:
                    errors.append(exc)
        return errors[0], errors[1]

    first, second = asyncio.run(asyncio.wait_for(main(), 10))
    assert first.kind == second.kind == "rate_limit" and first.attempts == 1
    assert f"{purpose} request was not sent" in str(second)
    assert provider.hits["limited"] == 1  # the second never reached the endpoint


def test_without_an_asked_wait_the_backoff_doubles_with_up_to_one_base_of_jitter(
    provider: Any,
) -> None:
    provider.answers["failing"] = (503, {}, b"{}")
    base = f"http://127.0.0.1:{provider.server_port}/failing/v1"
    error, events = _outcome(base, backoff_s=0.01, backoff_max_s=0.03, max_retries=3)
    assert isinstance(error, ModelError) and error.kind == "server" and error.attempts == 4
    assert [(w.reason, w.status, w.attempt, w.attempts) for w in events] == [
        ("server", 503, n, 4) for n in (2, 3, 4)
    ]
    for wait, least in zip(events, (0.01, 0.02, 0.03), strict=True):
        assert least <= wait.delay_s <= least + 0.01
    assert provider.hits["failing"] == 4


def test_a_background_request_waits_for_a_failing_server_at_most_the_backoff(
    provider: Any,
) -> None:
    base = f"http://127.0.0.1:{provider.server_port}/failing/v1"
    speculation = ChatRequest(system="s", history=(Message.user("go"),), model="m",
                              purpose="speculation")
    provider.answers["failing"] = (503, {}, b"{}")
    error, events = _outcome(base, speculation)
    assert isinstance(error, ModelError) and error.kind == "server" and error.attempts == 3
    assert len(events) == 2 and all(w.delay_s <= 0.03 for w in events)
    # Asked for longer than that: no wait at all, and the error says why.
    provider.answers["failing"] = (503, {"retry-after": "30"}, b"{}")
    error, events = _outcome(base, speculation)
    assert isinstance(error, ModelError) and error.attempts == 1 and not error.retryable
    assert "it asks to wait 30 s, longer than specrun waits" in str(error)
    assert events == [] and provider.hits["failing"] == 4


def test_a_gzip_encoded_error_body_is_read(provider: Any) -> None:
    body = gzip.compress(_openai("insufficient_quota", "insufficient_quota",
                                 "You exceeded your current quota."))
    provider.answers["gzipped"] = (429, {"content-encoding": "gzip"}, body)
    error, _ = _outcome(f"http://127.0.0.1:{provider.server_port}/gzipped/v1")
    assert isinstance(error, ModelError) and error.kind == "quota"
    assert "You exceeded your current quota" in str(error)


def test_a_json_answer_to_a_stream_request_is_read_as_the_answer(provider: Any) -> None:
    provider.answers["plain"] = (200, {}, _json({"id": "x", "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "hi there"},
         "finish_reason": "stop"}]}))
    result, events = _outcome(f"http://127.0.0.1:{provider.server_port}/plain/v1")
    assert isinstance(result, ChatResult) and result.message.text == "hi there"
    assert [getattr(e, "text", None) for e in events] == ["hi there"]


def test_ctrl_c_during_a_wait_ends_it_at_once(provider: Any) -> None:
    provider.answers["limited"] = (429, {"retry-after": "20"}, b"{}")
    base = f"http://127.0.0.1:{provider.server_port}/limited/v1"

    async def main() -> float:
        waiting = asyncio.Event()

        async def on_event(event: Any) -> None:
            if isinstance(event, RetryWait):
                waiting.set()

        async with _client(base, retry_after_cap_s=60) as client:
            task = asyncio.ensure_future(client.chat(REQUEST, on_event))
            await asyncio.wait_for(waiting.wait(), 10)
            started = time.monotonic()
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            return time.monotonic() - started

    assert asyncio.run(asyncio.wait_for(main(), 20)) < 1.0
    assert provider.hits["limited"] == 1


# ------------------------------------------------------------------------ transport


def _failed(base: str) -> ModelError:
    error, _ = _outcome(base, timeout_s=5, connect_timeout_s=5)
    assert isinstance(error, ModelError)
    return error


def test_an_unknown_host_is_not_retried() -> None:
    error = _failed("http://no-such-host.invalid/v1")
    assert error.kind == "connect" and error.attempts == 1 and not error.retryable
    assert "could not be resolved" in str(error)


@pytest.fixture
def tls_port(tmp_path: Path) -> Iterator[Callable[[], int]]:
    """A loopback server that answers TLS with a self-signed certificate; the number of
    handshakes it was asked for."""
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout",
         str(tmp_path / "key"), "-out", str(tmp_path / "cert"), "-days", "1",
         "-subj", "/CN=localhost"],
        capture_output=True, check=True,
    )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(tmp_path / "cert", tmp_path / "key")
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.1)
    handshakes = [0]
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            handshakes[0] += 1
            conn.settimeout(5)
            try:
                context.wrap_socket(conn, server_side=True).close()
            except (ssl.SSLError, OSError):
                conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    port = listener.getsockname()[1]
    try:
        yield lambda: port
    finally:
        stop.set()
        thread.join()
        listener.close()
    assert handshakes[0] >= 1


def test_an_untrusted_certificate_is_one_sentence_and_not_retried(
    tls_port: Callable[[], int],
) -> None:
    error = _failed(f"https://127.0.0.1:{tls_port()}/v1")
    assert error.kind == "tls" and error.attempts == 1
    text = str(error)
    assert "TLS certificate" in text and "could not be verified" in text
    assert "self-signed" in text and "_ssl.c" not in text
