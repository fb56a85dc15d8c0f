"""status, stop, workers, debug kill-worker."""

from __future__ import annotations

import os
import random

from coordinator.service.commands.deps import HandlerDeps
from coordinator.service.commands.registry import handles
from protocol.text.secret_text import without_password
from protocol.wire.control import (
    ErrorReply,
    KillWorkerRequest,
    OkReply,
    StatusReply,
    StatusRequest,
    StopRequest,
    WorkersReply,
    WorkersRequest,
    WorkerState,
)


def status_reply(svc: HandlerDeps, req_id: int) -> StatusReply:
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


@handles(StatusRequest)
async def status(svc: HandlerDeps, identity: bytes, req: StatusRequest) -> None:
    await svc.send(identity, status_reply(svc, req.req_id))


@handles(StopRequest)
async def stop(svc: HandlerDeps, identity: bytes, req: StopRequest) -> None:
    await svc.send(identity, OkReply(req.req_id, "stopping"))
    svc.stop_requested.set()


@handles(WorkersRequest)
async def workers(svc: HandlerDeps, identity: bytes, req: WorkersRequest) -> None:
    await svc.send(identity, WorkersReply(req.req_id, tuple(svc.pool.infos())))


@handles(KillWorkerRequest)
async def kill_worker(svc: HandlerDeps, identity: bytes, req: KillWorkerRequest) -> None:
    # A worker the pool is already stopping is no target for a random kill (its death
    # would change nothing, and a stress test would count a kill that did not happen).
    gone = (WorkerState.STOPPING, WorkerState.DEAD)
    handles = [h for h in svc.pool.handles() if h.state not in gone]
    if req.pid is None:
        handle = random.choice(handles) if handles else None
    else:
        handle = svc.pool.find(req.pid)
    if handle is None:
        what = (
            "no workers are running"
            if req.pid is None
            else f"{req.pid} is not a worker of this service"
        )
        await svc.send(identity, ErrorReply(req.req_id, "not_found", f"Nothing to kill: {what}."))
        return
    os.kill(handle.pid, 9)
    await svc.send(identity, OkReply(req.req_id, f"sent SIGKILL to worker {handle.pid}"))
