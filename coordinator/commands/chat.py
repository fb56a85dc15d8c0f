"""ask, cancel, approval answers, reset."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from coordinator.emitter import Emitter
from coordinator.speculation import AcceptFallback
from protocol.control import (
    ApprovalAnswer,
    AskRequest,
    CancelRequest,
    ErrorReply,
    OkReply,
    ResetRequest,
    TurnEnded,
)

if TYPE_CHECKING:
    from coordinator.service import Service


async def ask(svc: Service, identity: bytes, req: AskRequest) -> None:
    text = req.text.strip()
    if not text:
        await svc.send(
            identity,
            ErrorReply(req.req_id, "bad_request", "The query is empty; type something to ask."),
        )
        return
    out = Emitter(svc, identity, req.req_id)
    await run_query(svc, out, text, req, speculative_method=req.accept_method)


async def run_query(
    svc: Service, out: Emitter, text: str, req: AskRequest, speculative_method: str
) -> None:
    """Submit ``text``: the speculation if it predicted exactly this, else a normal turn."""
    started = time.monotonic()
    manager = svc.speculation
    manager.cancel_generation()
    if manager.matches(text):
        try:
            saved = await manager.accept(speculative_method, out)
        except AcceptFallback as why:
            if str(why) == "debounced":
                await out.send(
                    TurnEnded(out.req_id, "debounced", "Accept pressed twice; ignored the second.")
                )
                return
            await out.notice(f"Running it as a normal turn: {why}.")
        else:
            await out.send(
                TurnEnded(
                    out.req_id, "accepted", f"saved {saved:.2f}s", True, time.monotonic() - started
                )
            )
            return
    else:
        await manager.dismiss("user typed something else")
    mode = req.approval_mode or svc.chat.approval_mode
    result = await svc.chat.run_turn(out, text, mode, req.can_confirm)
    await out.send(
        TurnEnded(out.req_id, result.reason, result.message, False, time.monotonic() - started)
    )
    manager.after_turn(result.reason, mode)


async def cancel(svc: Service, identity: bytes, req: CancelRequest) -> None:
    cancelled = svc.chat.cancel(req.ask_req_id)
    await svc.send(identity, OkReply(req.req_id, "cancelled" if cancelled else "nothing to cancel"))


async def approval_answer(svc: Service, identity: bytes, req: ApprovalAnswer) -> None:
    if not svc.chat.answer_approval(req.ask_req_id, req.call_id, req.approved):
        await svc.send(
            identity,
            ErrorReply(req.req_id, "not_found", "No tool call is waiting for that answer."),
        )
        return
    await svc.send(identity, OkReply(req.req_id))


async def reset(svc: Service, identity: bytes, req: ResetRequest) -> None:
    svc.speculation.cancel_generation()
    await svc.speculation.dismiss("reset")
    svc.chat.reset()
    await svc.send(identity, OkReply(req.req_id, f"new session {svc.chat.session_id}"))
