"""The worker's side of the event socket: what jobs use to report to the coordinator."""

from __future__ import annotations

import zmq.asyncio

from protocol.wire import codec
from protocol.wire.work import WorkerEvent

__all__ = ["Outbox"]


class Outbox:
    """Sends worker events to the coordinator; one encoder, one socket."""

    def __init__(self, sock: zmq.asyncio.Socket) -> None:
        self._sock = sock
        self._codec = codec.worker_to_coordinator()

    async def send(self, event: WorkerEvent) -> None:
        await self._sock.send(self._codec.encode(event))
