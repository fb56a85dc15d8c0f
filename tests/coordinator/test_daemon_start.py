"""start_daemon: the service says on a pipe when it answers and when its pool is warm, so the
start returns at that moment (no polling), and a service that cannot start fails at once."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import psutil
import pytest

from coordinator.cli.client import ServiceClient
from coordinator.cli.daemon import StartError, start_daemon, stop_daemon
from protocol.wire.control import StatusReply, StatusRequest
from protocol.wire.start_notes import READY_FD_ENV
from tests.support import isolated_env, processes_with_env, service_processes, wait_until


def _status(project: Path) -> StatusReply:
    with ServiceClient(project, timeout_s=10) as client:
        reply = client.request(StatusRequest(req_id=client.next_id()))
    assert isinstance(reply, StatusReply), reply
    return reply


def test_start_returns_when_the_service_answers_or_its_pool_is_warm(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = tmp_path / "proj"
    project.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=project, check=True)
    with isolated_env() as env:
        monkeypatch.setenv("SPECRUN_RUNTIME_DIR", str(env.runtime))
        try:
            pid = start_daemon(project, ["--workers", "2"], env=env.vars, wait_warm=False)
            assert _status(project).pid == pid  # it answers as soon as start returns
            stop_daemon(project)

            made: list[str] = []  # the pipes start_daemon makes (the ready pipe among them)
            real_pipe = os.pipe

            def recorded_pipe() -> tuple[int, int]:
                r, w = real_pipe()
                made.append(f"pipe:[{os.fstat(r).st_ino}]")
                return r, w

            monkeypatch.setattr(os, "pipe", recorded_pipe)
            pid = start_daemon(project, ["--workers", "2"], env=env.vars)
            monkeypatch.setattr(os, "pipe", real_pipe)
            reply = _status(project)
            assert reply.pid == pid and reply.pool_warm
            assert sum(1 for w in reply.workers if w.state == "idle") == 2
            # the pipe is the service's alone: nothing it started holds it or is told of it
            coordinator = psutil.Process(pid)
            family = service_processes(pid)[1:]
            assert family and made  # its fork server and workers
            for proc in family:
                try:
                    held = {os.readlink(f"/proc/{proc.pid}/fd/{fd}")
                            for fd in os.listdir(f"/proc/{proc.pid}/fd")}  # fmt: skip
                    assert not held & set(made), proc
                    # A fork of the coordinator shows the coordinator's own start
                    # environment in /proc; it lost the variable before the fork.
                    if proc.cmdline() != coordinator.cmdline():
                        assert READY_FD_ENV not in proc.environ()
                except (psutil.NoSuchProcess, FileNotFoundError):
                    continue

            # a second service for the project exits at once: the start says so at once
            t0 = time.monotonic()
            with pytest.raises(StartError, match="exited during start-up"):
                start_daemon(project, [], env=env.vars)
            assert time.monotonic() - t0 < 20
            assert _status(project).pid == pid  # the first one is untouched
        finally:
            stop_daemon(project)
            assert wait_until(lambda: not processes_with_env(env.runtime), timeout=10)
