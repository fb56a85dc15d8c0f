"""``specrun accept``: Tab, from the command line."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from coordinator.commands.declaration import Args, Command, Option, Retired
from protocol.text.branch_number import (
    RETIRED_OPTION,
    below_one_sentence,
    rank_of,
    retired_index_sentence,
)
from protocol.wire.control import AcceptRequest, ErrorReply, TurnEnded

if TYPE_CHECKING:
    from coordinator.commands.seam import Client, Service

SHOWN_CHANGED = (
    "The suggestion changed since it was shown: nothing was taken. Look at the one shown "
    "now and take it if you want it."
)


async def serve(service: Service, identity: bytes, req: AcceptRequest) -> None:
    # Checked and taken with no wait in between: nothing can change the suggestion here.
    shown = req.shown_text
    if shown is not None and not service.still_shown(req.index, shown, req.shown_speculation):
        await service.send(identity, ErrorReply(req.req_id, "not_found", SHOWN_CHANGED))
        return
    await service.send(identity, await service.submit(identity, req))


def run(client: Client, args: Args) -> int:
    """The accept streams like a turn: the transcript, then how it ended. On a terminal a
    speculation stopped at a boundary runs as a turn that asks, as `ask` does."""
    confirm = client.can_confirm
    branch = args["branch"]
    wrong = below_one_sentence(branch) if branch is not None else None
    if wrong is not None:
        client.usage_error(wrong)
    index = rank_of(branch) if branch is not None else None
    return client.turn(AcceptRequest(req_id=client.next_id(), method="cli", index=index,
                                     can_confirm=confirm,
                                     client_pid=os.getpid() if confirm else None))


COMMAND = Command(
    "accept",
    request=AcceptRequest,
    reply=TurnEnded,
    serve=serve,
    run=run,
    params=(Option("--branch", "Take branch N, as `specrun suggestion` numbers them (1 is "
                               "the top guess); the others' speculations are killed. "
                               "Default: the best one still live.", kind=int, metavar="N"),
            Retired(RETIRED_OPTION, retired_index_sentence)),
    help="""Accept the current suggestion (Tab): apply its speculation at once.

    A speculation that is still running or stopped at a boundary is aborted and the
    suggestion runs as a normal turn instead.

    \b
    Example:
      specrun accept
      specrun accept --branch 2
    """,
)
