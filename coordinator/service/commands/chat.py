"""ask, cancel, approval answers, reset."""

from __future__ import annotations

import time

from coordinator.service.commands.deps import ChatReplies, QueryDeps, SessionDeps
from coordinator.service.commands.registry import handles
from coordinator.service.emitter import Emitter
from coordinator.service.speculation import AcceptCancelled, AcceptFallback, Debounced
from protocol.control import (
    AcceptMethod,
    ApprovalAnswer,
    AskRequest,
    CancelRequest,
    CompactRequest,
    ErrorReply,
    OkReply,
    ResetRequest,
    TurnEnded,
)
from protocol.display import format_args


@handles(AskRequest)
async def ask(svc: QueryDeps, identity: bytes, req: AskRequest) -> None:
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
    svc: QueryDeps,
    out: Emitter,
    text: str,
    req: AskRequest,
    speculative_method: AcceptMethod,
    via_accept: bool = False,
    index: int = 0,
) -> None:
    """Submit ``text``: a speculation if one predicted it, else a normal turn. From an
    accept (``via_accept``) the branch of rank ``index``; from a typed prompt the branch
    it equals (``acceptTypedPrompt``; method ``typed``), else the top one if the text is
    exactly its suggestion."""
    started = time.monotonic()
    chat = svc.chat
    waiting_on = chat.pending_approval()
    if waiting_on is not None:
        # Never silence: the running turn holds the chat until someone answers it.
        timeout_s = svc.settings.approval_timeout_s
        await out.send(
            ErrorReply(
                out.req_id,
                "busy",
                f"Another turn is waiting for approval of {waiting_on.name} "
                f"({format_args(waiting_on)}); answer it where it was asked or press Ctrl-C "
                f"there. Unanswered, it counts as a no after {timeout_s} s.",
            )
        )
        return
    if chat.busy:
        await out.notice("Another turn is running; this one starts when it ends.")
    manager = svc.speculation
    manager.cancel_generation()
    rank: int | None = None
    method = speculative_method
    wait = False  # a prompt sent (not Tab) waits for a running speculation to finish
    if via_accept:
        rank = index
    elif (typed := manager.typed_match(text)) is not None:
        # A line Enter filled and sent unchanged is an Enter accept; one typed out, typed.
        rank, method, wait = typed.rank, ("enter" if req.filled else "typed"), True
        spec = typed.speculation
        state = "completed" if spec is None or spec.status == "completed" else "still running"
        waits = "" if state == "completed" else ", waiting for it to finish"
        how = "Sent the suggestion" if req.filled else "You typed a predicted prompt"
        await out.notice(f"{how}: using its speculation ({state}{waits}).")
    elif manager.matches(text):
        rank = 0
    if rank is not None:
        try:
            saved = await manager.accept(method, out, index=rank, wait=wait)
        except Debounced:
            await out.send(
                TurnEnded(out.req_id, "debounced", "Accept pressed twice; ignored the second.")
            )
            return
        except AcceptCancelled:
            await out.send(
                TurnEnded(
                    out.req_id, "aborted", "The turn was cancelled; its speculation was stopped.",
                    False, time.monotonic() - started,
                )
            )
            return
        except AcceptFallback as why:
            await out.notice(f"Running it as a normal turn: {why}.")
        else:
            await out.send(
                TurnEnded(
                    out.req_id, "accepted", f"saved {saved:.2f}s", True, time.monotonic() - started
                )
            )
            return
    else:
        current = manager.current
        spec = current.speculation if current is not None else None
        status = spec.status if spec is not None else None
        await manager.dismiss("user typed something else")
        if current is not None and status in ("running", "completed"):
            # Say it, as the demo does: work done ahead of the person was thrown away.
            done = "still running" if status == "running" else "completed"
            await out.notice(
                f"You typed something else: stopped the speculation of “{current.text}” "
                f"({done}); its worker was killed and its overlay removed."
            )
    mode = req.approval_mode or chat.approval_mode
    result = await chat.run_turn(
        out,
        text,
        mode,
        req.can_confirm,
        client_pid=req.client_pid,
        from_accept=via_accept,
    )
    # Before the turn's end reaches the client: a `suggestion` sent right after `ask`
    # must find the generation already under way (pending), not "no suggestion".
    manager.after_turn(result.reason, mode)
    await out.send(
        TurnEnded(out.req_id, result.reason, result.message, False, time.monotonic() - started)
    )


@handles(CancelRequest)
async def cancel(svc: SessionDeps, identity: bytes, req: CancelRequest) -> None:
    # The turn, or a typed prompt still waiting for the speculation it will use.
    cancelled = svc.chat.cancel(req.ask_req_id) or svc.speculation.cancel_accept(req.ask_req_id)
    await svc.send(identity, OkReply(req.req_id, "cancelled" if cancelled else "nothing to cancel"))


@handles(ApprovalAnswer)
async def approval_answer(svc: ChatReplies, identity: bytes, req: ApprovalAnswer) -> None:
    if not svc.chat.answer_approval(req.ask_req_id, req.call_id, req.approved):
        await svc.send(
            identity,
            ErrorReply(req.req_id, "not_found", "No tool call is waiting for that answer."),
        )
        return
    await svc.send(identity, OkReply(req.req_id))


@handles(CompactRequest)
async def compact(svc: QueryDeps, identity: bytes, req: CompactRequest) -> None:
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
async def reset(svc: SessionDeps, identity: bytes, req: ResetRequest) -> None:
    svc.speculation.cancel_generation()
    await svc.speculation.dismiss("reset")
    svc.chat.reset()
    svc.speculation.new_session()
    await svc.send(identity, OkReply(req.req_id, f"new session {svc.chat.session_id}"))
