"""The commands over the service's real parts: a real ``MainChat`` and
``SpeculationManager`` on the scripted model, the real ``Session`` and ``CommandPort``;
only the pool is the tests' ``Workers`` (no worker processes). What the stand-ins of the
other command tests answer, the real parts answer here."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from coordinator.commands import ask, reject, reset, stats, status, suggestion
from coordinator.service.chat import MainChat
from coordinator.service.commands import CommandPort
from coordinator.service.routing import WorkerEventRouter
from coordinator.service.session import Session
from coordinator.service.speculation import Budget, CostLedger, SpeculationManager
from coordinator.settings import Settings
from protocol.wire import control
from protocol.wire.control import (
    AskRequest,
    OkReply,
    RejectRequest,
    ResetRequest,
    StatsReply,
    StatsRequest,
    StatusReply,
    StatusRequest,
    SuggestionReply,
    SuggestionRequest,
    TextChunk,
    TurnEnded,
)
from tests.coordinator.service.conftest import Place
from tests.coordinator.service.fakes import Replies, Workers, client, run, scripted

SUGGESTION = "add a test for negative numbers"


@dataclass
class RealParts:
    """The service's parts the command port reads (``ServiceParts``), all real but the
    pool; replies land in ``replies``."""

    session: Session
    chat: MainChat
    speculation: SpeculationManager
    settings: Settings
    pool: Workers
    project_root: Path
    replies: Replies
    stop_requested: asyncio.Event
    epoch: int = 7
    uptime_s: float = 1.0
    base_url: str = ""
    scripted_model: bool = True

    async def send(self, identity: bytes, reply: control.ControlReply) -> None:
        await self.replies.send(identity, reply)

    @property
    def port(self) -> CommandPort:
        return CommandPort(self)  # type: ignore[arg-type]


@asynccontextmanager
async def real_parts(place: Place, **settings: Any) -> AsyncIterator[RealParts]:
    # Two model turns (a tool call, then the answer): a suggestion comes after the second.
    read = {"name": "read_file", "arguments": {"file_path": "README.md"}}
    rules = [{"when": {"purpose": "suggestion"}, "reply": {"json": {"suggestion": SUGGESTION}}},
             {"when": {"purpose": "main", "last_tool": "read_file"}, "reply": {"text": "Done."}},
             {"when": {"purpose": "main"}, "reply": {"tool_calls": [read]}}]
    with scripted(*rules) as server:
        config = Settings(**{"enable_memory": False, "enable_speculation": False, **settings})
        cost = CostLedger(Budget(config.speculation_budget, config.speculation_budget_window))
        model = client(server, on_usage=cost.count)
        workers = Workers()
        chat = MainChat(place.root, config, workers, model)
        manager = SpeculationManager(place.root, config, workers, chat, model,
                                     base_url=server.base_url, cost=cost)
        router = WorkerEventRouter({"tool": chat, "speculation": manager})
        workers.on_event, workers.on_death = router.on_event, router.on_death
        parts = RealParts(Session(chat, manager, config), chat, manager, config, workers,
                          place.root, Replies(), asyncio.Event(), base_url=server.base_url)
        try:
            yield parts
        finally:
            await manager.shutdown()
            await chat.shutdown()
            await model.aclose()


def test_a_query_runs_a_real_turn_then_the_suggestion_comes(place: Place) -> None:
    async def main() -> None:
        async with real_parts(place) as parts:
            await ask.serve(parts.port, b"c", AskRequest(req_id=3, text=" fix add "))
            end = parts.replies.of(TurnEnded)[-1]
            assert (end.req_id, end.reason) == (3, "completed")
            assert TextChunk(3, "Done.") in parts.replies.replies
            await suggestion.serve(parts.port, b"c", SuggestionRequest(req_id=4, wait_visible=True))
            shown = parts.replies.of(SuggestionReply)[-1]
            assert (shown.req_id, shown.text, shown.visible) == (4, SUGGESTION, True), shown

            await reject.serve(parts.port, b"c", RejectRequest(req_id=5))
            await reject.serve(parts.port, b"c", RejectRequest(req_id=6))
            assert parts.replies.of(OkReply)[-2:] == [
                OkReply(5, "dismissed"), OkReply(6, "there was no suggestion")]
            await stats.serve(parts.port, b"c", StatsRequest(req_id=7))
            numbers = parts.replies.of(StatsReply)[-1]
            assert (numbers.suggestions_shown, numbers.suggestions_ignored) == (1, 1)

    run(main())


def test_status_and_reset_read_the_real_chat(place: Place) -> None:
    async def main() -> None:
        async with real_parts(place, model="main-m", fast_model="fast-m") as parts:
            await status.serve(parts.port, b"c", StatusRequest(req_id=1))
            [about] = parts.replies.of(StatusReply)
            assert (about.model, about.fast_model) == ("main-m", "fast-m")
            assert about.session_id == parts.chat.session_id
            assert about.project == str(place.root) and not about.speculation_enabled
            before = parts.chat.session_id
            await reset.serve(parts.port, b"c", ResetRequest(req_id=2))
            [ok] = parts.replies.of(OkReply)
            assert ok.message == f"new session {parts.chat.session_id}"
            assert parts.chat.session_id != before

    run(main())
