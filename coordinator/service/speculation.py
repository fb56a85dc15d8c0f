"""The speculation manager: suggest, speculate in a worker, accept or abort.

After a normal main turn the fast model predicts the next prompt; the
speculation starts on a warm worker at once (in parallel with the 300 ms
display delay). Accept applies the overlay (all-or-nothing, conflict-checked),
then appends the speculated messages to the main history; anything else kills
the worker's process group and removes its overlay. Every worker event is
fenced by speculation id (the pool already fenced the epoch), so a late message
from a killed worker is dropped.

With ``speculationBranches`` N > 1 a suggestion holds up to N ranked branches
(alternative next prompts), each with its own speculation, worker and overlay;
accepting one kills the others, typing keeps only the branches it is still a
prefix of. ``branch_decision`` is the rule for starting a branch beyond the top one.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import secrets
import time
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal, get_args

import psutil

import overlay
from coordinator.boundary_text import describe_boundary
from coordinator.memory import memory_dirs
from coordinator.service.accept_record import (
    GONE,
    PendingAccept,
    clear_pending,
    digest,
    write_pending,
)
from coordinator.service.applied_set import RefusedReport, SpeculationFiles
from coordinator.service.cost import Budget
from coordinator.service.emitter import Emitter
from coordinator.service.pool import WorkerHandle, WorkerStartError
from coordinator.service.ports import ForkSource, WorkerJobs
from coordinator.service.preview import Progress, preview_files, transcript_of
from coordinator.service.stats import Stats
from coordinator.service.suggestions import generate_suggestion
from coordinator.service.transcript import ensure_tool_result_pairing, render_transcript
from coordinator.settings import Settings
from overlay.errors import describe_paths
from protocol.approval import ApprovalMode
from protocol.boundary import BoundaryReason
from protocol.chat import Message, Usage
from protocol.control import (
    AcceptMethod,
    DiffReply,
    SkipReason,
    SpeculationInfo,
    SpeculationStatus,
    StatsReply,
    SuggestionReply,
    SuppressReason,
    Transcript,
    TranscriptEntry,
    TurnEndReason,
    WorkerState,
)
from protocol.control import Branch as BranchInfo
from protocol.inert_text import quote_name
from protocol.model import ModelClient
from protocol.suggestion import is_typed_prefix, matches_prompt
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
    ToolStarted,
    WorkerEvent,
)

log = logging.getLogger("specrun.speculation")

SUGGESTION_DELAY_MS = 300
ACCEPT_DEBOUNCE_MS = 100
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
# The moves a speculation's status can make; nothing else changes it (``Speculation.move_to``).
# An abort marks any speculation not yet decided ``aborted`` (design §5 "Abort"), a completed
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
    "another branch accepted",  # speculationBranches > 1: the person took another guess
    "cancelled",  # Ctrl-C while a typed prompt waited for its running speculation
]
# Speculations whose workers may still report tokens: a killed worker's last frames
# can arrive after the speculation was dropped (the pool keeps departed workers briefly).
# Room for two suggestions' worth of the most branches there can be.
RECENT_SPECULATIONS = 8

# -- branches (speculationBranches > 1) ---------------------------------------------------
#
# The top branch (rank 0) starts exactly as a single suggestion's speculation always did.
# A branch beyond it starts, in rank order, only when ``branch_decision`` says ``start``:
#
# 1. budget: with a ``speculationBudget`` set, the tokens left in its window must cover one
#    more speculation at the average cost of the recent finished ones for every branch that
#    would then be running (before any finished, only "not spent yet" is asked, as for the
#    top branch); otherwise the branch is skipped (``budget``) and so are those after it;
# 2. the main chat: never while it is running a turn (the branch waits);
# 3. CPU: a speculation mostly waits on the model; what makes one CPU-bound is running
#    tests and builds, which only ``speculateShell`` allows. With it on, at most
#    max(1, usable CPUs - 1) branches run at once, one core left for the main chat (the
#    branch waits for a slot); with it off the setting's own cap (at most 4) holds.
#    Either way a branch beyond the top one runs at a lower priority (nice +10, for the
#    worker's threads and its autogroup), so it only gets CPU the main chat and the top
#    guess leave idle.
#
# A waiting branch starts when a running one ends or is killed.
EXTRA_BRANCH_NICE: Final = 10
BranchDecision = Literal["start", "wait", "budget"]


@dataclass(frozen=True)
class BranchRoom:
    """What ``branch_decision`` looks at when a branch beyond the top one could start."""

    running: int  # branches of the suggestion whose speculation is running
    cpus: int  # usable CPUs
    speculate_shell: bool
    main_busy: bool  # the main chat is running a turn
    budget_left: int | None  # tokens left in the budget's window; None: no budget
    tokens_per_speculation: float | None  # recent average; None: nothing finished yet


def max_running_branches(cpus: int, speculate_shell: bool, branches: int) -> int:
    """How many branches may run at once (rule 3 above)."""
    if speculate_shell:
        return min(branches, max(1, cpus - 1))
    return branches


def branch_decision(room: BranchRoom, branches: int) -> BranchDecision:
    """Whether the next waiting branch (beyond the top one) starts now, waits, or is
    skipped for the budget; ``branches`` is the ``speculationBranches`` setting."""
    if room.budget_left is not None:
        if room.budget_left <= 0:
            return "budget"
        estimate = room.tokens_per_speculation
        if estimate is not None and room.budget_left < estimate * (room.running + 1):
            return "budget"
    if room.main_busy:
        return "wait"
    if room.running >= max_running_branches(room.cpus, room.speculate_shell, branches):
        return "wait"
    return "start"


def usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except OSError:
        return os.cpu_count() or 1


def tree_cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of ``pid`` and every process below it (the children it
    reaped included); None if it is gone."""
    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return None
    total = 0.0
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            t = proc.cpu_times()
            total += t.user + t.system + t.children_user + t.children_system
    return total


