"""Starting the service in the background and stopping it."""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import psutil

from coordinator.cli.client import ServiceClient, ServiceNotRunning, ServiceTimeout
from coordinator.pidfile import is_locked, read_pid
from coordinator.user_state import logs_dir, project_state_path, user_state_root
from overlay.kernel import libc
from protocol.wire.control import StatusReply, StatusRequest, StopRequest
from protocol.wire.endpoints import Endpoints
from protocol.wire.start_notes import ANSWERING, POOL_WARM, READY_FD_ENV

SERVICE_MODULE = ("-m", "coordinator")
"""What ``start_daemon`` runs: specrun's own command line, given ``--project P serve ...``."""


class StartError(RuntimeError):
    pass


def log_path(project_root: Path, env: Mapping[str, str] | None = None) -> Path:
    """The service log; ``env``: the service's environment when it is not this process's
    (its state directory is then the one that environment names)."""
    if env is None:
        return logs_dir(project_root) / "service.log"
    path = project_state_path(project_root, "logs", "service.log",
                              state_root=user_state_root(env))
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    return path


def is_running(project_root: Path) -> bool:
    return is_locked(Endpoints.for_project(project_root, create=False).pidfile)


def start_daemon(
    project_root: Path,
    serve_args: list[str],
    timeout_s: float = 30.0,
    env: dict[str, str] | None = None,
    *,
    wait_warm: bool = True,
    entry: Sequence[str] = SERVICE_MODULE,
    debug: bool = False,
) -> int:
    """Start ``specrun serve`` detached; returns its pid once it answers on its control
    socket and, with ``wait_warm``, once its warm workers are up too (a service whose
    workers do not come up is returned after half of ``timeout_s``: that is not a failed
    start). ``env``: the service's environment (default: this process's).

    The service says when it answers and when its pool is warm on a pipe (its fd in
    ``SPECRUN_READY_FD``), so nothing here polls: the wait ends the moment it writes,
    or the moment it exits.

    ``-P``: the project directory must never shadow specrun's own packages in the service
    or in its workers (a project may well have a ``worker/`` or ``protocol/`` package).
    ``entry``: what the interpreter runs, given ``--project P serve ...``; a test passes its
    own entry point to build the service differently (``protocol.wire.seams``). ``debug``
    (``specrun --debug start``): the service logs at debug level."""
    log_file = log_path(project_root, env)
    ready_r, ready_w = os.pipe()
    try:
        child_env = dict(os.environ if env is None else env)
        child_env[READY_FD_ENV] = str(ready_w)
        with open(log_file, "ab") as log:
            since = log.seek(0, os.SEEK_END)  # a failed start shows this run's lines only
            proc = subprocess.Popen(
                [sys.executable, "-P", *entry, "--project", str(project_root),
                 *(["--debug"] if debug else []), "serve", *serve_args],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                start_new_session=True,
                close_fds=True,
                pass_fds=(ready_w,),
                cwd=project_root,
                env=child_env,
            )
    except BaseException:
        os.close(ready_r)
        raise
    finally:
        os.close(ready_w)  # the service holds the only write end now
    try:
        return _wait_started(proc, ready_r, project_root, log_file, timeout_s, since, wait_warm)
    except BaseException:
        # Ctrl-C (or any failure) while it starts: do not leave a half-started service.
        _terminate(proc)
        raise
    finally:
        os.close(ready_r)


def _wait_started(
    proc: subprocess.Popen[bytes],
    ready: int,
    project_root: Path,
    log_file: Path,
    timeout_s: float,
    since: int,
    wait_warm: bool,
) -> int:
    """Wait for the service's notes on the pipe ``ready`` (``ANSWERING``, then
    ``POOL_WARM``) or for its exit, whichever comes first."""
    started = time.monotonic()
    deadline = started + timeout_s
    # The service answers before its warm workers are up; `start` returns once it can
    # speculate at once, or gives up waiting on them (not on the start) half-way.
    warm_deadline = started + timeout_s / 2
    try:
        exited = libc.pidfd_open(proc.pid)
    except OSError:  # no pidfds (Linux < 5.3): the ready pipe closing still shows the exit
        exited = None
    poller = select.poll()  # any fd number (select() stops at 1024)
    for fd in (ready, exited):
        if fd is not None:
            poller.register(fd, select.POLLIN)
    notes = b""
    try:
        while True:
            answering = ANSWERING in notes
            if answering and (not wait_warm or POOL_WARM in notes):
                return proc.pid
            limit = max(warm_deadline, time.monotonic()) if answering else deadline
            left = limit - time.monotonic()
            if left <= 0:
                if answering:
                    return proc.pid
                raise StartError(
                    f"The service did not answer within {timeout_s:.0f}s; see {log_file}."
                )
            readable = {fd for fd, _ in poller.poll(left * 1000)}
            chunk = os.read(ready, 16) if ready in readable else None
            if chunk:
                notes += chunk
                continue
            if chunk is None and exited not in readable:
                continue  # timed out: the checks above decide
            # The pipe closed or the process ended: it exited, or is about to.
            try:
                code = proc.wait(timeout=max(0.0, min(5.0, deadline - time.monotonic())))
            except subprocess.TimeoutExpired:
                # Alive but not telling (it closed the pipe): ask it the old way.
                return _poll_started(proc, project_root, log_file, deadline, wait_warm)
            raise StartError(
                f"The service exited during start-up (code {code}); its log is {log_file}:\n"
                + _tail(log_file, since)
            )
    finally:
        if exited is not None:
            os.close(exited)


