"""subscribe, live_snapshot: the live view of the session (`specrun web`)."""

from __future__ import annotations

from coordinator.service.commands.deps import HandlerDeps
from coordinator.service.commands.registry import handles
from protocol.wire.control import ErrorReply, LiveSnapshotRequest, SubscribeRequest


@handles(SubscribeRequest)
async def subscribe(svc: HandlerDeps, identity: bytes, req: SubscribeRequest) -> None:
    # No reply now: the events are the replies. The subscriber asks for a snapshot next
    # (handled after this one: requests of one client are handled in order).
    try:
        svc.live_hub.subscribe(identity, req.req_id, req.client_pid)
    except ProcessLookupError as exc:
        await svc.send(identity, ErrorReply(req.req_id, "not_found", f"Not subscribed: {exc}."))


@handles(LiveSnapshotRequest)
async def live_snapshot(svc: HandlerDeps, identity: bytes, req: LiveSnapshotRequest) -> None:
    await svc.send(identity, await svc.live.snapshot(req.req_id))
