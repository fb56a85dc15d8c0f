"""The two sides a command's halves are handed, each as one narrow protocol in the wire's
types: a command imports neither the CLI (``coordinator/cli``) nor the service
(``coordinator/service``).

``Service`` is what a server half may ask of the running service; the service hands
its ``CommandPort`` (``coordinator/service/commands/port.py``), which mypy checks
against this protocol where it is handed. ``Client`` is what a client half may do on the
command line; ``coordinator/cli/client_side.py`` implements it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NoReturn, Protocol

if TYPE_CHECKING:
    from protocol.wire.approval import ApprovalMode
    from protocol.wire.control import (
        AcceptRequest,
        AskRequest,
        ControlReply,
        ControlRequest,
        DiffReply,
        ErrorReply,
        LiveSnapshot,
        PresenceReport,
        StatsReply,
        StatusReply,
        SuggestionReply,
        UndoReply,
        UndoRequest,
        WorkerInfo,
    )


class Service(Protocol):
    """The running service as a command's server half sees it."""

    async def send(self, identity: bytes, reply: ControlReply) -> None:
        """One reply (or turn event) to the client ``identity``."""
        ...

    # -- the chat session: prompts submitted, turns, history

    async def submit(self, identity: bytes, request: AskRequest | AcceptRequest) -> ControlReply:
        """Run a prompt sent (ask) or a suggestion taken (accept) to its end, its events
        streamed to ``identity`` on the way; the reply that ends it."""
        ...

    def cancel(self, ask_req_id: int) -> bool:
        """Ctrl-C for the prompt of ``ask_req_id``; whether there was one to cancel."""
        ...

    def answer_approval(self, ask_req_id: int, call_id: str, approved: bool,
                        remember: bool = False, reason: str = "") -> bool:
        """The person's answer to a waiting tool call (``remember``: keep a yes for the
        session; ``reason``: a no's words for the model); False when none waits for it."""
        ...

    def set_approval_mode(self, mode: ApprovalMode) -> ApprovalMode:
        """The chat's approval mode for the turns started from now on; the one before."""
        ...

    @property
    def turn_running(self) -> bool: ...

    async def compact(self, identity: bytes, req_id: int) -> str | None:
        """Compact the chat now (after a running turn); what was done, None for nothing."""
        ...

    async def reset(self) -> str:
        """A new chat session; its id."""
        ...

    # -- the suggestion and its speculations

    async def wait_visible(self, timeout_s: float) -> None: ...

    async def wait_settled(self, timeout_s: float) -> None: ...

    def suggestion_reply(
        self, req_id: int, transcript: int | None = None, full: bool = False
    ) -> SuggestionReply:
        """``transcript``: the rank of the branch whose speculation so far the reply
        carries; ``full``: its tool results whole."""
        ...

    def still_shown(self, index: int | None, text: str, speculation_id: str) -> bool:
        """Whether the branch an accept of ``index`` would take is still the one a client
        showed (its text and its speculation's id, '' for none)."""
        ...

    async def typed(self, text: str) -> None:
        """This much of a prompt is typed: keep the branches it leads to, kill the rest."""
        ...

    async def reject(self) -> bool:
        """Dismiss the suggestion; whether there was one."""
        ...

    async def diff_reply(self, req_id: int, index: int | None, stat: bool) -> DiffReply | None:
        """What Tab would do with the files of the branch ranked ``index``; None when
        there is no such speculation."""
        ...

    def stats_reply(self, req_id: int) -> StatsReply: ...

    def presence(self, client_pid: int, state: PresenceReport) -> None:
        """A chat says whether someone looks at it; ``ProcessLookupError`` when
        ``client_pid`` is gone."""
        ...

    # -- undo

    async def undo(self, request: UndoRequest) -> UndoReply | ErrorReply:
        """List, or take back, the session's checkpoints (``specrun undo``); an undo
        waits for a running turn to end first."""
        ...

    # -- the service itself, its workers, its live view

    def status_reply(self, req_id: int) -> StatusReply: ...

    def stop(self) -> None:
        """Ask the service to stop (after the replies already sent)."""
        ...

    def workers(self) -> list[WorkerInfo]: ...

    def subscribe(self, identity: bytes, req_id: int, client_pid: int | None) -> None:
        """Follow the live view; ``ProcessLookupError`` when ``client_pid`` is gone."""
        ...

    async def live_snapshot(self, req_id: int) -> LiveSnapshot: ...


class Client(Protocol):
    """The command line as a command's client half sees it: one connection to the
    service, and the terminal (or, with ``--json``, a script) it answers."""

    @property
    def as_json(self) -> bool: ...

    @property
    def can_confirm(self) -> bool:
        """A person is at a terminal who can answer an approval question."""
        ...

    def next_id(self) -> int: ...

    def request(self, request: ControlRequest, timeout_s: float | None = None) -> ControlReply:
        """Send ``request``; its final reply. ``timeout_s``: per reply (None: the client's
        default; ``float('inf')``: as long as the service lives)."""
        ...

    def show(self, reply: ControlReply) -> None:
        """Print a reply: as JSON, or drawn for a person. An ``ErrorReply`` is shown as
        one sentence and ends the command with exit code 1."""
        ...

    def note(self, text: str) -> None:
        """A grey aside for a person (nothing in JSON)."""
        ...

    def turn(self, request: AskRequest | AcceptRequest) -> int:
        """Stream a turn: its events shown as they come, approvals asked (when the client
        can confirm); the exit code its end means."""
        ...

    def usage_error(self, message: str) -> NoReturn:
        """The command line is wrong: ``message``, exit code 2."""
        ...
