"""Several ranked branches per suggestion (``speculationBranches``), unit level: the rule
that lets a branch beyond the top one start, the manager starting, holding back, killing
and accepting branches (stand-in pool, real scripted model, real overlay directories),
the alternatives request and its raw-text retry, and the branch cost in the stats."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import pytest

from coordinator.scripted_model import ScriptedModelServer
from coordinator.service.emitter import Emitter
from coordinator.service.pool.workers import WorkerHandle
from coordinator.service.speculation import SpeculationManager
from coordinator.service.speculation.prediction import predict_next_prompt
from coordinator.service.speculation.scheduler import (
    BranchRoom,
    branch_decision,
    max_running_branches,
)
from coordinator.service.speculation.stats import Stats
from protocol.prompts.prediction import (
    ALTERNATIVES_SCHEMA_NAME,
    SUGGESTION_PROMPT,
    SUGGESTION_SCHEMA,
)
from protocol.wire.chat import Message, Usage
from protocol.wire.work import Completed, PipelinedSuggestion, RunSpeculation
from worker.boundary import SpeculatedConversation
from worker.speculation import LoopEnd, outcome

from ..conftest import Place
from ..fakes import Chat, Replies, Workers, client, requests_of, run, scripted, until
from .test_speculation_manager import manager_for as wired_manager
from .test_speculation_manager import overlay_of, usage

GUESSES = ["run the tests", "add a test for negative numbers", "show me the diff"]

# -- the rule -----------------------------------------------------------------------------


def room(**changes: Any) -> BranchRoom:
    base: dict[str, Any] = {
        "running": 1,
        "cpus": 2,
        "speculate_shell": False,
        "main_busy": False,
        "budget_left": None,
        "tokens_per_speculation": None,
    }
    return BranchRoom(**{**base, **changes})


@pytest.mark.parametrize(
    ("changes", "branches", "decision"),
    [
        ({}, 3, "start"),
        # the main chat runs a turn: wait, whatever else holds
        ({"main_busy": True}, 3, "wait"),
        ({"main_busy": True, "running": 0}, 4, "wait"),
        # without speculateShell a branch waits on the model: the setting is the cap
        ({"running": 2, "cpus": 1}, 3, "start"),
        ({"running": 3, "cpus": 64}, 3, "wait"),
        # with it, one core is left for the main chat
        ({"speculate_shell": True, "running": 1, "cpus": 2}, 3, "wait"),
        ({"speculate_shell": True, "running": 1, "cpus": 1}, 3, "wait"),
        ({"speculate_shell": True, "running": 2, "cpus": 4}, 3, "start"),
        ({"speculate_shell": True, "running": 3, "cpus": 4}, 4, "wait"),
        ({"speculate_shell": True, "running": 0, "cpus": 1}, 2, "start"),
        # the budget: spent, or not enough left for one more at the recent average
        ({"budget_left": 0}, 3, "budget"),
        ({"budget_left": -5, "main_busy": True}, 3, "budget"),
        ({"budget_left": 10}, 3, "start"),  # nothing finished yet: no estimate
        ({"budget_left": 799, "tokens_per_speculation": 400.0}, 3, "budget"),
        ({"budget_left": 800, "tokens_per_speculation": 400.0}, 3, "start"),
        ({"budget_left": 1199, "running": 2, "tokens_per_speculation": 400.0}, 3, "budget"),
    ],
)
def test_when_a_branch_beyond_the_top_one_starts(
    changes: dict[str, Any], branches: int, decision: str
) -> None:
    assert branch_decision(room(**changes), branches) == decision


def test_the_cpu_cap() -> None:
    assert [max_running_branches(c, True, 4) for c in (1, 2, 3, 4, 8)] == [1, 1, 2, 3, 4]
    assert [max_running_branches(c, False, 3) for c in (1, 2, 8)] == [3, 3, 3]


# -- the manager --------------------------------------------------------------------------


def manager_for(
    place: Place,
    server: ScriptedModelServer,
    workers: Workers,
    chat: Chat,
    cpus: int = 2,
    **settings: Any,
) -> AbstractAsyncContextManager[SpeculationManager]:
    """The single-suggestion tests' manager, with three branches on two CPUs unless told."""
    settings = {"speculation_branches": 3, **settings}
    return wired_manager(place, server, workers, chat, cpus, **settings)


def jobs(workers: Workers) -> list[tuple[WorkerHandle, RunSpeculation]]:
    return workers.jobs_of(RunSpeculation)


