"""The presence guard (issue 35): a chat tells the service whether someone looks at it, and
while every chat that does says nobody looks, the next prompt is not predicted (its
speculation and tokens are saved); when someone looks again the skipped prediction is made.
Several chats, a dead chat and no chat at all are each checked, through a real service on
the scripted model. The "chats" here are processes whose pid a report names, as a chat's
own report does (the chat in a real terminal: test_chat_focus_pty.py)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from typing import Any

import pytest

from protocol.wire.control import PresenceRequest, SuggestionRequest
from tests.coordinator.e2e import FIX, NEG
from tests.support import Specrun, wait_until


@pytest.fixture
def chats() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Stand-in chat processes (what the service watches is that a chat lives)."""
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for proc in started:
        proc.kill()
        proc.wait()


def _chat(chats: list[subprocess.Popen[bytes]]) -> int:
    proc = subprocess.Popen(["sleep", "600"])
    chats.append(proc)
    return proc.pid


def _tell(specrun: Specrun, pid: int, state: str) -> dict[str, Any]:
    reply: dict[str, Any] = specrun.query(PresenceRequest, state=state, client_pid=pid)
    return reply


def _suppressed(specrun: Specrun) -> dict[str, int]:
    by_reason: dict[str, int] = specrun.json("stats")["suggestions_suppressed"]["by_reason"]
    return by_reason


def test_nobody_looking_skips_the_prediction_and_it_is_made_on_return(
    specrun: Specrun, chats: list[subprocess.Popen[bytes]]
) -> None:
    specrun.run("start", "--approval-mode", "auto-edit", check=True)
    try:
        chat = _chat(chats)
        assert _tell(specrun, chat, "unfocused")["type"] == "ok"
        specrun.run("ask", FIX, check=True)
        shown = specrun.json("suggestion", "--wait")
        assert shown["text"] is None and shown["suppressed_reason"] == "unfocused"
        assert _suppressed(specrun) == {"unfocused": 1}
        assert specrun.json("stats")["tokens"]["suggestion"]["requests"] == 0  # nothing spent

        _tell(specrun, chat, "present")  # back: the skipped prediction is made now
        assert wait_until(lambda: specrun.query(SuggestionRequest).get("text") == NEG)
        stats = specrun.json("stats")
        assert stats["suggestions_made_on_return"] == 1
        shown = specrun.run("stats", check=True).stdout
        assert "unfocused 1" in shown and "made on return" in shown
    finally:
        specrun.run("stop")


def test_one_chat_looking_is_enough_and_a_dead_or_silent_chat_skips_nothing(
    specrun: Specrun, chats: list[subprocess.Popen[bytes]]
) -> None:
    specrun.run("start", "--approval-mode", "auto-edit", check=True)
    try:
        away, looking = _chat(chats), _chat(chats)
        _tell(specrun, away, "away")
        _tell(specrun, looking, "present")
        specrun.run("ask", FIX, check=True)
        assert specrun.json("suggestion", "--wait")["text"] == NEG  # someone looks

        # The looking chat dies: the one left is away, so the next turn's is skipped.
        chats[1].kill()
        chats[1].wait()
        specrun.run("reject", check=True)
        specrun.run("ask", "what does multiply do?", check=True)
        assert specrun.json("suggestion", "--wait")["suppressed_reason"] == "away"

        # The away chat dies too: no chat reports, as with the command line alone, and
        # nothing is skipped any more. (The service hears of an exit at once: a pidfd in
        # its event loop, readable before the next request arrives.)
        chats[0].kill()
        chats[0].wait()
        specrun.run("ask", "what does multiply do?", check=True)
        assert specrun.json("suggestion", "--wait")["suppressed_reason"] != "away"
        assert _suppressed(specrun).get("away") == 1
    finally:
        specrun.run("stop")


def test_a_report_for_a_process_that_is_not_running_is_refused(specrun: Specrun) -> None:
    specrun.run("start", check=True)
    try:
        gone = subprocess.Popen(["true"])
        gone.wait()
        reply = _tell(specrun, gone.pid, "away")
        assert reply["type"] == "error" and "not running" in reply["message"]
    finally:
        specrun.run("stop")