def lower_priority(pid: int) -> None:
    """Nice +10 for ``pid``'s threads and its descendants', and for its autogroup (a worker
    leads its own session: with autogroups on, the scheduler shares CPU between sessions
    first, so the threads' nice alone would not yield to the main chat). Best effort."""
    with contextlib.suppress(OSError), open(f"/proc/{pid}/autogroup", "w") as group:
        group.write(str(EXTRA_BRANCH_NICE))
    try:
        pids = [pid, *(p.pid for p in psutil.Process(pid).children(recursive=True))]
    except psutil.Error:
        return
    for one in pids:
        try:
            threads = os.listdir(f"/proc/{one}/task")
        except OSError:
            continue
        for tid in threads:
            with contextlib.suppress(OSError, ValueError):
                os.setpriority(os.PRIO_PROCESS, int(tid), EXTRA_BRANCH_NICE)


@dataclass(eq=False)
class Speculation:
    id: str
    suggestion: str
    rank: int = 0  # the branch it speculates (0: the top guess)
    overlay_dir: str = ""
    status: SpeculationStatus = "running"
    started_at: float = field(default_factory=time.monotonic)
    ended_at: float | None = None
    worker: WorkerHandle | None = None
    turns: int = 0
    tool_uses: int = 0
    boundary_reason: BoundaryReason | None = None
    error: str | None = None
    abort_cause: AbortCause | None = None
    outcome: SpeculationOutcome | None = None
    pipelined: str | None = None
    pipelined_alternatives: tuple[str, ...] = ()  # with speculationBranches > 1, best first
    pipelined_done: asyncio.Event = field(default_factory=asyncio.Event)
    finished: asyncio.Event = field(default_factory=asyncio.Event)
    progress: Progress = field(default_factory=Progress)  # what its worker reported so far

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
            boundary_reason=self.boundary_reason.text() if self.boundary_reason else None,
            elapsed_s=round(self.elapsed_s, 4),
            worker_pid=self.worker.pid if self.worker else None,
            pipelined_suggestion=self.pipelined,
            boundary=self.boundary_reason,
        )


