"""``specrun stats``: what the suggestions and speculations came to."""

from __future__ import annotations

from typing import TYPE_CHECKING

from coordinator.commands.declaration import Command
from protocol.wire.control import StatsReply, StatsRequest

if TYPE_CHECKING:
    from coordinator.commands.seam import Service


async def serve(service: Service, identity: bytes, req: StatsRequest) -> None:
    await service.send(identity, service.stats_reply(req.req_id))


COMMAND = Command(
    "stats",
    request=StatsRequest,
    reply=StatsReply,
    serve=serve,
    help="""Suggestions shown/accepted/ignored/suppressed, speculation outcomes, time saved.

    \b
    Example:
      specrun stats --json
    """,
)
