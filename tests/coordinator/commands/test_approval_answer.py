"""``approval_answer``: its server half over the service's port."""

from __future__ import annotations

import pytest

from coordinator.commands import approval_answer
from protocol.wire.control import (
    ApprovalAnswer,
    ErrorReply,
    OkReply,
)
from tests.coordinator.commands.support import Deps, serve


@pytest.mark.parametrize("found", [True, False])
def test_an_approval_answer_reaches_the_waiting_call_or_is_not_found(found: bool) -> None:
    deps = Deps()
    deps.chat.answer_found = found
    serve(deps, approval_answer.serve, ApprovalAnswer(5, 3, "c1", True))
    assert deps.chat.answers == [(3, "c1", True)]
    [reply] = deps.replies.replies
    if found:
        assert reply == OkReply(5)
    else:
        assert isinstance(reply, ErrorReply) and reply.code == "not_found"
