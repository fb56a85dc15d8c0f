"""Control commands: one small handler per request type, looked up by type."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from coordinator.service.commands import chat, service, speculation
from protocol import control

if TYPE_CHECKING:
    from coordinator.service.service import Service

Handler = Callable[["Service", bytes, Any], Awaitable[None]]

HANDLERS: dict[type, Handler] = {
    control.StatusRequest: service.status,
    control.StopRequest: service.stop,
    control.WorkersRequest: service.workers,
    control.KillWorkerRequest: service.kill_worker,
    control.AskRequest: chat.ask,
    control.CancelRequest: chat.cancel,
    control.ApprovalAnswer: chat.approval_answer,
    control.ResetRequest: chat.reset,
    control.SuggestionRequest: speculation.suggestion,
    control.AcceptRequest: speculation.accept,
    control.RejectRequest: speculation.reject,
    control.StatsRequest: speculation.stats,
}


async def dispatch(svc: Service, identity: bytes, request: Any) -> None:
    await HANDLERS[type(request)](svc, identity, request)
