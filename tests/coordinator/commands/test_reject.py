"""``reject``: its server half over the service's port."""

from __future__ import annotations

import pytest

from coordinator.commands import reject
from protocol.wire.control import (
    OkReply,
    RejectRequest,
)
from tests.coordinator.commands.support import Deps, serve


@pytest.mark.parametrize(
    ("offered", "said"), [(True, "dismissed"), (False, "there was no suggestion")]
)
def test_reject_dismisses_the_suggestion(offered: bool, said: str) -> None:
    deps = Deps()
    if offered:
        deps.speculation.offer("add a test", "running")
    serve(deps, reject.serve, RejectRequest(req_id=2))
    assert deps.log == [("dismiss", "rejected")]
    assert deps.replies.replies == [OkReply(2, said)]
