"""``ask``: an empty query is refused; the rest is the session's (what a submitted prompt
comes to), seen through the command."""

from __future__ import annotations

import pytest

from coordinator.commands import ask
from coordinator.service.speculation import (
    AcceptCancelled,
    AcceptFallback,
    BranchRun,
    Debounced,
    Speculation,
)
from protocol.wire.approval import ApprovalMode
from protocol.wire.chat import ToolCall
from protocol.wire.control import (
    ErrorReply,
    Notice,
    SpeculationStatus,
    TextChunk,
    TurnEnded,
)
from tests.coordinator.commands.support import Deps, query, serve


def test_an_empty_query_is_a_bad_request() -> None:
    deps = Deps()
    serve(deps, ask.serve, query("   "))
    [reply] = deps.replies.replies
    assert isinstance(reply, ErrorReply) and reply.code == "bad_request"
    assert deps.log == []


def test_a_query_while_another_turn_waits_for_approval_is_refused_at_once() -> None:
    deps = Deps()
    deps.chat.waiting = ToolCall("c1", "write_file", '{"file_path": "a.py"}')
    serve(deps, ask.serve, query("something"))
    [reply] = deps.replies.replies
    assert isinstance(reply, ErrorReply) and reply.code == "busy"
    assert "approval of write_file" in reply.message and "after 90 s" in reply.message
    assert deps.log == []  # no turn, and the suggestion is left alone


def test_a_query_runs_a_turn_and_the_next_suggestion_starts_before_its_end_is_sent() -> None:
    deps = Deps()
    deps.chat.busy = True  # another turn holds the chat: this one queues behind it
    request = query(" explain it ", approval_mode=ApprovalMode.YOLO, can_confirm=True,
                    client_pid=99)
    serve(deps, ask.serve, request)
    assert deps.log == [
        "cancel_generation",
        ("dismiss", "user typed something else"),
        "run_turn",
        ("after_turn", "completed", ApprovalMode.YOLO, 0),  # no TurnEnded out yet
    ]
    assert deps.chat.turns == [
        {
            "req_id": 3,
            "text": "explain it",
            "mode": ApprovalMode.YOLO,
            "can_confirm": True,
            "client_pid": 99,
            "from_accept": False,
        }
    ]
    notice, chunk, end = deps.replies.replies
    assert notice == Notice(3, "Another turn is running; this one starts when it ends.")
    assert chunk == TextChunk(3, "the answer")
    assert isinstance(end, TurnEnded)
    assert (end.req_id, end.reason, end.message, end.speculated) == (
        3,
        "completed",
        "all done",
        False,
    )


def test_a_query_without_a_mode_runs_in_the_chats_mode() -> None:
    deps = Deps()
    serve(deps, ask.serve, query("explain it"))
    assert deps.chat.turns[0]["mode"] is ApprovalMode.DEFAULT


def test_the_suggested_prompt_applies_its_speculation_instead_of_a_turn() -> None:
    deps = Deps()
    deps.speculation.offer("add a test", "completed")
    serve(deps, ask.serve, query("add a test", accept_method="tab"))
    assert deps.log == ["cancel_generation", ("accept", "tab", 0)]
    [end] = deps.replies.replies
    assert isinstance(end, TurnEnded)
    assert (end.reason, end.message, end.speculated) == ("accepted", "saved 1.50s", True)


def test_a_second_accept_at_once_is_debounced() -> None:
    deps = Deps()
    deps.speculation.offer("add a test", "completed")
    deps.speculation.accepting = Debounced()
    serve(deps, ask.serve, query("add a test"))
    [end] = deps.replies.replies
    assert isinstance(end, TurnEnded) and end.reason == "debounced"
    assert "run_turn" not in deps.log


def test_a_speculation_that_cannot_be_used_runs_the_prompt_as_a_normal_turn() -> None:
    deps = Deps()
    deps.speculation.offer("add a test", "failed")
    deps.speculation.accepting = AcceptFallback("its speculation failed (boom)")
    serve(deps, ask.serve, query("add a test"))
    assert deps.log[:3] == ["cancel_generation", ("accept", "enter", 0), "run_turn"]
    notice = deps.replies.of(Notice)
    assert notice == [Notice(3, "Running it as a normal turn: its speculation failed (boom).")]
    assert deps.replies.of(TurnEnded)[0].reason == "completed"


@pytest.mark.parametrize(
    ("status", "said"),
    [("running", "still running"), ("completed", "completed"), ("failed", None), (None, None)],
)
def test_typing_something_else_says_which_speculation_was_thrown_away(
    status: SpeculationStatus | None, said: str | None
) -> None:
    deps = Deps()
    deps.speculation.offer("add a test", status)
    serve(deps, ask.serve, query("something else"))
    assert ("dismiss", "user typed something else") in deps.log
    notices = [n.text for n in deps.replies.of(Notice)]
    if said is None:
        assert notices == []
    else:
        [text] = notices
        assert text.startswith(
            f"You typed something else: stopped the speculation of “add a test” ({said})"
        )


@pytest.mark.parametrize(
    ("status", "said"),
    [("running", "still running, waiting for it to finish"), ("completed", "completed")],
)
def test_a_typed_out_predicted_prompt_uses_its_branch(status: SpeculationStatus, said: str) -> None:
    deps = Deps()
    deps.speculation.offer("add a test", "running")
    deps.speculation.typed_branch = BranchRun(
        2, "show the diff", Speculation("s2", "x", status=status)
    )
    serve(deps, ask.serve, query("show the diff"))
    assert deps.log == ["cancel_generation", ("accept", "typed", 2)]
    assert deps.replies.of(Notice) == [
        Notice(3, f"You typed a predicted prompt: using its speculation ({said}).")
    ]
    assert deps.replies.of(TurnEnded)[0].reason == "accepted"


def test_a_line_enter_filled_and_sent_unchanged_is_an_enter_accept() -> None:
    deps = Deps()
    deps.speculation.offer("add a test", "running")
    deps.speculation.typed_branch = BranchRun(
        1, "show the diff", Speculation("s2", "x", status="completed")
    )
    serve(deps, ask.serve, query("show the diff", accept_method="typed", filled=True))
    assert deps.log == ["cancel_generation", ("accept", "enter", 1)]
    assert deps.replies.of(Notice) == [
        Notice(3, "Sent the suggestion: using its speculation (completed).")
    ]


def test_a_cancelled_typed_prompt_ends_its_turn_and_runs_nothing() -> None:
    deps = Deps()
    deps.speculation.typed_branch = BranchRun(0, "show the diff", Speculation("s", "x"))
    deps.speculation.accepting = AcceptCancelled()
    serve(deps, ask.serve, query("show the diff"))
    [end] = deps.replies.of(TurnEnded)
    assert end.reason == "aborted" and "cancelled" in end.message
    assert "run_turn" not in deps.log and deps.chat.turns == []  # no normal turn after it