def _poll_started(
    proc: subprocess.Popen[bytes],
    project_root: Path,
    log_file: Path,
    deadline: float,
    wait_warm: bool,
) -> int:
    """The fallback for a service that closed its pipe early: ask ``status`` until it
    answers (and its pool is warm, with ``wait_warm``)."""
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise StartError(f"The service exited during start-up; its log is {log_file}.")
        try:
            with ServiceClient(project_root, timeout_s=1.0) as client:
                reply = client.request(StatusRequest(req_id=client.next_id()), timeout_s=1.0)
                if not wait_warm or not isinstance(reply, StatusReply) or reply.pool_warm:
                    return proc.pid
        except (ServiceNotRunning, ServiceTimeout):
            pass
        time.sleep(0.02)
    raise StartError(f"The service did not answer in time; see {log_file}.")


def _terminate(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM (the service shuts down cleanly), then SIGKILL after a few seconds."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def service_family(pid: int | None) -> list[psutil.Process]:
    """The service and every process below it (fork server, workers, their tools)."""
    if not pid:
        return []
    try:
        service = psutil.Process(pid)
        return [service, *service.children(recursive=True)]
    except psutil.Error:
        return []


def _wait_exited(procs: list[psutil.Process], deadline: float) -> list[psutil.Process]:
    """Wait until each process has exited (a zombie counts: its parent reaps it, not us),
    through pidfds, so the wait ends the moment the last one exits; returns those still
    running at ``deadline``. (psutil's wait on a process that is not our child polls.)"""
    fds: dict[int, psutil.Process] = {}
    for proc in procs:
        try:
            fds[os.pidfd_open(proc.pid)] = proc
        except (ProcessLookupError, OSError):
            continue  # already gone
    try:
        while fds:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            ready, _, _ = select.select(list(fds), [], [], left)
            for fd in ready:
                fds.pop(fd)
                os.close(fd)
        return list(fds.values())
    finally:
        for fd in fds:
            os.close(fd)


def stop_daemon(project_root: Path, timeout_s: float = 20.0) -> int | None:
    """Ask the service to stop and wait until it and all its helper processes have
    exited. Returns its pid, or None if none was running. Escalates to SIGTERM, then
    SIGKILL, for whatever is still alive after ``timeout_s``.

    The pidfile lock is released before the service's process ends, and its fork server
    ends later still: waiting for the lock alone returned while they ran."""
    endpoints = Endpoints.for_project(project_root, create=False)
    pid = read_pid(endpoints.pidfile)
    family = service_family(pid) if is_locked(endpoints.pidfile) else []
    try:
        with ServiceClient(project_root, timeout_s=5.0) as client:
            client.request(StopRequest(req_id=client.next_id()), timeout_s=5.0)
    except ServiceNotRunning:
        return None
    except ServiceTimeout:
        if pid:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    # Processes forked after the list was taken are children of the fork server or
    # workers listed here; each of those waits for its own children before it exits.
    alive = _wait_exited(family, deadline)
    for sig, grace in ((signal.SIGTERM, 3.0), (signal.SIGKILL, 3.0)):
        if not alive:
            break
        for proc in alive:
            with contextlib.suppress(psutil.Error):
                proc.send_signal(sig)
        alive = _wait_exited(alive, time.monotonic() + grace)
    while is_locked(endpoints.pidfile) and time.monotonic() < deadline + 6:
        time.sleep(0.02)  # a pidfile still locked means a process we did not see
    return pid


def stop_own_daemon(project_root: Path) -> None:
    """Stop a service this process started, however it is doing: ask it to stop (any
    failure to is ignored: what follows still ends it), kill whatever of its family is
    left after ten seconds, and reap the service (our child) so no zombie stays."""
    pid = read_pid(Endpoints.for_project(project_root, create=False).pidfile)
    tree = service_family(pid)
    with contextlib.suppress(Exception):
        stop_daemon(project_root)
    _, alive = psutil.wait_procs(tree, timeout=10)
    for proc in alive:
        with contextlib.suppress(psutil.Error):
            proc.kill()
    for proc in tree:
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(proc.pid, os.WNOHANG)


def _tail(path: Path, since: int = 0, lines: int = 15) -> str:
    """The last ``lines`` lines written after byte ``since``."""
    try:
        with path.open("rb") as fh:
            fh.seek(since)
            text = fh.read().decode(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])
