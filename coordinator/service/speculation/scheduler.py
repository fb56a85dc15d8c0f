"""When a suggestion's branches start (``speculationBranches`` > 1).

The top branch (rank 0) starts exactly as a single suggestion's speculation always did.
A branch beyond it starts, in rank order, only when ``branch_decision`` says ``start``:

1. budget: with a ``speculationBudget`` set, the tokens left in its window must cover one
   more speculation at the average cost of the recent finished ones for every branch that
   would then be running (before any finished, only "not spent yet" is asked, as for the
   top branch); otherwise the branch is skipped (``budget``) and so are those after it;
2. the main chat: never while it is running a turn (the branch waits);
3. CPU: a speculation mostly waits on the model; what makes one CPU-bound is running
   tests and builds, which only ``speculateShell`` allows. With it on, at most
   max(1, usable CPUs - 1) branches run at once, one core left for the main chat (the
   branch waits for a slot); with it off the setting's own cap (at most 4) holds.
   Either way a branch beyond the top one runs at a lower priority (``cpu.lower_priority``).

A waiting branch starts when a running one ends or is killed (``wake``): the scheduler
waits on the ``finished`` of each branch it starts.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Literal

from coordinator.service.speculation.context import SpeculationContext, SpeculationPart
from coordinator.service.speculation.record import Speculation
from coordinator.service.speculation.runner import SpeculationRunner
from coordinator.service.speculation.suggestion import BranchRun, Suggestion

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


class BranchScheduler(SpeculationPart):
    """Starts the shown suggestion's branches on the ``runner`` as the rules above allow."""

    def __init__(self, context: SpeculationContext, runner: SpeculationRunner, cpus: int) -> None:
        super().__init__(context)
        self.runner = runner
        self.cpus = cpus
        self._lock = asyncio.Lock()  # one pass over the waiting branches at a time

    async def launch(self, suggestion: Suggestion) -> None:
        """Speculate a new suggestion: the top branch at once, the others as
        ``branch_decision`` allows."""
        if self.stats.cost.budget_exhausted():
            # Still shown (the person may take it), but not run ahead: nothing more is
            # spent until the window frees tokens or a new session starts.
            for branch in suggestion.branches:
                self._skip_for_budget(branch)
            return
        top = suggestion.top
        top.speculation = await self.runner.start(top.text)
        await self._kill_if_dropped(suggestion, top)
        if len(suggestion.branches) > 1:
            self._wake_when_stopped(top.speculation)
            await self._start_waiting(suggestion)

    def room(self, suggestion: Suggestion) -> BranchRoom:
        cost = self.stats.cost
        return BranchRoom(
            running=sum(1 for s in suggestion.speculations() if s.status == "running"),
            cpus=self.cpus,
            speculate_shell=self.settings.speculate_shell,
            main_busy=self.context.chat.busy,
            budget_left=cost.budget.tokens - cost.budget_spent() if cost.budget.enabled else None,
            tokens_per_speculation=cost.average_speculation_tokens(self.runner.ended_ids()),
        )

    def wake(self) -> None:
        """A branch stopped running: a waiting one may start now."""
        current = self.shown.current
        if current is not None and any(b.waiting for b in current.branches):
            self.context.background.spawn(self._start_waiting(current))

    def _wake_when_stopped(self, spec: Speculation | None) -> None:
        if spec is not None:
            self.context.background.spawn(self._wake_after(spec))

    async def _wake_after(self, spec: Speculation) -> None:
        await spec.finished.wait()
        self.wake()

    async def settled(self, suggestion: Suggestion, timeout_s: float) -> None:
        """Until ``suggestion``'s speculations are no longer running and none of its
        branches waits to start (or it is no longer shown)."""
        deadline = time.monotonic() + timeout_s
        while self.shown.is_current(suggestion) and time.monotonic() < deadline:
            running = [s for s in suggestion.speculations() if not s.finished.is_set()]
            if running:
                waits = {asyncio.ensure_future(s.finished.wait()) for s in running}
                await asyncio.wait(waits, timeout=deadline - time.monotonic())
                for waiting in waits:
                    waiting.cancel()
            elif any(b.waiting for b in suggestion.branches) and self.settings.enable_speculation:
                await asyncio.sleep(0.02)
            else:
                return

    async def _start_waiting(self, suggestion: Suggestion) -> None:
        """Start the waiting branches in rank order while ``branch_decision`` allows."""
        async with self._lock:
            for branch in list(suggestion.branches):
                if not self.shown.is_current(suggestion) or not self.settings.enable_speculation:
                    return
                if branch not in suggestion.branches or not branch.waiting:
                    continue
                decision = branch_decision(
                    self.room(suggestion), self.settings.speculation_branches
                )
                if decision == "wait":
                    return
                if decision == "budget":
                    self._skip_for_budget(branch)
                    continue
                branch.tried = True
                branch.speculation = await self.runner.start(branch.text, rank=branch.rank)
                self._wake_when_stopped(branch.speculation)
                await self._kill_if_dropped(suggestion, branch)

    async def _kill_if_dropped(self, suggestion: Suggestion, branch: BranchRun) -> None:
        """A branch dismissed, diverged from or replaced while its worker was being
        acquired: its speculation was out of reach then; stop it now."""
        spec = branch.speculation
        if spec is None:
            return
        if self.shown.is_current(suggestion) and branch in suggestion.branches:
            return
        await self.runner.abort(spec, branch.dropped or "replaced")

    def _skip_for_budget(self, branch: BranchRun) -> None:
        branch.skipped = "budget"
        self.stats.skipped["budget"] += 1