def work(place: Place, job: RunSpeculation, files: dict[str, str]) -> Completed:
    """The worker's part: write ``files`` through the job's overlay and report them."""
    ov = overlay_of(place, job)
    for rel, text in files.items():
        ov.redirect_write(rel).write_text(text)
    said = [Message.user(job.suggestion), Message.assistant(f"Done: {job.suggestion}.")]
    end = LoopEnd("completed", "answered", SpeculatedConversation(job.suggestion, said))
    return Completed(job.job_id, job.epoch, outcome(end, ov))


def test_branches_start_in_rank_order_each_on_its_own_worker(place: Place) -> None:
    workers = Workers()

    async def main() -> None:
        async with manager_for(place, server, workers, Chat()) as manager:
            await manager.offer(GUESSES, delay_s=0)
            assert [job.suggestion for _, job in jobs(workers)] == GUESSES
            assert len({h.pid for h, _ in jobs(workers)}) == 3
            assert len({job.overlay_dir for _, job in jobs(workers)}) == 3
            reply = manager.suggestion_reply(1)
            assert [(b.rank, b.text) for b in reply.branches] == list(enumerate(GUESSES))
            assert all(b.speculation and b.speculation.status == "running" for b in reply.branches)
            assert reply.text == GUESSES[0]
            assert reply.speculation == reply.branches[0].speculation

    with scripted() as server:
        run(main())


def test_with_shell_speculation_on_two_cpus_a_branch_waits_for_a_free_slot(
    place: Place,
) -> None:
    workers = Workers()

    async def main() -> None:
        async with manager_for(
            place, server, workers, Chat(), cpus=2, speculate_shell=True
        ) as manager:
            await manager.offer(GUESSES, delay_s=0)
            assert [job.suggestion for _, job in jobs(workers)] == GUESSES[:1]
            waiting = manager.suggestion_reply(1).branches[1:]
            assert [(b.speculation, b.skipped) for b in waiting] == [(None, None)] * 2
            handle, job = jobs(workers)[0]
            await workers.deliver(handle, work(place, job, {}))
            await until(lambda: len(jobs(workers)) == 2)
            assert jobs(workers)[1][1].suggestion == GUESSES[1]
            handle, job = jobs(workers)[1]
            await workers.deliver(handle, work(place, job, {}))
            await until(lambda: len(jobs(workers)) == 3)

    with scripted() as server:
        run(main())


def test_no_branch_beyond_the_top_one_starts_while_the_main_chat_runs_a_turn(
    place: Place,
) -> None:
    workers = Workers()
    chat = Chat()
    chat.busy = True

    async def main() -> None:
        async with manager_for(place, server, workers, chat) as manager:
            await manager.offer(GUESSES, delay_s=0)
            assert len(jobs(workers)) == 1
            chat.busy = False
            handle, job = jobs(workers)[0]
            await workers.deliver(handle, work(place, job, {}))  # a slot frees: try again
            await until(lambda: len(jobs(workers)) == 3)

    with scripted() as server:
        run(main())


@pytest.mark.parametrize(
    ("budget", "skipped"), [(1000, [None, "budget", "budget"]), (1300, [None, None, "budget"])]
)
def test_branches_start_only_while_the_budget_covers_them(
    place: Place, budget: int, skipped: list[str | None]
) -> None:
    workers = Workers()

    async def main() -> None:
        async with manager_for(place, server, workers, Chat(), speculation_budget=budget) as m:
            # One earlier speculation cost 400 tokens: the estimate for each branch.
            await m.offer("earlier guess", delay_s=0)
            handle, job = jobs(workers)[0]
            await workers.deliver(handle, usage(job, 400))
            await workers.deliver(handle, work(place, job, {}))
            await m.dismiss("rejected")
            # 600 (or 900) left: the top one starts; another needs 400 per running branch.
            await m.offer(GUESSES, delay_s=0)
            reply = m.suggestion_reply(1)
            assert [b.skipped for b in reply.branches] == skipped
            started = [b.text for b in reply.branches if b.speculation is not None]
            assert [job.suggestion for _, job in jobs(workers)[1:]] == started
            assert m.stats_reply(1).speculations_skipped.by_reason == {
                "budget": skipped.count("budget")
            }

    with scripted() as server:
        run(main())


