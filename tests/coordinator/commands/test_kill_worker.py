"""``kill_worker``: its server half over the service's port."""

from __future__ import annotations

import subprocess
import time
from typing import Any

import pytest

from coordinator.commands import kill_worker
from coordinator.service.pool.workers import WorkerHandle
from protocol.wire.control import (
    ErrorReply,
    KillWorkerRequest,
    OkReply,
)
from tests.coordinator.commands.support import Deps, serve


@pytest.fixture
def sleeper() -> Any:
    """A real process to stand in for a worker that kill-worker kills."""
    proc = subprocess.Popen(["sleep", "60"])
    yield proc
    proc.kill()
    proc.wait(timeout=10)


def test_kill_worker_sends_sigkill_to_the_worker(sleeper: subprocess.Popen[bytes]) -> None:
    deps = Deps()
    handle = WorkerHandle(pid=sleeper.pid, process=None, started_at=time.monotonic())
    deps.pool.live[handle.pid] = handle
    serve(deps, kill_worker.serve, KillWorkerRequest(req_id=1))  # any worker
    assert sleeper.wait(timeout=10) == -9
    assert deps.replies.replies == [OkReply(1, f"sent SIGKILL to worker {sleeper.pid}")]


@pytest.mark.parametrize(
    ("pid", "said"),
    [(None, "no workers are running"), (4242, "4242 is not a worker of this service")],
)
def test_kill_worker_with_nothing_to_kill_is_not_found(pid: int | None, said: str) -> None:
    deps = Deps()
    serve(deps, kill_worker.serve, KillWorkerRequest(req_id=1, pid=pid))
    [reply] = deps.replies.replies
    assert isinstance(reply, ErrorReply) and reply.code == "not_found"
    assert reply.message == f"Nothing to kill: {said}."
