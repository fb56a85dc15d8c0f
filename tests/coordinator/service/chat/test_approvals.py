"""``Approvals`` built directly: a question is answered, or lost when the asking client
(a real process, watched through its pidfd) exits or the time runs out."""

from __future__ import annotations

import asyncio
import subprocess

import pytest

from coordinator.service.chat.approvals import Answer, ApprovalLost, Approvals
from coordinator.service.emitter import Emitter
from protocol.wire.chat import ToolCall
from protocol.wire.control import ApprovalNeeded, Notice, ToolShown

from ..fakes import Replies, run, until

CALL = ToolCall("c1", "write_file", '{"file_path": "a.py"}')


def test_an_answer_reaches_the_waiting_question_once() -> None:
    approvals, replies = Approvals(timeout_s=30), Replies()

    async def main() -> Answer:
        asking = asyncio.ensure_future(approvals.ask(Emitter(replies, b"c", 4), CALL, "why"))
        await until(lambda: approvals.pending() == CALL)
        assert not approvals.answer(4, "other-call", True)
        assert approvals.answer(4, "c1", True)
        assert not approvals.answer(4, "c1", False)  # already answered
        return await asking

    assert run(main()) == Answer(True)
    assert replies.of(ApprovalNeeded) == [ApprovalNeeded(4, CALL, "why", rememberable=True)]
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


SHELL = ToolCall("s1", "run_shell_command", '{"command": "python -m pytest -q"}')
OTHER = ToolCall("s2", "run_shell_command", '{"command": "python -m pytest -q; rm -rf x"}')


def _answered(approvals: Approvals, replies: Replies, call: ToolCall, *answer: object,
              rememberable: bool = True) -> Answer:
    async def main() -> Answer:
        asking = asyncio.ensure_future(
            approvals.ask(Emitter(replies, b"c", 4), call, "why", rememberable))
        if answer:
            await until(lambda: approvals.pending() == call)
            assert approvals.answer(4, call.id, *answer)  # type: ignore[arg-type]
        return await asking

    return run(main())


def test_a_yes_kept_for_the_session_allows_that_exact_command_and_nothing_else() -> None:
    approvals, replies = Approvals(timeout_s=30), Replies()
    assert _answered(approvals, replies, SHELL, True, True) == Answer(True, True)
    # asked no more for the same command: allowed at once, with a notice saying why
    assert _answered(approvals, replies, SHELL) == Answer(True)
    assert any("allowed this command for this session" in n.text
               for n in replies.of(Notice))
    # a different command text is asked again
    assert _answered(approvals, replies, OTHER, False) == Answer(False)
    approvals.forget()  # a new session asks again
    assert _answered(approvals, replies, SHELL, True) == Answer(True)
    assert len(replies.of(ApprovalNeeded)) == 3


def test_a_call_that_may_not_be_kept_is_always_asked_and_a_no_carries_its_reason() -> None:
    approvals, replies = Approvals(timeout_s=30), Replies()
    assert _answered(approvals, replies, CALL, True, True, rememberable=False) == Answer(True)
    assert _answered(approvals, replies, CALL, False, False, "  not that file  ",
                     rememberable=False) == Answer(False, reason="not that file")
    assert [a.rememberable for a in replies.of(ApprovalNeeded)] == [False, False]
