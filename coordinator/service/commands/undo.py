"""undo: take back checkpoints, or list them."""

from __future__ import annotations

from coordinator.service.commands.deps import HandlerDeps
from coordinator.service.commands.registry import handles
from protocol.wire.control import UndoRequest


@handles(UndoRequest)
async def undo(svc: HandlerDeps, identity: bytes, req: UndoRequest) -> None:
    await svc.send(identity, await svc.undo.handle(req))
