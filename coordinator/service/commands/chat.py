"""ask, cancel, approval answers, compact, reset."""

from __future__ import annotations

from coordinator.service.commands.deps import HandlerDeps
from coordinator.service.commands.registry import handles
from coordinator.service.emitter import Emitter
from coordinator.service.session import Asked
from protocol.wire.control import (
    ApprovalAnswer,
    ApprovalModeRequest,
    AskRequest,
    CancelRequest,
    CompactRequest,
    ErrorReply,
    OkReply,
    ResetRequest,
)


@handles(AskRequest)
async def ask(svc: HandlerDeps, identity: bytes, req: AskRequest) -> None:
    text = req.text.strip()
    if not text:
        await svc.send(
            identity,
            ErrorReply(req.req_id, "bad_request", "The query is empty; type something to ask."),
        )
        return
    asked = Asked(
        text, method=req.accept_method, filled=req.filled, mode=req.approval_mode,
        can_confirm=req.can_confirm, client_pid=req.client_pid,
    )
    outcome = await svc.session.submit(Emitter(svc, identity, req.req_id), asked)
    await svc.send(identity, outcome.reply(req.req_id))


@handles(CancelRequest)
async def cancel(svc: HandlerDeps, identity: bytes, req: CancelRequest) -> None:
    cancelled = svc.session.cancel(req.ask_req_id)
    await svc.send(identity, OkReply(req.req_id, "cancelled" if cancelled else "nothing to cancel"))


@handles(ApprovalAnswer)
async def approval_answer(svc: HandlerDeps, identity: bytes, req: ApprovalAnswer) -> None:
    if not svc.chat.answer_approval(req.ask_req_id, req.call_id, req.approved, req.remember,
                                    req.reason):
        await svc.send(
            identity,
            ErrorReply(req.req_id, "not_found", "No tool call is waiting for that answer."),
        )
        return
    await svc.send(identity, OkReply(req.req_id))


@handles(CompactRequest)
async def compact(svc: HandlerDeps, identity: bytes, req: CompactRequest) -> None:
    out = Emitter(svc, identity, req.req_id)
    if svc.chat.busy:
        await out.notice("A turn is running; compacting when it ends.")
    done = await svc.chat.compact_on_request(out)
    if done is None:
        await svc.send(identity, OkReply(req.req_id, "Nothing to compact: the session has "
                                         "no turn before its last one."))
        return
    await svc.send(identity, OkReply(req.req_id, done))


@handles(ResetRequest)
async def reset(svc: HandlerDeps, identity: bytes, req: ResetRequest) -> None:
    session_id = await svc.session.reset()
    await svc.send(identity, OkReply(req.req_id, f"new session {session_id}"))


@handles(ApprovalModeRequest)
async def approval_mode(svc: HandlerDeps, identity: bytes, req: ApprovalModeRequest) -> None:
    before = svc.chat.approval_mode
    svc.chat.set_approval_mode(req.mode)
    if before is req.mode:
        said = f"The approval mode is already {req.mode.value}."
    else:
        running = " (a turn running now keeps the mode it started with)" if svc.chat.busy else ""
        said = f"Approval mode {req.mode.value} from the next turn on, was {before.value}{running}."
    await svc.send(identity, OkReply(req.req_id, said))
