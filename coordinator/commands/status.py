"""``specrun status``: the service, its session and its pool."""

from __future__ import annotations

from typing import TYPE_CHECKING

from coordinator.commands.declaration import Command
from protocol.wire.control import StatusReply, StatusRequest

if TYPE_CHECKING:
    from coordinator.commands.seam import Service


async def serve(service: Service, identity: bytes, req: StatusRequest) -> None:
    await service.send(identity, service.status_reply(req.req_id))


COMMAND = Command(
    "status",
    request=StatusRequest,
    reply=StatusReply,
    serve=serve,
    help="""Show the service: project, uptime, model endpoint, workers (with --verbose: pids
    and ids too).

    \b
    Example:
      specrun status --json
    """,
)
