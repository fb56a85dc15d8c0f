"""The prefetch handle, one test per row of the seed's behaviour table and per cleanup path.

Each test drives a ``MemoryPrefetcher`` through a simulated turn (real asyncio timing) while
recall talks to the real scripted model server over HTTP with a per-rule latency.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from coordinator.memory import (
    EMPTY_RECALL,
    AbortReason,
    AbortSignal,
    MemoryPrefetcher,
    MemoryPrefetchHandle,
    RecallResult,
)
from coordinator.memory.abort import AbortLike
from protocol.model import ModelClient
from protocol.wire.chat import message_to_openai

from .test_memory_support import (
    Project,
    RecordingModel,
    TurnTrace,
    make_prefetcher,
    make_project,
    manifest_of,
    recall_requests,
    recall_rule,
    run,
    scripted,
    settle,
    simulated_turn,
    until,
    with_client,
)


@pytest.fixture
def project(tmp_path: Path) -> Project:
    return make_project(tmp_path)


def deploy_rule(project: Project, latency_ms: int) -> dict[str, object]:
    return recall_rule("deploy", paths=[project.paths["deploy"]], latency_ms=latency_ms)


# --------------------------------------------------------------------------- behaviour table


def test_row1_recall_done_before_request_is_injected_on_the_user_query(project: Project) -> None:
    async def main(client: ModelClient) -> tuple[TurnTrace, MemoryPrefetcher]:
        pf = make_prefetcher(project, client)
        trace = await simulated_turn(
            pf, "deploy to staging", prepare_s=0.3, tool_turns=[0.02], prepared=lambda: _settled(pf)
        )
        return trace, pf

    with scripted(deploy_rule(project, latency_ms=0)) as server:
        trace, pf = with_client(server, main)
    reminders = trace.user_message.reminders
    assert reminders[0].startswith("## Relevant memory")  # memory leads the reminders
    assert reminders[1] == "<environment details>"
    assert "Deploy process" in reminders[0]
    assert trace.consume1_s < 0.005  # ~0 wait
    assert trace.tool_messages[0].reminders == ()  # used once
    assert pf.last_consumption is not None and pf.last_consumption.point == "user_query"
    assert pf.pending is None and pf.surfaced_paths == {project.paths["deploy"]}


def test_row2_slow_recall_is_not_waited_for_and_lands_after_the_first_tool_results(
    project: Project,
) -> None:
    async def main(client: ModelClient) -> tuple[TurnTrace, float, MemoryPrefetcher]:
        pf = make_prefetcher(project, client)
        t0 = time.perf_counter()
        trace = await simulated_turn(
            pf, "deploy to staging", prepare_s=0.01, tool_turns=[0.3, 0.05, 0.05],
            tool_ready=lambda _: _settled(pf),
        )
        return trace, time.perf_counter() - t0, pf

    # The recall takes 1.5 s: the query's request cannot have waited for it (it carries
    # no memory), and the memory lands with the first tool results once it is ready.
    with scripted(deploy_rule(project, latency_ms=1500)) as server:
        trace, _, pf = with_client(server, main)
    assert trace.user_message.reminders == ("<environment details>",)
    first, second, third = trace.tool_messages
    assert len(first.reminders) == 1 and "Deploy process" in first.reminders[0]
    assert second.reminders == () and third.reminders == ()
    # on the wire the tool result comes right after the call, the memory after it
    wire = message_to_openai(first)
    assert [m["role"] for m in wire] == ["tool", "user"]
    assert "Relevant memory" in wire[1]["content"]
    assert pf.last_consumption is not None and pf.last_consumption.point == "tool_results"


def test_row3_no_hard_short_timeout_a_recall_slower_than_1s_still_lands(
    project: Project,
) -> None:
    async def main(client: ModelClient) -> TurnTrace:
        pf = make_prefetcher(project, client)
        return await simulated_turn(
            pf, "deploy to staging", prepare_s=0.01, tool_turns=[0.45, 0.45, 0.5],
            tool_ready=lambda i: i < 2 or _settled(pf),
        )

    # The recall takes at least 1.05 s: it cannot be ready for the first two tool results
    # (0.45 s and 0.9 s in), and the third tool turn lasts until it is, so a loaded machine
    # cannot make it miss (a 1 s cut-off would lose it and fail the last check).
    with scripted(deploy_rule(project, latency_ms=1_050)) as server:
        trace = with_client(server, main)
    memories = [m.reminders for m in trace.tool_messages]
    assert memories[0] == () and memories[1] == ()
    assert len(memories[2]) == 1 and "Deploy process" in memories[2][0]


def test_row4_slow_recall_and_no_tools_is_lost_and_never_carried_over(project: Project) -> None:
    rules = [
        deploy_rule(project, latency_ms=200),
        recall_rule("run pytest", paths=[project.paths["testing"]], latency_ms=0),
    ]

    async def main(client: ModelClient) -> tuple[TurnTrace, TurnTrace, MemoryPrefetcher]:
        pf = make_prefetcher(project, client)
        first = await simulated_turn(pf, "deploy to staging", prepare_s=0.01, answer_s=0.02)
        # normal end of turn: the handle stays pending; let the first recall finish unused
        pending = pf.pending
        assert pending is not None
        await until(pending.is_settled)
        assert pf.pending is pending
        second = await simulated_turn(
            pf, "run pytest", prepare_s=0.3, tool_turns=[0.05], prepared=lambda: _settled(pf)
        )
        return first, second, pf

    with scripted(*rules) as server:
        first, second, pf = with_client(server, main)
    assert first.user_message.reminders == ("<environment details>",)
    user2 = second.user_message.reminders
    assert "Running tests" in user2[0] and "Deploy process" not in "".join(user2)
    assert len(second.tool_messages) == 1
    assert all(m.reminders == () for m in second.tool_messages)
    assert pf.surfaced_paths == {project.paths["testing"]}  # the lost one was never surfaced


def test_row5_second_query_aborts_the_running_first_recall(project: Project) -> None:
    rules = [
        deploy_rule(project, latency_ms=2_000),
        recall_rule("run pytest", paths=[project.paths["testing"]], latency_ms=0),
    ]

    async def main(
        client: ModelClient,
    ) -> tuple[MemoryPrefetchHandle, RecordingModel, TurnTrace, MemoryPrefetcher]:
        model = RecordingModel(client)
        pf = make_prefetcher(project, model)
        pf.fire("deploy to staging")
        first = pf.pending
        # the first recall request is in flight: the model server has it
        await until(lambda: len(server.requests) == 1)
        assert first is not None and not first.is_settled()
        trace = await simulated_turn(
            pf, "run pytest", prepare_s=0.15, prepared=lambda: _settled(pf)
        )
        await asyncio.gather(first.task, return_exceptions=True)
        return first, model, trace, pf

    with scripted(*rules) as server:
        first, model, trace, _ = with_client(server, main)
        purposes = [r["purpose"] for r in server.requests]
    # Nobody waited for the 2 s recall: it was cancelled mid-request, never answered.
    assert first.abort.aborted and first.abort.reason == AbortReason.NEW_USER_QUERY
    assert first.task.cancelled()
    assert model.outcomes == ["cancelled", "ok"]  # the first HTTP request was cancelled
    assert purposes == ["recall", "recall"]
    assert "Running tests" in trace.user_message.reminders[0]


def _settled(pf: MemoryPrefetcher) -> bool:
    """The current query's recall has its answer (or there is none to wait for)."""
    return pf.pending is None or pf.pending.is_settled()


