"""The worker process: connect, say hello, beat, run jobs until told to stop.

Entry point for the coordinator's pool (``worker_entry``). A worker runs any
number of tool jobs, but at most one speculation: a speculation may confine the
process (Landlock cannot be undone), so the worker exits afterwards and the pool
starts a fresh one.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
from typing import TYPE_CHECKING

import zmq
import zmq.asyncio

from overlay.kernel import libc
from protocol.wire import codec
from protocol.wire.endpoints import make_dealer
from protocol.wire.seams import NO_SEAMS, WorkerSeams
from protocol.wire.work import (
    Failed,
    Heartbeat,
    Hello,
    RunSpeculation,
    RunTool,
    Shutdown,
)
from worker.lifecycle import detach_session, die_with_parent
from worker.outbox import Outbox

if TYPE_CHECKING:
    from worker.contain.helper import SandboxHelper

log = logging.getLogger("specrun.worker")

_FLUSH_MS = 2000


def worker_entry(
    endpoint: str,
    epoch: int,
    coordinator_pid: int,
    heartbeat_s: float,
    seams: WorkerSeams = NO_SEAMS,
) -> None:
    """``seams``: what a test built into this worker (``protocol.wire.seams``); the pool
    passes its own, which are ``NO_SEAMS`` unless a test constructed the service."""
    detach_session()
    die_with_parent()
    # The coordinator may have died between our fork and the prctl above.
    if libc.pidfd_open(coordinator_pid) is None:
        os._exit(0)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    if seams.any_set:
        log.warning("worker %d built by a test: %s", os.getpid(), seams.describe())
    # The sandbox helper first: forking is safe only while we are single-threaded (no
    # event loop, no ZeroMQ threads yet), and it must not inherit our later confinement.
    from worker.contain import preflight
    from worker.contain.helper import SandboxHelper

    preflight.report()  # inherited from the fork server; probes here only otherwise
    helper = SandboxHelper.fork(seams)
    try:
        asyncio.run(_serve(endpoint, epoch, coordinator_pid, heartbeat_s, helper, seams))
    except BaseException:
        log.exception("worker %d stopped by an error", os.getpid())
        sys.stderr.flush()
    finally:
        helper.close()
        # Skip interpreter teardown: nothing to flush, and it keeps exit fast.
        os._exit(0)


async def _serve(
    endpoint: str,
    epoch: int,
    coordinator_pid: int,
    heartbeat_s: float,
    helper: SandboxHelper,
    seams: WorkerSeams,
) -> None:
    from worker.contain import preflight
    from worker.contain.landlock import sandbox_kind
    from worker.jobs import run_speculation, run_tool
    from worker.tools import TOOL_SPECS

    pid = os.getpid()
    ctx = zmq.asyncio.Context()
    sock = make_dealer(ctx, endpoint, identity=f"w{pid}".encode())
    outbox = Outbox(sock)
    jobs = codec.coordinator_to_worker()
    stop = asyncio.Event()
    current: dict[str, str | None] = {"job": None}

    loop = asyncio.get_running_loop()
    pidfd = libc.pidfd_open(coordinator_pid)
    if pidfd is None:
        return
    loop.add_reader(pidfd, stop.set)

    async def beat() -> None:
        while True:
            await outbox.send(Heartbeat(pid=pid, epoch=epoch, job_id=current["job"]))
            await asyncio.sleep(heartbeat_s)

    async def receive() -> None:
        while True:
            frame = await sock.recv()
            try:
                job = jobs.decode(frame)
            except codec.ProtocolError as exc:
                log.warning("dropping %s", exc)
                continue
            if job.epoch != epoch or isinstance(job, Shutdown):
                if isinstance(job, Shutdown):
                    return
                continue
            current["job"] = job.job_id
            try:
                if isinstance(job, RunTool):
                    await run_tool(job, outbox, helper, seams)
                elif isinstance(job, RunSpeculation):
                    await run_speculation(job, outbox, helper, seams)
                    return  # one speculation per worker process
            except Exception as exc:  # a bug in a job must still answer the coordinator
                log.exception("job %s failed", job.job_id)
                await outbox.send(Failed(job_id=job.job_id, epoch=epoch, error=str(exc)))
            finally:
                current["job"] = None

    hello = Hello(
        pid=pid,
        epoch=epoch,
        sandbox=sandbox_kind(),
        tools=TOOL_SPECS,
        # The fork server's report is of a helper without seams: a broken layer shows
        # only in this worker's own helper.
        containment=helper.probe() if seams.broken_layer else preflight.report(helper),
    )
    await outbox.send(hello)
    beater = asyncio.create_task(beat())
    receiver = asyncio.create_task(receive())
    stopper = asyncio.create_task(stop.wait())
    await asyncio.wait({receiver, stopper}, return_when=asyncio.FIRST_COMPLETED)
    for task in (beater, receiver, stopper):
        task.cancel()
    with contextlib.suppress(BaseException):
        await asyncio.gather(beater, receiver, stopper, return_exceptions=True)
    # The last events (a pipelined suggestion) may still sit in the socket's queue: give
    # them a moment to leave, unless the coordinator is gone and nobody will read them.
    sock.close(linger=0 if stop.is_set() else _FLUSH_MS)
    ctx.term()
