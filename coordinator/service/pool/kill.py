"""Kill a worker together with everything it started.

A worker is a session leader; its tool subprocesses live in its session, some in
process groups of their own (so a tool timeout can kill just that tool). We
freeze the worker's group first so nothing new is forked while we look, collect
its descendants, then SIGKILL every group and process we found.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal

import psutil

log = logging.getLogger("specrun.kill")


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
    found = [p for p in _descendants(pid) if p.pid != os.getpid()]
    groups = {pid}
    for child in found:
        with contextlib.suppress(psutil.Error, ProcessLookupError):
            groups.add(os.getpgid(child.pid))
    # Never signal ourselves: a worker that has not yet left our process group (it is
    # still starting) must not take the coordinator down with it.
    own_group = os.getpgid(0)
    if own_group in groups:
        log.warning("worker %d still shares our process group; killing it alone", pid)
        groups.discard(own_group)
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
