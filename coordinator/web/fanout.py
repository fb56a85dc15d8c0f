"""The web view's viewers (open event streams), each fed through a bounded queue.

One subscription to the service feeds every viewer. Handing an event to a viewer never
waits: a viewer whose queue is full (a slow or stalled browser) loses what is queued and
is told to resync, so it takes a fresh snapshot and goes on from there.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

QUEUE_LIMIT = 256
# Events are counted in bytes too: a diff event may be half a MiB, and 256 of them queued
# for one stalled tab would be 128 MiB.
QUEUE_BYTES = 8 << 20
RESYNC = (-1, b"")  # the marker in a viewer's queue: take a new snapshot
CLOSED = (-2, b"")  # the marker in a viewer's queue: the view stops, end the stream


@dataclass(eq=False)
class Viewer:
    queue: asyncio.Queue[tuple[int, bytes]] = field(
        default_factory=lambda: asyncio.Queue(QUEUE_LIMIT)
    )
    resyncs: int = 0
    queued_bytes: int = 0

    async def get(self) -> tuple[int, bytes]:
        item = await self.queue.get()
        self.queued_bytes -= len(item[1])
        return item

    def get_nowait(self) -> tuple[int, bytes]:
        item = self.queue.get_nowait()
        self.queued_bytes -= len(item[1])
        return item


class Fanout:
    def __init__(self) -> None:
        self.viewers: set[Viewer] = set()
        self.closed = False
        self.closed_because = ""  # what the pages are told

    def add(self) -> Viewer:
        viewer = Viewer()
        self.viewers.add(viewer)
        if self.closed:
            viewer.queue.put_nowait(CLOSED)
        return viewer

    def remove(self, viewer: Viewer) -> None:
        self.viewers.discard(viewer)

    def publish(self, seq: int, data: bytes) -> None:
        if self.closed:
            return
        for viewer in self.viewers:
            if viewer.queued_bytes + len(data) > QUEUE_BYTES:
                self._resync(viewer)
                continue
            try:
                viewer.queue.put_nowait((seq, data))
            except asyncio.QueueFull:
                self._resync(viewer)
                continue
            viewer.queued_bytes += len(data)

    def resync_all(self) -> None:
        """The service dropped events for this process: every viewer resyncs."""
        if self.closed:
            return
        for viewer in self.viewers:
            self._resync(viewer)

    def close_all(self, because: str) -> None:
        """The view stops (the service stopped, or Ctrl-C): every stream says so and
        ends, before the server stops, so a page learns it instead of retrying a port
        nobody serves any more. The first reason given is the one told."""
        if self.closed:
            return
        self.closed = True
        self.closed_because = because
        for viewer in self.viewers:
            while not viewer.queue.empty():
                viewer.get_nowait()
            viewer.queue.put_nowait(CLOSED)

    @staticmethod
    def _resync(viewer: Viewer) -> None:
        while not viewer.queue.empty():
            viewer.get_nowait()
        viewer.queue.put_nowait(RESYNC)
        viewer.resyncs += 1
