"""status, stop, workers, debug kill-worker."""

from __future__ import annotations

import os
import random
from typing import TYPE_CHECKING

from protocol.control import (
    ErrorReply,
    KillWorkerRequest,
    OkReply,
    StatusReply,
    StatusRequest,
    StopRequest,
    WorkersReply,
    WorkersRequest,
)

if TYPE_CHECKING:
    from coordinator.service.service import Service


async def status(svc: Service, identity: bytes, req: StatusRequest) -> None:
    chat = svc.chat
    await svc.send(
        identity,
        StatusReply(
            req_id=req.req_id,
            project=str(svc.project_root),
            pid=os.getpid(),
            epoch=svc.epoch,
            uptime_s=round(svc.uptime_s, 3),
            model_endpoint=svc.base_url,
            scripted_model=svc.model_server is not None,
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
        ),
    )


async def stop(svc: Service, identity: bytes, req: StopRequest) -> None:
    await svc.send(identity, OkReply(req.req_id, "stopping"))
    svc.stop_requested.set()


async def workers(svc: Service, identity: bytes, req: WorkersRequest) -> None:
    await svc.send(identity, WorkersReply(req.req_id, tuple(svc.pool.infos())))


async def kill_worker(svc: Service, identity: bytes, req: KillWorkerRequest) -> None:
    handles = svc.pool.handles()
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
