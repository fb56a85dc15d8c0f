"""``specrun workers``: the pool's worker processes."""

from __future__ import annotations

from typing import TYPE_CHECKING

from coordinator.commands.declaration import Command
from protocol.wire.control import WorkersReply, WorkersRequest

if TYPE_CHECKING:
    from coordinator.commands.seam import Service


async def serve(service: Service, identity: bytes, req: WorkersRequest) -> None:
    await service.send(identity, WorkersReply(req.req_id, tuple(service.workers())))


COMMAND = Command(
    "workers",
    request=WorkersRequest,
    reply=WorkersReply,
    serve=serve,
    help="""List worker processes: pid, state, job, overlay, age, memory, sandbox.

    \b
    Example:
      specrun workers
    """,
)
