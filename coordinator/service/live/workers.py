"""The live view's worker table: each worker's CPU share since the last sample and the
size of its overlay, measured in a thread so the service's loop never walks a directory."""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from typing import TYPE_CHECKING, Any

from protocol.wire.control import LiveWorker, LiveWorkers

if TYPE_CHECKING:
    from coordinator.service.pool import WorkerHandle, WorkerPool


def _dir_bytes(path: str | None) -> int | None:
    if not path or not os.path.isdir(path):
        return None
    total = 0
    for top, _dirs, files in os.walk(path, followlinks=False):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(top, name)).st_size
    return total


class WorkerSampler:
    """Samples the pool's workers; a worker's CPU percent is over the time since the
    sample before, so the first sample of a worker has none."""

    def __init__(self, pool: WorkerPool) -> None:
        self.pool = pool
        self._cpu: dict[int, tuple[float, float]] = {}  # pid -> (cpu seconds, when)

    async def sample(self) -> LiveWorkers:
        handles = list(self.pool.handles())
        containment = self.pool.containment
        return await asyncio.to_thread(self._measure, handles, containment)

    def _measure(self, handles: list[WorkerHandle], containment: Any) -> LiveWorkers:
        from coordinator.service.pool import tree_cpu_seconds

        now = time.monotonic()
        out = []
        seen = set()
        for handle in sorted(handles, key=lambda h: h.started_at):
            info = handle.info()
            seen.add(handle.pid)
            used = tree_cpu_seconds(handle.pid) if handle.process is not None else None
            percent = None
            if used is not None:
                before = self._cpu.get(handle.pid)
                if before is not None and now > before[1]:
                    percent = round(max(0.0, used - before[0]) / (now - before[1]) * 100, 1)
                self._cpu[handle.pid] = (used, now)
            out.append(LiveWorker(info, percent, _dir_bytes(handle.overlay_dir)))
        for pid in list(self._cpu):
            if pid not in seen:
                del self._cpu[pid]
        return LiveWorkers(tuple(out), tuple(containment))
