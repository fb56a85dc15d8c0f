"""``specrun reject``: dismiss the suggestion (Esc)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from coordinator.commands.declaration import Command
from protocol.wire.control import OkReply, RejectRequest

if TYPE_CHECKING:
    from coordinator.commands.seam import Service


async def serve(service: Service, identity: bytes, req: RejectRequest) -> None:
    had = await service.reject()
    said = "dismissed" if had else "there was no suggestion"
    await service.send(identity, OkReply(req.req_id, said))


COMMAND = Command(
    "reject",
    request=RejectRequest,
    reply=OkReply,
    serve=serve,
    help="""Dismiss the current suggestion and kill its speculation.

    \b
    Example:
      specrun reject
    """,
)