@dataclass(eq=False)
class Branch:
    """One ranked guess of a suggestion and its speculation."""

    rank: int
    text: str
    speculation: Speculation | None = None
    skipped: SkipReason | None = None  # why it is not speculated
    # Why it was dropped while its speculation was being started (killed on arrival).
    dropped: AbortCause | None = None
    tried: bool = False  # its speculation was started (or could not be)

    @property
    def waiting(self) -> bool:
        """A branch beyond the top one neither started nor skipped: waiting for its turn
        (``branch_decision``). The top branch is never waiting: it starts at once."""
        return self.rank > 0 and not self.tried and self.skipped is None and not self.dropped

    def info(self) -> BranchInfo:
        spec = self.speculation.info() if self.speculation else None
        return BranchInfo(self.rank, self.text, spec, self.skipped)


class Suggestion:
    """The predicted next prompt: one guess, or with ``speculationBranches`` > 1 up to N
    ranked ones. ``branches`` holds the live ones in rank order (never empty: a suggestion
    whose last branch goes is dismissed); ``text``, ``speculation`` and ``skipped`` are the
    top live branch's."""

    def __init__(
        self,
        text: str | Sequence[str],
        *,
        delay_s: float = SUGGESTION_DELAY_MS / 1000,
        speculation: Speculation | None = None,
        skipped: SkipReason | None = None,
    ) -> None:
        texts = [text] if isinstance(text, str) else list(text)
        if not texts:
            raise ValueError("a suggestion needs at least one text")
        self.branches: list[Branch] = [Branch(rank, t) for rank, t in enumerate(texts)]
        self.branches[0].speculation = speculation
        self.branches[0].skipped = skipped
        self.created_at = time.monotonic()
        self.delay_s = delay_s
        self.settled = False  # its outcome (accepted / ignored) is recorded
        self.typed_prefix = False  # typing kept it alive (keepSpeculationWhileTyping)
        self.typed = ""  # the typed text last acted on (clients and tests can see it was)

    @property
    def top(self) -> Branch:
        return self.branches[0]

    @property
    def text(self) -> str:
        return self.top.text

    @property
    def speculation(self) -> Speculation | None:
        return self.top.speculation

    @speculation.setter
    def speculation(self, spec: Speculation | None) -> None:
        self.top.speculation = spec

    @property
    def skipped(self) -> SkipReason | None:
        return self.top.skipped

    @skipped.setter
    def skipped(self, reason: SkipReason | None) -> None:
        self.top.skipped = reason

    @property
    def visible(self) -> bool:
        return time.monotonic() - self.created_at >= self.delay_s

    def branch(self, rank: int) -> Branch | None:
        """The live branch of that rank, if any."""
        return next((b for b in self.branches if b.rank == rank), None)

    def speculations(self) -> list[Speculation]:
        return [b.speculation for b in self.branches if b.speculation is not None]


class AcceptFallback(Exception):
    """Accept could not use the speculation; the text runs as a normal turn."""


class Debounced(Exception):
    """A second accept within ``ACCEPT_DEBOUNCE_MS`` of the last one: ignored, nothing runs."""


