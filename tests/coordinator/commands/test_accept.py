"""``accept``: a suggestion taken, and a client's stale view never taken."""

from __future__ import annotations

from coordinator.commands import accept
from coordinator.service.speculation import (
    AcceptFallback,
    Speculation,
    Suggestion,
)
from protocol.wire.approval import ApprovalMode
from protocol.wire.control import (
    AcceptRequest,
    ErrorReply,
)
from tests.coordinator.commands.support import Deps, serve


def test_accept_without_a_suggestion_is_not_found() -> None:
    deps = Deps()
    serve(deps, accept.serve, AcceptRequest(req_id=6))
    [reply] = deps.replies.replies
    assert isinstance(reply, ErrorReply) and reply.code == "not_found"
    assert deps.log == []


def test_accept_submits_the_suggestion_and_a_fallback_turn_knows_it_came_from_accept() -> None:
    deps = Deps()
    deps.speculation.offer("add a test", "boundary")
    deps.speculation.accepting = AcceptFallback("its speculation stopped at a boundary")
    serve(deps, accept.serve, AcceptRequest(req_id=6, method="right"))
    assert ("accept", "right", 0) in deps.log
    [turn] = deps.chat.turns
    assert (turn["req_id"], turn["text"], turn["from_accept"]) == (6, "add a test", True)
    assert turn["mode"] is ApprovalMode.DEFAULT and not turn["can_confirm"]


def test_accept_of_a_rank_that_is_gone_is_not_found() -> None:
    deps = Deps()
    deps.speculation.current = Suggestion(["first", "second"])
    serve(deps, accept.serve, AcceptRequest(req_id=6, index=2))
    [reply] = deps.replies.replies
    assert isinstance(reply, ErrorReply) and reply.code == "not_found"
    assert "no branch 3" in reply.message and "live branches: 1, 2" in reply.message
    assert deps.log == []


def test_accept_of_a_rank_submits_that_branch() -> None:
    deps = Deps()
    deps.speculation.current = Suggestion(["first", "second"])
    serve(deps, accept.serve, AcceptRequest(req_id=6, index=1))
    assert deps.log == ["cancel_generation", ("accept", "cli", 1)]


def test_accept_of_what_a_client_showed_takes_it_only_while_it_is_still_that() -> None:
    deps = Deps()
    spec = Speculation("spec-a", "first")
    deps.speculation.current = Suggestion(["first", "second"], speculation=spec)
    stale = [
        AcceptRequest(req_id=6, index=0, shown_text="first", shown_speculation="spec-old"),
        AcceptRequest(req_id=7, index=1, shown_text="an older second"),
        AcceptRequest(req_id=8, index=2, shown_text="second"),
    ]
    for request in stale:
        serve(deps, accept.serve, request)
    replies = deps.replies.replies
    assert all(isinstance(r, ErrorReply) and r.code == "not_found" for r in replies), replies
    assert len(replies) == 3 and all("changed since it was shown" in r.message for r in replies)
    assert deps.log == []
    # The same speculation, or with none shown (not started yet), the same text: taken.
    serve(deps, accept.serve, AcceptRequest(
        req_id=9, index=0, shown_text="first", shown_speculation="spec-a"))
    serve(deps, accept.serve, AcceptRequest(
        req_id=10, index=0, shown_text="first"))
    serve(deps, accept.serve, AcceptRequest(
        req_id=11, index=1, shown_text="second"))
    assert [e for e in deps.log if e != "cancel_generation"] == [
        ("accept", "cli", 0), ("accept", "cli", 0), ("accept", "cli", 1)]
