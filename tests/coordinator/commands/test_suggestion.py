"""``suggestion``: its server half over the service's port."""

from __future__ import annotations

import pytest

from coordinator.commands import suggestion
from protocol.wire.control import (
    SuggestionReply,
    SuggestionRequest,
)
from tests.coordinator.commands.support import Deps, serve


@pytest.mark.parametrize(
    ("request_", "waits"),
    [
        (SuggestionRequest(1), []),
        (SuggestionRequest(1, wait_visible=True), [("wait_visible", 30.0)]),
        (
            SuggestionRequest(1, wait_settled=True),
            [("wait_visible", 30.0), ("wait_settled", 60.0)],
        ),
    ],
)
def test_suggestion_waits_as_asked_then_answers(
    request_: SuggestionRequest, waits: list[tuple[str, float]]
) -> None:
    deps = Deps()
    deps.speculation.offer("add a test", "running")
    serve(deps, suggestion.serve, request_)
    assert deps.log == waits
    [reply] = deps.replies.replies
    assert isinstance(reply, SuggestionReply) and reply.text == "add a test"