# --------------------------------------------------------------------------- cleanup paths


def _early_exit(pf: MemoryPrefetcher, how: str, turn_abort: AbortSignal) -> None:
    if how == "reset":
        pf.reset()
    elif how == "turn_abort":
        turn_abort.abort("user pressed Esc")
    else:
        pf.abort_and_clear(AbortReason(how))


@pytest.mark.parametrize(
    "how",
    [
        "reset",
        "turn_abort",
        AbortReason.MAX_SESSION_TURNS.value,
        AbortReason.BOUNDED_TURNS_ZERO.value,
        AbortReason.SESSION_TOKEN_LIMIT.value,
        AbortReason.CONTROL_STOP.value,
        AbortReason.LOOP_DETECTED.value,
        AbortReason.ERROR.value,
        AbortReason.ABNORMAL_EXIT.value,
    ],
)
def test_early_exits_cancel_the_recall(project: Project, how: str) -> None:
    async def main(
        client: ModelClient,
    ) -> tuple[MemoryPrefetchHandle, RecordingModel, MemoryPrefetcher, float]:
        model = RecordingModel(client)
        pf = make_prefetcher(project, model)
        turn_abort = AbortSignal()
        handle = pf.fire("deploy to staging", turn_abort)
        assert handle is not None and turn_abort.listener_count == 1
        await until(lambda: model.started == 1)
        assert pf.consume_for_user_query() is None  # not settled: skipped, no waiting
        t0 = time.monotonic()
        _early_exit(pf, how, turn_abort)
        await asyncio.gather(handle.task, return_exceptions=True)
        unwound = time.monotonic() - t0
        await until(lambda: turn_abort.listener_count == 0)  # bridge removed once settled
        return handle, model, pf, unwound

    with scripted(deploy_rule(project, latency_ms=1_500)) as server:
        handle, model, pf, unwound = with_client(server, main)
    assert handle.task.cancelled() and unwound < 0.2
    assert model.outcomes == ["cancelled"]
    if how != "turn_abort":  # a turn abort also leads the loop to abort_and_clear; here it didn't
        assert pf.pending is None
    assert pf.consume_for_tool_results() is None  # nothing arrives later
    assert pf.surfaced_paths == set()


def test_normal_end_of_turn_keeps_the_pending_handle(project: Project) -> None:
    async def main(client: ModelClient) -> tuple[MemoryPrefetcher, str | None]:
        pf = make_prefetcher(project, client)
        await simulated_turn(pf, "deploy to staging", prepare_s=0.01)
        assert pf.pending is not None and not pf.pending.abort.aborted
        await settle(pf)
        # a later tool-result turn of the same query (e.g. a resumed turn) may still use it
        return pf, pf.consume_for_tool_results()

    with scripted(deploy_rule(project, latency_ms=100)) as server:
        _, late = with_client(server, main)
    assert late is not None and "Deploy process" in late


