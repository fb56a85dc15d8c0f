"""The service as people and scripts use it: real processes, real sockets.

Tests that only talk to a running service share one (``shared``); those that start,
stop or signal it have their own."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator

import msgspec
import psutil
import pytest
import zmq

from protocol.wire.control import WorkersRequest
from protocol.wire.endpoints import MAX_FRAME_BYTES, Endpoints
from tests.support import (
    Specrun,
    make_sample_project,
    processes_with_env,
    running_service,
    service_processes,
    wait_until,
    worker_frames_handled,
)


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Specrun]:
    """One service (auto-edit mode, scripted model) for the tests that do not stop it."""
    project = make_sample_project(tmp_path_factory.mktemp("svc") / "proj")
    # two warm workers, as a user who sets workerPool to 2: a killed one is replaced while
    # the other stays idle
    with running_service(project, "--approval-mode", "auto-edit", "--workers", "2") as runner:
        yield runner


def _pid_of(specrun: Specrun) -> int:
    return int(specrun.json("status")["pid"])


def test_cli_without_a_service_says_how_to_start_one(specrun: Specrun) -> None:
    proc = specrun.run("status")
    assert proc.returncode == 2
    assert "specrun start" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_start_status_stop_leaves_nothing_behind(
    specrun: Specrun, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SPECRUN_RUNTIME_DIR", str(specrun.env.runtime))
    started = specrun.json("start")
    assert started["started"] is True
    status = specrun.json("status")
    assert status["project"] == str(specrun.project.resolve())
    assert status["pid"] == started["pid"]
    assert status["scripted_model"] is True
    assert wait_until(  # the default pool: one warm worker
        lambda: sum(w["state"] == "idle" for w in specrun.query(WorkersRequest)["workers"]) == 1
    )
    again = specrun.run("start")
    assert again.returncode == 0 and "already running" in again.stdout
    pid = status["pid"]
    assert len(service_processes(pid)) >= 3  # coordinator, fork server, workers
    stopped = specrun.json("stop")
    assert stopped == {"stopped": True, "pid": pid}
    assert wait_until(lambda: not processes_with_env(specrun.env.runtime), timeout=10)
    endpoints = Endpoints.for_project(specrun.project, create=False)
    assert not endpoints.directory.exists()
    assert specrun.run("stop").returncode == 2


def test_malformed_frames_get_an_error_and_the_service_keeps_serving(shared: Specrun) -> None:
    service = shared
    pid = _pid_of(service)
    endpoints = Endpoints.for_project(service.project, create=False)
    ctx = zmq.Context()
    try:
        control = ctx.socket(zmq.DEALER)
        control.setsockopt(zmq.LINGER, 0)
        control.connect(endpoints.control)
        for frame in (b"garbage", msgspec.msgpack.encode({"type": "nope", "req_id": 77}), b""):
            control.send(frame)
            assert control.poll(5000), "no reply to a malformed frame"
            reply = msgspec.msgpack.decode(control.recv())
            assert reply["type"] == "error" and reply["code"] == "bad_request"
        control.send_multipart([b"two", b"parts"])
        # Over the frame limit: ZeroMQ drops it (and the peer) before Python sees it.
        huge = ctx.socket(zmq.DEALER)
        huge.setsockopt(zmq.LINGER, 0)
        huge.connect(endpoints.control)
        huge.send(b"\x00" * (MAX_FRAME_BYTES + 1))
        huge.close()
        workers = ctx.socket(zmq.DEALER)
        workers.setsockopt(zmq.LINGER, 0)
        workers.setsockopt(zmq.IDENTITY, b"w999999")
        workers.connect(endpoints.workers)
        for frame in (b"\x00\x01", msgspec.msgpack.encode({"type": "hello", "pid": "x"}), b""):
            workers.send(frame)
        workers.close()
        control.close()
    finally:
        ctx.term()
    worker_frames_handled(service.project, service.json("status")["epoch"], service.service_log)
    assert service.json("status")["pid"] == pid


def test_a_killed_worker_is_noticed_and_replaced(shared: Specrun) -> None:
    service = shared
    assert wait_until(
        lambda: sum(w["state"] == "idle" for w in service.query(WorkersRequest)["workers"]) == 2
    )
    before = {w["pid"] for w in service.json("workers")["workers"]}
    victim = sorted(before)[0]
    assert service.run("debug", "kill-worker", str(victim), check=True).returncode == 0

    def replaced() -> bool:
        now = {w["pid"]: w["state"] for w in service.query(WorkersRequest)["workers"]}
        return victim not in now and sum(s == "idle" for s in now.values()) == 2

    assert wait_until(replaced, timeout=10)
    assert not psutil.pid_exists(victim) or psutil.Process(victim).status() == psutil.STATUS_ZOMBIE


def test_kill_worker_of_an_unknown_pid_is_a_clear_error(shared: Specrun) -> None:
    service = shared
    proc = service.run("debug", "kill-worker", "1")
    assert proc.returncode == 1
    assert "not a worker" in proc.stderr


def test_sigterm_stops_the_service_cleanly(service: Specrun) -> None:
    pid = service.service_pid()
    os.kill(pid, signal.SIGTERM)
    assert wait_until(lambda: not processes_with_env(service.env.runtime), timeout=10)
    assert service.run("status").returncode == 2


def test_stop_while_the_pool_is_still_warming_leaves_nothing(specrun: Specrun) -> None:
    """Regression: a worker forked while the pool closed outlived it, and the service
    then hung at exit joining that worker, which was waiting for the service to exit."""
    import subprocess
    import sys

    for delay in (0.05, 0.2, 0.4):
        starting = subprocess.Popen(
            [sys.executable, "-m", "coordinator", "--project", str(specrun.project), "start"],
            env=specrun.env.vars,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(delay)  # the race: stop at three points of the start-up
        # A stop that has to escalate to SIGKILL (after 20 s) means the exit hung. Each
        # stop is timed on its own (the start CLI between them is not part of it), with
        # room below those 20 s for cores shared by the suite's parallel workers.
        for _ in range(2):
            t0 = time.monotonic()
            specrun.run("stop")
            assert time.monotonic() - t0 < 15
            if starting.poll() is None:
                starting.wait(timeout=30)
        assert wait_until(lambda: not processes_with_env(specrun.env.runtime), timeout=10), [
            p.cmdline() for p in processes_with_env(specrun.env.runtime)
        ]
