"""``specrun diff``: what Tab would do now with a speculation's files."""

from __future__ import annotations

from typing import TYPE_CHECKING

from coordinator.commands.declaration import Args, Command, Flag, Option, Retired
from protocol.text.branch_number import (
    RETIRED_OPTION,
    below_one_sentence,
    branch_name,
    rank_of,
    retired_index_sentence,
)
from protocol.wire.control import DiffReply, DiffRequest, ErrorReply

if TYPE_CHECKING:
    from coordinator.commands.seam import Client, Service


async def serve(service: Service, identity: bytes, req: DiffRequest) -> None:
    reply = await service.diff_reply(req.req_id, req.index, req.stat)
    if reply is None:
        which = "the suggestion" if req.index is None else branch_name(req.index)
        await service.send(identity, ErrorReply(
            req.req_id, "not_found",
            f"There is no speculation of {which} right now; `specrun suggestion` shows what "
            "there is."))
        return
    await service.send(identity, reply)


def run(client: Client, args: Args) -> None:
    branch = args["branch"]
    wrong = below_one_sentence(branch) if branch is not None else None
    if wrong is not None:
        client.usage_error(wrong)
    client.show(client.request(DiffRequest(
        req_id=client.next_id(), index=rank_of(branch) if branch is not None else None,
        stat=bool(args["stat"]))))


COMMAND = Command(
    "diff",
    request=DiffRequest,
    reply=DiffReply,
    serve=serve,
    run=run,
    params=(
        Option("--branch", "Branch N, as `specrun suggestion` numbers them (1 is the top "
                           "guess). Default: the best one still live.", kind=int, metavar="N"),
        Flag("--stat", "One line per file with its counts, no diff."),
        Retired(RETIRED_OPTION, retired_index_sentence),
    ),
    help="""Show what Tab would do now: each file created, modified, deleted or changed in
    mode, with its diff against the project.

    Computed by the service exactly as accept computes its listing. Files that run later
    without a key press are flagged, files git ignores are summed up, and a file you
    changed since the speculation read it is named (Tab would refuse). A running
    speculation shows what it wrote so far.

    \b
    Example:
      specrun diff
      specrun diff --stat --branch 2
    """,
)
