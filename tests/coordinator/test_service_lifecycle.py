"""The service's own lifecycle through the real CLI: `stop` returns only once every
process of the service is gone; a service whose project is deleted or moved exits and
leaves nothing; `.specrun/` never shows in `git status`."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from protocol.wire.endpoints import Endpoints
from tests.support import (
    Specrun,
    make_sample_project,
    processes_with_env,
    running_service,
    service_processes,
    wait_until,
)


def test_stop_returns_only_after_every_service_process_exited(specrun: Specrun) -> None:
    for _ in range(3):  # the race was 60-210 ms wide: a few rounds catch a regression
        specrun.run("start", check=True)
        pid = specrun.service_pid()
        family = service_processes(pid)
        assert len(family) >= 3  # coordinator, fork server, workers
        assert specrun.json("stop") == {"stopped": True, "pid": pid}
        # Checked once, right after `stop` returned: no waiting here.
        alive = [p.pid for p in family if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
        assert alive == [], f"still running after stop returned: {alive}"
        assert processes_with_env(specrun.env.runtime) == []


@pytest.fixture(scope="module")
def idle(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Specrun]:
    """A service that is started and left idle (default mode), for the two tests below
    that only look at its processes."""
    project = make_sample_project(tmp_path_factory.mktemp("idle") / "proj")
    with running_service(project) as runner:
        yield runner


def test_an_idle_service_runs_no_resource_tracker(idle: Specrun) -> None:
    """The idle family is the coordinator, the fork server and each warm worker with its
    sandbox helper: no ``multiprocess`` resource tracker (a whole interpreter, about 10 MB,
    for semaphores and shared memory specrun never creates)."""
    coordinator = psutil.Process(idle.service_pid())
    assert len(coordinator.children()) == 1, coordinator.children()  # the fork server
    commands = [" ".join(p.cmdline()) for p in service_processes(coordinator.pid)]
    assert not any("resource_tracker" in c for c in commands), commands


def _signals(pid: int, field: str) -> set[int]:
    """The signals ``field`` (SigCgt: caught, SigIgn: ignored) of /proc/PID/status."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            mask = int(line.split()[1], 16)
            return {n for n in range(1, 65) if mask >> (n - 1) & 1}
    raise AssertionError(f"no {field} for {pid}")


def test_the_fork_server_is_a_fork_of_the_coordinator_that_holds_none_of_its_state(
    idle: Specrun,
) -> None:
    """The fork server is forked from the coordinator (its pages shared, not a second
    interpreter importing them again), yet starts as a fresh one would: it does not hold
    the pidfile (a restart must not wait for it), catches no signal the coordinator's event
    loop catches (every worker would inherit that), and has no descriptor of the
    coordinator's besides stdio, the scripted model's socket included."""
    coordinator = psutil.Process(idle.service_pid())
    (server,) = coordinator.children()
    assert server.cmdline() == coordinator.cmdline()  # forked, not a new interpreter
    assert wait_until(lambda: len(server.children()) >= 1, timeout=30)
    pidfile = str(Endpoints.for_project(idle.project, create=False).pidfile)
    for process in (server, *server.children()):
        assert pidfile not in {f.path for f in process.open_files()}, process
    caught = _signals(server.pid, "SigCgt")
    assert caught == {signal.SIGCHLD}, caught
    assert {signal.SIGTERM, signal.SIGUSR1} & _signals(coordinator.pid, "SigCgt")
    # 0-2, the listener and the liveness pipe, and what multiprocess's loop opened (the
    # new stdin, an epoll, a signal pipe, a status pipe per live worker): nothing else
    assert len(os.listdir(f"/proc/{server.pid}/fd")) <= 9 + len(server.children())
    # The scripted model's port is bound before this fork (its thread starts after):
    # only the coordinator may hold it.
    assert any(c.status == psutil.CONN_LISTEN for c in coordinator.net_connections("tcp"))
    for process in (server, *server.children()):
        assert not process.net_connections("tcp"), process


@pytest.mark.parametrize("how", ["deleted", "moved"])
def test_a_service_whose_project_disappears_exits_cleanly(
    specrun: Specrun, tmp_path: Path, how: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SPECRUN_RUNTIME_DIR", str(specrun.env.runtime))
    specrun.run("start", check=True)
    pid = specrun.service_pid()
    endpoints = Endpoints.for_project(specrun.project, create=False)
    assert endpoints.directory.exists()
    if how == "deleted":
        shutil.rmtree(specrun.project)
    else:
        specrun.project.rename(tmp_path / "elsewhere")
    assert wait_until(lambda: not processes_with_env(specrun.env.runtime), timeout=15), (
        "the service kept running without its project"
    )
    # An exiting process loses its environment (its memory) a moment before it is a zombie.
    assert wait_until(lambda: _gone(pid), timeout=5)
    assert not endpoints.directory.exists()  # sockets and pidfile removed


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_specrun_state_is_invisible_to_git(specrun: Specrun) -> None:
    specrun.run("config", "set", "approvalMode", "auto-edit", check=True)
    specrun.run("memory", "add", "notes", "-d", "how to test", "-b", "pytest -q", check=True)
    ignore = specrun.project / ".specrun" / ".gitignore"  # only the memory is in the project
    assert ignore.read_text().splitlines()[-1] == "*"
    specrun.run("start", check=True)
    specrun.run("ask", "hello", check=False)
    status = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all"],
        cwd=specrun.project, capture_output=True, text=True, check=True,
    )
    assert ".specrun" not in status.stdout, status.stdout
    specrun.run("stop", check=True)
