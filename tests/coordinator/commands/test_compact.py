"""``compact``: its server half over the service's port."""

from __future__ import annotations

import pytest

from coordinator.commands import compact
from protocol.wire.control import (
    CompactRequest,
    Notice,
    OkReply,
)
from tests.coordinator.commands.support import Deps, serve


@pytest.mark.parametrize("busy", [False, True])
@pytest.mark.parametrize("done", ["Compacted the conversation: 6 earlier messages.", None])
def test_compact_says_what_it_did_or_that_there_was_nothing(busy: bool, done: str | None) -> None:
    deps = Deps()
    deps.chat.busy, deps.chat.compacted = busy, done
    serve(deps, compact.serve, CompactRequest(req_id=5))
    assert deps.log == ["chat.compact"]
    *notices, last = deps.replies.replies
    assert notices == ([Notice(5, "A turn is running; compacting when it ends.")] if busy else [])
    assert isinstance(last, OkReply) and last.req_id == 5
    assert last.message == (done or "Nothing to compact: the session has no turn before its "
                            "last one.")
