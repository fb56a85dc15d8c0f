"""Scripts stop what they started when they are interrupted: SIGTERM (a timeout), SIGINT
(Ctrl-C) and SIGHUP (the terminal closed) in the middle of a run leave no service, worker or
fork server behind."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import psutil
import pytest

from tests.support import REPO, isolated_env, wait_until

# Each run, and how many processes of its own it has once it is in the middle of its
# work (a service and its fork server; a worker pool's fork server and a worker).
RUNS = {
    "bench_accept": ([sys.executable, str(REPO / "scripts" / "bench_accept.py"), "--rounds",
                      "3", "--aborts", "3", "--latency-ms", "800"], 3),
    "bench_speculation": ([sys.executable, str(REPO / "scripts" / "bench_speculation.py")], 2),
    "demo": ([str(REPO / "scripts" / "demo"), "--pace", "1"], 3),
}


def _descendants(proc: psutil.Process) -> list[psutil.Process]:
    try:
        return proc.children(recursive=True)
    except psutil.Error:
        return []


def _runs_python(process: psutil.Process) -> bool:
    # /proc read afresh: psutil keeps the first exe() it read, and an exec changes it.
    try:
        return Path(os.readlink(f"/proc/{process.pid}/exe")).name.startswith("python")
    except OSError:
        return False


def _alive(process: psutil.Process) -> bool:
    """Still running something: a zombie (exited, waiting for whoever inherited it to
    reap it) holds no resources and runs nothing."""
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _describe(process: psutil.Process) -> str:
    try:
        return f"{process.pid} {process.status()} {' '.join(process.cmdline())}"
    except psutil.Error as exc:
        return f"{process.pid} ({type(exc).__name__})"


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP],
                         ids=["SIGTERM", "SIGINT", "SIGHUP"])
@pytest.mark.parametrize("name", sorted(RUNS))
def test_an_interrupted_script_leaves_nothing_running(name: str, sig: signal.Signals) -> None:
    argv, busy = RUNS[name]
    # The script's TMPDIR: what it leaves there is a leak. Short, as pytest's tmp_path is
    # not: the scripts put their services' ipc:// sockets below it.
    scratch = Path(tempfile.mkdtemp(prefix="sr-tmp-"))
    with isolated_env(TMPDIR=str(scratch)) as env:
        popen = subprocess.Popen(argv, env=env.vars, cwd=REPO, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.PIPE, text=True)
        script = psutil.Process(popen.pid)
        seen: dict[int, psutil.Process] = {}

        def in_the_middle() -> bool:
            # scripts/demo is bash until its .venv check is done and it execs Python: the
            # check's own short commands (sha256sum, compileall) are not the run's processes,
            # and a signal then stops nothing (SIGTERM) or is waited out by bash, which then
            # plays the whole demo (SIGINT).
            if not _runs_python(script):
                return False
            for p in _descendants(script):
                seen.setdefault(p.pid, p)
            return len(seen) >= busy

        try:
            assert wait_until(in_the_middle, timeout=60), f"only {len(seen)} processes started"
            in_the_middle()
            popen.send_signal(sig)
            popen.wait(timeout=60)
            left = [p for p in seen.values() if _alive(p)]
            assert wait_until(lambda: not [p for p in left if _alive(p)], timeout=5), (
                f"left running: {[_describe(p) for p in left if _alive(p)]}\n"
                f"{popen.stderr.read() if popen.stderr else ''}"
            )
            # The private speculation base (mode 0700) is kept on purpose; nothing else.
            leftovers = [p.name for p in scratch.iterdir()
                         if not p.name.startswith("specrun-speculation-")]
            assert leftovers == [], (
                f"left in its TMPDIR: {leftovers}: "
                f"{[str(p.relative_to(scratch)) for p in scratch.rglob('*')][:20]}\n"
                f"{popen.stderr.read() if popen.stderr else ''}"
            )
        finally:
            if popen.poll() is None:
                popen.kill()
                popen.wait()
            for leftover in seen.values():
                if leftover.is_running():
                    leftover.kill()
            shutil.rmtree(scratch, ignore_errors=True)
