"""``stats``: its server half over the service's port."""

from __future__ import annotations

from coordinator.commands import stats
from protocol.wire.control import (
    StatsReply,
    StatsRequest,
)
from tests.coordinator.commands.support import Deps, serve


def test_stats_answers_with_the_managers_numbers() -> None:
    deps = Deps()
    deps.speculation.stats.shown = 4
    serve(deps, stats.serve, StatsRequest(req_id=3))
    [reply] = deps.replies.replies
    assert isinstance(reply, StatsReply) and (reply.req_id, reply.suggestions_shown) == (3, 4)
