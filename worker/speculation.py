"""The speculative loop (design §5 "Loop" and "Boundary mid-turn").

The worker runs the suggested prompt in a fork of the main chat: each model answer's
tool calls go through the tool gate and run against the overlay, until the model
answers without calls (``completed``), a limit is hit (also ``completed``), or the gate
stops a call (``boundary``). Progress is streamed as it happens: one ``ModelText`` per
turn with visible text, ``ToolStarted``/``ToolFinished`` around every call.

What is handed back (``SpeculationOutcome.messages``) starts *after* the suggestion's
user message: on accept the coordinator appends ``Message.user(suggestion)`` itself,
then these. The message limit counts the suggestion's message too (it is part of the
speculated conversation the model sees).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, cast

import msgspec

from overlay import Overlay
from protocol.model import ChatRequest, ModelClient
from protocol.model.tokens import estimate_messages
from protocol.model.tool_result_fit import fit_tool_result, tool_result_tokens
from protocol.rules.tools import SHELL_TOOL
from protocol.wire.approval import ApprovalMode
from protocol.wire.boundary import BoundaryReason
from protocol.wire.chat import Message, ToolCall, ToolResult
from protocol.wire.seams import NO_SEAMS, WorkerSeams
from protocol.wire.work import (
    Boundary,
    Completed,
    Containment,
    ModelText,
    OriginalFile,
    RunSpeculation,
    SpeculationOutcome,
    ToolFinished,
    ToolStarted,
    WorkerEvent,
    WrittenFile,
)
from worker.boundary import SpeculatedConversation
from worker.fork import ForkedChat
from worker.gate import GateDecision, evaluate
from worker.shell.runner import ShellResult
from worker.tools import OverlayAccess, ToolContext, ToolStop, execute, get_tool

ReadOnlyRunner = Callable[[str, str | Path, float, int], ShellResult]

log = logging.getLogger("specrun.worker.speculation")

Emit = Callable[[WorkerEvent], Awaitable[None]]
Status = Literal["completed", "boundary"]
WALL_CLOCK = BoundaryReason("limit", "wall_clock")
CONTEXT_WINDOW = BoundaryReason("limit", "context_window")



@dataclass(frozen=True, slots=True)
class LoopEnd:
    """How a loop ended. ``stop`` says why a completed loop stopped (``answered``,
    ``empty``, ``max_turns``, ``max_messages``); for a boundary it is the boundary's reason."""

    status: Status
    stop: str | BoundaryReason
    conversation: SpeculatedConversation


class Toolbox:
    """The gate and the tools as the loop sees them, bound to one overlay.

    ``seams``: what a test built differently (``protocol.wire.seams``). Its
    ``ungated_command`` is the backstop probe: a ``run_shell_command`` call with exactly
    this command skips the gate and runs with the full shell, so a test can prove the
    kernel backstop stops what the gate would have.
    """

    def __init__(
        self,
        overlay: Overlay,
        approval_mode: ApprovalMode,
        *,
        shell_timeout_s: float = 30.0,
        seams: WorkerSeams = NO_SEAMS,
        read_only_runner: ReadOnlyRunner | None = None,
        captured_runner: ReadOnlyRunner | None = None,
        containment: Containment | None = None,
    ) -> None:
        self.overlay = overlay
        self._told: tuple[frozenset[str], frozenset[str]] = (frozenset(), frozenset())
        self.approval_mode = approval_mode
        self.containment = containment or Containment()
        self.context = ToolContext(
            access=OverlayAccess(
                overlay,
                quota_bytes=self.containment.overlay_quota_bytes,
                quota_files=self.containment.overlay_quota_files,
                private=self.containment.private_paths,
            ),
            shell_mode="read_only",
            shell_timeout_s=shell_timeout_s,
            shell_max_timeout_s=shell_timeout_s,
            read_only_runner=read_only_runner,
            captured_runner=captured_runner,
        )
        self._seams = seams
        self._ungated = seams.ungated_command or None

    def _is_probe(self, call: ToolCall) -> bool:
        return (
            self._ungated is not None
            and call.name == SHELL_TOOL
            and call.args().get("command") == self._ungated
        )

    def decide(self, call: ToolCall) -> GateDecision:
        if self._is_probe(call):
            return GateDecision(action="allow", reason="test_ungated_shell", args=call.args())
        return evaluate(
            call.name,
            call.args(),
            self.approval_mode,
            self.overlay,
            sandboxed_shell=self.context.captured_runner is not None,
            protected_paths=self.containment.protected_paths,
            private_paths=self.containment.private_paths,
            runs_later_paths=(
                self.containment.runs_later_paths
                if self.containment.runs_later_boundary
                else None
            ),
            seams=self._seams,
        )

    def files_if_changed(self) -> dict[str, WrittenFile] | None:
        """The overlay's entries when the set of files written or deleted changed since the
        last time they were told, else None (a rewrite of a file already written is not
        news: the coordinator reads the content itself)."""
        keys = (frozenset(self.overlay.written_files()), frozenset(self.overlay.deleted_files()))
        if keys == self._told:
            return None
        self._told = keys
        return written_files(self.overlay)

    def known(self, name: str) -> bool:
        return get_tool(name) is not None

    async def execute(self, call: ToolCall, action: str = "allow") -> ToolResult:
        if self._is_probe(call):
            return await execute(call, dataclasses.replace(self.context, shell_mode="full"))
        if action == "sandbox":
            return await execute(call, dataclasses.replace(self.context, shell_mode="captured"))
        return await execute(call, self.context)


