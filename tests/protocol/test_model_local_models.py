"""A real local model as it behaved, replayed: answers recorded from Qwen2.5-Coder-1.5B on
llama-server by ``scripts/real_model --record`` (``streams/real/``), served again on
loopback with the recorded wait for the prompt (scaled down) by ``llama_replay``.

What they show that the scripted model never did: the tool call written as text in a code
fence, an answer that goes on until something stops it, a first byte that comes after the
prompt has been read (minutes on a CPU), and the window a llama.cpp slot reports."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Coroutine
from typing import Any, TypeVar

import pytest

from protocol.model import (
    PURPOSES,
    ChatRequest,
    ChatResult,
    ModelClient,
    ModelError,
    ToolCallDelta,
)
from protocol.wire.chat import Message
from protocol.wire.model_options import ModelOptions, OutputCaps
from tests.protocol.llama_replay import REAL, Recording, replaying
from worker.tools import TOOL_SPECS, arguments_fit

T = TypeVar("T")

# The recorded waits run this many times faster here, and so do the client's limits: the
# defaults. 120 s become 1.2 s, and the ratios between waits and limits are the real ones.
SCALE = 1 / 100


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(asyncio.wait_for(coro, 30))


def recorded_request(recording: Recording, purpose: Any = "main") -> ChatRequest:
    """The recorded request, as specrun sent it: its messages and the real tools."""
    body = recording.meta["request"]
    messages = body["messages"]
    return ChatRequest(
        system=messages[0]["content"],
        history=tuple(Message.user(m["content"]) for m in messages[1:] if m["role"] == "user"),
        tools=TOOL_SPECS,
        model=body["model"],
        purpose=purpose,
    )


def scaled(**options: Any) -> ModelOptions:
    defaults = ModelOptions()
    return ModelOptions(
        first_byte_timeout_s=options.pop("first_byte_timeout_s",
                                         defaults.first_byte_timeout_s * SCALE),
        first_byte_s_per_1k_tokens=options.pop("first_byte_s_per_1k_tokens",
                                               defaults.first_byte_s_per_1k_tokens * SCALE),
        **options,
    )


# ------------------------------------------------------------------ tool calls as text


def test_the_recorded_fenced_call_is_run_as_a_tool_call() -> None:
    recording = Recording.load("llamacpp_fenced_call")
    assert recording.text().startswith("```json\n{")  # what the model wrote: prose for a server
    assert not any(
        c.get("delta", {}).get("tool_calls") for e in recording.events for c in e["choices"]
    )

    async def main() -> tuple[ChatResult, list[Any]]:
        with replaying(recording) as served:
            async with ModelClient(served.base_url, max_retries=0,
                                   arguments_fit=arguments_fit) as client:
                events = [e async for e in client.stream(recorded_request(recording))]
        assert isinstance(events[-1], ChatResult)
        return events[-1], events

    result, events = run(main())
    (call,) = result.message.tool_calls
    assert call.name == "run_shell_command"
    assert json.loads(call.arguments)["command"] == "pytest -q tests/test_calc.py"
    assert result.finish_reason == "tool_calls" and result.message.text == ""
    assert [e.name for e in events if isinstance(e, ToolCallDelta)] == ["run_shell_command"]


def test_text_stays_text_where_the_setting_says_so() -> None:
    recording = Recording.load("llamacpp_fenced_call")

    async def main() -> ChatResult:
        with replaying(recording) as served:
            off = ModelOptions(text_tool_calls="off")
            async with ModelClient(served.base_url, max_retries=0, options=off) as client:
                return await client.chat(recorded_request(recording))

    result = run(main())
    assert result.message.tool_calls == () and result.message.text == recording.text()


# ------------------------------------------------------------------ output caps


def test_every_request_carries_its_purposes_output_cap() -> None:
    # The recorded answer that went on and on (227 tokens of prose and code, unfinished).
    recording = Recording.load("llamacpp_long_read")
    caps = OutputCaps(main=40, speculation=30, suggestion=20, recall=10, compaction=50)

    async def main() -> tuple[list[dict[str, Any]], list[ChatResult]]:
        with replaying(recording) as served:
            async with ModelClient(served.base_url, max_retries=0,
                                   options=ModelOptions(max_tokens=caps)) as client:
                results = [await client.chat(recorded_request(recording, purpose))
                           for purpose in PURPOSES]
                # A caller that asks for less keeps its own; one that asks for more is capped.
                mine = recorded_request(recording, "recall")
                results.append(await client.complete(
                    ChatRequest(**{**_fields(mine), "max_tokens": 3})))
                results.append(await client.complete(
                    ChatRequest(**{**_fields(mine), "max_tokens": 5000})))
            return served.bodies, results

    bodies, results = run(main())
    assert [b.get("max_tokens") for b in bodies] == [40, 20, 30, 20, 10, 50, 3, 10]
    # Cut where the server cuts: every answer ended at its cap, instead of where the server's
    # window ends (this one was still going after 227 tokens and 18 minutes).
    assert {r.finish_reason for r in results} == {"length"}


def _fields(req: ChatRequest) -> dict[str, Any]:
    return {name: getattr(req, name) for name in req.__struct_fields__}


# ------------------------------------------------------------------ the first byte


def test_the_first_byte_may_take_as_long_as_the_prompt_takes_to_read() -> None:
    recording = Recording.load("llamacpp_long_read")
    assert recording.prompt_s > 120  # the recorded read passed the old fixed limit
    assert recording.prompt_tokens / recording.prompt_s < 10  # tokens a second, loaded CPU
    request = recorded_request(recording)

    async def ask(options: ModelOptions, ping_s: float | None = None) -> ChatResult:
        delay = recording.prompt_s * SCALE
        with replaying(recording, delay_s=delay, ping_s=ping_s) as served:
            async with ModelClient(served.base_url, max_retries=0, timeout_s=120 * SCALE,
                                   options=options) as client:
                return await client.chat(request)

    # Silent while it reads (Ollama, vLLM and older llama.cpp): the deadline that grows
    # with the unread prompt lets it finish; a fixed one (the client before) gives up.
    assert run(ask(scaled())).message.text.startswith("To fix the failing test")
    fixed = scaled(first_byte_timeout_s=120 * SCALE, first_byte_s_per_1k_tokens=0.0)
    with pytest.raises(ModelError) as caught:
        run(ask(fixed))
    assert caught.value.kind == "timeout"
    assert "sent nothing for 1.2 s after a request with about" in str(caught.value)
    assert "firstByteTimeoutS" in str(caught.value)
    # llama-server sends a comment every 30 s meanwhile: bytes, so even a fixed limit holds.
    assert run(ask(fixed, ping_s=30 * SCALE)).message.text


def test_a_prompt_the_server_has_read_before_gets_no_extra_wait() -> None:
    # The second request repeats the first one's prompt and adds a line: the server reads
    # only that line, so the deadline is the base one again and a slow answer fails.
    recording = Recording.load("llamacpp_fenced_call")
    first = recorded_request(recording)
    second = ChatRequest(**{**_fields(first),
                            "history": (*first.history, Message.user("and then?"))})
    long_read = recording.prompt_s * SCALE

    async def main() -> None:
        with replaying(recording, delay_s=long_read) as served:
            async with ModelClient(served.base_url, max_retries=0, timeout_s=0.05,
                                   options=scaled(first_byte_timeout_s=0.05,
                                                  first_byte_s_per_1k_tokens=200 * SCALE),
                                   ) as client:
                await client.chat(first)  # 1.5k unread tokens: 0.05 + about 0.8 s
                with pytest.raises(ModelError, match="sent nothing"):
                    await client.chat(second)

    run(main())


# ------------------------------------------------------------------ the window


def test_a_llama_cpp_slots_window_is_read_before_the_first_turn() -> None:
    props = json.loads((REAL / "llamacpp_props.json").read_text())
    listing = json.loads((REAL / "llamacpp_models.json").read_text())
    assert props["default_generation_settings"]["n_ctx"] == 8192  # -c 8192 -np 1
    from protocol.model.client import _reported_window

    assert _reported_window(listing, "qwen2.5-coder-1.5b-instruct") == 8192
    assert _reported_window(props, "qwen2.5-coder-1.5b-instruct") == 8192
    ollama = {"parameters": "stop \"<|im_end|>\"\nnum_ctx 16384",
              "model_info": {"qwen2.context_length": 32768}}
    assert _reported_window(ollama, "qwen2.5-coder:1.5b") == 16384  # what Ollama runs
    assert _reported_window({"model_info": {"qwen2.context_length": 32768}}, "q") == 32768
