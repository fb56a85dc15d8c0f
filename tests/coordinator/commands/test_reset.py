"""``reset``: its server half over the service's port."""

from __future__ import annotations

from coordinator.commands import reset
from protocol.wire.control import (
    OkReply,
    ResetRequest,
)
from tests.coordinator.commands.support import Deps, serve


def test_reset_drops_the_suggestion_then_starts_a_new_session() -> None:
    deps = Deps()
    deps.speculation.offer("add a test", "running")
    serve(deps, reset.serve, ResetRequest(req_id=4))
    assert deps.log == ["cancel_generation", ("dismiss", "reset"), "chat.reset", "new_session"]
    assert deps.replies.replies == [OkReply(4, "new session session-2")]
