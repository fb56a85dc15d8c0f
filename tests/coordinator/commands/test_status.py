"""``status``: its server half over the service's port."""

from __future__ import annotations

import os

from coordinator.commands import status
from protocol.wire.approval import ApprovalMode
from protocol.wire.control import (
    ContextInfo,
    StatusReply,
    StatusRequest,
)
from tests.coordinator.commands.support import answer_with_a_busy_worker


def test_status_reports_the_service_its_session_and_its_pool() -> None:
    request = StatusRequest(req_id=1)
    reply = answer_with_a_busy_worker(status.serve, request, "tool", "tool-1")
    assert isinstance(reply, StatusReply)
    assert (reply.project, reply.pid, reply.epoch) == ("/work/project", os.getpid(), 12345)
    assert (reply.uptime_s, reply.model_endpoint, reply.scripted_model) == (
        3.142,
        "http://127.0.0.1:9/v1",
        True,
    )
    assert (reply.model, reply.fast_model, reply.session_id) == (
        "main-model",
        "fast-model",
        "session-1",
    )
    assert reply.approval_mode is ApprovalMode.DEFAULT
    assert [w.job_id for w in reply.workers] == ["tool-1"]
    assert (reply.sandbox, reply.pool_warm) == ("none", True)
    assert reply.speculation_enabled and reply.suggestions_enabled
    assert reply.context == ContextInfo(32768, "endpoint", 20000, 0.8, 1)
