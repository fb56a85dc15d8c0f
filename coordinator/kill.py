"""Kill a worker together with everything it started.

A worker is a session leader; its tool subprocesses live in its session, some in
process groups of their own (so a tool timeout can kill just that tool). We
freeze the worker's group first so nothing new is forked while we look, collect
its descendants, then SIGKILL every group and process we found.
"""

from __future__ import annotations

import contextlib
import os
import signal

import psutil


def _descendants(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return []


def kill_tree(pid: int) -> int:
    """SIGKILL ``pid``'s process group, its descendants and their groups.
    Returns how many processes were signalled. Never raises for vanished processes."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGSTOP)
    found = _descendants(pid)
    groups = {pid}
    for child in found:
        with contextlib.suppress(psutil.Error, ProcessLookupError):
            groups.add(os.getpgid(child.pid))
    count = 0
    for group in groups:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(group, signal.SIGKILL)
            count += 1
    for proc in [*found]:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(proc.pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, signal.SIGKILL)
    return count + len(found)
