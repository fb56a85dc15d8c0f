"""The tool calls of one main-chat answer, run under the approval mode: refused, asked
about, or run on a pool worker, each result cut to fit the context window."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable

from coordinator.service.chat.approvals import Answer, ApprovalLost, Approvals
from coordinator.service.chat.context_meter import ContextMeter
from coordinator.service.chat.protected_writes import ProtectedWrites
from coordinator.service.chat.tool_exec import (
    HIDDEN_NAME_REASON,
    ToolExecutor,
    hidden_name_reason,
    shell_mode,
    write_policy,
)
from coordinator.service.emitter import Emitter
from protocol.model.tool_result_fit import fit_tool_result
from protocol.rules.tools import SHELL_TOOL, WRITE_TOOLS
from protocol.wire.approval import ApprovalMode
from protocol.wire.chat import ToolCall, ToolResult


class ChatToolCalls:
    """Runs the main chat's tool calls on ``executor``, asking ``approvals`` where the
    approval mode wants a person's yes."""

    def __init__(
        self,
        executor: ToolExecutor,
        approvals: Approvals,
        context: ContextMeter,
        guard: ProtectedWrites | None = None,
    ):
        self.executor = executor
        self.approvals = approvals
        self.context = context
        self.guard = guard or ProtectedWrites(os.path.realpath(executor.project_root))
        self.from_accept = False  # the running turn is an accept's fallback (no flags)
        # Called before a write tool runs (undo keeps the file's state first).
        self.before_write: Callable[[ToolCall], Awaitable[None]] | None = None

    async def run_all(
        self, out: Emitter, calls: tuple[ToolCall, ...], mode: ApprovalMode, can_confirm: bool
    ) -> tuple[list[ToolResult], str | None]:
        """A result for every call, in order, and why the turn must end, if it must: an
        approval question was lost. The history stays valid then: the calls that ran keep
        their results, the rest are answered as not run."""
        results: list[ToolResult] = []
        try:
            for call in calls:
                results.append(await self.run(out, call, mode, can_confirm))
        except ApprovalLost as lost:
            why = str(lost)
            ran = {r.call_id for r in results}
            results += [
                ToolResult(c.id, c.name, error=f"not run: {why}") for c in calls if c.id not in ran
            ]
            return results, why
        return results, None

    async def run(
        self, out: Emitter, call: ToolCall, mode: ApprovalMode, can_confirm: bool
    ) -> ToolResult:
        policy = write_policy(call, mode)
        if policy == "refuse":
            return await self._refused(out, call, f"{call.name} is not allowed in plan mode.")
        # Asked whatever the mode (yolo too): a name that hides what it is, or a file that
        # a later unsandboxed run executes (protected_writes). Such a yes is never kept.
        # A shell command's parse (bashlex, pure Python) runs off the event loop: a long
        # command must not stall the service's other clients.
        always = hidden_name_reason(call) or (
            await asyncio.to_thread(self.guard.reason, call) if call.name == SHELL_TOOL
            else self.guard.reason(call))
        if always and mode is ApprovalMode.PLAN and call.name == SHELL_TOOL:
            return await self._refused(out, call, "Only read-only shell commands run in plan mode.")
        if policy == "ask" or always:
            answer = await self._confirm(
                out, call, always or f"{call.name} changes files", can_confirm,
                rememberable=not always,
            )
            if not answer.approved:
                return await self._refused(out, call, self._refusal_text(
                    can_confirm, call, always or "", bool(always), answer.reason))
        await out.tool(call, "running")
        if self.before_write is not None and call.name in WRITE_TOOLS:
            await self.before_write(call)
        # A shell command the coordinator found writing a protected path was asked about
        # above: it runs on that yes, with what it names left writable by the backstop.
        shell_protected = bool(always) and call.name == SHELL_TOOL
        outcome = await self.executor.run(
            call, "full" if shell_protected else shell_mode(call, mode),
            protected_confirmed=shell_protected)
        confirmed, asked = shell_protected, 0
        # At most two questions: the mode's (a kept yes may answer it), then, if the
        # command writes a protected path, that one (every mode, never kept). A
        # protected write found first is the only question.
        while (outcome.needs_approval is not None and not confirmed
               and (asked == 0 or outcome.always_asks)):
            asked += 1
            if mode is ApprovalMode.PLAN and call.name == SHELL_TOOL:
                return await self._refused(
                    out, call, "Only read-only shell commands run in plan mode."
                )
            confirmed = outcome.always_asks
            answer = await self._confirm(out, call, outcome.needs_approval, can_confirm,
                                         rememberable=not outcome.always_asks)
            if not answer.approved:
                return await self._refused(
                    out, call,
                    self._refusal_text(can_confirm, call, outcome.needs_approval,
                                      always=outcome.always_asks,
                                      declined_because=answer.reason),
                )
            outcome = await self.executor.run(call, "full", protected_confirmed=confirmed)
        result = self._fit(
            ToolResult(call.id, call.name, outcome.result.output, outcome.result.error)
        )
        # a command that ran and exited non-zero is a failure to show, not a success
        await out.tool(
            call, "error" if result.failed else "success", result.error or result.output or "",
            result.exit_code,
        )
        return result

    async def _confirm(self, out: Emitter, call: ToolCall, reason: str, can_confirm: bool,
                       rememberable: bool = True) -> Answer:
        if not can_confirm:
            return Answer(False)
        return await self.approvals.ask(out, call, reason, rememberable)

    async def _refused(self, out: Emitter, call: ToolCall, why: str) -> ToolResult:
        await out.tool(call, "refused", why)
        return ToolResult(call.id, call.name, error=why)

    def _refusal_text(
        self, can_confirm: bool, call: ToolCall, why: str = "", always: bool = False,
        declined_because: str = "",
    ) -> str:
        """Why a call was not run, naming the one approval mode that allows exactly this
        call (file writes: auto-edit; shell, reads outside the project: yolo) and saying
        where it can be given; a person's no with the reason they gave."""
        if can_confirm:
            if declined_because:
                return f"The user declined this tool call, saying: {declined_because}"
            return "The user declined this tool call."
        needed = "auto-edit" if call.name in WRITE_TOOLS else "yolo"
        if always or why == HIDDEN_NAME_REASON:  # no mode allows it: only a yes at a terminal
            return (f"This call needs the user's approval ({why}) and no terminal can ask; "
                    "`specrun chat` or `specrun ask` on a terminal asks.")
        if self.from_accept:
            where = (
                f"`specrun accept` takes no approval mode: to allow it, ask the same prompt "
                f'with `specrun ask "<prompt>" --approval-mode {needed}`, or start the '
                f"service with --approval-mode {needed}"
            )
        else:
            where = f"rerun with --approval-mode {needed} to allow it"
        because = f" ({why})" if why else ""
        return f"This call needs the user's approval{because} and no terminal can ask; {where}."

    def _fit(self, result: ToolResult) -> ToolResult:
        """One tool result may take at most a quarter of the window: cut with a note."""
        return fit_tool_result(result, self.context.tool_result_tokens)