class AcceptCancelled(Exception):
    """Ctrl-C while a typed prompt waited for its running speculation: it was aborted and
    nothing runs, as a cancelled turn."""


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
        cpus: int | None = None,
    ) -> None:
        self.project_root = project_root
        self.settings = settings
        self.workers = workers
        self.chat = chat
        self.model = model
        self.base_url = base_url
        self.cpus = cpus if cpus is not None else usable_cpus()
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
        self._stopping: set[asyncio.Task[None]] = set()  # kills still being reaped
        self._generation: asyncio.Task[object] | None = None
        self._accepted: Speculation | None = None  # accepted, its pipelined text pending
        self._accepting: Speculation | None = None  # being accepted right now
        self._cancels: dict[int, asyncio.Event] = {}  # typed prompts waiting, by request
        self._branch_lock = asyncio.Lock()  # one pass over the waiting branches at a time
        self._moves = 0  # bumped whenever the user submits something
        self._flushing: asyncio.Task[object] | None = None
        # Told when the suggestion may have changed (the live view compares and sends).
        self.on_change: Callable[[], None] = lambda: None

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
        result = await generate_suggestion(
            self.model, snapshot, self.chat.fast_model, self.settings.speculation_branches
        )
        if result.text is None:
            self._suppress(result.suppressed or "empty")
            return
        await self.offer(result.alternatives or result.text, delay_s=SUGGESTION_DELAY_MS / 1000)

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

    async def offer(self, text: str | Sequence[str], delay_s: float) -> None:
        """Make ``text`` the current suggestion (several texts: its ranked branches) and
        start speculating it right away: the top branch at once, the others as
        ``branch_decision`` allows."""
        await self.dismiss("replaced")
        suggestion = Suggestion(text, delay_s=delay_s)
        self.current = suggestion
        self.on_change()
        self.last_suppressed = None
        self.stats.shown += 1
        if not self.settings.enable_speculation:
            return
        if self.stats.cost.budget_exhausted():
            # Still shown (the person may take it), but not run ahead: nothing more is
            # spent until the window frees tokens or a new session starts.
            for branch in suggestion.branches:
                branch.skipped = "budget"
                self.stats.skipped["budget"] += 1
            return
        top = suggestion.top
        top.speculation = await self.start(top.text)
        await self._kill_if_dropped(suggestion, top)
        if len(suggestion.branches) > 1:
            await self._start_waiting(suggestion)

    async def _kill_if_dropped(self, suggestion: Suggestion, branch: Branch) -> None:
        """A branch dismissed, diverged from or replaced while its worker was being
        acquired: its speculation was out of reach then; stop it now."""
        spec = branch.speculation
        if spec is None:
            return
        if self.current is suggestion and branch in suggestion.branches:
            return
        await self._abort_spec(spec, branch.dropped or "replaced")

    def _room(self, suggestion: Suggestion) -> BranchRoom:
        cost = self.stats.cost
        ended = [s.id for s in self._recent.values() if s.status != "running"]
        return BranchRoom(
            running=sum(1 for s in suggestion.speculations() if s.status == "running"),
            cpus=self.cpus,
            speculate_shell=self.settings.speculate_shell,
            main_busy=self.chat.busy,
            budget_left=cost.budget.tokens - cost.budget_spent() if cost.budget.enabled else None,
            tokens_per_speculation=cost.average_speculation_tokens(ended),
        )

    async def _start_waiting(self, suggestion: Suggestion) -> None:
        """Start the waiting branches in rank order while ``branch_decision`` allows."""
        async with self._branch_lock:
            for branch in list(suggestion.branches):
                if self.current is not suggestion or not self.settings.enable_speculation:
                    return
                if branch not in suggestion.branches or not branch.waiting:
                    continue
                decision = branch_decision(
                    self._room(suggestion), self.settings.speculation_branches
                )
                if decision == "wait":
                    return
                if decision == "budget":
                    branch.skipped = "budget"
                    self.stats.skipped["budget"] += 1
                    continue
                branch.tried = True
                branch.speculation = await self.start(branch.text, rank=branch.rank)
                await self._kill_if_dropped(suggestion, branch)

    def _wake_waiting(self) -> None:
        """A branch stopped running: a waiting one may start now."""
        current = self.current
        if current is not None and any(b.waiting for b in current.branches):
            self._spawn(self._start_waiting(current))

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
        """For `specrun suggestion --settled`: until the current suggestion's speculations
        are no longer running (a Tab then applies one instead of running a normal turn)
        and none of its branches waits to start."""
        current = self.current
        if current is None:
            return
        deadline = time.monotonic() + timeout_s
        while self.current is current and time.monotonic() < deadline:
            running = [s for s in current.speculations() if not s.finished.is_set()]
            if running:
                waits = {asyncio.ensure_future(s.finished.wait()) for s in running}
                await asyncio.wait(waits, timeout=deadline - time.monotonic())
                for waiting in waits:
                    waiting.cancel()
            elif any(b.waiting for b in current.branches) and self.settings.enable_speculation:
                await asyncio.sleep(0.02)
            else:
                return

    # -- speculation ------------------------------------------------------------

    async def start(self, text: str, rank: int = 0) -> Speculation | None:
        chat = self.chat
        if chat.snapshot is None:
            log.info("CacheSafeParams not available for speculation")
            return None
        spec = Speculation(
            id=f"spec-{next(self._ids)}-{secrets.token_hex(3)}", suggestion=text, rank=rank
        )
        self.stats.branch(spec.id, rank)
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
        if rank > 0 and handle.process is not None:
            # Speculation workers exit when done, so the priority never reaches the pool.
            await asyncio.to_thread(lower_priority, handle.pid)
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
            containment=self.settings.containment(
                memory_dirs(self.project_root, self.settings.memory_dir or None)
            ),
            alternatives=self.settings.speculation_branches,
            limits=self.settings.speculation_limits(),
        )
        try:
            await self.workers.send(handle, job)
        except WorkerStartError as exc:
            spec.error = str(exc)
            await self._end(spec, "failed")
            return spec
        self._spawn(self._wall_clock(spec, job.limits.wall_clock_s + WALL_CLOCK_GRACE_S))
        return spec

    async def _wall_clock(self, spec: Speculation, limit_s: float) -> None:
        """The backstop of the wall-clock limit: the worker ends its own speculation at the
        limit (``limit:wall_clock``, keeping what it did); one still running a moment later
        is not trusted to, and is killed."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(spec.finished.wait(), limit_s)
        if spec.status == "running":
            spec.error = "the speculation ran past its wall-clock limit (speculationTimeoutS)"
            await self._end(spec, "failed")

    def _live_speculations(self) -> list[Speculation]:
        """The speculations whose events still matter: the current suggestion's branches',
        the one being accepted, and the accepted one whose pipelined text is pending."""
        specs = self.current.speculations() if self.current else []
        specs += [s for s in (self._accepting, self._accepted) if s is not None]
        return specs

    def _spec_for(self, handle: WorkerHandle, job_id: str) -> Speculation | None:
        """The speculation this event is for, if it still matters; None fences it off."""
        for spec in self._live_speculations():
            if spec.id == job_id and spec.worker is handle:
                return spec
        return None

    def _read_cpu(self, spec: Speculation) -> None:
        """Keep the CPU seconds its worker's process tree has used so far."""
        handle = spec.worker
        record = self.stats.branches.get(spec.id)
        if handle is None or handle.process is None or record is None:
            return
        used = tree_cpu_seconds(handle.pid)
        if used is not None:
            record.cpu_s = max(record.cpu_s, used)

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
            spec.progress.text(event.turn, event.text)
        elif isinstance(event, ToolStarted):
            spec.progress.call(event.turn, event.call)
        elif isinstance(event, ToolFinished):
            spec.tool_uses += 1 if event.result.ok else 0
            spec.progress.result(event.turn, event.result)
            if event.written is not None:
                spec.progress.written = dict(event.written)
        elif isinstance(event, Completed) and spec.status == "running":
            spec.outcome = event.outcome
            spec.turns = event.outcome.turns
            if handle.state is not WorkerState.DEAD:  # its exit may have been seen first
                handle.state = WorkerState.STOPPING  # it exits by itself after the pipelined step
            spec.move_to("completed")
            self.stats.completed += 1
            self._read_cpu(spec)
            if event.outcome.written_files:
                self._preflush()
            self._wake_waiting()
        elif isinstance(event, Boundary) and spec.status == "running":
            spec.outcome = event.outcome
            spec.turns = event.outcome.turns
            spec.boundary_reason = event.reason
            if handle.state is not WorkerState.DEAD:
                handle.state = WorkerState.STOPPING
            spec.move_to("boundary")
            spec.pipelined_done.set()
            self.stats.boundary[event.reason.code] += 1
            self._read_cpu(spec)
            self._wake_waiting()
        elif isinstance(event, PipelinedSuggestion):
            spec.pipelined = event.text
            spec.pipelined_alternatives = event.alternatives
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
        spec = next((s for s in self._live_speculations() if s.worker is handle), None)
        if spec is None:
            return
        # A worker exits right after sending its pipelined suggestion; the frame may
        # trail the death notice by a moment, so wait a little before giving up on it.
        asyncio.get_running_loop().call_later(PIPELINED_GRACE_S, spec.pipelined_done.set)
        if spec.status == "running" and handle.killed_at is None:  # not the pool's own kill
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(spec.finished.wait(), FINAL_EVENT_GRACE_S)
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
        if was_running:
            self._wake_waiting()
        self.on_change()

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

    async def abort(self, cause: AbortCause) -> None:
        """Idempotent: kill + reap the workers of the current suggestion's branches (all at
        once), remove their overlays, status `aborted` with its cause (logged, and named in
        the kill). Nothing to do for one that failed or was accepted."""
        current = self.current
        if current is not None:
            await self._kill_branches(list(current.branches), cause)

    async def _abort_spec(self, spec: Speculation, cause: AbortCause) -> None:
        if "aborted" not in MOVES[spec.status]:
            return
        log.info("aborting speculation %s (%s, was %s)", spec.id, cause, spec.status)
        spec.abort_cause = cause
        await self._end(spec, "aborted")

    async def _kill_branches(self, branches: Sequence[Branch], cause: AbortCause) -> None:
        """Stop these branches' speculations concurrently (process group kill, reap,
        overlay removal); a branch still being started is stopped when its worker comes."""
        for branch in branches:
            branch.dropped = branch.dropped or cause
        specs = [b.speculation for b in branches if b.speculation is not None]
        if specs:
            await asyncio.gather(*(self._abort_spec(spec, cause) for spec in specs))

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
        self.on_change()

    async def typed(self, text: str) -> None:
        """What the person has typed so far at the prompt (``TypedRequest``). Keeps the
        branches it is still a prefix of, kills the others at once; none left dismisses
        the suggestion. Blank text keeps all. With ``keepSpeculationWhileTyping`` off any
        typed text dismisses, as the first keystroke that is not Tab always did."""
        current = self.current
        if current is None:
            return
        current.typed = text
        if not text.strip():
            current.typed_prefix = False
            return
        if not self.settings.keep_speculation_while_typing:
            await self.dismiss("user typed something else")
            return
        keep = [b for b in current.branches if is_typed_prefix(text, b.text)]
        if not keep:
            await self.dismiss("user typed something else")
            return
        gone = [b for b in current.branches if b not in keep]
        current.branches = keep  # first: the diverged ones' late events are fenced off
        current.typed_prefix = True
        await self._kill_branches(gone, "user typed something else")
        self.on_change()

    # -- accept -----------------------------------------------------------------

    def matches(self, text: str) -> bool:
        return self.current is not None and self.current.text == text.strip()

    def typed_match(self, text: str) -> Branch | None:
        """The live branch a submitted prompt equals (``matches_prompt``: case, whitespace
        and a final period ignored) whose speculation completed or is still running, when
        ``acceptTypedPrompt`` is on; the best-ranked one if several do."""
        current = self.current
        if current is None or not self.settings.accept_typed_prompt:
            return None
        for branch in current.branches:
            spec = branch.speculation
            live = spec is not None and spec.status in ("running", "completed")
            if live and matches_prompt(text, branch.text):
                return branch
        return None

    async def accept(
        self, method: AcceptMethod, out: Emitter, index: int = 0, wait: bool = False
    ) -> float:
        """Apply the completed speculation of the current suggestion's branch of rank
        ``index``, killing every other branch at once. Returns seconds saved; raises
        ``AcceptFallback`` (after aborting) when the text must run as a normal turn, and
        ``Debounced`` for a second accept right after the last one. A ``typed`` accept (the
        person typed the prompt out) or one with ``wait`` (a prompt sent, as the chat's
        Enter sends the line it filled) waits for a running speculation to end first."""
        now = time.monotonic()
        if (now - self._last_accept) * 1000 < ACCEPT_DEBOUNCE_MS:
            raise Debounced
        self._last_accept = now
        suggestion = self.current
        if suggestion is None:
            raise AcceptFallback("there is no suggestion to accept")
        branch = suggestion.branch(index)
        if branch is None:
            raise AcceptFallback(f"there is no suggestion ranked {index}")
        # Taken at once: a reject, a typed key or another prompt arriving while this accept
        # applies files finds no suggestion to dismiss, instead of killing this speculation
        # and removing its overlay mid-apply.
        self.current = None
        suggestion.settled = True
        self.stats.accepted[method] += 1
        self.stats.accepted_by_rank[branch.rank] += 1
        if method == "typed":
            self.stats.accepted_by_typing["exact_match"] += 1
        elif suggestion.typed_prefix:
            self.stats.accepted_by_typing["prefix_kept"] += 1
        spec = branch.speculation
        self._accepting = spec
        self.on_change()
        try:
            return await self._accept_branch(suggestion, branch, method, out, now, wait)
        finally:
            self._accepting = None
            self.on_change()

    async def _accept_branch(
        self,
        suggestion: Suggestion,
        branch: Branch,
        method: AcceptMethod,
        out: Emitter,
        now: float,
        wait: bool = False,
    ) -> float:
        others = [b for b in suggestion.branches if b is not branch]
        if others:
            suggestion.branches = [branch]
            await self._kill_branches(others, "another branch accepted")
        spec = branch.speculation
        if (method == "typed" or wait) and spec is not None and spec.status == "running":
            await self._wait_unless_cancelled(spec, out.req_id)
        if spec is None or spec.status != "completed" or spec.outcome is None:
            why = "no speculation ran" if spec is None else f"its speculation {_describe(spec)}"
            if spec is not None:
                await self._abort_spec(spec, "accepted before completion")
            raise AcceptFallback(why)
        # The accepted prompt is this turn: a prompt sent while it is applied waits for it
        # (and one already running finishes first).
        async with self.chat.turn_slot():
            return await self._apply(spec, branch, out, now)

    async def _wait_unless_cancelled(self, spec: Speculation, req_id: int) -> None:
        """Wait for a running speculation to end, or for ``cancel_accept(req_id)``: then
        abort it and raise ``AcceptCancelled``."""
        cancel = self._cancels[req_id] = asyncio.Event()
        waits = [asyncio.ensure_future(spec.finished.wait()), asyncio.ensure_future(cancel.wait())]
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            self._cancels.pop(req_id, None)
            for wait in waits:
                wait.cancel()
        if cancel.is_set() and spec.status == "running":
            await self._abort_spec(spec, "cancelled")
            raise AcceptCancelled

    def cancel_accept(self, req_id: int | None = None) -> bool:
        """Ctrl-C for a typed prompt still waiting for its speculation (``req_id``: that
        prompt's request; None: any). Whether one was waiting."""
        waiting = list(self._cancels.items())
        found = [event for rid, event in waiting if req_id is None or rid == req_id]
        for event in found:
            event.set()
        return bool(found)

    async def _apply(self, spec: Speculation, branch: Branch, out: Emitter, now: float) -> float:
        assert spec.outcome is not None  # completed
        root = self.project_root
        messages = ensure_tool_result_pairing(list(spec.outcome.messages))
        accepted = [Message.user(branch.text), *messages]
        ov = overlay.Overlay(root, spec.overlay_dir)
        try:
            # The worker's report is checked entry by entry before anything is read from its
            # overlay or written to the project (``SpeculationFiles``).
            files = await asyncio.to_thread(
                SpeculationFiles,
                root,
                spec.overlay_dir,
                spec.outcome.written_files,
                self.settings,
            )
            ov = files.overlay
            if self.settings.runs_later_boundary:
                later = (await asyncio.to_thread(files.preview)).runs_later
                if later:
                    names = describe_paths(c.path for c in later)
                    raise AcceptFallback(
                        f"it changed files that run later ({names}) and runsLaterBoundary is on"
                    )
            # 1. files first (all or nothing), 2.-3. then the history, so a failed apply
            # leaves neither; a crash between the two is settled at the next start from
            # the pending record; 5. the overlay goes in every case.
            await asyncio.to_thread(self._write_pending, files, accepted)
            applied = await asyncio.to_thread(files.apply)
            await self.chat.extend_from_speculation(accepted)
        except RefusedReport as exc:
            log.warning("speculation %s: refused report %s", spec.id, exc.refused)
            raise AcceptFallback(_refused_text(exc)) from None
        except overlay.ConflictError as exc:
            raise AcceptFallback(f"you changed files it also changed ({exc})") from None
        except (overlay.OverlayError, OSError) as exc:
            raise AcceptFallback(f"its files could not be applied ({exc})") from None
        finally:
            clear_pending(root)
            ov.cleanup()
        spec.move_to("accepted")
        self.stats.cost.accepted(spec.id)
        saved = max(0.0, spec.elapsed_s - (time.monotonic() - now))
        self.stats.time_saved_s.append(saved)
        entries = render_transcript(branch.text, messages)
        await out.send(
            Transcript(
                out.req_id,
                tuple(entries),
                applied.paths,
                saved,
                changes=applied.changes,
                ignored_skipped=applied.ignored_skipped,
            )
        )
        # The accepted suggestion is used up (taken when the accept began); its worker may
        # still be writing the pipelined suggestion, which the next Tab will want.
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
            # Its ranked guesses become the next suggestion's branches (speculationBranches).
            await self.offer(spec.pipelined_alternatives or spec.pipelined, delay_s=0.0)

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

    def _write_pending(self, files: SpeculationFiles, accepted: list[Message]) -> None:
        """The record that settles a crash between the files and the history. Files git
        ignores are left out (the apply may skip them: the real one wins); a deletion is
        recorded as "" (applied: the file is gone)."""
        ov = files.overlay
        record = {
            rel: digest(path)
            for rel, path in ov.written_files().items()
            if path.exists() and rel not in files.ignored
        }
        record.update((rel, GONE) for rel in ov.deleted_files() if rel not in files.ignored)
        write_pending(self.project_root, PendingAccept(tuple(accepted), record))

    # -- reporting & lifecycle ---------------------------------------------------

    def suggestion_reply(self, req_id: int, transcript: int | None = None) -> SuggestionReply:
        """The suggestion; ``transcript``: the rank of a branch whose speculation so far
        (text, tool calls and results) the reply carries."""
        current = self.current
        if current is None:
            return SuggestionReply(
                req_id, None, False, self.last_suppressed, None, pending=self.pending
            )
        branches = tuple(branch.info() for branch in current.branches)
        entries: tuple[TranscriptEntry, ...] = ()
        chosen = current.branch(transcript) if transcript is not None else None
        if chosen is not None and chosen.speculation is not None:
            spec = chosen.speculation
            messages = spec.outcome.messages if spec.outcome is not None else None
            entries = tuple(transcript_of(chosen.text, messages, spec.progress))
        return SuggestionReply(
            req_id,
            current.text,
            current.visible,
            None,
            branches[0].speculation,  # the top live branch's, read once for both
            speculation_skipped=current.skipped,
            branches=branches,
            typed=current.typed,
            transcript=entries,
        )

    async def diff_reply(self, req_id: int, index: int | None, stat: bool) -> DiffReply | None:
        """What Tab would do now with the branch of rank ``index`` (None: the top live
        one), computed as accept computes its listing; None if there is no such branch
        with a speculation."""
        current = self.current
        if current is None:
            return None
        branch = current.branch(index) if index is not None else current.top
        spec = branch.speculation if branch is not None else None
        if branch is None or spec is None or not spec.overlay_dir:
            return None
        written = dict(spec.outcome.written_files) if spec.outcome else dict(spec.progress.written)
        files, refused = await asyncio.to_thread(
            preview_files, str(self.project_root), spec.overlay_dir, written, self.settings, stat
        )
        return DiffReply(req_id, branch.rank, branch.text, spec.status, files, refused)

    def stats_reply(self, req_id: int) -> StatsReply:
        # Only a speculation that can still be accepted is undecided; a failed or boundary
        # one is thrown away already (accepting it runs the prompt as a normal turn).
        specs = self.current.speculations() if self.current else []
        pending = [s.id for s in specs if s.status in ("running", "completed")]
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
        # Kills an abort left to finish in the background: their overlays go before exit.
        await asyncio.gather(*self._stopping, return_exceptions=True)

    def _spawn(self, coro: Coroutine[Any, Any, object]) -> asyncio.Task[object]:
        task: asyncio.Task[object] = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task


def _describe(spec: Speculation) -> str:
    if spec.status == "boundary":
        return describe_boundary(spec.boundary_reason)
    if spec.status == "failed":
        return f"failed ({spec.error})"
    return f"was {spec.status}"


def _refused_text(exc: RefusedReport) -> str:
    refused = describe_paths(f"{quote_name(path)}: {why}" for path, why in exc.refused.items())
    return f"the speculation reported files it may not change, so nothing was applied ({refused})"
