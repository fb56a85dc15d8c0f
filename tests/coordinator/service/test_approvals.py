"""``Approvals`` built directly: a question is answered, or lost when the asking client
(a real process, watched through its pidfd) exits or the time runs out."""

from __future__ import annotations

import asyncio
import subprocess

import pytest

from coordinator.service.chat.approvals import ApprovalLost, Approvals
from coordinator.service.emitter import Emitter
from protocol.wire.chat import ToolCall
from protocol.wire.control import ApprovalNeeded, ToolShown

from .fakes import Replies, run, until

CALL = ToolCall("c1", "write_file", '{"file_path": "a.py"}')


def test_an_answer_reaches_the_waiting_question_once() -> None:
    approvals, replies = Approvals(timeout_s=30), Replies()

    async def main() -> bool:
        asking = asyncio.ensure_future(approvals.ask(Emitter(replies, b"c", 4), CALL, "why"))
        await until(lambda: approvals.pending() == CALL)
        assert not approvals.answer(4, "other-call", True)
        assert approvals.answer(4, "c1", True)
        assert not approvals.answer(4, "c1", False)  # already answered
        return await asking

    assert run(main()) is True
    assert replies.of(ApprovalNeeded) == [ApprovalNeeded(4, CALL, "why")]
    assert approvals.pending() is None


def test_the_asking_client_exiting_loses_the_question() -> None:
    approvals, replies = Approvals(timeout_s=60), Replies()
    client = subprocess.Popen(["sleep", "60"])
    approvals.client_pid = client.pid

    async def main() -> None:
        asking = asyncio.ensure_future(approvals.ask(Emitter(replies, b"c", 4), CALL, "why"))
        await until(lambda: approvals.pending() == CALL)
        client.kill()
        with pytest.raises(ApprovalLost, match="client that was asked for approval is gone"):
            await asking

    try:
        run(main())
    finally:
        client.kill()
        client.wait(timeout=10)
    [shown] = replies.of(ToolShown)
    assert shown.status == "refused" and approvals.pending() is None


def test_no_answer_in_time_loses_the_question() -> None:
    approvals, replies = Approvals(timeout_s=0.05), Replies()
    with pytest.raises(ApprovalLost, match="nobody answered the approval question within"):
        run(approvals.ask(Emitter(replies, b"c", 4), CALL, "why"))
    assert [s.status for s in replies.of(ToolShown)] == ["refused"]
