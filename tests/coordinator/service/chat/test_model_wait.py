"""What the person sees while the main chat's model request waits to retry: one notice per
wait, ``specrun status``'s ``model_wait`` while it lasts, and Ctrl-C ending the wait at
once. The real scripted model answers 429 over HTTP; MainChat is built directly."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from coordinator.service.chat.main_chat import MainChat, TurnResult
from coordinator.service.emitter import Emitter
from coordinator.settings import Settings
from protocol.model import ModelClient
from protocol.wire.control import ModelWaitInfo, Notice, TextChunk

from ..conftest import Place
from ..fakes import Replies, Workers, requests_of, run, scripted, until

REQ = 41


def _chat(place: Place, base_url: str, **client: Any) -> tuple[MainChat, ModelClient]:
    model = ModelClient(base_url, timeout_s=10.0, backoff_s=0.01, **client)
    return MainChat(place.root, Settings(enable_memory=False), Workers(), model), model


def _limited(retry_after: float, times: int = 1) -> dict[str, Any]:
    return {
        "when": {"purpose": "main"},
        "fail": {"status": 429, "times": times, "retry_after": retry_after},
        "reply": {"text": "here it is"},
    }


def test_each_wait_is_one_notice_and_the_turn_goes_on(place: Place) -> None:
    async def main() -> tuple[TurnResult, ModelWaitInfo | None]:
        chat, model = _chat(place, server.base_url, max_retries=3)
        try:
            result = await chat.run_turn(Emitter(replies, b"c", REQ), "hello")
            return result, chat.model_wait.info()
        finally:
            await chat.shutdown()
            await model.aclose()

    replies = Replies()
    with scripted(_limited(0.2, times=2)) as server:
        result, after = run(main())
        assert len(requests_of(server, "main")) == 3
    assert result.reason == "completed" and after is None
    notices = [n.text for n in replies.of(Notice)]
    assert notices == [
        "The model endpoint is rate-limiting requests (HTTP 429); retrying in 0.2 s "
        "(attempt 2 of 4).",
        "The model endpoint is rate-limiting requests (HTTP 429); retrying in 0.2 s "
        "(attempt 3 of 4).",
    ]
    assert "".join(c.text for c in replies.of(TextChunk)) == "here it is"


def test_status_shows_the_wait_while_it_lasts_and_ctrl_c_ends_it(place: Place) -> None:
    async def main() -> tuple[TurnResult, ModelWaitInfo, float, ModelWaitInfo | None]:
        chat, model = _chat(place, server.base_url, max_retries=2, retry_after_cap_s=60)
        try:
            turn = chat.run_turn(Emitter(replies, b"c", REQ), "hello")
            task = asyncio.ensure_future(turn)
            await until(lambda: chat.model_wait.info() is not None)
            waiting = chat.model_wait.info()
            assert waiting is not None
            started = time.monotonic()
            assert chat.cancel(REQ)
            result = await task
            return result, waiting, time.monotonic() - started, chat.model_wait.info()
        finally:
            await chat.shutdown()
            await model.aclose()

    replies = Replies()
    with scripted(_limited(40)) as server:
        result, waiting, cancel_s, after = run(main())
        assert len(requests_of(server, "main")) == 1
    assert (waiting.reason, waiting.status, waiting.attempt, waiting.attempts) == (
        "rate_limit", 429, 2, 3
    )
    assert 35 < waiting.seconds_left <= 40
    assert waiting.text.startswith("The model endpoint is rate-limiting requests (HTTP 429); ")
    assert result.reason == "aborted" and cancel_s < 2.0
    assert after is None
    assert len(replies.of(Notice)) == 1


@pytest.mark.parametrize(("reason", "notice"), [
    ("length", "The model's answer was cut off at its output token limit."),
    ("content_filter", "The provider's content filter stopped the model's answer part-way."),
    ("error", "The provider reported an error part-way through the answer; it may be "
              "incomplete."),
])
def test_an_answer_that_stopped_short_says_so(place: Place, reason: str, notice: str) -> None:
    async def main() -> TurnResult:
        chat, model = _chat(place, server.base_url, max_retries=0)
        try:
            return await chat.run_turn(Emitter(replies, b"c", REQ), "hello")
        finally:
            await chat.shutdown()
            await model.aclose()

    replies = Replies()
    rule = {"when": {"purpose": "main"}, "reply": {"text": "a long", "finish_reason": reason}}
    with scripted(rule) as server:
        result = run(main())
    assert result.reason == "completed"
    assert [n.text for n in replies.of(Notice)] == [notice]
