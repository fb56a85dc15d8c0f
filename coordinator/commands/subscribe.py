"""``SubscribeRequest``: follow the session live (the web view sends it)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from coordinator.commands.declaration import Command
from protocol.wire.control import ErrorReply, SubscribeRequest

if TYPE_CHECKING:
    from coordinator.commands.seam import Service


async def serve(service: Service, identity: bytes, req: SubscribeRequest) -> None:
    # No reply now: the events are the replies. The subscriber asks for a snapshot next
    # (handled after this one: requests of one client are handled in order).
    try:
        service.subscribe(identity, req.req_id, req.client_pid)
    except ProcessLookupError as exc:
        problem = f"Not subscribed: {exc}."
        await service.send(identity, ErrorReply(req.req_id, "not_found", problem))


COMMAND = Command("subscribe", request=SubscribeRequest, serve=serve, cli=False)
