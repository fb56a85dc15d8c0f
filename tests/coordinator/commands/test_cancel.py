"""``cancel``: its server half over the service's port."""

from __future__ import annotations

from coordinator.commands import cancel
from protocol.wire.control import (
    CancelRequest,
    OkReply,
)
from tests.coordinator.commands.support import Deps, serve


def test_cancel_says_whether_there_was_a_turn_to_cancel() -> None:
    deps = Deps()
    serve(deps, cancel.serve, CancelRequest(req_id=1, ask_req_id=7))
    serve(deps, cancel.serve, CancelRequest(req_id=2, ask_req_id=8))
    assert deps.chat.cancels == [7, 8]
    assert deps.replies.replies == [OkReply(1, "cancelled"), OkReply(2, "nothing to cancel")]


def test_cancel_reaches_a_typed_prompt_waiting_for_its_speculation() -> None:
    deps = Deps()  # the chat has no turn 9 to cancel: the prompt waits in the manager
    deps.speculation.waiting_typed = {9}
    serve(deps, cancel.serve, CancelRequest(req_id=1, ask_req_id=9))
    assert ("cancel_accept", 9) in deps.log
    assert deps.replies.replies == [OkReply(1, "cancelled")]
