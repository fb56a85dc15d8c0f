"""``specrun suggestion``: the predicted next prompt and its speculation."""

from __future__ import annotations

from typing import TYPE_CHECKING

from coordinator.commands.declaration import Args, Command, Flag, Option, Retired
from protocol.text.branch_number import (
    RETIRED_OPTION,
    below_one_sentence,
    rank_of,
    retired_index_sentence,
)
from protocol.wire.control import (
    ControlReply,
    SuggestionReply,
    SuggestionRequest,
    Transcript,
    TypedRequest,
)

if TYPE_CHECKING:
    from coordinator.commands.seam import Client, Service


async def serve(service: Service, identity: bytes, req: SuggestionRequest) -> None:
    if req.wait_visible or req.wait_settled:
        await service.wait_visible(timeout_s=30.0)
    if req.wait_settled:
        await service.wait_settled(timeout_s=60.0)
    await service.send(identity, service.suggestion_reply(req.req_id, req.transcript, req.full))


def run(client: Client, args: Args) -> None:
    """``--typed``: first tell the service that this much of a prompt is typed (the
    chat's keystrokes): branches it still leads to are kept, the others killed, and the
    answer shows what is left. ``--transcript``: also show the speculation so far of the
    branch ``--branch`` (1 the top); ``--full``: with each tool result whole."""
    wait, settled, full = bool(args["wait"]), bool(args["settled"]), bool(args["full"])
    wrong = below_one_sentence(args["branch"])
    if wrong is not None:
        client.usage_error(wrong)
    rank = rank_of(args["branch"]) if args["transcript"] or full else None
    reply: ControlReply | None = None
    if args["typed"] is not None:
        reply = client.request(TypedRequest(req_id=client.next_id(), text=args["typed"]))
    again = wait or settled or rank is not None
    if reply is None or (isinstance(reply, SuggestionReply) and again):
        reply = client.request(
            SuggestionRequest(req_id=client.next_id(), wait_visible=wait, wait_settled=settled,
                              transcript=rank, full=full),
            timeout_s=105.0 if settled else 45.0 if wait else None,
        )
    client.show(reply)
    if rank is not None and not client.as_json and isinstance(reply, SuggestionReply):
        show_transcript(client, reply, full)


def show_transcript(client: Client, reply: SuggestionReply, full: bool) -> None:
    """The speculation so far for a person; ``full``: each tool result whole below it."""
    if not reply.transcript:
        client.note("  (no speculation to show)")
        return
    client.show(Transcript(reply.req_id, reply.transcript, (), 0.0))
    for entry in reply.transcript if full else ():
        if entry.kind == "tool":  # below the excerpts: each result whole
            client.note(f"── {entry.tool}({entry.args}) ──")
            client.note(entry.text or "(no output)")


COMMAND = Command(
    "suggestion",
    request=SuggestionRequest,
    reply=SuggestionReply,
    serve=serve,
    run=run,
    params=(
        Flag("--wait", "Wait until a suggestion is visible (or none comes)."),
        Flag("--settled", "Also wait until its speculation stopped running (up to 60 s), so "
                          "that accept applies it."),
        Option("--typed", "First say that TEXT is typed so far at the prompt: alternatives "
                          "it still leads to keep their speculation, the others are killed.",
               metavar="TEXT"),
        Flag("--transcript", "Also show the speculation so far: the model's text, its tool "
                             "calls and their results (of branch --branch N)."),
        Option("--branch", "With --transcript: branch N (default 1, the top guess).",
               kind=int, default=1, metavar="N"),
        Flag("--full", "The transcript (--transcript) with each tool result whole, as the "
                       "model got it (within the command's output limit), not cut to 500 "
                       "characters."),
        Retired(RETIRED_OPTION, retired_index_sentence),
    ),
    help="""Show the predicted next prompt and its speculation's status.

    With `speculationBranches` above 1, the other guesses follow the top one (branch 1),
    each numbered as `specrun accept --branch N` takes it, with its speculation. In
    `--json`, `rank` counts from 0: branch N is rank N-1.

    \b
    Example:
      specrun suggestion --wait --json
    """,
)
