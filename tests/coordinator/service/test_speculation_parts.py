"""The parts of the speculation core on their own, without a manager: the runner's
status moves and its "stopped running" signal, the scheduler killing a branch dropped
while its worker was being acquired, a suggestion matching typed text. The pool is the
stand-in of ``fakes.py``; overlays live under the test's private temp dir."""

from __future__ import annotations

import asyncio
from pathlib import Path

from coordinator.service.pool.workers import WorkerHandle
from coordinator.service.speculation.background import Background
from coordinator.service.speculation.board import Board
from coordinator.service.speculation.record import Speculation
from coordinator.service.speculation.runner import SpeculationRunner
from coordinator.service.speculation.scheduler import BranchScheduler
from coordinator.service.speculation.stats import Stats
from coordinator.service.speculation.suggestion import Suggestion
from coordinator.settings import Settings
from protocol.wire.boundary import BoundaryReason
from protocol.wire.control import JobKind, WorkerState
from protocol.wire.work import Boundary, Failed, RunSpeculation, SpeculationOutcome

from .conftest import Place
from .fakes import Chat, Workers, run, until


class MarkingWorkers(Workers):
    """The stand-in pool, keeping which workers it was told exit by themselves."""

    def __init__(self) -> None:
        super().__init__()
        self.marked: list[WorkerHandle] = []

    def mark_stopping(self, handle: WorkerHandle) -> None:
        self.marked.append(handle)
        super().mark_stopping(handle)


def runner_for(
    place: Place, workers: Workers, board: Board, background: Background
) -> SpeculationRunner:
    return SpeculationRunner(
        place.root,
        Settings(),
        workers,
        Chat(),
        Stats(),
        base_url="http://127.0.0.1:9/v1",
        background=background,
        board=board,
    )


def boundary(spec: Speculation) -> Boundary:
    outcome = SpeculationOutcome(messages=(), written_files={}, tool_use_count=1, turns=1)
    reason = BoundaryReason("shell", "not read-only")
    return Boundary(job_id=spec.id, epoch=7, reason=reason, outcome=outcome)


def test_the_runner_says_when_a_speculation_stops_running(place: Place) -> None:
    """``on_stopped`` (the scheduler's wake) fires once for each speculation that stops
    running, whichever way it stops, and not for aborting one that already stopped."""
    workers = MarkingWorkers()

    async def main() -> None:
        background = Background()
        runner = runner_for(place, workers, Board(), background)
        stops: list[str] = []
        runner.on_stopped = lambda: stops.append("stopped")
        at_boundary, failing, aborted = [await runner.start(t) for t in ("a", "b", "c")]
        assert at_boundary and failing and aborted
        assert [s.status for s in (at_boundary, failing, aborted)] == ["running"] * 3
        handle = at_boundary.worker
        assert handle is not None
        await runner.on_event(at_boundary, handle, boundary(at_boundary))
        assert (at_boundary.status, stops) == ("boundary", ["stopped"])
        # The worker exits by itself: the runner tells the pool, it does not set the state.
        assert workers.marked == [handle] and handle.state is WorkerState.STOPPING
        assert failing.worker is not None
        await runner.on_event(failing, failing.worker, Failed(failing.id, 7, "boom"))
        assert (failing.status, failing.error, len(stops)) == ("failed", "boom", 2)
        assert aborted.worker is not None
        await runner.abort(aborted, "rejected")
        assert (aborted.status, aborted.abort_cause, len(stops)) == ("aborted", "rejected", 3)
        await runner.abort(at_boundary, "rejected")  # it had stopped running already
        assert at_boundary.status == "aborted" and len(stops) == 3
        # Each one's worker is killed as it ends; the boundary one's too, once aborted.
        assert [(h.pid, why) for h, why in workers.killed] == [
            (failing.worker.pid, "speculation failed"),
            (aborted.worker.pid, "speculation aborted: rejected"),
            (handle.pid, "speculation aborted: rejected"),
        ]
        await background.cancel_all()

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
        board, background = Board(), Background()
        runner = runner_for(place, workers, board, background)
        scheduler = BranchScheduler(Settings(), 2, Chat(), Stats(), runner, board, background)
        first = board.current = Suggestion("run the tests")
        launching = asyncio.ensure_future(scheduler.launch(first))
        await workers.asked.wait()
        board.current = Suggestion("show me the diff")  # the person moved on meanwhile
        workers.give.set()
        await launching
        spec = first.speculation
        assert spec is not None and (spec.status, spec.abort_cause) == ("aborted", "replaced")
        [(handle, job)] = workers.jobs_of(RunSpeculation)
        assert workers.killed == [(handle, "speculation aborted: replaced")]
        assert not Path(job.overlay_dir).exists()
        await background.cancel_all()

    run(main())


def test_a_waiting_branch_starts_when_a_running_one_stops(place: Place) -> None:
    """The scheduler alone: with ``speculateShell`` on two CPUs one branch runs at a time;
    the runner's stop wakes the next."""
    workers = Workers()

    async def main() -> None:
        board, background = Board(), Background()
        settings = Settings(speculation_branches=2, speculate_shell=True)
        runner = runner_for(place, workers, board, background)
        scheduler = BranchScheduler(settings, 2, Chat(), Stats(), runner, board, background)
        runner.on_stopped = scheduler.wake
        suggestion = board.current = Suggestion(["run the tests", "show me the diff"])
        await scheduler.launch(suggestion)
        top, second = suggestion.branches
        assert top.speculation is not None and second.waiting
        await runner.abort(top.speculation, "rejected")
        await until(lambda: second.speculation is not None)
        assert not second.waiting and len(workers.jobs_of(RunSpeculation)) == 2
        await background.cancel_all()

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
