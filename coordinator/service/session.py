"""The session: what a prompt the person submits comes to.

A prompt reaches the service as an ``ask`` (text sent) or an ``accept`` (a suggestion
taken: Tab, →, the CLI, the web page). Whether it applies a speculation, falls back to a
normal turn, throws the suggestion away and runs a turn, or runs nothing (a second accept
at once, a Ctrl-C while it waited, another turn waiting for an approval) is decided here
and only here: the control commands decode a request, call ``Session.submit`` and send
the ``Outcome``'s reply. The speculation manager says why it could not apply a
speculation by raising; those exceptions end in this module.

The session drives the real main chat and speculation manager; the commands reach it
through their port (``commands/port.py``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from coordinator.service.chat import MainChat, TurnResult
from coordinator.service.emitter import Emitter
from coordinator.service.speculation import (
    AcceptCancelled,
    AcceptFallback,
    BranchRun,
    Debounced,
    SpeculationManager,
)
from coordinator.settings import Settings
from protocol.text.branch_number import branch_name, branch_number
from protocol.wire.approval import ApprovalMode
from protocol.wire.chat import ToolCall
from protocol.wire.control import (
    AcceptMethod,
    ErrorReply,
    TurnEnded,
)
from protocol.wire.display import format_args

# -- how a prompt was submitted --------------------------------------------------------


@dataclass(frozen=True)
class Asked:
    """Text sent (``ask``). It applies the speculation of a live branch it equals
    (``acceptTypedPrompt``), or of the suggestion when it is exactly its text (accepted
    by ``method``); otherwise the suggestion is thrown away and it runs as a turn.
    ``filled``: Enter filled the line with the suggestion and sent it unchanged."""

    text: str
    method: AcceptMethod = "enter"
    filled: bool = False
    mode: ApprovalMode | None = None  # None: the chat's
    can_confirm: bool = False
    client_pid: int | None = None


@dataclass(frozen=True)
class Accepted:
    """A suggestion taken (``accept``): the branch of rank ``index``, None for the
    best-ranked live one. Should its speculation be unusable (it stopped at a boundary,
    say), its text runs as a turn in the chat's approval mode, asking at the client when
    it ``can_confirm`` exactly as that text sent with Enter would."""

    method: AcceptMethod
    index: int | None = None
    can_confirm: bool = False
    client_pid: int | None = None


How = Asked | Accepted


# -- what it came to ---------------------------------------------------------------------


@dataclass(frozen=True)
class Applied:
    """The speculation's work was applied instead of a turn."""

    saved_s: float
    elapsed_s: float

    def reply(self, req_id: int) -> TurnEnded:
        return TurnEnded(req_id, "accepted", f"saved {self.saved_s:.2f}s", True, self.elapsed_s)


@dataclass(frozen=True)
class TurnRan:
    """A normal turn ran. ``fell_back``: why the speculation meant for the prompt could
    not be used; ``dismissed``: the suggestion whose live speculation was thrown away."""

    result: TurnResult
    elapsed_s: float
    fell_back: str | None = None
    dismissed: str | None = None

    def reply(self, req_id: int) -> TurnEnded:
        return TurnEnded(req_id, self.result.reason, self.result.message, False, self.elapsed_s)


@dataclass(frozen=True)
class AcceptRepeated:
    """A second accept right after the last one: ignored (debounced), nothing ran."""

    def reply(self, req_id: int) -> TurnEnded:
        return TurnEnded(req_id, "debounced", "Accept pressed twice; ignored the second.")


@dataclass(frozen=True)
class WaitCancelled:
    """Ctrl-C while the prompt waited for its running speculation: that speculation was
    stopped and nothing ran."""

    elapsed_s: float

    def reply(self, req_id: int) -> TurnEnded:
        why = "The turn was cancelled; its speculation was stopped."
        return TurnEnded(req_id, "aborted", why, False, self.elapsed_s)


@dataclass(frozen=True)
class Busy:
    """Refused at once: another turn holds the chat waiting for an approval."""

    waiting_on: ToolCall
    timeout_s: float

    def reply(self, req_id: int) -> ErrorReply:
        call = self.waiting_on
        return ErrorReply(
            req_id,
            "busy",
            f"Another turn is waiting for approval of {call.name} ({format_args(call)}); "
            "answer it where it was asked or press Ctrl-C there. Unanswered, it counts as "
            f"a no after {self.timeout_s} s.",
        )


@dataclass(frozen=True)
class NoSuggestion:
    """An accept with nothing to take: no suggestion (``live_ranks`` None), or none of
    the asked rank."""

    index: int | None
    live_ranks: tuple[int, ...] | None

    def reply(self, req_id: int) -> ErrorReply:
        if self.live_ranks is None:
            return ErrorReply(req_id, "not_found", "There is no suggestion to accept right now.")
        live = ", ".join(str(branch_number(rank)) for rank in self.live_ranks)
        which = "branch" if self.index is None else branch_name(self.index)
        return ErrorReply(
            req_id,
            "not_found",
            f"There is no {which} to accept right now (live branches: {live or 'none'}); "
            "`specrun suggestion` lists them.",
        )


Outcome = Applied | TurnRan | AcceptRepeated | WaitCancelled | Busy | NoSuggestion


