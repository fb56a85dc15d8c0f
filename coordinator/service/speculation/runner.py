"""One speculation's run: start it on a pool worker, move its status as the worker
reports (``record.MOVES``), stop it for good (kill the worker, remove the overlay).

Every event reaching ``on_event`` was fenced already (this speculation, from its own
worker); only the tokens a worker reports are taken from a speculation no longer wanted
(``count_usage``): they were spent all the same.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import secrets
from collections.abc import Sequence
from typing import Literal, Protocol

import overlay
from coordinator.memory import memory_dirs
from coordinator.service.pool import (
    WorkerHandle,
    WorkerStartError,
    lower_priority,
    tree_cpu_seconds,
)
from coordinator.service.ports import WorkerJobs
from coordinator.service.speculation.context import SpeculationContext, SpeculationPart
from coordinator.service.speculation.preflush import Preflush
from coordinator.service.speculation.record import AbortCause, Speculation
from coordinator.service.speculation.suggestion import BranchRun
from protocol.wire.control import WorkerState
from protocol.wire.work import (
    Boundary,
    Completed,
    Failed,
    ModelEndpoint,
    ModelText,
    ModelUsage,
    PipelinedSuggestion,
    RunSpeculation,
    ToolFinished,
    ToolStarted,
    WorkerEvent,
)

log = logging.getLogger("specrun.speculation")

PIPELINED_GRACE_S = 1.0
# A worker sends its final event (Completed, Boundary, Failed) and exits. Its exit reaches
# the service through a pidfd at once, the frame through two ZeroMQ I/O threads: on a busy
# machine the death can be seen first. A running speculation whose worker died is failed
# only if no final event came within this long.
FINAL_EVENT_GRACE_S = 0.5
# How long after its wall-clock limit a speculation's worker may take to report the end.
WALL_CLOCK_GRACE_S = 10.0
# An abort waits this long for the killed worker to be reaped and its overlay removed; a
# death the kernel is slow to deliver (a process stuck in the D state, a big address space
# being torn down) finishes in the background, so an abort never holds up the next turn.
ABORT_WAIT_S = 0.5
# Speculations whose workers may still report tokens: a killed worker's last frames
# can arrive after the speculation was dropped (the pool keeps departed workers briefly).
# Room for two suggestions' worth of the most branches there can be.
RECENT_SPECULATIONS = 8


class SpeculationWorkers(WorkerJobs, Protocol):
    """The pool as the speculation core uses it: a speculation's worker exits by itself
    once its loop is over, and only the pool changes a worker's state, so the core tells
    it so (``mark_stopping``) instead of setting the state."""

    def mark_stopping(self, handle: WorkerHandle) -> None: ...


class SpeculationRunner(SpeculationPart):
    """Runs speculations on pool workers (``SpeculationWorkers``), forked from the main chat
    (the context's ``ForkSource``), against the model endpoint at ``base_url``. A
    speculation that stops running is seen by whoever waits on its ``finished``."""

    def __init__(
        self, context: SpeculationContext, workers: SpeculationWorkers, *, base_url: str
    ) -> None:
        super().__init__(context)
        self.workers = workers
        self.base_url = base_url
        self.preflush = Preflush(context.background)
        self._recent: dict[str, Speculation] = {}
        self._ids = itertools.count(1)
        self._stopping: set[asyncio.Task[None]] = set()  # kills still being reaped

    def ended_ids(self) -> list[str]:
        """The recent speculations that are no longer running."""
        return [s.id for s in self._recent.values() if s.status != "running"]

    # -- start -------------------------------------------------------------------

    async def start(self, text: str, rank: int = 0) -> Speculation | None:
        """Speculate ``text`` (the branch of rank ``rank``) on a worker; None when the
        main chat has nothing to fork yet, a ``failed`` one when no worker could take it."""
        if self.chat.snapshot is None:
            log.info("CacheSafeParams not available for speculation")
            return None
        spec = Speculation(
            id=f"spec-{next(self._ids)}-{secrets.token_hex(3)}", suggestion=text, rank=rank
        )
        self._remember(spec)
        self.preflush()  # runs beside the speculation; an accept may follow it soon
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
        if rank > 0 and handle.process is not None:
            # Speculation workers exit when done, so the priority never reaches the pool.
            await asyncio.to_thread(lower_priority, handle.pid)
        job = self._job(spec)
        try:
            await self.workers.send(handle, job)
        except WorkerStartError as exc:
            spec.error = str(exc)
            await self.end(spec, "failed")
            return spec
        limit_s = job.limits.wall_clock_s + WALL_CLOCK_GRACE_S
        self.context.background.spawn(self._wall_clock(spec, limit_s))
        return spec

    def _remember(self, spec: Speculation) -> None:
        self.stats.branch(spec.id, spec.rank)
        self._recent[spec.id] = spec
        while len(self._recent) > RECENT_SPECULATIONS:
            self._recent.pop(next(iter(self._recent)))

    def _job(self, spec: Speculation) -> RunSpeculation:
        chat, settings = self.chat, self.settings
        assert chat.snapshot is not None  # checked by start
        context = chat.context_info()
        return RunSpeculation(
            job_id=spec.id,
            epoch=self.workers.epoch,
            suggestion=spec.suggestion,
            snapshot=chat.snapshot,
            approval_mode=chat.approval_mode,
            model=chat.fast_model,
            project_root=str(self.project_root),
            overlay_dir=spec.overlay_dir,
            endpoint=ModelEndpoint(
                base_url=self.base_url,
                api_key=settings.api_key or None,
                cache_sharing=settings.enable_cache_sharing,
                timeout_s=float(settings.model_timeout_s),
                options=settings.model_options(),
            ),
            speculate_shell=settings.speculate_shell,
            containment=settings.containment(
                memory_dirs(self.project_root, settings.memory_dir or None)
            ),
            alternatives=settings.speculation_branches,
            limits=settings.speculation_limits(),
            context_window=context.window,
            context_tokens=context.tokens if context.window_source != "default" else 0,
        )

    async def _wall_clock(self, spec: Speculation, limit_s: float) -> None:
        """The backstop of the wall-clock limit: the worker ends its own speculation at the
        limit (``limit:wall_clock``, keeping what it did); one still running a moment later
        is not trusted to, and is killed."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(spec.finished.wait(), limit_s)
        if spec.status == "running":
            spec.error = "the speculation ran past its wall-clock limit (speculationTimeoutS)"
            await self.end(spec, "failed")

    # -- what its worker reports -------------------------------------------------------

    async def on_event(self, spec: Speculation, handle: WorkerHandle, event: WorkerEvent) -> None:
        """An event of ``spec``'s own worker."""
        running = spec.status == "running"
        if isinstance(event, ModelText):
            spec.turns = max(spec.turns, event.turn + 1)
            spec.progress.text(event.turn, event.text)
        elif isinstance(event, ToolStarted):
            spec.progress.call(event.turn, event.call)
        elif isinstance(event, ToolFinished):
            spec.tool_uses += 1 if event.result.ok else 0
            spec.progress.result(event.turn, event.result)
            if event.written is not None:
                spec.progress.written = dict(event.written)
        elif isinstance(event, Completed | Boundary) and running:
            self._reached_end(spec, handle, event)
        elif isinstance(event, PipelinedSuggestion):
            spec.pipelined = event.text
            spec.pipelined_alternatives = event.alternatives
            spec.pipelined_done.set()
        elif isinstance(event, Failed) and running:
            spec.error = event.error
            await self.end(spec, "failed")

    def _reached_end(
        self, spec: Speculation, handle: WorkerHandle, event: Completed | Boundary
    ) -> None:
        """The loop is over: its worker exits by itself (after the pipelined step of a
        completed one)."""
        spec.outcome = event.outcome
        spec.turns = event.outcome.turns
        self.workers.mark_stopping(handle)
        if isinstance(event, Completed):
            spec.move_to("completed")
            self.stats.completed += 1
            if event.outcome.written_files:
                self.preflush()
        else:
            spec.boundary_reason = event.reason
            spec.move_to("boundary")
            spec.pipelined_done.set()
            self.stats.boundary[event.reason.code] += 1
        self._read_cpu(spec)

    def count_usage(self, handle: WorkerHandle, event: ModelUsage) -> None:
        """Tokens are spent whether or not the speculation is still wanted, so a recent
        speculation's usage counts even after it was aborted and its worker killed; the
        fence is the same as for every event: this speculation, from its own worker."""
        spec = self._recent.get(event.job_id)
        if spec is None or spec.worker is not handle:
            log.info("dropping a ModelUsage for %s", event.job_id)
            return
        self.stats.cost.count(event.purpose, event.usage, speculation_id=spec.id)

    async def on_death(self, spec: Speculation, handle: WorkerHandle) -> None:
        # A worker exits right after sending its pipelined suggestion; the frame may
        # trail the death notice by a moment, so wait a little before giving up on it.
        asyncio.get_running_loop().call_later(PIPELINED_GRACE_S, spec.pipelined_done.set)
        if spec.status == "running" and handle.killed_at is None:  # not the pool's own kill
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(spec.finished.wait(), FINAL_EVENT_GRACE_S)
        if spec.status == "running":
            spec.error = "the speculation's worker died"
            await self.end(spec, "failed")

    def _read_cpu(self, spec: Speculation) -> None:
        """Keep the CPU seconds its worker's process tree has used so far."""
        handle = spec.worker
        record = self.stats.branches.get(spec.id)
        if handle is None or handle.process is None or record is None:
            return
        used = tree_cpu_seconds(handle.pid)
        if used is not None:
            record.cpu_s = max(record.cpu_s, used)

    # -- stop --------------------------------------------------------------------------

    async def end(self, spec: Speculation, status: Literal["aborted", "failed"]) -> None:
        """Stop a speculation for good: mark it, kill its worker (if alive), remove its
        overlay. The stats count a speculation stopped while it ran (a completed or boundary
        one was counted when it got there)."""
        was_running = spec.status == "running"
        if spec.move_to(status) and was_running:
            if status == "aborted":
                self.stats.aborted += 1
            else:
                self.stats.failed += 1
                # No reply carries the reason; the log is where a failure is explained.
                log.warning("speculation %s failed: %s", spec.id, spec.error)
        stop = asyncio.ensure_future(self._stop_worker_and_overlay(spec))
        self._stopping.add(stop)
        stop.add_done_callback(self._stopping.discard)
        done, _ = await asyncio.wait({stop}, timeout=ABORT_WAIT_S)
        if not done:
            log.warning(
                "speculation %s: its worker is not reaped yet; going on, the overlay is "
                "removed once it is",
                spec.id,
            )
        self.context.shown.notify()

    async def _stop_worker_and_overlay(self, spec: Speculation) -> None:
        """Kill and reap the speculation's worker, then remove its overlay (only then: a
        command still dying could write into it)."""
        if spec.worker is not None and spec.worker.state is not WorkerState.DEAD:
            why = f"aborted: {spec.abort_cause}" if spec.abort_cause else spec.status
            self._read_cpu(spec)
            await self.workers.kill(spec.worker, f"speculation {why}")
        spec.pipelined_done.set()
        if spec.overlay_dir:
            overlay.Overlay(self.project_root, spec.overlay_dir).cleanup()

    async def abort(self, spec: Speculation, cause: AbortCause) -> None:
        """Idempotent; nothing to do for one that failed or was accepted."""
        if not spec.abortable:
            return
        log.info("aborting speculation %s (%s, was %s)", spec.id, cause, spec.status)
        spec.abort_cause = cause
        await self.end(spec, "aborted")

    async def kill_branches(self, branches: Sequence[BranchRun], cause: AbortCause) -> None:
        """Stop these branches' speculations concurrently (process group kill, reap,
        overlay removal); a branch still being started is stopped when its worker comes."""
        for branch in branches:
            branch.dropped = branch.dropped or cause
        specs = [b.speculation for b in branches if b.speculation is not None]
        if specs:
            await asyncio.gather(*(self.abort(spec, cause) for spec in specs))

    async def reaped(self) -> None:
        """Until the kills an abort left to finish in the background are done (their
        overlays go before the service exits)."""
        await asyncio.gather(*self._stopping, return_exceptions=True)