async def run_loop(
    job: RunSpeculation,
    client: ModelClient,
    tools: Toolbox,
    emit: Emit,
    *,
    deadline: float | None = None,
) -> LoopEnd:
    """The speculative loop, top to bottom. Raises ``ModelError`` when a request fails.
    At ``deadline`` (monotonic; by default the job's wall-clock limit from now) it ends at
    the boundary ``limit:wall_clock`` with what it has so far."""
    chat = ForkedChat.from_snapshot(job.snapshot, job.model)
    spec = SpeculatedConversation(job.suggestion)
    limits = job.limits
    if deadline is None:
        deadline = time.monotonic() + limits.wall_clock_s
    for turn in range(limits.max_turns):
        if len(spec) >= limits.max_messages:
            return LoopEnd("completed", "max_messages", spec)
        left = deadline - time.monotonic()
        if left <= 0:
            return LoopEnd("boundary", WALL_CLOCK, spec)
        if not fits(job, spec):
            # A request the provider would refuse: stop here, keeping what was done; the
            # main chat, which can compact, takes the turn on from this point at Tab.
            return LoopEnd("boundary", CONTEXT_WINDOW, spec)
        try:
            request = chat.request(spec.messages, "speculation")
            reply = await asyncio.wait_for(ask(client, request, job, turn, emit), left)
        except ModelRefused:
            # Nothing to show at Tab: the user's own turn will get the model's answer.
            return LoopEnd("boundary", BoundaryReason("refusal"), spec)
        except TimeoutError:
            return LoopEnd("boundary", WALL_CLOCK, spec)
        spec.turns = turn + 1
        if not reply.text and not reply.tool_calls:
            return LoopEnd("completed", "empty", spec)
        if not reply.tool_calls:
            spec.add(reply)
            return LoopEnd("completed", "answered", spec)
        responses, boundary = await run_calls(reply, tools, job, turn, emit, deadline=deadline)
        spec.count_successes(responses)
        if boundary is not None:
            spec.add_cut(reply, responses)
            return LoopEnd("boundary", boundary, spec)
        spec.add(reply, Message.tool(tuple(responses)))
    return LoopEnd("completed", "max_turns", spec)


def fits(job: RunSpeculation, spec: SpeculatedConversation) -> bool:
    """Whether the next request (the snapshot's, as the main chat estimated it, plus the
    speculation's own messages) stays inside the window; with a window that is only the
    default guess (no estimate given): yes. The window itself, not the main chat's 95 %:
    a speculation cannot compact, and the estimate is more often high than low, so only
    a request the provider would surely refuse is not sent."""
    if job.context_window <= 0 or job.context_tokens <= 0:
        return True
    return job.context_tokens + estimate_messages(spec.messages) <= job.context_window


class ModelRefused(Exception):
    """The model refused the speculated prompt (``refusal`` in its answer)."""


async def ask(
    client: ModelClient, request: ChatRequest, job: RunSpeculation, turn: int, emit: Emit
) -> Message:
    """One streamed model turn: the visible text and the named calls (thinking dropped).
    Its text, if any, is reported once the answer is complete."""
    result = await client.chat(request)
    if result.refusal is not None:
        raise ModelRefused(result.refusal)
    reply = result.message
    text = reply.text if reply.text.strip() else ""
    calls = tuple(c for c in reply.tool_calls if c.name)
    if text:
        await emit(ModelText(job_id=job.job_id, epoch=job.epoch, turn=turn, text=text))
    return Message.assistant(text, calls)


