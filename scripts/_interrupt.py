"""Shared by the scripts: SIGTERM and SIGHUP stop a script the way Ctrl-C does.

Python turns only SIGINT into ``KeyboardInterrupt``; SIGTERM (a CI timeout, ``timeout``,
``kill``) ends the process at once, so no ``finally`` runs, and the services, worker
pools, mounts and temp dirs a script started outlive it. After this, SIGTERM and SIGHUP
unwind the stack through those ``finally`` blocks as SIGINT does (SIGINT keeps Python's
own handler, which asyncio.run also knows how to stop).
"""

from __future__ import annotations

import signal
from types import FrameType


def _interrupt(signum: int, frame: FrameType | None) -> None:
    # A second signal while the cleanup runs must not cut the cleanup short.
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    raise KeyboardInterrupt


def stop_like_ctrl_c() -> None:
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _interrupt)
