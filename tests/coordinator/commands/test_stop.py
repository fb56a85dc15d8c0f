"""``stop``: its server half over the service's port."""

from __future__ import annotations

from coordinator.commands import stop
from protocol.wire.control import (
    OkReply,
    StopRequest,
)
from tests.coordinator.commands.support import Deps, serve


def test_stop_answers_then_asks_the_service_to_stop() -> None:
    deps = Deps()
    serve(deps, stop.serve, StopRequest(req_id=1))
    assert deps.replies.replies == [OkReply(1, "stopping")]
    assert deps.stop_requested.is_set()
