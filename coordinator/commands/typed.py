"""``TypedRequest``: what is typed so far at the chat's prompt (its keystrokes); ``specrun
suggestion --typed`` sends it too."""

from __future__ import annotations

from typing import TYPE_CHECKING

from coordinator.commands.declaration import Command
from protocol.wire.control import SuggestionReply, TypedRequest

if TYPE_CHECKING:
    from coordinator.commands.seam import Service


async def serve(service: Service, identity: bytes, req: TypedRequest) -> None:
    await service.typed(req.text)
    await service.send(identity, service.suggestion_reply(req.req_id))


COMMAND = Command("typed", request=TypedRequest, reply=SuggestionReply, serve=serve, cli=False)
