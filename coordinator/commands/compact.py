"""``specrun compact``: summarize the chat so far into one message."""

from __future__ import annotations

from typing import TYPE_CHECKING

from coordinator.commands.declaration import Args, Command
from protocol.wire.control import CompactRequest, Notice, OkReply

if TYPE_CHECKING:
    from coordinator.commands.seam import Client, Service

NOTHING = "Nothing to compact: the session has no turn before its last one."


async def serve(service: Service, identity: bytes, req: CompactRequest) -> None:
    if service.turn_running:
        waits = "A turn is running; compacting when it ends."
        await service.send(identity, Notice(req.req_id, waits))
    done = await service.compact(identity, req.req_id)
    await service.send(identity, OkReply(req.req_id, done or NOTHING))


def run(client: Client, args: Args) -> None:
    # Waits as long as the summary takes (a running turn first): the fast model's own
    # timeout bounds it, not the client's.
    client.show(client.request(CompactRequest(req_id=client.next_id()), timeout_s=float("inf")))


COMMAND = Command(
    "compact",
    request=CompactRequest,
    reply=OkReply,
    serve=serve,
    run=run,
    help="""Summarize the chat so far, all but its last turn, into one message (the fast
    model writes it; the full history stays on disk). specrun also does this by itself
    once a request would pass compactAt of the context window.

    \b
    Example:
      specrun compact
    """,
)