def test_turn_abort_already_set_aborts_at_once(project: Project) -> None:
    async def main(client: ModelClient) -> tuple[TurnTrace, MemoryPrefetcher]:
        pf = make_prefetcher(project, client)
        turn_abort = asyncio.Event()
        turn_abort.set()
        trace = await simulated_turn(pf, "deploy", turn_abort=turn_abort, tool_turns=[0.05])
        return trace, pf

    with scripted(deploy_rule(project, latency_ms=0)) as server:
        trace, pf = with_client(server, main)
        assert recall_requests(server) == []
    assert trace.user_message.reminders == ("<environment details>",)
    assert pf.last_consumption is not None and pf.last_consumption.result == EMPTY_RECALL


def test_asyncio_event_turn_abort_is_bridged(project: Project) -> None:
    async def main(client: ModelClient) -> tuple[MemoryPrefetchHandle, RecordingModel]:
        model = RecordingModel(client)
        pf = make_prefetcher(project, model)
        turn_abort = asyncio.Event()
        handle = pf.fire("deploy", turn_abort)
        await until(lambda: model.started == 1)
        turn_abort.set()
        assert handle is not None
        await asyncio.gather(handle.task, return_exceptions=True)
        return handle, model

    with scripted(deploy_rule(project, latency_ms=1_500)) as server:
        handle, model = with_client(server, main)
    assert handle.task.cancelled() and model.outcomes == ["cancelled"]


# --------------------------------------------------------------------------- surfaced / misc


def test_surfaced_paths_are_excluded_until_reset(project: Project) -> None:
    async def main(client: ModelClient) -> MemoryPrefetcher:
        pf = make_prefetcher(project, client)
        await simulated_turn(pf, "deploy to staging", prepare_s=0.3)
        await simulated_turn(pf, "deploy to production", prepare_s=0.3)
        pf.reset()
        await simulated_turn(pf, "deploy again", prepare_s=0.3)
        return pf

    with scripted(deploy_rule(project, latency_ms=0)) as server:
        pf = with_client(server, main)
        first, second, third = (manifest_of(r) for r in recall_requests(server))
    deploy = project.paths["deploy"]
    assert deploy in first and deploy not in second and deploy in third
    assert pf.surfaced_paths == {deploy}


def test_empty_result_is_consumed_once_and_surfaces_nothing(project: Project) -> None:
    async def main(client: ModelClient) -> tuple[TurnTrace, MemoryPrefetcher]:
        pf = make_prefetcher(project, client)
        trace = await simulated_turn(pf, "deploy", prepare_s=0.3, tool_turns=[0.02])
        return trace, pf

    with scripted(recall_rule("deploy", paths=[])) as server:
        trace, pf = with_client(server, main)
    assert trace.user_message.reminders == ("<environment details>",)
    assert pf.pending is None and pf.surfaced_paths == set()
    assert pf.last_consumption is not None and pf.last_consumption.point == "user_query"
    assert pf.stats.consumed_user_query == 1 and pf.stats.injected == 0


def test_disabled_memory_makes_no_recall_call(project: Project) -> None:
    async def main(client: ModelClient) -> tuple[TurnTrace, MemoryPrefetcher]:
        pf = make_prefetcher(project, client, enabled=False)
        trace = await simulated_turn(pf, "deploy", prepare_s=0.05, tool_turns=[0.05])
        return trace, pf

    with scripted(deploy_rule(project, latency_ms=0)) as server:
        trace, pf = with_client(server, main)
        assert recall_requests(server) == []
    assert pf.pending is None and pf.stats.fired == 0
    assert trace.user_message.reminders == ("<environment details>",)


def test_a_recall_that_raises_never_breaks_the_turn() -> None:
    async def broken(query: str, excluded: frozenset[str], abort: AbortLike) -> RecallResult:
        await asyncio.sleep(0.01)
        raise RuntimeError("disk on fire")

    async def main() -> tuple[TurnTrace, MemoryPrefetcher]:
        pf = MemoryPrefetcher(broken)
        trace = await simulated_turn(pf, "anything", prepare_s=0.05, tool_turns=[0.02])
        return trace, pf

    trace, pf = run(main())
    assert trace.user_message.reminders == ("<environment details>",)
    assert pf.stats.failed == 1 and pf.pending is None


def test_aclose_unwinds_the_pending_recall(project: Project) -> None:
    async def main(client: ModelClient) -> MemoryPrefetchHandle | None:
        pf = make_prefetcher(project, client)
        handle = pf.fire("deploy")
        await until(lambda: bool(recall_requests(server)))  # in flight, at the model
        await pf.aclose()
        return handle

    with scripted(deploy_rule(project, latency_ms=2_000)) as server:
        handle = with_client(server, main)
    assert handle is not None and handle.task.done()
