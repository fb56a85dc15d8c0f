"""The parts of the speculation core on their own, without a manager: the runner's
status moves and its "stopped running" signal (``finished``), the scheduler killing a branch dropped
while its worker was being acquired, a suggestion matching typed text. The pool is the
stand-in of ``fakes.py``; overlays live under the test's private temp dir."""

from __future__ import annotations

import asyncio
from pathlib import Path

from coordinator.service.pool.workers import WorkerHandle
from coordinator.service.speculation.context import SpeculationContext
from coordinator.service.speculation.record import Speculation
from coordinator.service.speculation.runner import SpeculationRunner
from coordinator.service.speculation.scheduler import BranchScheduler
from coordinator.service.speculation.stats import Stats
from coordinator.service.speculation.suggestion import Suggestion
from coordinator.settings import Settings
from protocol.wire.boundary import BoundaryReason
from protocol.wire.control import JobKind, WorkerState
from protocol.wire.work import Boundary, Failed, RunSpeculation, SpeculationOutcome

from ..conftest import Place
from ..fakes import Chat, Workers, run, until


class MarkingWorkers(Workers):
    """The stand-in pool, keeping which workers it was told exit by themselves."""

    def __init__(self) -> None:
        super().__init__()
        self.marked: list[WorkerHandle] = []

    def mark_stopping(self, handle: WorkerHandle) -> None:
        self.marked.append(handle)
        super().mark_stopping(handle)


def context_for(place: Place, settings: Settings | None = None) -> SpeculationContext:
    return SpeculationContext(place.root, settings or Settings(), Chat(), Stats())


def runner_for(context: SpeculationContext, workers: Workers) -> SpeculationRunner:
    return SpeculationRunner(context, workers, base_url="http://127.0.0.1:9/v1")


def boundary(spec: Speculation) -> Boundary:
    outcome = SpeculationOutcome(messages=(), written_files={}, tool_use_count=1, turns=1)
    reason = BoundaryReason("shell", "not read-only")
    return Boundary(job_id=spec.id, epoch=7, reason=reason, outcome=outcome)


def test_the_runner_says_when_a_speculation_stops_running(place: Place) -> None:
    """A speculation's ``finished`` (what the scheduler's wake waits on) is set when it
    stops running, whichever way it stops; stopping one tells the shown suggestion
    (``changed``, what the live view waits on)."""
    workers = MarkingWorkers()

    async def main() -> None:
        context = context_for(place)
        runner = runner_for(context, workers)
        at_boundary, failing, aborted = [await runner.start(t) for t in ("a", "b", "c")]
        assert at_boundary and failing and aborted
        assert [s.status for s in (at_boundary, failing, aborted)] == ["running"] * 3
        assert not any(s.finished.is_set() for s in (at_boundary, failing, aborted))
        handle = at_boundary.worker
        assert handle is not None
        await runner.on_event(at_boundary, handle, boundary(at_boundary))
        assert at_boundary.status == "boundary" and at_boundary.finished.is_set()
        # The worker exits by itself: the runner tells the pool, it does not set the state.
        assert workers.marked == [handle] and handle.state is WorkerState.STOPPING
        assert failing.worker is not None
        context.shown.changed.clear()
        await runner.on_event(failing, failing.worker, Failed(failing.id, 7, "boom"))
        assert (failing.status, failing.error) == ("failed", "boom")
        assert failing.finished.is_set() and context.shown.changed.is_set()
        assert aborted.worker is not None and not aborted.finished.is_set()
        await runner.abort(aborted, "rejected")
        assert (aborted.status, aborted.abort_cause) == ("aborted", "rejected")
        assert aborted.finished.is_set()
        await runner.abort(at_boundary, "rejected")  # it had stopped running already
        assert at_boundary.status == "aborted"
        # Each one's worker is killed as it ends; the boundary one's too, once aborted.
        assert [(h.pid, why) for h, why in workers.killed] == [
            (failing.worker.pid, "speculation failed"),
            (aborted.worker.pid, "speculation aborted: rejected"),
            (handle.pid, "speculation aborted: rejected"),
        ]
        await context.background.cancel_all()

    run(main())


class HeldWorkers(Workers):
    """A pool whose worker for a speculation comes only when the test lets it."""

    def __init__(self) -> None:
        super().__init__()
        self.asked = asyncio.Event()
        self.give = asyncio.Event()

    async def acquire(
        self, kind: JobKind, job_id: str, overlay_dir: str | None = None
    ) -> WorkerHandle:
        self.asked.set()
        await self.give.wait()
        return await super().acquire(kind, job_id, overlay_dir)


def test_a_suggestion_replaced_while_its_worker_comes_is_killed_on_arrival(
    place: Place,
) -> None:
    workers = HeldWorkers()

    async def main() -> None:
        context = context_for(place)
        runner = runner_for(context, workers)
        scheduler = BranchScheduler(context, runner, 2)
        first = Suggestion("run the tests")
        context.shown.show(first)
        launching = asyncio.ensure_future(scheduler.launch(first))
        await workers.asked.wait()
        context.shown.show(Suggestion("show me the diff"))  # the person moved on meanwhile
        workers.give.set()
        await launching
        spec = first.speculation
        assert spec is not None and (spec.status, spec.abort_cause) == ("aborted", "replaced")
        [(handle, job)] = workers.jobs_of(RunSpeculation)
        assert workers.killed == [(handle, "speculation aborted: replaced")]
        assert not Path(job.overlay_dir).exists()
        await context.background.cancel_all()

    run(main())


def test_a_waiting_branch_starts_when_a_running_one_stops(place: Place) -> None:
    """The scheduler alone: with ``speculateShell`` on two CPUs one branch runs at a time;
    the stop of the running one wakes the next (nobody wires a callback for it)."""
    workers = Workers()

    async def main() -> None:
        settings = Settings(speculation_branches=2, speculate_shell=True)
        context = context_for(place, settings)
        runner = runner_for(context, workers)
        scheduler = BranchScheduler(context, runner, 2)
        suggestion = Suggestion(["run the tests", "show me the diff"])
        context.shown.show(suggestion)
        await scheduler.launch(suggestion)
        top, second = suggestion.branches
        assert top.speculation is not None and second.waiting
        await runner.abort(top.speculation, "rejected")
        await until(lambda: second.speculation is not None)
        assert not second.waiting and len(workers.jobs_of(RunSpeculation)) == 2
        await context.background.cancel_all()

    run(main())


def test_typed_text_matches_the_best_ranked_branch_still_worth_accepting() -> None:
    suggestion = Suggestion(["run the tests", "Run the tests", "show me the diff"])
    specs = [Speculation(f"s{rank}", b.text, rank) for rank, b in enumerate(suggestion.branches)]
    for branch, spec in zip(suggestion.branches, specs, strict=True):
        branch.speculation = spec
    assert specs[0].move_to("failed")
    assert [b.rank for b in suggestion.leading_to("RUN  the")] == [0, 1]
    match = suggestion.typed_match("run the tests.")
    assert match is not None and match.rank == 1  # the failed top one is passed over
    assert suggestion.typed_match("show me the diff?") is None
    assert specs[1].move_to("completed") and suggestion.typed_match("run the tests") is not None