async def run_calls(
    reply: Message,
    tools: Toolbox,
    job: RunSpeculation,
    turn: int,
    emit: Emit,
    *,
    deadline: float | None = None,
) -> tuple[list[ToolResult], BoundaryReason | None]:
    """Run the reply's calls in order until the gate stops one.

    Returns the responses produced (one per call that ran, errors included) and the
    boundary reason, or ``None`` when every call ran.
    """
    responses: list[ToolResult] = []
    for call in reply.tool_calls:
        if deadline is not None and time.monotonic() >= deadline:
            return responses, WALL_CLOCK
        decision = tools.decide(call)
        if decision.action == "boundary":  # its reason is a BoundaryReason (GateDecision)
            return responses, cast(BoundaryReason, decision.reason)
        await emit(
            ToolStarted(
                job_id=job.job_id, epoch=job.epoch, turn=turn, call=call, decision=decision.action
            )
        )
        try:
            result = await run_one(tools, rewritten(call, decision), decision.action)
        except ToolStop as stop:
            return responses, stop.reason
        if job.context_window > 0:
            result = fit_tool_result(result, tool_result_tokens(job.context_window))
        responses.append(result)
        files = tools.files_if_changed()
        finished = ToolFinished(job.job_id, job.epoch, turn, result, written=files)
        await emit(finished)
    return responses, None





def rewritten(call: ToolCall, decision: GateDecision) -> ToolCall:
    """The call to execute: the gate's (possibly rewritten) arguments, same id and name.
    The conversation keeps the original call, so overlay paths never reach the history."""
    if decision.args == call.args():
        return call
    return ToolCall(call.id, call.name, msgspec.json.encode(decision.args).decode())


async def run_one(tools: Toolbox, call: ToolCall, action: str = "allow") -> ToolResult:
    """Execute without confirmation: unknown tool, exception and success all become a
    response for ``call``; ``ToolStop`` (a limit, the quota, a missing sandbox layer)
    propagates, to end the speculation at a boundary."""
    if not tools.known(call.name):
        return ToolResult(call.id, call.name, error=f"Tool '{call.name}' not found")
    try:
        result = await tools.execute(call, action)
    except ToolStop:
        raise
    except Exception as exc:
        log.info("tool %s raised: %r", call.name, exc)
        return ToolResult(call.id, call.name, error=str(exc) or type(exc).__name__)
    return ToolResult(call.id, call.name, output=result.output, error=result.error)


def written_files(overlay: Overlay) -> dict[str, WrittenFile]:
    """The overlay's entries as the coordinator is told them: every file written (with the
    real file's fingerprint at copy-up), every file deleted and every symlink left."""
    fingerprints = overlay.fingerprints()
    deleted = set(overlay.deleted_files())
    by_command = overlay.command_output()
    links = overlay.links()
    written: dict[str, WrittenFile] = {}
    paths = {**overlay.written_files(), **{rel: None for rel in (*deleted, *links)}}
    for rel, path in paths.items():
        if path is None:  # a deletion or a link: its overlay path, where nothing is
            path = Path(overlay.overlay_dir, rel)
        fp = fingerprints.get(rel)
        original = OriginalFile(fp.size, fp.mtime_ns, fp.sha256) if fp is not None else None
        written[rel] = WrittenFile(
            overlay_path=str(path),
            original=original,
            deleted=rel in deleted,
            by_command=rel in by_command and rel not in deleted,
            link=links.get(rel),
        )
    return written


def outcome(end: LoopEnd, overlay: Overlay) -> SpeculationOutcome:
    """The outcome handed to the coordinator, with the overlay's written files."""
    spec = end.conversation
    return SpeculationOutcome(
        messages=spec.speculated,
        written_files=written_files(overlay),
        tool_use_count=spec.tool_use_count,
        turns=spec.turns,
    )


def final_event(job: RunSpeculation, end: LoopEnd, overlay: Overlay) -> Completed | Boundary:
    result = outcome(end, overlay)
    if isinstance(end.stop, BoundaryReason):
        return Boundary(job_id=job.job_id, epoch=job.epoch, reason=end.stop, outcome=result)
    return Completed(job_id=job.job_id, epoch=job.epoch, outcome=result)