def test_accepting_a_branch_kills_the_others_and_applies_its_files(place: Place) -> None:
    workers = Workers()
    chat = Chat()

    async def main() -> None:
        async with manager_for(place, server, workers, chat) as manager:
            await manager.offer(GUESSES, delay_s=0)
            (h0, j0), (h1, j1), (h2, j2) = jobs(workers)
            for handle, job, tokens in ((h0, j0, 100), (h1, j1, 200), (h2, j2, 300)):
                await workers.deliver(handle, usage(job, tokens))
            for job in (j0, j2):  # the others have written something too
                overlay_of(place, job).redirect_write("scratch.txt").write_text(job.suggestion)
            await workers.deliver(h1, work(place, j1, {"tests/test_neg.py": "ok\n"}))
            replies = Replies()
            await manager.accept("tab", Emitter(replies, b"c", 9), index=1)
            assert {(h, why) for h, why in workers.killed} == {
                (h0, "speculation aborted: another branch accepted"),
                (h2, "speculation aborted: another branch accepted"),
            }
            assert not Path(j0.overlay_dir).exists() and not Path(j2.overlay_dir).exists()
            assert (place.root / "tests/test_neg.py").read_text() == "ok\n"
            assert not (place.root / "scratch.txt").exists()
            assert chat.extended[0][0] == Message.user(GUESSES[1])
            stats = manager.stats_reply(1)
            assert stats.accepted_by_rank == {1: 1} and stats.speculations_aborted == 2
            cost = stats.branch_cost
            assert {r: s.tokens for r, s in cost.by_rank.items()} == {0: 100, 1: 200, 2: 300}
            assert cost.discarded.tokens == 400

    with scripted() as server:
        run(main())


def test_after_tab_the_pipelined_guesses_are_the_next_branches(place: Place) -> None:
    """Every branch's worker is asked for as many pipelined guesses as there are branches;
    after Tab, the accepted branch's guesses become the next suggestion's branches, each
    speculated as the first ones were."""
    workers = Workers()
    nexts = ("show me the diff", "run the tests", "commit this")

    async def main() -> None:
        async with manager_for(place, server, workers, Chat()) as manager:
            await manager.offer(GUESSES, delay_s=0)
            assert [job.alternatives for _, job in jobs(workers)] == [3, 3, 3]
            (h0, j0), *_ = jobs(workers)
            await workers.deliver(h0, work(place, j0, {"notes.txt": "n\n"}))
            await manager.accept("tab", Emitter(Replies(), b"c", 9), index=0)
            started = len(jobs(workers))
            pipelined = PipelinedSuggestion(j0.job_id, j0.epoch, nexts[0], None, nexts)
            await workers.deliver(h0, pipelined)
            await until(lambda: manager.current is not None and len(jobs(workers)) == started + 3)
            assert manager.current is not None
            assert [b.text for b in manager.current.branches] == list(nexts)
            assert [job.suggestion for _, job in jobs(workers)[started:]] == list(nexts)

    with scripted() as server:
        run(main())


def test_an_unknown_rank_is_not_accepted(place: Place) -> None:
    workers = Workers()

    async def main() -> None:
        from coordinator.service.speculation import AcceptFallback

        async with manager_for(place, server, workers, Chat()) as manager:
            await manager.offer(GUESSES, delay_s=0)
            with pytest.raises(AcceptFallback, match="no branch 6 of this suggestion"):
                await manager.accept("cli", Emitter(Replies(), b"c", 9), index=5)
            assert workers.killed == []

    with scripted() as server:
        run(main())


def test_typing_keeps_the_branches_it_leads_to(place: Place) -> None:
    workers = Workers()

    async def main() -> None:
        async with manager_for(place, server, workers, Chat()) as manager:
            await manager.offer(GUESSES, delay_s=0)
            (h0, _), (h1, _), (h2, _) = jobs(workers)
            await manager.typed("")
            assert len(manager.suggestion_reply(1).branches) == 3
            await manager.typed("RUN  the")
            assert [b.rank for b in manager.suggestion_reply(1).branches] == [0]
            assert {h for h, _ in workers.killed} == {h1, h2}
            assert manager.typed_match("run the tests.") is not None
            await manager.typed("run the builds")
            assert manager.current is None and h0 in {h for h, _ in workers.killed}
            assert manager.stats_reply(1).suggestions_ignored == 1

    with scripted() as server:
        run(main())


