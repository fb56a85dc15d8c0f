"""``CommandPort``: the running service as its commands see it (``commands.seam.Service``).

Every command's server half is handed this one object; it reaches the service's parts
(the session, the main chat, the speculation manager, the pool, the live view) only
through the members below, which speak the wire's types.
"""

from __future__ import annotations

import os

from coordinator.service.commands.parts import ServiceParts
from coordinator.service.emitter import Emitter
from coordinator.service.session import Accepted, Asked, How
from protocol.text.secret_text import without_password
from protocol.wire.approval import ApprovalMode
from protocol.wire.control import (
    AcceptRequest,
    AskRequest,
    ControlReply,
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


def status_reply(svc: ServiceParts, req_id: int) -> StatusReply:
    chat = svc.chat
    return StatusReply(
        req_id=req_id,
        project=str(svc.project_root),
        pid=os.getpid(),
        epoch=svc.epoch,
        uptime_s=round(svc.uptime_s, 3),
        model_endpoint=without_password(svc.base_url),
        scripted_model=svc.scripted_model,
        model=chat.model_name,
        fast_model=chat.fast_model,
        approval_mode=chat.approval_mode,
        session_id=chat.session_id,
        sandbox=svc.pool.sandbox,
        workers=tuple(svc.pool.infos()),
        speculation_enabled=svc.settings.enable_speculation,
        suggestions_enabled=svc.settings.enable_followup_suggestions,
        pool_warm=svc.pool.is_warm(),
        containment=svc.pool.containment,
        context=chat.context_info(),
        model_wait=chat.model_wait.info(),
    )


def _how(request: AskRequest | AcceptRequest) -> How:
    if isinstance(request, AcceptRequest):
        return Accepted(request.method, request.index, can_confirm=request.can_confirm,
                        client_pid=request.client_pid)
    return Asked(request.text, method=request.accept_method, filled=request.filled,
                 mode=request.approval_mode, can_confirm=request.can_confirm,
                 client_pid=request.client_pid)


class CommandPort:
    """What a command may ask of the service (``seam.Service``), over its parts."""

    def __init__(self, service: ServiceParts) -> None:
        self._svc = service

    async def send(self, identity: bytes, reply: ControlReply) -> None:
        await self._svc.send(identity, reply)

    async def submit(self, identity: bytes, request: AskRequest | AcceptRequest) -> ControlReply:
        out = Emitter(self._svc, identity, request.req_id)
        outcome = await self._svc.session.submit(out, _how(request))
        return outcome.reply(request.req_id)

    def cancel(self, ask_req_id: int) -> bool:
        return self._svc.session.cancel(ask_req_id)

    def answer_approval(self, ask_req_id: int, call_id: str, approved: bool,
                        remember: bool = False, reason: str = "") -> bool:
        return self._svc.chat.answer_approval(ask_req_id, call_id, approved, remember, reason)

    def set_approval_mode(self, mode: ApprovalMode) -> ApprovalMode:
        before = self._svc.chat.approval_mode
        self._svc.chat.set_approval_mode(mode)
        return before

    @property
    def turn_running(self) -> bool:
        return self._svc.chat.busy

    async def compact(self, identity: bytes, req_id: int) -> str | None:
        return await self._svc.chat.compact_on_request(Emitter(self._svc, identity, req_id))

    async def reset(self) -> str:
        return await self._svc.session.reset()

    async def wait_visible(self, timeout_s: float) -> None:
        await self._svc.speculation.wait_visible(timeout_s)

    async def wait_settled(self, timeout_s: float) -> None:
        await self._svc.speculation.wait_settled(timeout_s)

    def suggestion_reply(
        self, req_id: int, transcript: int | None = None, full: bool = False
    ) -> SuggestionReply:
        return self._svc.speculation.suggestion_reply(req_id, transcript, full)

    def still_shown(self, index: int | None, text: str, speculation_id: str) -> bool:
        current = self._svc.speculation.current
        return current is not None and current.shows(index, text, speculation_id)

    async def typed(self, text: str) -> None:
        await self._svc.speculation.typed(text)

    async def reject(self) -> bool:
        had = self._svc.speculation.current is not None
        await self._svc.speculation.dismiss("rejected")
        return had

    async def diff_reply(self, req_id: int, index: int | None, stat: bool) -> DiffReply | None:
        return await self._svc.speculation.diff_reply(req_id, index, stat)

    def stats_reply(self, req_id: int) -> StatsReply:
        return self._svc.speculation.stats_reply(req_id)

    def presence(self, client_pid: int, state: PresenceReport) -> None:
        self._svc.speculation.context.viewers.report(client_pid, state)

    async def undo(self, request: UndoRequest) -> UndoReply | ErrorReply:
        return await self._svc.undo.handle(request)

    def status_reply(self, req_id: int) -> StatusReply:
        return status_reply(self._svc, req_id)

    def stop(self) -> None:
        self._svc.stop_requested.set()

    def workers(self) -> list[WorkerInfo]:
        return self._svc.pool.infos()

    def subscribe(self, identity: bytes, req_id: int, client_pid: int | None) -> None:
        self._svc.live_hub.subscribe(identity, req_id, client_pid)

    async def live_snapshot(self, req_id: int) -> LiveSnapshot:
        return await self._svc.live.snapshot(req_id)
