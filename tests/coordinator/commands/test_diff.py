"""``diff``: what Tab would do, asked of the service; no speculation is ``not_found``."""

from __future__ import annotations

import pytest

from coordinator.commands import diff
from protocol.wire.control import DiffReply, DiffRequest, ErrorReply
from tests.coordinator.commands.support import Deps, serve


def test_diff_answers_with_the_branchs_diff() -> None:
    deps = Deps()
    deps.speculation.offer("add a test", "completed")
    serve(deps, diff.serve, DiffRequest(req_id=4, index=None, stat=True))
    assert deps.log == [("diff_reply", None, True)]
    [reply] = deps.replies.replies
    assert isinstance(reply, DiffReply)
    assert (reply.req_id, reply.suggestion, reply.status) == (4, "add a test", "completed")


@pytest.mark.parametrize(("index", "which"), [
    (None, "the suggestion"), (2, "branch 3")])
def test_no_speculation_to_show_is_not_found(index: int | None, which: str) -> None:
    deps = Deps()
    deps.speculation.offer("add a test", None)  # shown, not speculated
    serve(deps, diff.serve, DiffRequest(req_id=5, index=index))
    [reply] = deps.replies.replies
    assert isinstance(reply, ErrorReply) and reply.code == "not_found"
    assert reply.message.startswith(f"There is no speculation of {which} right now")
