"""``workers``: its server half over the service's port."""

from __future__ import annotations

from coordinator.commands import workers
from protocol.wire.control import (
    WorkersReply,
    WorkersRequest,
    WorkerState,
)
from tests.coordinator.commands.support import answer_with_a_busy_worker


def test_workers_lists_the_pools_workers() -> None:
    request = WorkersRequest(req_id=2)
    reply = answer_with_a_busy_worker(workers.serve, request, "speculation", "spec-1")
    assert isinstance(reply, WorkersReply)
    assert [(w.job_kind, w.state) for w in reply.workers] == [("speculation", WorkerState.BUSY)]
