"""The CPU a worker may use and has used: the usable CPUs, the CPU seconds of a worker's
process tree, the lower priority of a branch beyond the top one, and whether a process
waits for a CPU (what tells a starved worker from a hung one).

A worker's heartbeat needs a moment of CPU; a branch beyond the top one runs at nice +10 on
purpose, so on a busy machine it can sit on a run queue, ready but not running, for longer
than the hang limit. That silence is the scheduler's doing, not the worker's. (The kernel's
own run-queue wait, ``schedstat``'s second field, only grows once a wait ends, so a wait
still going on is not in it: hence a thread's state and the CPU time it got: ``cpu_sample``.)
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from typing import Final

import psutil

# A branch beyond the top one only gets CPU the main chat and the top guess leave idle.
EXTRA_BRANCH_NICE: Final = 10


def usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except OSError:
        return os.cpu_count() or 1


def tree_cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of ``pid`` and every process below it (the children it
    reaped included); None if it is gone."""
    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return None
    total = 0.0
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            t = proc.cpu_times()
            total += t.user + t.system + t.children_user + t.children_system
    return total


def lower_priority(pid: int) -> None:
    """Nice +10 for ``pid``'s threads and its descendants', and for its autogroup (a worker
    leads its own session: with autogroups on, the scheduler shares CPU between sessions
    first, so the threads' nice alone would not yield to the main chat). Best effort."""
    with contextlib.suppress(OSError), open(f"/proc/{pid}/autogroup", "w") as group:
        group.write(str(EXTRA_BRANCH_NICE))
    try:
        pids = [pid, *(p.pid for p in psutil.Process(pid).children(recursive=True))]
    except psutil.Error:
        return
    for one in pids:
        try:
            threads = os.listdir(f"/proc/{one}/task")
        except OSError:
            continue
        for tid in threads:
            with contextlib.suppress(OSError, ValueError):
                os.setpriority(os.PRIO_PROCESS, int(tid), EXTRA_BRANCH_NICE)


@dataclass(frozen=True)
class CpuSample:
    cpu_s: float  # CPU time its threads alive now have used
    runnable: bool  # one of them is ready to run (running, or waiting for a CPU)


def cpu_sample(pid: int) -> CpuSample | None:
    """``pid``'s threads now (``/proc/<pid>/task``); None when it is gone or unreadable."""
    base = f"/proc/{pid}/task"
    try:
        tids = os.listdir(base)
    except OSError:
        return None
    cpu_ns, runnable, read = 0, False, False
    for tid in tids:
        try:
            with open(f"{base}/{tid}/stat", "rb") as f:
                state = f.read().rsplit(b")", 1)[1].split(None, 1)[0]
            with open(f"{base}/{tid}/schedstat", "rb") as f:
                cpu_ns += int(f.read().split()[0])
        except (OSError, IndexError, ValueError):
            continue  # a thread that ended meanwhile
        runnable = runnable or state == b"R"
        read = True
    return CpuSample(cpu_ns / 1e9, runnable) if read else None


def starved(before: CpuSample, after: CpuSample, seconds: float) -> bool:
    """Between two samples ``seconds`` apart: it is ready to run yet got under a quarter of
    that time on a CPU. A stopped or blocked process is not ready; a spinning one on a CPU
    of its own gets far more (on a machine so busy that it does not, the pool's cap on any
    silence still catches it)."""
    return after.runnable and after.cpu_s - before.cpu_s < seconds / 4
