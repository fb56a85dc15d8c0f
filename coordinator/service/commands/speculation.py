"""suggestion, accept (Tab), typed, reject, stats, diff."""

from __future__ import annotations

from coordinator.service.commands.deps import HandlerDeps
from coordinator.service.commands.registry import handles
from coordinator.service.emitter import Emitter
from coordinator.service.session import Accepted
from protocol.wire.control import (
    AcceptRequest,
    DiffRequest,
    ErrorReply,
    OkReply,
    RejectRequest,
    StatsRequest,
    SuggestionRequest,
    TypedRequest,
)


@handles(SuggestionRequest)
async def suggestion(svc: HandlerDeps, identity: bytes, req: SuggestionRequest) -> None:
    if req.wait_visible or req.wait_settled:
        await svc.speculation.wait_visible(timeout_s=30.0)
    if req.wait_settled:
        await svc.speculation.wait_settled(timeout_s=60.0)
    await svc.send(identity, svc.speculation.suggestion_reply(req.req_id, req.transcript, req.full))


@handles(DiffRequest)
async def diff(svc: HandlerDeps, identity: bytes, req: DiffRequest) -> None:
    reply = await svc.speculation.diff_reply(req.req_id, req.index, req.stat)
    if reply is None:
        which = "the suggestion" if req.index is None else f"the suggestion ranked {req.index}"
        await svc.send(
            identity,
            ErrorReply(
                req.req_id,
                "not_found",
                f"There is no speculation of {which} right now; `specrun suggestion` shows "
                "what there is.",
            ),
        )
        return
    await svc.send(identity, reply)


SHOWN_CHANGED = (
    "The suggestion changed since it was shown: nothing was taken. Look at the one shown "
    "now and take it if you want it."
)


def shown_changed(svc: HandlerDeps, req: AcceptRequest) -> bool:
    """The client said what it showed, and the branch it would take is another now."""
    if req.shown_text is None:
        return False
    current = svc.speculation.current
    return current is None or not current.shows(req.index, req.shown_text, req.shown_speculation)


@handles(AcceptRequest)
async def accept(svc: HandlerDeps, identity: bytes, req: AcceptRequest) -> None:
    # Checked and taken with no wait in between: nothing can change the suggestion here.
    if shown_changed(svc, req):
        await svc.send(identity, ErrorReply(req.req_id, "not_found", SHOWN_CHANGED))
        return
    taken = Accepted(req.method, req.index)
    outcome = await svc.session.submit(Emitter(svc, identity, req.req_id), taken)
    await svc.send(identity, outcome.reply(req.req_id))


@handles(TypedRequest)
async def typed(svc: HandlerDeps, identity: bytes, req: TypedRequest) -> None:
    await svc.speculation.typed(req.text)
    await svc.send(identity, svc.speculation.suggestion_reply(req.req_id))


@handles(RejectRequest)
async def reject(svc: HandlerDeps, identity: bytes, req: RejectRequest) -> None:
    had = svc.speculation.current is not None
    await svc.speculation.dismiss("rejected")
    await svc.send(identity, OkReply(req.req_id, "dismissed" if had else "there was no suggestion"))


@handles(StatsRequest)
async def stats(svc: HandlerDeps, identity: bytes, req: StatsRequest) -> None:
    await svc.send(identity, svc.speculation.stats_reply(req.req_id))
