"""``specrun reset``: a new chat session."""

from __future__ import annotations

from typing import TYPE_CHECKING

from coordinator.commands.declaration import Command
from protocol.wire.control import OkReply, ResetRequest

if TYPE_CHECKING:
    from coordinator.commands.seam import Service


async def serve(service: Service, identity: bytes, req: ResetRequest) -> None:
    session_id = await service.reset()
    await service.send(identity, OkReply(req.req_id, f"new session {session_id}"))


COMMAND = Command(
    "reset",
    request=ResetRequest,
    reply=OkReply,
    serve=serve,
    help="""Start a new chat session (the old one stays on disk).

    \b
    Example:
      specrun reset
    """,
)
