"""Building specrun differently for a test (``protocol.wire.seams``), across the process
boundaries it has: a sandbox helper in a fresh interpreter, a service in the background.

The product takes its seams as arguments only. Where a test's process cannot call the
function itself (the service runs in its own process, started the way ``specrun start``
starts it), it runs one of the two entry points beside this module instead of specrun's
own: each takes the seams as its first argument, as JSON, and calls the product's entry
with them (``seamed_helper.py``, ``seamed_service.py``). Both run by path under ``-P``, so
they import nothing from ``tests`` but this module (found beside them).
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import time
from pathlib import Path
from typing import Any

from overlay.apply import Hook
from protocol.wire.seams import NO_SEAMS, WorkerSeams

HERE = Path(__file__).resolve().parent
HELPER_ENTRY = HERE / "seamed_helper.py"
SERVICE_ENTRY = HERE / "seamed_service.py"


def checkpoint_hook(spec: str) -> Hook:
    """An overlay checkpoint (``overlay.apply.Hook``) from ``sleep=SECONDS`` (pause at each
    one) and/or ``kill=N`` (SIGKILL this process at the N-th), comma-separated."""
    sleep_s = 0.0
    kill_at = 0
    for part in spec.split(","):
        key, _, value = part.partition("=")
        if key.strip() == "sleep":
            sleep_s = float(value)
        elif key.strip() == "kill":
            kill_at = int(value)
        else:
            raise ValueError(f"not a checkpoint spec: {part!r} (sleep=S or kill=N)")
    count = 0

    def hook(_label: str) -> None:
        nonlocal count
        count += 1
        if kill_at and count == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)
        if sleep_s:
            time.sleep(sleep_s)

    return hook


def encode(seams: WorkerSeams = NO_SEAMS, apply_checkpoint: str | None = None) -> str:
    """The entry points' first argument."""
    return json.dumps({"worker": dataclasses.asdict(seams), "apply_checkpoint": apply_checkpoint})


def decode(text: str) -> tuple[WorkerSeams, str | None]:
    spec: dict[str, Any] = json.loads(text)
    return WorkerSeams(**spec["worker"]), spec.get("apply_checkpoint")


def helper_entry(seams: WorkerSeams) -> tuple[str, ...]:
    """``SandboxHelper.start(entry=...)`` for a helper with ``seams``."""
    return (str(HELPER_ENTRY), encode(seams))


def service_entry(seams: WorkerSeams, apply_checkpoint: str | None = None) -> tuple[str, ...]:
    """``start_daemon(entry=...)`` (or the head of a ``serve`` command line) for a service
    whose workers get ``seams`` and whose applies get the checkpoint ``apply_checkpoint``
    (a :func:`checkpoint_hook` spec)."""
    return (str(SERVICE_ENTRY), encode(seams, apply_checkpoint))
