"""The CPU a worker may use and has used: the usable CPUs, the CPU seconds
of a worker's process tree, and the lower priority of a branch beyond the top one."""

from __future__ import annotations

import contextlib
import os
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
