"""Running the main chat's tool calls in worker processes.

The coordinator never runs a tool itself: each call is a ``RunTool`` job on a
pool worker (no overlay), so a slow tool never blocks the event loop and
cancelling a turn is a kill. Approval policy lives here too: which calls the
user must confirm in each approval mode.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from dataclasses import dataclass

from coordinator.service.pool import WorkerHandle, WorkerStartError
from coordinator.service.ports import WorkerJobs
from protocol.rules.tools import WRITE_PATH_ARGUMENTS, WRITE_TOOLS
from protocol.text.inert_text import find_hidden
from protocol.wire.approval import ApprovalMode
from protocol.wire.chat import ToolCall, ToolResult
from protocol.wire.work import (
    CommandLimits,
    Failed,
    RunTool,
    ShellPermission,
    ToolDone,
    WorkerEvent,
    WriteGuard,
)

log = logging.getLogger("specrun.tools")


@dataclass(frozen=True)
class ToolOutcome:
    result: ToolResult
    needs_approval: str | None = None
    always_asks: bool = False  # about a protected write: asked in every mode, never kept


def write_policy(call: ToolCall, mode: ApprovalMode) -> str:
    """For a write tool: ``run``, ``ask`` or ``refuse`` (plan mode). Other tools: ``run``.

    A write to a file name holding a control, bidi or invisible character always asks
    (a speculation stops at it, ``bad_path``): such a name shows as something else in
    every listing, so it is created only on a yes to the question, which shows it
    escaped."""
    if call.name not in WRITE_TOOLS:
        return "run"
    if mode is ApprovalMode.PLAN:
        return "refuse"
    if hidden_name_reason(call) is not None:
        return "ask"
    return "run" if mode.allows_unconfirmed_edits else "ask"


HIDDEN_NAME_REASON = "its file name holds a control, bidi or invisible character"


def hidden_name_reason(call: ToolCall) -> str | None:
    """Why a write must ask whatever the mode (:data:`HIDDEN_NAME_REASON`), or None."""
    if call.name not in WRITE_TOOLS:
        return None
    args = call.args()
    keys = WRITE_PATH_ARGUMENTS.get(call.name, ())
    if any(isinstance(args.get(key), str) and find_hidden(args[key]) is not None
           for key in keys):
        return HIDDEN_NAME_REASON
    return None


def shell_mode(call: ToolCall, mode: ApprovalMode) -> ShellPermission:
    """``full`` when the mode already allows anything (yolo), else ``read_only``: the
    worker runs a command only if it is provably read-only, and a read only inside the
    project, and otherwise asks back."""
    return "full" if mode is ApprovalMode.YOLO else "read_only"


class ToolExecutor:
    def __init__(
        self,
        pool: WorkerJobs,
        project_root: str,
        limits: CommandLimits | None = None,
        *,
        private_paths: tuple[str, ...] = (),
        write_guard: WriteGuard | None = None,
    ) -> None:
        self.pool = pool
        self.write_guard = write_guard
        self.project_root = project_root
        self.limits = limits or CommandLimits()
        self.private_paths = private_paths
        self._ids = itertools.count(1)
        self._pending: dict[str, tuple[WorkerHandle, asyncio.Future[ToolOutcome]]] = {}

    async def run(
        self, call: ToolCall, shell: ShellPermission, timeout_s: float = 120.0,
        protected_confirmed: bool = False,
    ) -> ToolOutcome:
        """``protected_confirmed``: the person said yes to this call's protected write."""
        job_id = f"tool-{next(self._ids)}"
        handle = await self.pool.acquire("tool", job_id)
        future: asyncio.Future[ToolOutcome] = asyncio.get_running_loop().create_future()
        self._pending[job_id] = (handle, future)
        try:
            await self.pool.send(
                handle,
                RunTool(
                    job_id=job_id,
                    epoch=self.pool.epoch,
                    call=call,
                    project_root=self.project_root,
                    shell=shell,
                    timeout_s=timeout_s,
                    limits=self.limits,
                    private_paths=self.private_paths,
                    write_guard=self.write_guard,
                    protected_confirmed=protected_confirmed,
                ),
            )
            outcome = await future
        except asyncio.CancelledError:
            # The turn was aborted: the tool dies with its worker.
            await self.pool.kill(handle, "turn aborted")
            raise
        except WorkerStartError as exc:
            outcome = ToolOutcome(ToolResult(call.id, call.name, error=str(exc)))
        finally:
            self._pending.pop(job_id, None)
        self.pool.release(handle)
        return outcome

    def on_event(self, handle: WorkerHandle, event: WorkerEvent) -> bool:
        """Route a worker event that belongs to a tool job; False if it is not ours."""
        if not isinstance(event, ToolDone | Failed):
            return False
        entry = self._pending.get(event.job_id)
        if entry is None or entry[0] is not handle:
            return False
        future = entry[1]
        if not future.done():
            if isinstance(event, ToolDone):
                future.set_result(
                    ToolOutcome(event.result, event.needs_approval, event.always_asks)
                )
            else:
                future.set_result(
                    ToolOutcome(ToolResult(event.job_id, "", error=f"tool failed: {event.error}"))
                )
        return True

    def on_death(self, handle: WorkerHandle) -> None:
        for job_id, (owner, future) in list(self._pending.items()):
            if owner is handle and not future.done():
                future.set_result(
                    ToolOutcome(
                        ToolResult(
                            job_id, "", error="the worker running this tool died before it finished"
                        )
                    )
                )
