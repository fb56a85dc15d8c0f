"""What the commands that are one request to the service do: status, workers, suggestion,
accept, reject, stats, reset, debug kill-worker.

Free of click, and of rich until something is drawn for a person, so that ``light.py``
can run them straight from the command line; their click commands (help, options) call
the same functions.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, TypeVar

from coordinator.cli import render
from coordinator.cli.context import CommandContext
from coordinator.cli.errors import fail_on_error
from protocol.text.inert_text import inert
from protocol.wire.control import (
    AcceptRequest,
    CompactRequest,
    ControlReply,
    DiffReply,
    DiffRequest,
    OkReply,
    RejectRequest,
    ResetRequest,
    StatsReply,
    StatsRequest,
    StatusReply,
    StatusRequest,
    SuggestionReply,
    SuggestionRequest,
    Transcript,
    TypedRequest,
    WorkersReply,
    WorkersRequest,
)

R = TypeVar("R")


def report(obj: CommandContext, as_json: bool, kind: Any, expected: type[R],
           show: Callable[[R], object]) -> None:
    """Ask the service one question; print the reply as JSON or for a person."""
    with obj.client() as client:
        reply = client.call(kind)
    fail_on_error(reply, as_json)
    assert isinstance(reply, expected), reply
    if as_json:
        render.print_json(reply)
    else:
        show(reply)


def request_ok(obj: CommandContext, as_json: bool, kind: Any, **fields: Any) -> ControlReply:
    """Ask the service to do something; print its ok (or its error, and exit 1)."""
    with obj.client() as client:
        reply = client.call(kind, **fields)
    fail_on_error(reply, as_json)
    if as_json:
        render.print_json(reply)
    elif isinstance(reply, OkReply):
        from rich.text import Text

        render.console.print(Text(inert(reply.message or "ok")))
    return reply


def status(obj: CommandContext, as_json: bool) -> None:
    report(obj, as_json, StatusRequest, StatusReply, render.show_status)


def workers(obj: CommandContext, as_json: bool) -> None:
    report(obj, as_json, WorkersRequest, WorkersReply,
           lambda reply: render.console.print(render.workers_table(reply.workers)))


def stats(obj: CommandContext, as_json: bool) -> None:
    report(obj, as_json, StatsRequest, StatsReply, render.show_stats)


def suggestion(obj: CommandContext, as_json: bool, wait: bool = False,
               settled: bool = False, typed: str | None = None,
               transcript: bool = False, index: int = 0, full: bool = False) -> None:
    """The suggestion; ``typed``: first tell the service that this much of a prompt is
    typed (the chat's keystrokes): branches it still leads to are kept, the others
    killed, and the answer shows what is left. ``transcript``: also show the speculation
    so far of the branch of rank ``index`` (its tool results whole with ``full``)."""
    rank = index if transcript else None
    with obj.client() as client:
        reply: ControlReply | None = None
        if typed is not None:
            reply = client.request(TypedRequest(req_id=client.next_id(), text=typed))
        again = wait or settled or rank is not None
        if reply is None or (isinstance(reply, SuggestionReply) and again):
            reply = client.request(
                SuggestionRequest(req_id=client.next_id(), wait_visible=wait,
                                  wait_settled=settled, transcript=rank, full=full),
                timeout_s=105.0 if settled else 45.0 if wait else None,
            )
    fail_on_error(reply, as_json)
    assert isinstance(reply, SuggestionReply)
    if as_json:
        render.print_json(reply)
        return
    render.show_suggestion(reply)
    if rank is not None:
        if reply.transcript:
            render.show_transcript(Transcript(reply.req_id, reply.transcript, (), 0.0))
            if full:
                render.show_results_whole(reply.transcript)
        else:
            from rich.text import Text

            render.console.print(Text("  (no speculation to show)", style="bright_black"))


def diff(obj: CommandContext, as_json: bool, index: int | None = None,
         stat: bool = False) -> None:
    """What Tab would do now with a speculation's files (``DiffRequest``)."""
    from coordinator.cli.changes_view import diff_text

    with obj.client() as client:
        reply = client.request(DiffRequest(req_id=client.next_id(), index=index, stat=stat))
    fail_on_error(reply, as_json)
    assert isinstance(reply, DiffReply), reply
    if as_json:
        render.print_json(reply)
    else:
        render.console.print(diff_text(reply), soft_wrap=True)


def accept(obj: CommandContext, as_json: bool, index: int | None = None) -> None:
    """The accept streams like a turn: the transcript, then how it ended. ``index``:
    the rank of the alternative to take (by default the best-ranked one still live)."""
    from coordinator.cli.turns import stream_turn, view_for

    with obj.client() as client:
        request = AcceptRequest(req_id=client.next_id(), method="cli", index=index)
        outcome = stream_turn(client, request, view_for(as_json), None)
    sys.exit(outcome.exit_code)


def reject(obj: CommandContext, as_json: bool) -> None:
    request_ok(obj, as_json, RejectRequest)


def reset(obj: CommandContext, as_json: bool) -> None:
    request_ok(obj, as_json, ResetRequest)


def compact(obj: CommandContext, as_json: bool) -> None:
    """Waits as long as the summary takes (a running turn first): the fast model's
    own timeout bounds it, not the client's."""
    with obj.client() as client:
        reply = client.request(CompactRequest(req_id=client.next_id()), timeout_s=float("inf"))
    fail_on_error(reply, as_json)
    if as_json:
        render.print_json(reply)
    elif isinstance(reply, OkReply):
        render.console.print(reply.message or "ok")
