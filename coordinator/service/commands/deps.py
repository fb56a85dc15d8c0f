"""What each control command needs from the service.

A handler is ``async def handler(deps, identity, request)``; ``deps`` is typed with the
smallest protocol below that covers what the handler uses, so a test builds a handler's
world from a few fakes. The service passes itself: it is a ``CommandContext``, which is
every one of these at once (mypy checks that at the ``dispatch`` call).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Protocol

from coordinator.service.chat import TurnResult
from coordinator.service.emitter import Emitter
from coordinator.service.live_hub import LiveHub
from coordinator.service.live_state import LiveState
from coordinator.service.ports import PoolView, ReplySink
from coordinator.service.speculation import AbortCause, BranchRun, Suggestion
from coordinator.settings import Settings
from protocol.approval import ApprovalMode
from protocol.chat import ToolCall
from protocol.control import (
    AcceptMethod,
    ContextInfo,
    DiffReply,
    StatsReply,
    SuggestionReply,
    TurnEndReason,
)

# -- the main chat and the speculation manager, as the commands use them ------------


class ChatControl(Protocol):
    """The main chat (``MainChat``) as the commands drive it."""

    @property
    def model_name(self) -> str: ...

    @property
    def fast_model(self) -> str: ...

    @property
    def approval_mode(self) -> ApprovalMode: ...

    @property
    def session_id(self) -> str: ...

    @property
    def busy(self) -> bool: ...

    def pending_approval(self) -> ToolCall | None: ...

    async def run_turn(
        self,
        out: Emitter,
        text: str,
        mode: ApprovalMode | None = None,
        can_confirm: bool = False,
        *,
        client_pid: int | None = None,
        from_accept: bool = False,
    ) -> TurnResult: ...

    def cancel(self, ask_req_id: int | None = None) -> bool: ...

    def answer_approval(self, ask_req_id: int, call_id: str, approved: bool) -> bool: ...

    def reset(self) -> None: ...

    async def compact_on_request(self, out: Emitter) -> str | None: ...

    def context_info(self) -> ContextInfo: ...


class SpeculationControl(Protocol):
    """The speculation manager (``SpeculationManager``) as the commands drive it."""

    @property
    def current(self) -> Suggestion | None: ...

    def cancel_generation(self) -> None: ...

    def matches(self, text: str) -> bool: ...

    def typed_match(self, text: str) -> BranchRun | None: ...

    def cancel_accept(self, req_id: int | None = None) -> bool: ...

    async def accept(
        self, method: AcceptMethod, out: Emitter, index: int = 0, wait: bool = False
    ) -> float: ...

    async def dismiss(self, reason: AbortCause) -> None: ...

    async def typed(self, text: str) -> None: ...

    def after_turn(self, reason: TurnEndReason, mode: ApprovalMode) -> None: ...

    def new_session(self) -> None: ...

    async def wait_visible(self, timeout_s: float) -> None: ...

    async def wait_settled(self, timeout_s: float) -> None: ...

    def suggestion_reply(
        self, req_id: int, transcript: int | None = None
    ) -> SuggestionReply: ...

    async def diff_reply(
        self, req_id: int, index: int | None, stat: bool
    ) -> DiffReply | None: ...

    def stats_reply(self, req_id: int) -> StatsReply: ...


# -- what each group of handlers needs -----------------------------------------------


class HasChat(Protocol):
    @property
    def chat(self) -> ChatControl: ...


class HasSpeculation(Protocol):
    @property
    def speculation(self) -> SpeculationControl: ...


class HasSettings(Protocol):
    @property
    def settings(self) -> Settings: ...


class HasPool(Protocol):
    @property
    def pool(self) -> PoolView: ...


class ChatReplies(ReplySink, HasChat, Protocol):
    """`cancel`, approval answers."""


class SpeculationReplies(ReplySink, HasSpeculation, Protocol):
    """`suggestion`, `reject`, `stats`."""


class SessionDeps(ReplySink, HasChat, HasSpeculation, Protocol):
    """`reset`."""


class QueryDeps(ReplySink, HasChat, HasSpeculation, HasSettings, Protocol):
    """`ask` and `accept`: a query runs as a normal turn or as an accepted speculation."""


class PoolReplies(ReplySink, HasPool, Protocol):
    """`workers`, `kill-worker`."""


class StopDeps(ReplySink, Protocol):
    """`stop`."""

    @property
    def stop_requested(self) -> asyncio.Event: ...


class StatusDeps(ReplySink, HasChat, HasSettings, HasPool, Protocol):
    """`status`: facts about the service itself, its chat session and its pool."""

    @property
    def project_root(self) -> Path: ...

    @property
    def epoch(self) -> int: ...

    @property
    def uptime_s(self) -> float: ...

    @property
    def base_url(self) -> str: ...

    @property
    def scripted_model(self) -> bool: ...


class LiveDeps(ReplySink, Protocol):
    """`subscribe`, `live_snapshot`: the live view's subscribers and its state."""

    @property
    def live_hub(self) -> LiveHub: ...

    @property
    def live(self) -> LiveState: ...


class CommandContext(
    LiveDeps,
    StatusDeps,
    StopDeps,
    PoolReplies,
    QueryDeps,
    SessionDeps,
    ChatReplies,
    SpeculationReplies,
    Protocol,
):
    """All of the above: what ``dispatch`` is given (the service)."""
