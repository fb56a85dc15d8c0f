"""``specrun debug kill-worker``: SIGKILL a worker (stress tests use it)."""

from __future__ import annotations

import os
import random
from typing import TYPE_CHECKING

from coordinator.commands.declaration import Args, Argument, Command, Flag
from protocol.wire.control import ErrorReply, KillWorkerRequest, OkReply, WorkerState

if TYPE_CHECKING:
    from coordinator.commands.seam import Client, Service

# A worker the pool is already stopping is no target for a random kill (its death would
# change nothing, and a stress test would count a kill that did not happen).
GONE = (WorkerState.STOPPING, WorkerState.DEAD)


async def serve(service: Service, identity: bytes, req: KillWorkerRequest) -> None:
    workers = service.workers()
    if req.pid is None:
        alive = [w.pid for w in workers if w.state not in GONE]
        pid = random.choice(alive) if alive else None
        what = "no workers are running"
    else:
        pid = req.pid if any(w.pid == req.pid for w in workers) else None
        what = f"{req.pid} is not a worker of this service"
    if pid is None:
        problem = f"Nothing to kill: {what}."
        await service.send(identity, ErrorReply(req.req_id, "not_found", problem))
        return
    os.kill(pid, 9)
    await service.send(identity, OkReply(req.req_id, f"sent SIGKILL to worker {pid}"))


def run(client: Client, args: Args) -> None:
    if args["pid"] is None and not args["pick_random"]:
        client.usage_error("give a worker PID or --random")
    client.show(client.request(KillWorkerRequest(req_id=client.next_id(), pid=args["pid"])))


COMMAND = Command(
    "kill-worker",
    group="debug",
    request=KillWorkerRequest,
    reply=OkReply,
    serve=serve,
    run=run,
    params=(Argument("pid", kind=int, required=False),
            Flag("--random", "Kill a random worker.", dest="pick_random")),
    help="""SIGKILL a worker process (PID or --random); the pool replaces it.

    \b
    Example:
      specrun debug kill-worker --random
    """,
)
