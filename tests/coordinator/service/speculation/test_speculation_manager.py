"""SpeculationManager built directly: the real scripted model for suggestions, real
overlay directories written the way a worker writes them, real files applied on
accept; the pool is a stand-in whose "workers" report through the real event router,
and the main chat is a stand-in ``ForkSource``."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

import overlay
from coordinator.scripted_model import ScriptedModelServer
from coordinator.service.emitter import Emitter
from coordinator.service.pool.workers import WorkerHandle
from coordinator.service.routing import WorkerEventRouter
from coordinator.service.speculation import (
    AcceptCancelled,
    AcceptFallback,
    Budget,
    CostLedger,
    Speculation,
    SpeculationManager,
)
from coordinator.service.speculation.pending_accept import record_path
from coordinator.settings import Settings
from protocol.wire.approval import ApprovalMode
from protocol.wire.chat import Message, ToolCall, ToolResult, Usage
from protocol.wire.control import Transcript, WorkerState
from protocol.wire.work import (
    Completed,
    ModelUsage,
    PipelinedSuggestion,
    RunSpeculation,
    WorkerEvent,
)
from worker.boundary import SpeculatedConversation
from worker.speculation import LoopEnd, outcome

from ..conftest import Place
from ..fakes import Chat, Replies, Workers, client, requests_of, run, scripted, until

SUGGESTION = "add a test for negative numbers"


def suggestion_rule(text: str = SUGGESTION, latency_ms: int = 0) -> dict[str, Any]:
    reply = {"json": {"suggestion": text}, "latency_ms": latency_ms}
    return {"when": {"purpose": "suggestion"}, "reply": reply}


@asynccontextmanager
async def manager_for(
    place: Place,
    server: ScriptedModelServer,
    workers: Workers,
    chat: Chat,
    cpus: int | None = None,
    **settings: Any,
) -> AsyncIterator[SpeculationManager]:
    """A manager wired as the service wires it: speculation workers report to it
    through a WorkerEventRouter. ``cpus``: the machine's CPUs as the manager counts them
    (None: this machine's)."""
    config = Settings(**settings)
    cost = CostLedger(Budget(config.speculation_budget, config.speculation_budget_window))
    model = client(server, on_usage=cost.count)
    manager = SpeculationManager(
        place.root, config, workers, chat, model, base_url=server.base_url, cost=cost, cpus=cpus
    )
    router = WorkerEventRouter({"speculation": manager})
    workers.on_event, workers.on_death = router.on_event, router.on_death
    try:
        yield manager
    finally:
        await manager.shutdown()
        await model.aclose()


@asynccontextmanager
async def offered(
    place: Place, server: ScriptedModelServer, workers: Workers, chat: Chat | None = None
) -> AsyncIterator[tuple[SpeculationManager, WorkerHandle, RunSpeculation]]:
    """A manager (as ``manager_for``) that has offered SUGGESTION at once: the manager, the
    worker its speculation runs on and that speculation's job."""
    async with manager_for(place, server, workers, chat or Chat()) as manager:
        await manager.offer(SUGGESTION, delay_s=0)
        handle, job = the_job(workers)
        yield manager, handle, job


def the_job(workers: Workers, index: int = -1) -> tuple[WorkerHandle, RunSpeculation]:
    return workers.jobs_of(RunSpeculation)[index]


SPECULATED = [
    Message.assistant(
        "Adding the test.",
        (ToolCall("c1", "write_file", '{"file_path": "tests/test_negative.py"}'),),
    ),
    Message.tool((ToolResult("c1", "write_file", output="wrote 1 file"),)),
    Message.assistant("Added tests/test_negative.py."),
]


def overlay_of(place: Place, job: RunSpeculation) -> overlay.Overlay:
    """The job's overlay, as its worker opens it: the private speculation base, the
    worker's per-pid directory, the overlay directory in it."""
    overlay.ensure_private_base()
    overlay.ensure_private_dir(Path(job.overlay_dir).parent)
    overlay.make_private_dir(Path(job.overlay_dir))
    return overlay.Overlay(place.root, job.overlay_dir)


def work(place: Place, job: RunSpeculation, files: dict[str, str]) -> Completed:
    """What the worker does with ``job``: write ``files`` through the job's overlay, then
    report them and the speculated messages (the worker's own ``outcome``)."""
    ov = overlay_of(place, job)
    for rel, text in files.items():
        ov.redirect_write(rel).write_text(text)
    transcript = SpeculatedConversation(job.suggestion, [Message.user(job.suggestion), *SPECULATED])
    end = LoopEnd("completed", "answered", transcript)
    return Completed(job.job_id, job.epoch, outcome(end, ov))


def usage(job: RunSpeculation, tokens: int) -> ModelUsage:
    return ModelUsage(job.job_id, job.epoch, "speculation", Usage(tokens, 0, tokens))


# -- suggesting and starting -------------------------------------------------------------


def test_after_a_turn_the_suggestion_runs_ahead_on_a_worker(place: Place) -> None:
    workers, chat = Workers(), Chat()

    async def main() -> None:
        async with manager_for(place, server, workers, chat) as manager:
            manager.after_turn("completed", ApprovalMode.DEFAULT)
            assert manager.pending
            await manager.wait_visible(timeout_s=10)
            reply = manager.suggestion_reply(5)
            assert (reply.req_id, reply.text, reply.visible) == (5, SUGGESTION, True)
            assert reply.speculation is not None and reply.speculation.status == "running"
            handle, job = the_job(workers)
            assert reply.speculation.worker_pid == handle.pid
            assert handle.job_kind == "speculation" and handle.job_id == job.job_id
            assert job.suggestion == SUGGESTION and job.snapshot == chat.snapshot
            assert (job.model, job.approval_mode) == ("fast", ApprovalMode.AUTO_EDIT)
            assert job.project_root == str(place.root) and job.epoch == Workers.epoch
            assert job.endpoint.base_url == server.base_url
            assert Path(job.overlay_dir) == overlay.overlay_dir_for(handle.pid, job.job_id)
            # The manager counts its own model requests (the suggestion) by purpose.
            assert manager.stats_reply(6).tokens["suggestion"].requests == 1

    with scripted(suggestion_rule()) as server:
        run(main())
        [asked] = requests_of(server, "suggestion")
    assert asked["body"]["model"] == "fast"


@pytest.mark.parametrize(
    ("turns", "reason", "mode", "suppressed"),
    [
        (1, "completed", ApprovalMode.DEFAULT, "early_conversation"),
        (3, "completed", ApprovalMode.PLAN, None),
        (3, "error", ApprovalMode.DEFAULT, None),
    ],
)
def test_no_suggestion_early_in_a_chat_in_plan_mode_or_after_a_failed_turn(
    place: Place, turns: int, reason: Any, mode: ApprovalMode, suppressed: str | None
) -> None:
    workers = Workers()

    async def main() -> None:
        async with manager_for(place, server, workers, Chat(turns)) as manager:
            manager.after_turn(reason, mode)
            assert not manager.pending
            assert manager.suggestion_reply(1).suppressed_reason == suppressed

    with scripted(suggestion_rule()) as server:
        run(main())
        assert requests_of(server, "suggestion") == []
    assert workers.jobs == []


def test_a_spent_budget_shows_the_suggestion_without_speculating(place: Place) -> None:
    workers = Workers()

    async def main() -> None:
        async with manager_for(place, server, workers, Chat(), speculation_budget=100) as manager:
            await manager.offer("first", delay_s=0)
            handle, job = the_job(workers)
            await workers.deliver(handle, usage(job, 100))  # the whole budget
            await manager.offer("second", delay_s=0)
            reply = manager.suggestion_reply(1)
            assert (reply.text, reply.speculation, reply.speculation_skipped) == (
                "second",
                None,
                "budget",
            )
            assert manager.stats_reply(2).speculation_tokens.discarded == 100

    with scripted() as server:
        run(main())
    assert len(workers.jobs) == 1


# -- accept ------------------------------------------------------------------------------

ACCEPTED_FILES = {"tests/test_negative.py": "def test(): ...\n", "src/app.py": "new\n"}


async def a_completed_speculation(
    manager: SpeculationManager, workers: Workers, place: Place
) -> tuple[WorkerHandle, RunSpeculation, Speculation]:
    """The suggestion offered, its speculation run by a stand-in worker that wrote
    ``ACCEPTED_FILES``: (the worker, its job, the completed speculation)."""
    await manager.offer(SUGGESTION, delay_s=0)
    handle, job = the_job(workers)
    await workers.deliver(handle, work(place, job, ACCEPTED_FILES))
    spec = manager.current.speculation if manager.current else None
    assert spec is not None and spec.status == "completed"
    return handle, job, spec


def test_accept_applies_the_files_and_gives_the_chat_the_speculated_turn(place: Place) -> None:
    workers, chat, replies = Workers(), Chat(), Replies()

    async def main() -> float:
        async with manager_for(place, server, workers, chat) as manager:
            handle, job, spec = await a_completed_speculation(manager, workers, place)
            assert handle.state is WorkerState.STOPPING  # it ends by itself
            assert manager.matches(f"  {SUGGESTION} ")
            saved = await manager.accept("tab", Emitter(replies, b"c", 9))
            assert spec.status == "accepted" and manager.current is None
            assert not Path(job.overlay_dir).exists()
            stats = manager.stats_reply(1)
            assert stats.accepted_by_method == {"tab": 1}
            return saved

    with scripted() as server:
        saved = run(main())
    assert saved >= 0
    assert (place.root / "tests/test_negative.py").read_text() == "def test(): ...\n"
    assert (place.root / "src/app.py").read_text() == "new\n"
    assert chat.extended == [[Message.user(SUGGESTION), *SPECULATED]]
    [transcript] = replies.of(Transcript)
    assert transcript.req_id == 9
    assert transcript.files == ("tests/test_negative.py", "src/app.py")
    assert [e.kind for e in transcript.entries][:2] == ["user", "model"]
    assert not record_path(place.root).exists()  # the pending accept record is cleared


def test_a_reject_or_keystroke_during_an_accept_leaves_it_alone(place: Place) -> None:
    """The accept takes the suggestion when it begins: a reject (or typing, or another
    prompt's dismiss) arriving while it waits for the chat's turn slot or applies files
    finds nothing to dismiss, and the speculation, its overlay and its files stay whole."""
    workers, chat, replies = Workers(), Chat(), Replies()

    async def main() -> None:
        async with manager_for(place, server, workers, chat) as manager:
            _, job, spec = await a_completed_speculation(manager, workers, place)
            async with chat.slot:  # a main turn is running: the accept waits for it
                accepting = asyncio.ensure_future(manager.accept("tab", Emitter(replies, b"c", 9)))
                await until(lambda: manager.current is None)
                await manager.typed("something else")
                await manager.dismiss("rejected")
                assert not accepting.done()
                assert spec.status == "completed" and Path(job.overlay_dir).exists()
                assert workers.killed == []
            await accepting
            assert spec.status == "accepted"

    with scripted() as server:
        run(main())
    assert (place.root / "src/app.py").read_text() == "new\n"
    assert chat.extended == [[Message.user(SUGGESTION), *SPECULATED]]
    assert len(replies.of(Transcript)) == 1


def test_a_file_the_person_changed_meanwhile_makes_accept_fall_back(place: Place) -> None:
    workers, chat = Workers(), Chat()

    async def main() -> str:
        async with offered(place, server, workers, chat) as (manager, handle, job):
            await workers.deliver(handle, work(place, job, {"src/app.py": "speculated\n"}))
            (place.root / "src/app.py").write_text("the person's edit\n")
            with pytest.raises(AcceptFallback) as why:
                await manager.accept("tab", Emitter(Replies(), b"c", 9))
            assert manager.current is None and not Path(job.overlay_dir).exists()
            return str(why.value)

    with scripted() as server:
        why = run(main())
    assert why.startswith("you changed files it also changed")
    assert (place.root / "src/app.py").read_text() == "the person's edit\n"
    assert chat.extended == []


def test_ctrl_c_stops_a_typed_prompt_waiting_for_its_speculation(place: Place) -> None:
    """A typed-out predicted prompt waits for its running speculation; Ctrl-C (the
    prompt's CancelRequest) stops the wait, aborts the speculation and applies nothing."""
    workers = Workers()

    async def main() -> None:
        async with offered(place, server, workers) as (manager, handle, job):
            waiting = asyncio.ensure_future(manager.accept("typed", Emitter(Replies(), b"c", 9)))
            await until(lambda: manager.cancel_accept(8) is False and manager.acceptor.waiting(9))
            assert not waiting.done()
            assert manager.cancel_accept(9)
            with pytest.raises(AcceptCancelled):
                await waiting
            assert workers.killed == [(handle, "speculation aborted: cancelled")]
            assert not Path(job.overlay_dir).exists()
            assert not manager.cancel_accept(9)  # nothing waits any more

    with scripted() as server:
        run(main())
    assert not (place.root / "tests/test_negative.py").exists()


def test_accept_while_it_still_runs_aborts_it_and_falls_back(place: Place) -> None:
    workers = Workers()

    async def main() -> None:
        async with offered(place, server, workers) as (manager, handle, _):
            with pytest.raises(AcceptFallback, match="its speculation was running"):
                await manager.accept("enter", Emitter(Replies(), b"c", 9))
            assert workers.killed == [(handle, "speculation aborted: accepted before completion")]
            assert manager.stats_reply(1).speculations_aborted == 1

    with scripted() as server:
        run(main())


def test_the_pipelined_suggestion_is_offered_at_once_after_accept(place: Place) -> None:
    workers = Workers()

    async def main() -> None:
        async with offered(place, server, workers) as (manager, handle, job):
            await workers.deliver(handle, work(place, job, {}))
            await manager.accept("tab", Emitter(Replies(), b"c", 9))
            assert manager.pending  # its worker is still writing the next one
            await workers.deliver(
                handle, PipelinedSuggestion(job.job_id, job.epoch, "show me the diff")
            )
            await until(lambda: len(workers.jobs) == 2)
            reply = manager.suggestion_reply(1)
            assert (reply.text, reply.visible) == ("show me the diff", True)
            _, second = the_job(workers)
            assert second.suggestion == "show me the diff"

    with scripted() as server:
        run(main())


# -- fences and ends ---------------------------------------------------------------------


def test_events_from_another_worker_or_another_job_are_dropped(place: Place) -> None:
    workers = Workers()

    async def main() -> None:
        async with offered(place, server, workers) as (manager, handle, job):
            stranger = await workers.acquire("speculation", "spec-0-000000")
            done = work(place, job, {})
            events: list[tuple[WorkerHandle, WorkerEvent]] = [
                (stranger, done),  # its job, another worker
                (handle, Completed("spec-0-000000", job.epoch, done.outcome)),  # another job
                (stranger, usage(job, 50)),
            ]
            for sender, event in events:
                await workers.deliver(sender, event)
            spec = manager.current.speculation if manager.current else None
            assert spec is not None and spec.status == "running"
            assert manager.stats_reply(1).speculation_tokens.total == 0

    with scripted() as server:
        run(main())


def test_a_worker_that_dies_fails_its_speculation(place: Place) -> None:
    workers = Workers()

    async def main() -> None:
        async with offered(place, server, workers) as (manager, handle, job):
            overlay_of(place, job).redirect_write("a.txt").write_text("a")
            await workers.die(handle)
            reply = manager.suggestion_reply(1)
            assert reply.speculation is not None and reply.speculation.status == "failed"
            assert manager.stats_reply(2).speculations_failed == 1
            assert not Path(job.overlay_dir).exists()
            await manager.wait_settled(timeout_s=1)  # returns at once: it is over

    with scripted() as server:
        run(main())


def test_a_final_event_that_trails_the_workers_exit_still_counts(place: Place) -> None:
    """The worker sends Completed and exits; the exit (a pidfd) can be seen before the frame
    (two ZeroMQ I/O threads away). The speculation completes and can be accepted, instead
    of failing as if its worker had crashed."""
    workers, chat = Workers(), Chat()

    async def main() -> None:
        async with offered(place, server, workers, chat) as (manager, handle, job):
            completed = work(place, job, ACCEPTED_FILES)
            death = asyncio.ensure_future(workers.die(handle))
            await until(lambda: handle.state is WorkerState.DEAD)  # the death is being handled
            assert not death.done()  # ... and waits for a final event
            await workers.deliver(handle, completed)
            await death
            spec = manager.current.speculation if manager.current else None
            assert spec is not None and spec.status == "completed", spec
            assert handle.state is WorkerState.DEAD  # the late frame does not revive it
            await manager.accept("tab", Emitter(Replies(), b"c", 9))
            assert spec.status == "accepted"

    with scripted() as server:
        run(main())
    assert (place.root / "src/app.py").read_text() == "new\n"


def test_dismissing_kills_the_worker_and_its_tokens_still_count(place: Place) -> None:
    workers = Workers()

    async def main() -> None:
        async with offered(place, server, workers) as (manager, handle, job):
            overlay_of(place, job).redirect_write("a.txt").write_text("a")
            await manager.dismiss("user typed something else")
            assert manager.current is None
            assert workers.killed == [(handle, "speculation aborted: user typed something else")]
            assert not Path(job.overlay_dir).exists()
            # The killed worker's last report still counts: the tokens were spent.
            await workers.deliver(handle, usage(job, 40))
            stats = manager.stats_reply(1)
            assert stats.suggestions_ignored == 1 and stats.speculations_aborted == 1
            assert stats.speculation_tokens.discarded == 40
            assert manager.suggestion_reply(2).text is None

    with scripted() as server:
        run(main())


def test_no_worker_means_a_failed_speculation_not_an_error(place: Place) -> None:
    from coordinator.service.pool.workers import WorkerStartError

    workers = Workers()
    workers.fail_acquire = WorkerStartError("no worker process started")

    async def main() -> None:
        async with manager_for(place, server, workers, Chat()) as manager:
            await manager.offer(SUGGESTION, delay_s=0)
            reply = manager.suggestion_reply(1)
            assert reply.text == SUGGESTION
            assert reply.speculation is not None and reply.speculation.status == "failed"

    with scripted() as server:
        run(main())


class SlowDeathWorkers(Workers):
    """A pool whose kills are not seen until the test says so: a worker the kernel is
    slow to tear down (a task in the D state, a large address space being freed)."""

    def __init__(self) -> None:
        super().__init__()
        self.death_seen = asyncio.Event()
        self.kill_started = asyncio.Event()

    async def kill(self, handle: WorkerHandle, reason: str) -> float:
        self.kill_started.set()
        await self.death_seen.wait()
        return await super().kill(handle, reason)


def test_a_slow_death_never_holds_up_what_the_person_does_next(place: Place) -> None:
    workers = SlowDeathWorkers()

    async def main() -> None:
        async with offered(place, server, workers) as (manager, handle, job):
            overlay_of(place, job).redirect_write("a.txt").write_text("a")
            # The dismiss (a typed prompt's first step) returns while the kill still waits.
            await manager.dismiss("user typed something else")
            assert workers.kill_started.is_set() and not workers.killed
            assert manager.current is None
            assert manager.stats_reply(1).speculations_aborted == 1
            # The overlay outlives the unreaped worker (it could still be writing) ...
            assert Path(job.overlay_dir).exists()
            workers.death_seen.set()
            # ... and goes once the death is seen.
            await until(lambda: not Path(job.overlay_dir).exists())
            assert workers.killed == [(handle, "speculation aborted: user typed something else")]

    with scripted() as server:
        run(main())


def test_shutdown_waits_for_a_kill_left_in_the_background(place: Place) -> None:
    workers = SlowDeathWorkers()

    async def main() -> None:
        async with offered(place, server, workers) as (manager, _, job):
            overlay_of(place, job).redirect_write("a.txt").write_text("a")
            await manager.dismiss("user typed something else")
            shutdown = asyncio.ensure_future(manager.shutdown())
            # What the overlay was when shutdown returned: gone only if it waited for the
            # kill, which cannot end before the death is seen.
            overlay_at_return: list[bool] = []
            shutdown.add_done_callback(
                lambda _: overlay_at_return.append(Path(job.overlay_dir).exists())
            )
            await asyncio.wait({shutdown}, timeout=0.2)  # a shutdown that does not wait ends
            workers.death_seen.set()
            await shutdown
            assert overlay_at_return == [False]

    with scripted() as server:
        run(main())
