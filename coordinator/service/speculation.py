"""The speculation manager: suggest, speculate in a worker, accept or abort.

After a normal main turn the fast model predicts the next prompt; the
speculation starts on a warm worker at once (in parallel with the 300 ms
display delay). Accept applies the overlay (all-or-nothing, conflict-checked),
then appends the speculated messages to the main history; anything else kills
the worker's process group and removes its overlay. Every worker event is
fenced by speculation id (the pool already fenced the epoch), so a late message
from a killed worker is dropped.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import secrets
import time
from collections.abc import Coroutine, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal, get_args

import overlay
from coordinator.boundary_text import describe_boundary
from coordinator.service.accept_record import PendingAccept, clear_pending, digest, write_pending
from coordinator.service.cost import Budget
from coordinator.service.emitter import Emitter
from coordinator.service.pool import WorkerHandle, WorkerStartError, WorkerState
from coordinator.service.ports import ForkSource, WorkerJobs
from coordinator.service.stats import Stats
from coordinator.service.suggestions import generate_suggestion
from coordinator.service.transcript import ensure_tool_result_pairing, render_transcript
from coordinator.settings import Settings
from protocol.approval import ApprovalMode
from protocol.chat import Message, Usage
from protocol.control import (
    AcceptMethod,
    SkipReason,
    SpeculationInfo,
    SpeculationStatus,
    StatsReply,
    SuggestionReply,
    SuppressReason,
    Transcript,
    TurnEndReason,
)
from protocol.model import ModelClient
from protocol.work import (
    Boundary,
    Completed,
    Failed,
    ModelEndpoint,
    ModelText,
    ModelUsage,
    PipelinedSuggestion,
    RunSpeculation,
    SpeculationOutcome,
    ToolFinished,
    WorkerEvent,
    WrittenFile,
)

log = logging.getLogger("specrun.speculation")

SUGGESTION_DELAY_MS = 300
ACCEPT_DEBOUNCE_MS = 100
PIPELINED_GRACE_S = 1.0
# The moves a speculation's status can make; nothing else changes it (``Speculation.move_to``).
# An abort marks any speculation not yet decided ``aborted`` (SPEC §5 "Abort"), a completed
# or boundary one too: its worker is killed and its overlay removed all the same.
MOVES: Final[dict[SpeculationStatus, frozenset[SpeculationStatus]]] = {
    "running": frozenset({"completed", "boundary", "failed", "aborted"}),
    "completed": frozenset({"accepted", "aborted"}),
    "boundary": frozenset({"aborted"}),
    "failed": frozenset(),
    "aborted": frozenset(),
    "accepted": frozenset(),
}
# Every status but ``running``: the speculative loop is over (``finished`` is set).
TERMINAL: Final = frozenset(get_args(SpeculationStatus)) - {"running"}
# Why a speculation is aborted (the callers of ``SpeculationManager.abort``).
AbortCause = Literal[
    "replaced",  # a new suggestion takes its place
    "user typed something else",
    "rejected",  # `specrun reject`, Esc
    "reset",
    "accepted before completion",  # accepted while running or at a boundary: a normal turn
    "shutdown",
]
# Speculations whose workers may still report tokens: a killed worker's last frames
# can arrive after the speculation was dropped (the pool keeps departed workers briefly).
RECENT_SPECULATIONS = 8


@dataclass(eq=False)
class Speculation:
    id: str
    suggestion: str
    overlay_dir: str = ""
    status: SpeculationStatus = "running"
    started_at: float = field(default_factory=time.monotonic)
    ended_at: float | None = None
    worker: WorkerHandle | None = None
    turns: int = 0
    tool_uses: int = 0
    boundary_reason: str | None = None
    error: str | None = None
    abort_cause: AbortCause | None = None
    outcome: SpeculationOutcome | None = None
    pipelined: str | None = None
    pipelined_done: asyncio.Event = field(default_factory=asyncio.Event)
    finished: asyncio.Event = field(default_factory=asyncio.Event)

    def move_to(self, status: SpeculationStatus) -> bool:
        """Change the status if ``MOVES`` allows it; False (and no change) if not: a late or
        repeated end (an abort after a failure, a second abort) changes nothing."""
        if status not in MOVES[self.status]:
            if status != self.status:
                log.debug("speculation %s stays %s (not %s)", self.id, self.status, status)
            return False
        self.status = status
        self.ended_at = self.ended_at or time.monotonic()
        self.finished.set()
        return True

    @property
    def elapsed_s(self) -> float:
        return (self.ended_at or time.monotonic()) - self.started_at

    def info(self) -> SpeculationInfo:
        files = tuple(self.outcome.written_files) if self.outcome else ()
        return SpeculationInfo(
            id=self.id,
            status=self.status,
            turns=self.turns,
            tool_uses=self.outcome.tool_use_count if self.outcome else self.tool_uses,
            files_written=files,
            boundary_reason=self.boundary_reason,
            elapsed_s=round(self.elapsed_s, 4),
            worker_pid=self.worker.pid if self.worker else None,
            pipelined_suggestion=self.pipelined,
        )


@dataclass(eq=False)
class Suggestion:
    text: str
    created_at: float = field(default_factory=time.monotonic)
    delay_s: float = SUGGESTION_DELAY_MS / 1000
    speculation: Speculation | None = None
    settled: bool = False  # its outcome (accepted / ignored) is recorded
    skipped: SkipReason | None = None  # why it is not speculated

    @property
    def visible(self) -> bool:
        return time.monotonic() - self.created_at >= self.delay_s


class AcceptFallback(Exception):
    """Accept could not use the speculation; the text runs as a normal turn."""


class Debounced(Exception):
    """A second accept within ``ACCEPT_DEBOUNCE_MS`` of the last one: ignored, nothing runs."""


class SpeculationManager:
    """The suggestion after each turn and its speculation. It forks the main chat
    (``ForkSource``), runs speculations on pool workers (``WorkerJobs``), and hands them
    the model endpoint at ``base_url``; its own model requests go through ``model``."""

    def __init__(
        self,
        project_root: Path,
        settings: Settings,
        workers: WorkerJobs,
        chat: ForkSource,
        model: ModelClient,
        *,
        base_url: str,
    ) -> None:
        self.project_root = project_root
        self.settings = settings
        self.workers = workers
        self.chat = chat
        self.model = model
        self.base_url = base_url
        self.stats = Stats()
        self.stats.cost.budget = Budget(
            self.settings.speculation_budget, self.settings.speculation_budget_window
        )
        # The service's own requests (main turns, suggestions, recall) all go through
        # this one client; the workers report theirs as ModelUsage events.
        model.on_usage = self._count_own_usage
        self._recent: dict[str, Speculation] = {}
        self.current: Suggestion | None = None
        self.last_suppressed: SuppressReason | None = None
        self._ids = itertools.count(1)
        self._last_accept = 0.0
        self._tasks: set[asyncio.Task[object]] = set()
        self._generation: asyncio.Task[object] | None = None
        self._accepted: Speculation | None = None  # accepted, its pipelined text pending
        self._moves = 0  # bumped whenever the user submits something
        self._flushing: asyncio.Task[object] | None = None

    # -- suggestions -------------------------------------------------------------

    def after_turn(self, reason: TurnEndReason, mode: ApprovalMode) -> None:
        """A main turn ended; predict the next prompt in the background."""
        if not self.settings.enable_followup_suggestions:
            return
        if reason != "completed" or mode is ApprovalMode.PLAN:
            return
        if self.chat.model_turns() < 2:
            self._suppress("early_conversation")
            return
        self._generation = self._spawn(self._suggest())

    async def _suggest(self) -> None:
        snapshot = self.chat.snapshot
        if snapshot is None:
            self._suppress("no_snapshot")
            return
        result = await generate_suggestion(self.model, snapshot, self.chat.fast_model)
        if result.text is None:
            self._suppress(result.suppressed or "empty")
            return
        await self.offer(result.text, delay_s=SUGGESTION_DELAY_MS / 1000)

    def cancel_generation(self) -> None:
        """The user moved on: a suggestion still being generated for the previous turn
        (or a pipelined one still on its way) must not appear during the next one."""
        self._moves += 1
        if self._generation is not None and not self._generation.done():
            self._generation.cancel()
        self._generation = None

    def _suppress(self, reason: SuppressReason) -> None:
        self.last_suppressed = reason
        self.stats.suppressed[reason] += 1

    async def offer(self, text: str, delay_s: float) -> None:
        """Make ``text`` the current suggestion and start speculating it right away."""
        await self.dismiss("replaced")
        suggestion = Suggestion(text, delay_s=delay_s)
        self.current = suggestion
        self.last_suppressed = None
        self.stats.shown += 1
        if not self.settings.enable_speculation:
            return
        if self.stats.cost.budget_exhausted():
            # Still shown (the person may take it), but not run ahead: nothing more is
            # spent until the window frees tokens or a new session starts.
            suggestion.skipped = "budget"
            self.stats.skipped["budget"] += 1
            return
        suggestion.speculation = await self.start(text)

    @property
    def pending(self) -> bool:
        """A suggestion is on its way: being generated after a turn, or the pipelined one
        of an accepted speculation still being written."""
        generating = self._generation is not None and not self._generation.done()
        accepted = self._accepted
        return generating or (accepted is not None and not accepted.pipelined_done.is_set())

    async def wait_visible(self, timeout_s: float) -> None:
        """For `specrun suggestion --wait`: until a suggestion is visible or generation is over."""
        deadline = time.monotonic() + timeout_s
        if self._generation is not None:
            # asyncio.wait neither raises if the generation is cancelled nor cancels it.
            await asyncio.wait({self._generation}, timeout=timeout_s)
        if self.current is not None and not self.current.visible:
            await asyncio.sleep(max(0.0, min(self.current.delay_s, deadline - time.monotonic())))

    async def wait_settled(self, timeout_s: float) -> None:
        """For `specrun suggestion --settled`: until the current suggestion's speculation is
        no longer running (a Tab then applies it instead of running a normal turn)."""
        current = self.current
        spec = current.speculation if current is not None else None
        if spec is not None:
            await asyncio.wait({asyncio.ensure_future(spec.finished.wait())}, timeout=timeout_s)

    # -- speculation ------------------------------------------------------------

    async def start(self, text: str) -> Speculation | None:
        chat = self.chat
        if chat.snapshot is None:
            log.info("CacheSafeParams not available for speculation")
            return None
        spec = Speculation(id=f"spec-{next(self._ids)}-{secrets.token_hex(3)}", suggestion=text)
        self._recent[spec.id] = spec
        while len(self._recent) > RECENT_SPECULATIONS:
            self._recent.pop(next(iter(self._recent)))
        self._preflush()  # runs beside the speculation; an accept may follow it soon
        try:
            handle = await self.workers.acquire("speculation", spec.id)
        except WorkerStartError as exc:
            spec.error = str(exc)
            spec.move_to("failed")
            self.stats.failed += 1
            return spec
        spec.worker = handle
        spec.overlay_dir = str(overlay.overlay_dir_for(handle.pid, spec.id))
        handle.overlay_dir = spec.overlay_dir
        job = RunSpeculation(
            job_id=spec.id,
            epoch=self.workers.epoch,
            suggestion=text,
            snapshot=chat.snapshot,
            approval_mode=chat.approval_mode,
            model=chat.fast_model,
            project_root=str(self.project_root),
            overlay_dir=spec.overlay_dir,
            endpoint=ModelEndpoint(
                base_url=self.base_url,
                api_key=self.settings.api_key or None,
                cache_sharing=self.settings.enable_cache_sharing,
            ),
            speculate_shell=self.settings.speculate_shell,
            containment=self.settings.containment(),
        )
        try:
            await self.workers.send(handle, job)
        except WorkerStartError as exc:
            spec.error = str(exc)
            await self._end(spec, "failed")
        return spec

    def _spec_for(self, handle: WorkerHandle, job_id: str) -> Speculation | None:
        """The speculation this event is for, if it still matters; None fences it off."""
        current = self.current.speculation if self.current else None
        for spec in (current, self._accepted):
            if spec is not None and spec.id == job_id and spec.worker is handle:
                return spec
        return None

    async def on_worker_event(self, handle: WorkerHandle, event: WorkerEvent) -> None:
        """An event from a speculation's worker (the service routes them here)."""
        if isinstance(event, ModelUsage):
            self._count_worker_usage(handle, event)
            return
        job_id = getattr(event, "job_id", None)
        spec = self._spec_for(handle, job_id) if job_id else None
        if spec is None:
            log.info("dropping a late %s for %s", type(event).__name__, job_id)
            return
        if isinstance(event, ModelText):
            spec.turns = max(spec.turns, event.turn + 1)
        elif isinstance(event, ToolFinished):
            spec.tool_uses += 1 if event.result.ok else 0
        elif isinstance(event, Completed) and spec.status == "running":
            spec.outcome = event.outcome
            spec.turns = event.outcome.turns
            handle.state = WorkerState.STOPPING  # it exits by itself after the pipelined step
            spec.move_to("completed")
            self.stats.completed += 1
            if event.outcome.written_files:
                self._preflush()
        elif isinstance(event, Boundary) and spec.status == "running":
            spec.outcome = event.outcome
            spec.turns = event.outcome.turns
            spec.boundary_reason = event.reason
            handle.state = WorkerState.STOPPING
            spec.move_to("boundary")
            spec.pipelined_done.set()
            self.stats.boundary[event.reason.split(":", 1)[0]] += 1
        elif isinstance(event, PipelinedSuggestion):
            spec.pipelined = event.text
            spec.pipelined_done.set()
        elif isinstance(event, Failed) and spec.status == "running":
            spec.error = event.error
            await self._end(spec, "failed")

    def _count_own_usage(self, purpose: str, usage: Usage) -> None:
        self.stats.cost.count(purpose, usage)

    def _count_worker_usage(self, handle: WorkerHandle, event: ModelUsage) -> None:
        """Tokens are spent whether or not the speculation is still wanted, so a recent
        speculation's usage counts even after it was aborted and its worker killed; the
        fence is the same as for every event: this speculation, from its own worker."""
        spec = self._recent.get(event.job_id)
        if spec is None or spec.worker is not handle:
            log.info("dropping a ModelUsage for %s", event.job_id)
            return
        self.stats.cost.count(event.purpose, event.usage, speculation_id=spec.id)

    async def on_worker_death(self, handle: WorkerHandle) -> None:
        current = self.current.speculation if self.current else None
        spec = next((s for s in (current, self._accepted) if s and s.worker is handle), None)
        if spec is None:
            return
        # A worker exits right after sending its pipelined suggestion; the frame may
        # trail the death notice by a moment, so wait a little before giving up on it.
        asyncio.get_running_loop().call_later(PIPELINED_GRACE_S, spec.pipelined_done.set)
        if spec.status == "running":
            spec.error = "the speculation's worker died"
            await self._end(spec, "failed")

    async def _end(self, spec: Speculation, status: Literal["aborted", "failed"]) -> None:
        """Stop a speculation for good: mark it, kill its worker (if alive), remove its
        overlay. The stats count a speculation stopped while it ran (a completed or boundary
        one was counted when it got there)."""
        was_running = spec.status == "running"
        if spec.move_to(status) and was_running:
            if status == "aborted":
                self.stats.aborted += 1
            else:
                self.stats.failed += 1
        if spec.worker is not None and spec.worker.state is not WorkerState.DEAD:
            why = f"aborted: {spec.abort_cause}" if spec.abort_cause else spec.status
            await self.workers.kill(spec.worker, f"speculation {why}")
        spec.pipelined_done.set()
        if spec.overlay_dir:
            overlay.Overlay(self.project_root, spec.overlay_dir).cleanup()

    async def abort(self, cause: AbortCause) -> None:
        """Idempotent: kill + reap the worker, remove the overlay, status `aborted` with its
        cause (logged, and named in the kill). Nothing to do once it failed or was accepted."""
        spec = self.current.speculation if self.current else None
        if spec is None or "aborted" not in MOVES[spec.status]:
            return
        log.info("aborting speculation %s (%s, was %s)", spec.id, cause, spec.status)
        spec.abort_cause = cause
        await self._end(spec, "aborted")

    async def dismiss(self, reason: AbortCause) -> None:
        """The user did something else: record `ignored`, abort, forget the suggestion."""
        current = self.current
        if current is None:
            return
        if not current.settled:
            current.settled = True
            self.stats.ignored += 1
        await self.abort(reason)
        self.current = None

    # -- accept -----------------------------------------------------------------

    def matches(self, text: str) -> bool:
        return self.current is not None and self.current.text == text.strip()

    async def accept(self, method: AcceptMethod, out: Emitter) -> float:
        """Apply the current completed speculation. Returns seconds saved; raises
        ``AcceptFallback`` (after aborting) when the text must run as a normal turn, and
        ``Debounced`` for a second accept right after the last one."""
        now = time.monotonic()
        if (now - self._last_accept) * 1000 < ACCEPT_DEBOUNCE_MS:
            raise Debounced
        self._last_accept = now
        suggestion = self.current
        if suggestion is None:
            raise AcceptFallback("there is no suggestion to accept")
        suggestion.settled = True
        self.stats.accepted[method] += 1
        spec = suggestion.speculation
        if spec is None or spec.status != "completed" or spec.outcome is None:
            why = "no speculation ran" if spec is None else f"its speculation {_describe(spec)}"
            await self.abort("accepted before completion")
            self.current = None
            raise AcceptFallback(why)
        root = self.project_root
        messages = ensure_tool_result_pairing(list(spec.outcome.messages))
        accepted = [Message.user(suggestion.text), *messages]
        ov = overlay.Overlay(root, spec.overlay_dir)
        try:
            ov = overlay.Overlay.from_record(
                root,
                spec.overlay_dir,
                overlay_record(spec.outcome.written_files),
            )
            # 1. files first (all or nothing), 2.-3. then the history, so a failed apply
            # leaves neither; a crash between the two is settled at the next start from
            # the pending record; 5. the overlay goes in every case.
            await asyncio.to_thread(self._write_pending, ov, accepted)
            await asyncio.to_thread(ov.apply_to_real)
            await self.chat.extend_from_speculation(accepted)
        except overlay.ConflictError as exc:
            self.current = None
            raise AcceptFallback(f"you changed files it also changed ({exc})") from None
        except (overlay.OverlayError, OSError) as exc:
            self.current = None
            raise AcceptFallback(f"its files could not be applied ({exc})") from None
        finally:
            clear_pending(root)
            ov.cleanup()
        spec.move_to("accepted")
        self.stats.cost.accepted(spec.id)
        saved = max(0.0, spec.elapsed_s - (time.monotonic() - now))
        self.stats.time_saved_s.append(saved)
        entries = render_transcript(suggestion.text, messages)
        await out.send(
            Transcript(out.req_id, tuple(entries), tuple(spec.outcome.written_files), saved)
        )
        # The accepted suggestion is used up; its worker may still be writing the
        # pipelined suggestion, which the next Tab will want.
        self.current = None
        self._accepted = spec
        self._spawn(self._continue_pipeline(spec, self._moves))
        return saved

    async def _continue_pipeline(self, spec: Speculation, moves: int) -> None:
        """Tab-Tab-Tab: the pipelined suggestion becomes the next one at once (waiting for
        it if the worker is still writing it), and its speculation starts immediately."""
        await spec.pipelined_done.wait()
        if self._accepted is spec:
            self._accepted = None
        if self._moves != moves or self.current is not None:
            return  # the user moved on meanwhile
        if spec.pipelined and self.settings.enable_followup_suggestions:
            await self.offer(spec.pipelined, delay_s=0.0)

    def _preflush(self) -> None:
        """Write the file system's dirty pages out now, while the person reads the
        suggestion. The accept's durability barrier (syncfs) waits for every dirty page of
        the file system, not only its own: right after a big write (a fresh clone's
        `pip install`, a build) the first Tab took 0.6-1 s instead of ~30 ms. Started with
        each speculation (so it is done by the time Tab can apply anything) and again when
        one completes with files; one flush at a time."""
        if self._flushing is not None and not self._flushing.done():
            return
        self._flushing = self._spawn(asyncio.to_thread(os.sync))

    def _write_pending(self, ov: overlay.Overlay, accepted: list[Message]) -> None:
        files = {rel: digest(path) for rel, path in ov.written_files().items() if path.exists()}
        write_pending(self.project_root, PendingAccept(tuple(accepted), files))

    # -- reporting & lifecycle ---------------------------------------------------

    def suggestion_reply(self, req_id: int) -> SuggestionReply:
        current = self.current
        if current is None:
            return SuggestionReply(
                req_id, None, False, self.last_suppressed, None, pending=self.pending
            )
        spec = current.speculation.info() if current.speculation else None
        return SuggestionReply(
            req_id, current.text, current.visible, None, spec, speculation_skipped=current.skipped
        )

    def stats_reply(self, req_id: int) -> StatsReply:
        # Only a speculation that can still be accepted is undecided; a failed or boundary
        # one is thrown away already (accepting it runs the prompt as a normal turn).
        current = self.current.speculation if self.current else None
        pending = current.id if current and current.status in ("running", "completed") else None
        return self.stats.reply(req_id, pending_speculation=pending)

    def new_session(self) -> None:
        """A new chat session: a per-session speculation budget starts again."""
        self.stats.cost.new_session()

    async def shutdown(self) -> None:
        self.cancel_generation()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.abort("shutdown")

    def _spawn(self, coro: Coroutine[Any, Any, object]) -> asyncio.Task[object]:
        task: asyncio.Task[object] = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task


def _describe(spec: Speculation) -> str:
    if spec.status == "boundary":
        return describe_boundary(spec.boundary_reason or "")
    if spec.status == "failed":
        return f"failed ({spec.error})"
    return f"was {spec.status}"


def overlay_record(written_files: Mapping[str, WrittenFile]) -> dict[str, overlay.RecordEntry]:
    """A worker's report of the files it wrote, in the record format that
    ``overlay.Overlay.from_record`` checks and rebuilds the overlay from."""
    record: dict[str, overlay.RecordEntry] = {}
    for rel, written in written_files.items():
        fp = written.original
        record[rel] = overlay.RecordEntry(
            overlay_path=written.overlay_path,
            size=fp.size if fp else None,
            mtime_ns=fp.mtime_ns if fp else None,
            sha256=fp.sha256 if fp else None,
        )
    return record