def test_a_typed_prompt_matches_a_live_branch_only_when_allowed(place: Place) -> None:
    workers = Workers()

    async def main() -> None:
        async with manager_for(place, server, workers, Chat(), accept_typed_prompt=False) as m:
            await m.offer(GUESSES, delay_s=0)
            assert m.typed_match("show me the diff") is None
        async with manager_for(place, server, workers, Chat()) as m:
            await m.offer(GUESSES, delay_s=0)
            match = m.typed_match("Show me the diff!")
            assert match is not None and match.rank == 2
            assert m.typed_match("show me the diff?") is None  # a question is not a match

    with scripted() as server:
        run(main())


# -- the request ----------------------------------------------------------------------------

SNAPSHOT = Chat().snapshot


def test_one_branch_asks_exactly_as_before_and_several_ask_for_a_ranked_list() -> None:
    rule = {"when": {"purpose": "suggestion"}, "reply": {"suggestions": GUESSES}}

    async def main() -> tuple[Any, Any]:
        model = client(server)
        try:
            assert SNAPSHOT is not None
            one = await predict_next_prompt(model, SNAPSHOT, "fast")
            three = await predict_next_prompt(model, SNAPSHOT, "fast", 3)
        finally:
            await model.aclose()
        return one, three

    with scripted(rule) as server:
        one, three = run(main())
        first, second = (r["body"] for r in requests_of(server, "suggestion"))
    assert (one.text, one.alternatives) == (GUESSES[0], (GUESSES[0],))
    assert three.alternatives == tuple(GUESSES)
    assert first["messages"][-1]["content"] == SUGGESTION_PROMPT
    assert first["response_format"]["json_schema"] == {
        "name": "suggestion",
        "schema": SUGGESTION_SCHEMA,
    }
    assert second["response_format"]["json_schema"]["name"] == ALTERNATIVES_SCHEMA_NAME
    schema = second["response_format"]["json_schema"]["schema"]
    assert schema["properties"]["suggestions"]["maxItems"] == 3


def test_a_provider_that_rejects_the_schema_is_asked_again_for_raw_text() -> None:
    rule = {
        "when": {"purpose": "suggestion"},
        "fail": {"status": 400, "times": 1, "message": "response_format is not supported"},
        # a bare list, as a provider without structured output may send it
        "reply": {"json": ["run the tests", "looks good", "Run the tests."]},
    }

    async def main() -> Any:
        model = client(server)
        try:
            assert SNAPSHOT is not None
            return await predict_next_prompt(model, SNAPSHOT, "fast", 3)
        finally:
            await model.aclose()

    with scripted(rule) as server:
        result = run(main())
        bodies = [r["body"] for r in requests_of(server, "suggestion")]
    assert len(bodies) == 2
    assert "response_format" in bodies[0] and "response_format" not in bodies[1]
    assert bodies[0]["messages"] == bodies[1]["messages"]
    assert result.alternatives == ("run the tests",)
    assert result.dropped == (("looks good", "evaluative"), ("Run the tests.", "duplicate"))


def test_when_every_guess_is_filtered_the_first_reason_is_the_suppression() -> None:
    rule = {"when": {"purpose": "suggestion"}, "reply": {"suggestions": ["looks good", "ok"]}}

    async def main() -> Any:
        model = client(server)
        try:
            assert SNAPSHOT is not None
            return await predict_next_prompt(model, SNAPSHOT, "fast", 2)
        finally:
            await model.aclose()

    with scripted(rule) as server:
        result = run(main())
    # "ok" passes the filter alone; "looks good" is evaluative
    assert (result.text, result.alternatives) == ("ok", ("ok",))


# -- the stats ----------------------------------------------------------------------------------


def test_branch_cost_splits_by_rank_and_leaves_pending_and_accepted_out_of_discarded() -> None:
    stats = Stats()
    for spec_id, rank, tokens, cpu in (
        ("a", 0, 100, 0.5),
        ("b", 1, 200, 0.25),
        ("c", 2, 300, 1.0),
        ("d", 0, 50, 0.125),
    ):
        stats.branch(spec_id, rank).cpu_s = cpu
        stats.cost.count("speculation", Usage(tokens, 0, tokens), speculation_id=spec_id)
    stats.cost.accepted("b")
    reply = stats.reply(1, pending_speculation=["d"])
    cost = reply.branch_cost
    assert {r: (s.tokens, s.cpu_s) for r, s in cost.by_rank.items()} == {
        0: (150, 0.625),
        1: (200, 0.25),
        2: (300, 1.0),
    }
    assert (cost.discarded.tokens, cost.discarded.cpu_s) == (400, 1.5)
    assert reply.speculation_tokens.pending == 50
