"""``specrun undo``: take back the files of the last accept or turn, or rewind to before
turn N (docs/cli.md#undo)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from coordinator.commands.declaration import Args, Argument, Command, Flag
from protocol.wire.control import UndoReply, UndoRequest

if TYPE_CHECKING:
    from coordinator.commands.seam import Client, Service


async def serve(service: Service, identity: bytes, req: UndoRequest) -> None:
    await service.send(identity, await service.undo(req))


def run(client: Client, args: Args) -> int | None:
    turn = args["turn"]
    if turn is not None and turn < 1:
        client.usage_error(f"There is no turn {turn}: turns are numbered from 1.")
    # As long as the service lives: an undo waits for a running turn to end first.
    reply = client.request(UndoRequest(req_id=client.next_id(), **args),
                           timeout_s=float("inf"))
    client.show(reply)
    refused = isinstance(reply, UndoReply) and not reply.undone and not args["list_only"]
    return 1 if refused else None


COMMAND = Command(
    "undo",
    request=UndoRequest,
    reply=UndoReply,
    serve=serve,
    run=run,
    params=(
        Argument("turn", kind=int, required=False),
        Flag("--list", "List this session's checkpoints and what undoing each would do now.",
             dest="list_only"),
        Flag("--conversation", "Also rewind the conversation to before that turn (the rest "
                               "stays on disk in the old session)."),
        Flag("--force", "Undo the files that can be, leaving the ones you changed since as "
                        "they are (without it, such a file means nothing is undone)."),
    ),
    help="""Take back the files of the last accept or turn that wrote any; with TURN, of
    every one from that turn on.

    Every accept, and every main-chat turn whose tools wrote files, is a checkpoint: the
    content and mode each file had before, kept outside the project (never in git). A file
    you changed since is never overwritten: undo names it and changes nothing (or, with
    --force, undoes the others). Files written by shell commands you approved are not
    checkpointed.

    \b
    Example:
      specrun undo --list
      specrun undo
      specrun undo 2 --conversation
    """,
)
