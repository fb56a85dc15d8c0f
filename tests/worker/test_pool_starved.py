"""The pool's hang watch tells a starved worker from a hung one, on REAL workers: a branch
runs at nice +10 on purpose, so on a busy machine its heartbeat can be late by more than the
hang limit while it waits for a CPU; killing it then failed a sibling branch in the chaos
run. A stopped worker (no CPU wanted) is still hung."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from coordinator.service.pool.cpu import cpu_sample, starved
from coordinator.service.pool.workers import WorkerHandle, WorkerPool
from protocol.wire.control import WorkerState
from tests.support import wait_until

pytestmark = pytest.mark.usefixtures("stop_multiprocess_helpers")

HEARTBEAT_S = 0.05
HANG_AFTER_S = 0.5  # a silence of 10 of these is hung whatever the reason


@asynccontextmanager
async def one_worker() -> AsyncIterator[tuple[WorkerPool, WorkerHandle]]:
    runtime = Path(tempfile.mkdtemp(prefix="ps-"))  # short: ipc:// paths are length-limited
    pool = WorkerPool(
        f"ipc://{runtime}/w.sock",
        7,
        size=1,
        heartbeat_s=HEARTBEAT_S,
        hang_after_s=HANG_AFTER_S,
    )
    await pool.start()
    try:
        handle = await pool.acquire("tool", "job-1")
        yield pool, handle
    finally:
        await pool.close()
        shutil.rmtree(runtime, ignore_errors=True)


def _cpu_hog(cpu: int) -> subprocess.Popen[bytes]:
    """A busy loop on ``cpu`` at the highest priority, in a session (so an autogroup) of its
    own: the scheduler shares a CPU between autogroups by their nice value first."""
    code = (
        f"import os; os.sched_setaffinity(0, {{{cpu}}}); "
        "os.setpriority(os.PRIO_PROCESS, 0, -20); open('/proc/self/autogroup', 'w').write('-20')"
        "\nwhile True: pass"
    )
    return subprocess.Popen([sys.executable, "-c", code], start_new_session=True)


def _starve(pid: int, cpu: int) -> None:
    """The worker on the hog's CPU with the least weight there is: its autogroup (it leads
    its own session) at nice 19, each thread SCHED_IDLE."""
    Path(f"/proc/{pid}/autogroup").write_text("19")
    for tid in os.listdir(f"/proc/{pid}/task"):
        os.sched_setaffinity(int(tid), {cpu})
        os.sched_setscheduler(int(tid), os.SCHED_IDLE, os.sched_param(0))


def _hog_cpu() -> int:
    if os.geteuid() != 0:
        pytest.skip("a priority -20 CPU hog needs root")
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        pytest.skip("needs a second CPU for the pool while one is hogged")
    if Path("/proc/sys/kernel/sched_autogroup_enabled").read_text().strip() != "1":
        pytest.skip("the starving relies on autogroups")
    return cpus[-1]


async def _until(predicate: object, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return True
        await asyncio.sleep(0.01)
    return False


def test_a_worker_waiting_for_a_cpu_is_starved_not_hung() -> None:
    cpu = _hog_cpu()
    own = os.sched_getaffinity(0)

    async def main() -> None:
        async with one_worker() as (_pool, handle):
            hog = _cpu_hog(cpu)
            os.sched_setaffinity(0, own - {cpu})  # the pool (this process) keeps a CPU
            try:
                silent = False
                for _ in range(3):  # the machine's own load can leave the worker a share
                    _starve(handle.pid, cpu)
                    silent = await _until(
                        lambda: time.monotonic() - handle.last_seen > 4 * HANG_AFTER_S
                        or handle.state is WorkerState.DEAD,
                        timeout=10,
                    )
                    if silent:
                        break
                if not silent:
                    # What is tested needs a starved worker; this machine did not starve it.
                    pytest.skip("the hog did not starve the worker (its heartbeat went on)")
                assert handle.state is not WorkerState.DEAD and handle.killed_at is None, (
                    "a worker that only waited for a CPU was killed as hung"
                )
                now = cpu_sample(handle.pid)
                assert now is not None and now.runnable
            finally:
                hog.kill()
                hog.wait()
                os.sched_setaffinity(0, own)
            spoke = handle.last_seen
            assert await _until(lambda: handle.last_seen > spoke, timeout=10)
            assert handle.state is WorkerState.BUSY

    asyncio.run(main())


def test_a_stopped_worker_is_still_killed_as_hung() -> None:
    async def main() -> None:
        async with one_worker() as (_pool, handle):
            os.kill(handle.pid, signal.SIGSTOP)
            stopped_at = time.monotonic()
            assert await _until(lambda: handle.state is WorkerState.DEAD, timeout=10)
            assert handle.killed_at is not None
            # Well before the cap on any silence: its silence counted in full.
            assert handle.killed_at - stopped_at < 7 * HANG_AFTER_S

    asyncio.run(main())


def test_a_sleeping_process_is_not_starved_and_a_gone_one_is_unknown() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        asleep = lambda: (s := cpu_sample(child.pid)) is not None and not s.runnable  # noqa: E731
        assert wait_until(asleep, interval=0.01)
        before = cpu_sample(child.pid)
        assert before is not None
        assert not starved(before, before, 1.0)
    finally:
        child.kill()
        child.wait()
    assert cpu_sample(child.pid) is None


