"""suggestion, accept (Tab), typed, reject, stats, diff."""

from __future__ import annotations

from coordinator.service.commands.chat import run_query
from coordinator.service.commands.deps import QueryDeps, SpeculationReplies
from coordinator.service.commands.registry import handles
from coordinator.service.emitter import Emitter
from protocol.control import (
    AcceptRequest,
    AskRequest,
    DiffRequest,
    ErrorReply,
    OkReply,
    RejectRequest,
    StatsRequest,
    SuggestionRequest,
    TypedRequest,
)


@handles(SuggestionRequest)
async def suggestion(svc: SpeculationReplies, identity: bytes, req: SuggestionRequest) -> None:
    if req.wait_visible or req.wait_settled:
        await svc.speculation.wait_visible(timeout_s=30.0)
    if req.wait_settled:
        await svc.speculation.wait_settled(timeout_s=60.0)
    await svc.send(identity, svc.speculation.suggestion_reply(req.req_id, req.transcript))


@handles(DiffRequest)
async def diff(svc: SpeculationReplies, identity: bytes, req: DiffRequest) -> None:
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


@handles(AcceptRequest)
async def accept(svc: QueryDeps, identity: bytes, req: AcceptRequest) -> None:
    current = svc.speculation.current
    if current is None:
        await svc.send(
            identity,
            ErrorReply(req.req_id, "not_found", "There is no suggestion to accept right now."),
        )
        return
    branch = current.branches[0] if req.index is None and current.branches else None
    if req.index is not None:
        branch = current.branch(req.index)
    if branch is None:
        ranks = ", ".join(str(b.rank) for b in current.branches)
        await svc.send(
            identity,
            ErrorReply(
                req.req_id,
                "not_found",
                f"There is no suggestion ranked {req.index} right now "
                f"(live ranks: {ranks or 'none'}); "
                "`specrun suggestion` lists them.",
            ),
        )
        return
    out = Emitter(svc, identity, req.req_id)
    ask = AskRequest(req_id=req.req_id, text=branch.text, accept_method=req.method)
    await run_query(
        svc,
        out,
        branch.text,
        ask,
        speculative_method=req.method,
        via_accept=True,
        index=branch.rank,
    )


@handles(TypedRequest)
async def typed(svc: SpeculationReplies, identity: bytes, req: TypedRequest) -> None:
    await svc.speculation.typed(req.text)
    await svc.send(identity, svc.speculation.suggestion_reply(req.req_id))


@handles(RejectRequest)
async def reject(svc: SpeculationReplies, identity: bytes, req: RejectRequest) -> None:
    had = svc.speculation.current is not None
    await svc.speculation.dismiss("rejected")
    await svc.send(identity, OkReply(req.req_id, "dismissed" if had else "there was no suggestion"))


@handles(StatsRequest)
async def stats(svc: SpeculationReplies, identity: bytes, req: StatsRequest) -> None:
    await svc.send(identity, svc.speculation.stats_reply(req.req_id))
