"""Write the file system's dirty pages out while the person reads the suggestion.

The accept's durability barrier (syncfs) waits for every dirty page of the file system,
not only its own: right after a big write (a fresh clone's `pip install`, a build) the
first Tab took 0.6-1 s instead of ~30 ms. A flush starts with each speculation (so it is
done by the time Tab can apply anything) and again when one completes with files; one
flush at a time.
"""

from __future__ import annotations

import asyncio
import os

from coordinator.service.speculation.context import Background


class Preflush:
    def __init__(self, background: Background) -> None:
        self._background = background
        self._flushing: asyncio.Task[object] | None = None

    def __call__(self) -> None:
        if self._flushing is not None and not self._flushing.done():
            return
        self._flushing = self._background.spawn(asyncio.to_thread(os.sync))
