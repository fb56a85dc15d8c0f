"""One turn, streamed: send a query or an accept, show its events as they arrive, answer
approval questions, and on Ctrl-C cancel the turn and show how it ended.

Used by ``ask``, ``accept``, ``chat`` and the demo; what differs between them is how the
events are shown (a ``render.TurnPrinter`` for a person, ``JsonLines`` for scripts) and
who answers approval questions.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeAlias

from coordinator.cli import render
from coordinator.cli.client import FOREVER, ServiceClient
from coordinator.cli.errors import EXIT_ERROR, EXIT_OK
from protocol.wire.control import (
    AcceptRequest,
    ApprovalAnswer,
    ApprovalNeeded,
    AskRequest,
    CancelRequest,
    ControlReply,
    ErrorReply,
    TurnEnded,
)


@dataclass(frozen=True)
class Decision:
    """A person's answer to an approval question (``ApprovalAnswer``'s ``approved``,
    ``remember`` and ``reason``)."""

    approved: bool
    remember: bool = False
    reason: str = ""


# Who answers approval questions: a person at a terminal, the demo's scripted person
# (a plain yes or no), or nobody (None: always no).
Approver = Callable[[ApprovalNeeded], "bool | Decision"]

# The turn ends that a command reports as success (exit 0).
SUCCESSFUL_ENDS = ("completed", "accepted", "debounced")


class JsonLines:
    """Each event as one JSON line on stdout (an error's sentence also on stderr). Needs
    no rich, so a scripted ``accept --json`` never imports it."""

    def waiting(self, what: str) -> None:
        pass

    def show(self, reply: ControlReply) -> None:
        render.print_json(reply)
        if isinstance(reply, ErrorReply):
            render.error(reply.message)

    def close(self) -> None:
        pass


# How a turn's events are shown: to a person, or as JSON lines for scripts.
TurnView: TypeAlias = "JsonLines | render.TurnPrinter"


def view_for(as_json: bool) -> TurnView:
    return JsonLines() if as_json else render.TurnPrinter()


class TurnOutcome:
    """How a streamed turn ended. (A plain class: ``accept --json`` runs without click,
    and ``@dataclass`` would cost it the import and the class's generated code.)"""

    __slots__ = ("end", "interrupted")

    def __init__(self, end: ControlReply | None, interrupted: bool) -> None:
        self.end = end  # the last event: a TurnEnded, an ErrorReply, or None
        self.interrupted = interrupted  # Ctrl-C cancelled the turn

    @property
    def ended(self) -> TurnEnded | None:
        return self.end if isinstance(self.end, TurnEnded) else None

    @property
    def exit_code(self) -> int:
        ended = self.ended
        return EXIT_OK if ended is not None and ended.reason in SUCCESSFUL_ENDS else EXIT_ERROR


def stream_turn(
    client: ServiceClient,
    request: AskRequest | AcceptRequest,
    view: TurnView,
    approve: Approver | None,
) -> TurnOutcome:
    """Send ``request`` and show its events until the turn ends. ``approve`` answers
    approval questions (None: always no). Ctrl-C cancels the turn: the service is told,
    and the events up to its end are still shown."""
    client.send(request)
    end: ControlReply | None = None
    interrupted = False
    view.waiting("[bright_black]thinking…[/]")
    try:
        try:
            for reply in client.replies(request.req_id, timeout_s=FOREVER):
                view.show(reply)
                if isinstance(reply, ApprovalNeeded):
                    said = approve(reply) if approve is not None else False
                    decision = said if isinstance(said, Decision) else Decision(said)
                    client.send(ApprovalAnswer(client.next_id(), request.req_id, reply.call.id,
                                               decision.approved, decision.remember,
                                               decision.reason))
                end = reply
        except KeyboardInterrupt:
            interrupted = True
            view.close()
            client.send(CancelRequest(client.next_id(), request.req_id))
            for reply in client.replies(request.req_id, timeout_s=15):
                view.show(reply)
                end = reply
    finally:
        view.close()
    return TurnOutcome(end, interrupted)
