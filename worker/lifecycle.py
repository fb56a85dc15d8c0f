"""How a worker process detaches from its parent and notices the coordinator's death.

A worker is its own session and process group, so the coordinator can kill it
together with every tool subprocess it started. It must never outlive the
coordinator: the kernel's parent-death signal covers its direct parent (the
fork server, which exits when the coordinator does), and a pidfd on the
coordinator itself covers the rest without polling.
"""

from __future__ import annotations

import contextlib
import os
import signal

from overlay.kernel import libc


def detach_session() -> None:
    """Become a session leader (pgid == sid == our pid)."""
    with contextlib.suppress(PermissionError):  # already a session leader
        os.setsid()


def die_with_parent(sig: int = signal.SIGKILL) -> None:
    libc.prctl(libc.PR_SET_PDEATHSIG, sig, what="prctl(PR_SET_PDEATHSIG)")
