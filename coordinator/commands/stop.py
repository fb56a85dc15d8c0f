"""``StopRequest``: the service answers, then stops. (``specrun stop`` is the CLI's own
command, ``coordinator/cli/local/stop.py``: it sends this and waits for the exit.)"""

from __future__ import annotations

from typing import TYPE_CHECKING

from coordinator.commands.declaration import Command
from protocol.wire.control import OkReply, StopRequest

if TYPE_CHECKING:
    from coordinator.commands.seam import Service


async def serve(service: Service, identity: bytes, req: StopRequest) -> None:
    await service.send(identity, OkReply(req.req_id, "stopping"))
    service.stop()


COMMAND = Command("stop", request=StopRequest, reply=OkReply, serve=serve, cli=False)