@dataclass(frozen=True)
class _Use:
    """The speculation a submitted prompt takes: its branch's rank, the accept's method,
    and whether to wait for it if it is still running."""

    rank: int
    method: AcceptMethod
    wait: bool = False


# -- the session ---------------------------------------------------------------------------


class Session:
    """One chat session with its speculation: the policy between a submitted prompt and
    the main chat and speculation manager."""

    def __init__(
        self, chat: MainChat, speculation: SpeculationManager, settings: Settings
    ) -> None:
        self.chat = chat
        self.speculation = speculation
        self.settings = settings

    async def submit(self, out: Emitter, how: How) -> Outcome:
        """Run what ``how`` asks to its end; notices go out through ``out`` on the way
        (the end itself is the outcome's reply, for the caller to send)."""
        started = time.monotonic()
        if isinstance(how, Accepted):
            target = self._branch(how.index)
            if isinstance(target, NoSuggestion):
                return target
            asked = Asked(target.text, how.method, can_confirm=how.can_confirm,
                          client_pid=how.client_pid)
            taken = _Use(target.rank, how.method)
        else:
            asked, taken = how, None
        waiting_on = self.chat.pending_approval()
        if waiting_on is not None:
            # Never silence: the running turn holds the chat until someone answers it.
            return Busy(waiting_on, self.settings.approval_timeout_s)
        if self.chat.busy:
            await out.notice("Another turn is running; this one starts when it ends.")
        self.speculation.cancel_generation()
        use = taken if taken is not None else await self._speculation_for(out, asked)
        fell_back = dismissed = None
        if use is None:
            dismissed = await self._dismiss(out)
        else:
            try:
                saved = await self.speculation.accept(
                    use.method, out, index=use.rank, wait=use.wait
                )
            except Debounced:
                return AcceptRepeated()
            except AcceptCancelled:
                return WaitCancelled(time.monotonic() - started)
            except AcceptFallback as why:
                fell_back = str(why)
                await out.notice(f"Running it as a normal turn: {fell_back}.")
            else:
                return Applied(saved, time.monotonic() - started)
        result = await self._turn(out, asked, from_accept=taken is not None)
        return TurnRan(result, time.monotonic() - started, fell_back, dismissed)

    def _branch(self, index: int | None) -> BranchRun | NoSuggestion:
        current = self.speculation.current
        if current is None:
            return NoSuggestion(index, None)
        if index is None:
            branch = current.branches[0] if current.branches else None
        else:
            branch = current.branch(index)
        if branch is None:
            return NoSuggestion(index, tuple(b.rank for b in current.branches))
        return branch

    async def _speculation_for(self, out: Emitter, asked: Asked) -> _Use | None:
        """The speculation sent text takes: the live branch it equals (a prompt sent,
        unlike Tab, waits for it to finish), else the suggestion if it is exactly its
        text; None when it takes none."""
        manager = self.speculation
        typed = manager.typed_match(asked.text)
        if typed is not None:
            spec = typed.speculation
            done = spec is None or spec.status == "completed"
            state = "completed" if done else "still running, waiting for it to finish"
            how = "Sent the suggestion" if asked.filled else "You typed a predicted prompt"
            await out.notice(f"{how}: using its speculation ({state}).")
            # A line Enter filled and sent unchanged is an Enter accept; one typed out, typed.
            return _Use(typed.rank, "enter" if asked.filled else "typed", wait=True)
        if manager.matches(asked.text):
            return _Use(0, asked.method)
        return None

    async def _dismiss(self, out: Emitter) -> str | None:
        """The person sent something else: throw the suggestion away, and say so when
        its speculation had done (or was doing) work ahead of them, as the demo does."""
        current = self.speculation.current
        spec = current.speculation if current is not None else None
        status = spec.status if spec is not None else None
        await self.speculation.dismiss("user typed something else")
        if current is None or status not in ("running", "completed"):
            return None
        done = "still running" if status == "running" else "completed"
        await out.notice(
            f"You typed something else: stopped the speculation of “{current.text}” "
            f"({done}); its worker was killed and its overlay removed."
        )
        return current.text

    async def _turn(self, out: Emitter, asked: Asked, from_accept: bool) -> TurnResult:
        mode = asked.mode or self.chat.approval_mode
        result = await self.chat.run_turn(
            out, asked.text, mode, asked.can_confirm, client_pid=asked.client_pid,
            from_accept=from_accept,
        )
        # Before the turn's end reaches the client: a `suggestion` sent right after `ask`
        # must find the generation already under way (pending), not "no suggestion".
        self.speculation.after_turn(result.reason, mode)
        return result

    def cancel(self, ask_req_id: int | None) -> bool:
        """Ctrl-C for a prompt: its turn, or its wait for the speculation it will use."""
        return self.chat.cancel(ask_req_id) or self.speculation.cancel_accept(ask_req_id)

    async def reset(self) -> str:
        """A new session: the suggestion dropped, the chat's history started afresh.
        The new session's id."""
        self.speculation.cancel_generation()
        await self.speculation.dismiss("reset")
        self.chat.reset()
        self.speculation.new_session()
        return self.chat.session_id
