"""``specrun ask``: one user query, streamed as a turn."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from msgspec import structs

from coordinator.commands.declaration import Args, Argument, Command, Option
from protocol.wire.approval import ApprovalMode
from protocol.wire.control import AskRequest, ErrorReply, TurnEnded

if TYPE_CHECKING:
    from coordinator.commands.seam import Client, Service


async def serve(service: Service, identity: bytes, req: AskRequest) -> None:
    text = req.text.strip()
    if not text:
        problem = "The query is empty; type something to ask."
        await service.send(identity, ErrorReply(req.req_id, "bad_request", problem))
        return
    await service.send(identity, await service.submit(identity, structs.replace(req, text=text)))


def run(client: Client, args: Args) -> int:
    mode = args["approval_mode"]
    return client.turn(AskRequest(
        req_id=client.next_id(),
        text=args["text"],
        approval_mode=ApprovalMode(mode) if mode else None,
        can_confirm=client.can_confirm,
        client_pid=os.getpid(),
    ))


COMMAND = Command(
    "ask",
    request=AskRequest,
    reply=TurnEnded,
    serve=serve,
    run=run,
    params=(Argument("text"),
            Option("--approval-mode", "Approval mode for this query only.",
                   choices=tuple(m.value for m in ApprovalMode))),
    help="""Send one user query; the answer and tool calls stream as they happen.

    Typing something other than the current suggestion aborts its speculation; TEXT
    equal to the suggestion accepts it. Tool calls that need a yes are asked on a
    terminal and refused otherwise (or use --approval-mode auto-edit). Exits 1 if the
    turn did not complete (error, Ctrl-C).

    \b
    Example:
      specrun ask "fix the failing test in tests/test_calc.py"
    """,
)
