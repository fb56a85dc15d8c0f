"""The speculation manager: the one object the service and its commands drive. It wires
the parts of the speculation core and routes to them:

- ``Predictor`` (``prediction``): the predicted next prompt after a turn;
- ``BranchScheduler`` (``scheduler``): when each of the suggestion's branches starts;
- ``SpeculationRunner`` (``runner``): one speculation's run on a worker, its status;
- ``Acceptor`` (``acceptor``): accept, apply, the pending record, the Tab-Tab pipeline.

What they share is one frozen ``SpeculationContext`` (``context``): the project, the
settings, the main chat to fork, the stats, the shown suggestion (``ShownSuggestion``,
changed only through its methods) and the background tasks. Every worker event is fenced
by speculation id (the pool already fenced the epoch), so a late message from a killed
worker is dropped here.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

from coordinator.service.emitter import Emitter
from coordinator.service.pool import WorkerHandle, usable_cpus
from coordinator.service.speculation import replies
from coordinator.service.speculation.acceptor import Acceptor
from coordinator.service.speculation.context import ForkSource, SpeculationContext
from coordinator.service.speculation.cost import CostLedger
from coordinator.service.speculation.prediction import Predictor
from coordinator.service.speculation.record import AbortCause, Speculation
from coordinator.service.speculation.runner import SpeculationRunner, SpeculationWorkers
from coordinator.service.speculation.scheduler import BranchScheduler
from coordinator.service.speculation.stats import Stats
from coordinator.service.speculation.suggestion import BranchRun, Suggestion
from coordinator.settings import Settings
from protocol.model import ModelClient
from protocol.wire.approval import ApprovalMode
from protocol.wire.control import (
    AcceptMethod,
    DiffReply,
    StatsReply,
    SuggestionReply,
    TurnEndReason,
)
from protocol.wire.work import ModelUsage, WorkerEvent

log = logging.getLogger("specrun.speculation")


class SpeculationManager:
    """The suggestion after each turn and its speculations. It forks the main chat
    (``ForkSource``), runs speculations on pool workers (``SpeculationWorkers``), hands
    them the model endpoint at ``base_url``; its own model requests go through ``model``,
    whose usage the service counts into ``cost`` (the ledger it made the client with),
    as the workers' usage is counted here."""

    def __init__(
        self,
        project_root: Path,
        settings: Settings,
        workers: SpeculationWorkers,
        chat: ForkSource,
        model: ModelClient,
        *,
        base_url: str,
        cost: CostLedger,
        cpus: int | None = None,
    ) -> None:
        self.project_root = project_root
        self.settings = settings
        self.context = context = SpeculationContext(project_root, settings, chat, Stats(cost=cost))
        self.stats = context.stats
        self.shown = context.shown
        self.runner = runner = SpeculationRunner(context, workers, base_url=base_url)
        cpus = cpus if cpus is not None else usable_cpus()
        self.scheduler = BranchScheduler(context, runner, cpus)
        self.acceptor = Acceptor(context, runner, self.offer)
        self.predictor = Predictor(context, model, self.offer)

    # -- the shown suggestion -------------------------------------------------------

    @property
    def current(self) -> Suggestion | None:
        return self.shown.current

    @current.setter
    def current(self, suggestion: Suggestion | None) -> None:
        self.shown.show(suggestion)

    @property
    def pending(self) -> bool:
        """A suggestion is on its way: being generated after a turn, or the pipelined one
        of an accepted speculation still being written."""
        return self.predictor.generating or self.acceptor.pipelined_pending

    def after_turn(self, reason: TurnEndReason, mode: ApprovalMode) -> None:
        """A main turn ended; predict the next prompt in the background."""
        self.predictor.after_turn(reason, mode)

    def cancel_generation(self) -> None:
        self.predictor.cancel()

    async def wait_visible(self, timeout_s: float) -> None:
        """For `specrun suggestion --wait`: until a suggestion is visible or generation is over."""
        await self.predictor.wait_visible(timeout_s)

    async def wait_settled(self, timeout_s: float) -> None:
        """For `specrun suggestion --settled`: until the shown suggestion's speculations
        are no longer running (a Tab then applies one instead of running a normal turn)
        and none of its branches waits to start."""
        if self.shown.current is not None:
            await self.scheduler.settled(self.shown.current, timeout_s)

    async def offer(self, text: str | Sequence[str], delay_s: float) -> None:
        """Make ``text`` the shown suggestion (several texts: its ranked branches) and
        start speculating it right away."""
        await self.dismiss("replaced")
        suggestion = Suggestion(text, delay_s=delay_s)
        self.shown.show(suggestion)
        self.stats.shown += 1
        if self.settings.enable_speculation:
            await self.scheduler.launch(suggestion)

    async def dismiss(self, reason: AbortCause) -> None:
        """The person did something else: record `ignored`, abort, forget the suggestion."""
        current = self.shown.current
        if current is None:
            return
        if not current.settled:
            current.settled = True
            self.stats.ignored += 1
            self.stats.unused_streak += 1
        await self.abort(reason)
        self.shown.show(None)

    async def abort(self, cause: AbortCause) -> None:
        """Idempotent: kill + reap the workers of the shown suggestion's branches (all at
        once), remove their overlays, status `aborted` with its cause (logged, and named in
        the kill). Nothing to do for one that failed or was accepted."""
        current = self.shown.current
        if current is not None:
            await self.runner.kill_branches(list(current.branches), cause)

    async def typed(self, text: str) -> None:
        """What the person has typed so far at the prompt (``TypedRequest``). Keeps the
        branches it is still a prefix of, kills the others at once; none left dismisses
        the suggestion. Blank text keeps all. With ``keepSpeculationWhileTyping`` off any
        typed text dismisses, as the first keystroke that is not Tab always did."""
        current = self.shown.current
        if current is None:
            return
        current.typed = text
        if not text.strip():
            current.typed_prefix = False
            return
        keep = current.leading_to(text) if self.settings.keep_speculation_while_typing else []
        if not keep:
            await self.dismiss("user typed something else")
            return
        gone = [b for b in current.branches if b not in keep]
        current.branches = keep  # first: the diverged ones' late events are fenced off
        current.typed_prefix = True
        await self.runner.kill_branches(gone, "user typed something else")
        self.shown.notify()

    # -- accept ---------------------------------------------------------------------

    def matches(self, text: str) -> bool:
        return self.shown.current is not None and self.shown.current.text == text.strip()

    def typed_match(self, text: str) -> BranchRun | None:
        """The live branch a submitted prompt equals, when ``acceptTypedPrompt`` is on."""
        current = self.shown.current
        if current is None or not self.settings.accept_typed_prompt:
            return None
        return current.typed_match(text)

    async def accept(
        self, method: AcceptMethod, out: Emitter, index: int = 0, wait: bool = False
    ) -> float:
        """``Acceptor.accept``: seconds saved, or ``AcceptFallback`` / ``Debounced`` /
        ``AcceptCancelled``."""
        return await self.acceptor.accept(method, out, index, wait)

    def cancel_accept(self, req_id: int | None = None) -> bool:
        return self.acceptor.cancel_accept(req_id)

    # -- worker events ----------------------------------------------------------------

    def _live_speculations(self) -> list[Speculation]:
        """The speculations whose events still matter: the shown suggestion's branches',
        the one being accepted, and the accepted one whose pipelined text is pending."""
        current = self.shown.current
        return [*(current.speculations() if current else []), *self.acceptor.live()]

    async def on_worker_event(self, handle: WorkerHandle, event: WorkerEvent) -> None:
        """An event from a speculation's worker (the service routes them here)."""
        if isinstance(event, ModelUsage):
            self.runner.count_usage(handle, event)
            return
        job_id = getattr(event, "job_id", None)
        live = self._live_speculations()
        spec = next((s for s in live if s.id == job_id and s.worker is handle), None)
        if spec is None:
            log.info("dropping a late %s for %s", type(event).__name__, job_id)
            return
        await self.runner.on_event(spec, handle, event)

    async def on_worker_death(self, handle: WorkerHandle) -> None:
        spec = next((s for s in self._live_speculations() if s.worker is handle), None)
        if spec is not None:
            await self.runner.on_death(spec, handle)

    # -- replies and lifecycle ----------------------------------------------------------

    def suggestion_reply(
        self, req_id: int, transcript: int | None = None, full: bool = False
    ) -> SuggestionReply:
        return replies.suggestion_reply(self.shown, self.pending, req_id, transcript, full)

    async def diff_reply(self, req_id: int, index: int | None, stat: bool) -> DiffReply | None:
        current, root = self.shown.current, self.project_root
        return await replies.diff_reply(current, root, self.settings, req_id, index, stat)

    def stats_reply(self, req_id: int) -> StatsReply:
        return replies.stats_reply(self.stats, self.shown.current, req_id)

    def new_session(self) -> None:
        """A new chat session: a per-session speculation budget starts again."""
        self.stats.cost.new_session()

    async def shutdown(self) -> None:
        self.predictor.cancel()
        self.context.viewers.close()
        await self.context.background.cancel_all()
        await self.abort("shutdown")
        await self.runner.reaped()
