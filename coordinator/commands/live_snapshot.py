"""``LiveSnapshotRequest``: the whole live state at once (the web view's start)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from coordinator.commands.declaration import Command
from protocol.wire.control import LiveSnapshot, LiveSnapshotRequest

if TYPE_CHECKING:
    from coordinator.commands.seam import Service


async def serve(service: Service, identity: bytes, req: LiveSnapshotRequest) -> None:
    await service.send(identity, await service.live_snapshot(req.req_id))


COMMAND = Command("live-snapshot", request=LiveSnapshotRequest, reply=LiveSnapshot,
                  serve=serve, cli=False)
