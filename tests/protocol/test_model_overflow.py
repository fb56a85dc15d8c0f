"""A provider's "does not fit the context window" answer is its own error kind, told apart
from any other 400 by the bodies those servers really send (over real loopback HTTP), and
the window an endpoint reports is read from its metadata."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any, ClassVar

import msgspec
import pytest

from coordinator.scripted_model import ScriptedModelServer
from protocol.model import ModelError
from protocol.model.overflow import stated_window
from tests.protocol.test_model_client import fast_client, request, run
from tests.support import local_http_server

OPENAI = {
    "error": {
        "message": "This model's maximum context length is 128000 tokens. However, your "
        "messages resulted in 131072 tokens. Please reduce the length of the messages.",
        "type": "invalid_request_error",
        "param": "messages",
        "code": "context_length_exceeded",
    }
}
VLLM = {
    "object": "error",
    "message": "This model's maximum context length is 32768 tokens. However, you requested "
    "33602 tokens (33090 in the messages, 512 in the completion). Please reduce the length "
    "of the messages or completion.",
    "type": "BadRequestError",
    "param": None,
    "code": 400,
}
DASHSCOPE = {
    "error": {
        "message": "<400> InternalError.Algo.InvalidParameter: Range of input length should "
        "be [1, 129024]",
        "type": "invalid_request_error",
        "param": None,
        "code": "invalid_parameter_error",
    },
    "id": "chatcmpl-3f1c",
    "request_id": "3f1c0e4e-9a7b-9c2d-8f7e-2b6a1d0c5e4f",
}
LLAMA_CPP = {
    "error": {
        "code": 400,
        "message": "the request exceeds the available context size, try increasing it",
        "type": "exceed_context_size_error",
        "n_prompt_tokens": 9000,
        "n_ctx": 8192,
    }
}
OLLAMA = {"error": "the input length exceeds the context length"}
ANTHROPIC_VIA_LITELLM = {
    "error": {
        "message": "litellm.BadRequestError: litellm.ContextWindowExceededError: "
        'AnthropicException - {"type":"error","error":{"type":"invalid_request_error",'
        '"message":"prompt is too long: 208310 tokens > 200000 maximum"}}',
        "type": None,
        "param": None,
        "code": "400",
    }
}
BEDROCK_VIA_LITELLM = {
    "error": {
        "message": "litellm.ContextWindowExceededError: BedrockException: Context Window "
        'Error - {"message":"Input is too long for requested model."}',
        "type": None,
        "param": None,
        "code": "400",
    }
}
OPENROUTER = {
    "error": {
        "message": "This endpoint's maximum context length is 200000 tokens. However, you "
        "requested about 230311 tokens (230311 of text input). Please reduce the length of "
        "either one, or use the \"middle-out\" transform to compress your prompt "
        "automatically.",
        "code": 400,
        "metadata": {"provider_name": None},
    }
}
GEMINI = [{
    "error": {
        "code": 400,
        "message": "The input token count (1200345) exceeds the maximum number of tokens "
        "allowed (1048576).",
        "status": "INVALID_ARGUMENT",
    }
}]
MISTRAL = {
    "object": "error",
    "message": "Prompt contains 40213 tokens and 0 draft tokens, too large for model with "
    "32768 maximum context length",
    "type": "invalid_request_prompt",
    "param": None,
    "code": "3051",
}
SGLANG = {
    "object": "error",
    "message": "The input (40213 tokens) is longer than the model's context length (32768 "
    "tokens).",
    "type": "BadRequestError",
    "param": None,
    "code": 400,
}
XAI = {
    "code": "Client specified an invalid argument",
    "error": "This model's maximum prompt length is 131072 but the request contains 140213 "
    "tokens.",
}
TGI = {
    "error": "Input validation error: `inputs` tokens + `max_new_tokens` must be <= 8192. "
    "Given: 9000 `inputs` tokens and 100 `max_new_tokens`",
    "error_type": "validation",
}
MOONSHOT = {
    "error": {
        "message": "Invalid request: Your request exceeded model token limit: 131072",
        "type": "invalid_request_error",
    }
}
OTHER_400 = {
    "error": {
        "message": "Invalid value for 'temperature': must be between 0 and 2.",
        "type": "invalid_request_error",
        "param": "temperature",
        "code": "invalid_value",
    }
}


@pytest.mark.parametrize(
    ("body", "window"),
    [
        (OPENAI, 128000), (VLLM, 32768), (DASHSCOPE, 129024), (LLAMA_CPP, 8192),
        (OLLAMA, None), (ANTHROPIC_VIA_LITELLM, 200000), (BEDROCK_VIA_LITELLM, None),
        (OPENROUTER, 200000), (GEMINI, 1048576), (MISTRAL, 32768), (SGLANG, 32768),
        (XAI, 131072), (TGI, 8192), (MOONSHOT, 131072),
    ],
    ids=[
        "openai", "vllm", "dashscope", "llamacpp", "ollama", "anthropic-litellm",
        "bedrock-litellm", "openrouter", "gemini", "mistral", "sglang", "xai", "tgi",
        "moonshot",
    ],
)  # fmt: skip
def test_each_providers_overflow_body_is_a_context_length_error(
    body: Any, window: int | None
) -> None:
    rule = {"fail": {"status": 400, "body": body, "times": 5}, "default": {"text": "never"}}
    with ScriptedModelServer({"rules": [rule]}) as server:
        client = fast_client(server.base_url)
        with pytest.raises(ModelError) as caught:
            run(_chat_then_close(client))
        attempts = len(server.requests)
    error = caught.value
    assert error.kind == "context_length" and error.status == 400
    assert attempts == 1  # not retried: the same request would fail the same way
    assert "does not fit the model's context window" in str(error)
    assert stated_window(str(error)) == window


def test_any_other_400_stays_a_bad_request() -> None:
    rule = {"fail": {"status": 400, "body": OTHER_400}, "default": {"text": "never"}}
    with ScriptedModelServer({"rules": [rule]}) as server, pytest.raises(ModelError) as caught:
        run(_chat_then_close(fast_client(server.base_url)))
    assert caught.value.kind == "bad_request"


async def _chat_then_close(client: Any) -> None:
    try:
        await client.chat(request())
    finally:
        await client.aclose()


# -- the window an endpoint reports -------------------------------------------------------


class _Metadata(BaseHTTPRequestHandler):
    """Answers one metadata route with a canned body, 404 to the rest."""

    routes: ClassVar[dict[tuple[str, str], Any]] = {}

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        body = self.routes.get((self.command, self.path))
        data = msgspec.json.encode(body if body is not None else {"error": "not found"})
        self.send_response(200 if body is not None else 404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = _answer


@pytest.fixture
def metadata_server() -> Iterator[Any]:
    with contextlib.ExitStack() as servers:

        def start(routes: dict[tuple[str, str], Any]) -> str:
            handler = type("Handler", (_Metadata,), {"routes": routes})
            server = servers.enter_context(local_http_server(handler))
            return f"http://127.0.0.1:{server.server_port}/v1"

        yield start


OLLAMA_SHOW = {
    "model_info": {"general.architecture": "qwen2", "qwen2.context_length": 32768},
    "details": {"family": "qwen2"},
}


@pytest.mark.parametrize(
    ("routes", "window"),
    [
        (
            {
                ("GET", "/v1/models"): {
                    "data": [{"id": "q", "object": "model", "max_model_len": 40960}]
                }
            },
            40960,
        ),
        (
            {
                ("GET", "/v1/models"): {"data": [{"id": "q", "object": "model"}]},
                ("GET", "/props"): {"default_generation_settings": {"n_ctx": 8192}},
            },
            8192,
        ),
        (
            {
                ("GET", "/v1/models"): {"data": [{"id": "q", "object": "model"}]},
                ("POST", "/api/show"): OLLAMA_SHOW,
            },
            32768,
        ),
        ({("GET", "/v1/models"): {"data": [{"id": "q", "object": "model"}]}}, None),
    ],
    ids=["vllm", "llamacpp", "ollama", "none"],
)
def test_the_reported_window_is_read_from_the_endpoints_metadata(
    metadata_server: Any, routes: dict[tuple[str, str], Any], window: int | None
) -> None:
    client = fast_client(metadata_server(routes))

    async def ask() -> int | None:
        try:
            return await client.context_window("q")
        finally:
            await client.aclose()

    assert run(ask()) == window


def test_the_scripted_model_lists_its_window_as_vllm_does() -> None:
    with ScriptedModelServer({"rules": [], "context_window": 5000}) as server:
        client = fast_client(server.base_url)

        async def ask() -> int | None:
            try:
                return await client.context_window("scripted")
            finally:
                await client.aclose()

        assert run(ask()) == 5000
