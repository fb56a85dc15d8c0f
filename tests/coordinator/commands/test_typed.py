"""``typed``: its server half over the service's port."""

from __future__ import annotations

from coordinator.commands import typed
from protocol.wire import control
from protocol.wire.control import (
    SuggestionReply,
)
from tests.coordinator.commands.support import Deps, serve


def test_typed_tells_the_manager_then_answers_with_the_suggestion() -> None:
    deps = Deps()
    deps.speculation.offer("add a test", "running")
    serve(deps, typed.serve, control.TypedRequest(req_id=4, text="add"))
    assert deps.log == [("typed", "add")]
    [reply] = deps.replies.replies
    assert isinstance(reply, SuggestionReply) and (reply.req_id, reply.text) == (4, "add a test")
