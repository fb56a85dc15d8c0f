"""Compaction: where the history is cut, and the main chat compacting through the real
scripted model playing a context window (requests over it are refused as a provider
refuses them), with the history on disk."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from coordinator.service.chat.compaction import (
    MAX_PROMPTS,
    SUMMARY_HEADING,
    Summarized,
    facts,
    is_summary,
    split_point,
    summary_message,
)
from coordinator.service.chat.history import HistoryStore
from coordinator.service.chat.main_chat import CONTEXT_FULL, MainChat
from coordinator.service.emitter import Emitter
from coordinator.settings import Settings
from protocol.model.tokens import estimate_request
from protocol.wire.chat import Message, ToolCall, ToolResult
from protocol.wire.control import Notice
from protocol.wire.work import RunTool, ToolDone

from ..conftest import Place
from ..fakes import Replies, Workers, client, run, scripted
from .test_main_chat import call, main_rule

REQ = 43
BIG = "x = compute(value, other)  # a line of a large file\n" * 200  # ~10 KB


def turn(n: int, result: str = "small", *, write: bool = False) -> list[Message]:
    name = "write_file" if write else "read_file"
    calls = (ToolCall(f"c{n}", name, f'{{"file_path": "f{n}.py"}}'),)
    return [
        Message.user(f"prompt {n}"),
        Message.assistant("looking", calls),
        Message.tool((ToolResult(f"c{n}", name, output=result),)),
        Message.assistant(f"answer {n}"),
    ]


# -- where the cut falls -----------------------------------------------------------------


def test_the_cut_falls_at_a_turn_start_and_keeps_the_last_turns_whole() -> None:
    history = [m for n in range(6) for m in turn(n, BIG)]
    per_turn = estimate_request(None, history[:4], ())
    cut = split_point(history, keep_tokens=2 * per_turn + 10)
    assert cut == 16  # the last two turns (of four messages each) stay whole
    assert history[cut] == Message.user("prompt 4")


def test_a_turn_larger_than_the_budget_is_cut_between_steps_never_between_call_and_result() -> None:
    steps = []
    for i in range(5):
        steps.append(Message.assistant("", (ToolCall(f"s{i}", "read_file", "{}"),)))
        steps.append(Message.tool((ToolResult(f"s{i}", "read_file", output=BIG),)))
    history = [Message.user("one huge turn"), *steps]
    per_step = estimate_request(None, steps[:2], ())
    cut = split_point(history, keep_tokens=2 * per_step + 10)
    assert cut is not None and history[cut].role == "assistant"
    assert len(history) - cut == 4  # two steps kept, each call with its result
    # Even a budget no step fits keeps the last step whole.
    assert split_point(history, keep_tokens=1) == len(history) - 2


def test_nothing_to_cut_when_only_an_earlier_summary_precedes_the_tail() -> None:
    history = [summary_message("earlier"), *turn(9)]
    assert split_point(history, keep_tokens=10**6) is None
    assert split_point(history, keep_tokens=10**6, on_request=True) is None
    two = [summary_message("earlier"), *turn(8), *turn(9)]
    assert split_point(two, keep_tokens=10**6, on_request=True) == 5


def test_the_facts_list_prompts_and_the_files_written_successfully() -> None:
    old = [*turn(1, write=True), *turn(2), *turn(3, write=True)]
    old[-2] = Message.tool((ToolResult("c3", "write_file", error="refused"),))
    text = facts(old)
    assert "- prompt 1\n- prompt 2\n- prompt 3" in text
    assert "Files written by tools: f1.py" in text and "f3.py" not in text


def test_the_facts_kept_one_compaction_at_a_time_are_the_facts_of_the_whole_history() -> None:
    """Each compaction adds only the part it summarizes (after the earlier summary) to
    what the summary stands for; the result is what reading the whole history gives."""
    full = [m for n in range(MAX_PROMPTS + 12) for m in turn(n, write=n % 3 == 0)]
    full += [  # f0.py written again: listed once
        Message.user("prompt 99"),
        Message.assistant("", (ToolCall("again", "write_file", '{"file_path": "f0.py"}'),)),
        Message.tool((ToolResult("again", "write_file", output="ok"),)),
    ]
    summarized, start = Summarized(), 0
    for end in (8, 20, 64, 100, len(full)):
        old = [summary_message("earlier"), *full[start:end]] if start else full[start:end]
        summarized, start = summarized.plus(old), end
    assert summarized.text() == facts(full)
    assert "(after 13 earlier prompts)" in facts(full)  # 43 prompts, the latest 30 listed
    assert summarized.files.count("f0.py") == 1


def test_a_loaded_session_knows_what_its_summary_stands_for() -> None:
    full = [*turn(1, write=True), *turn(2), *turn(3)]
    view = [summary_message("turns 1 and 2"), *turn(3)]
    assert Summarized.of_session(full, view) == Summarized().plus(full[:8])
    assert Summarized.of_session(full, full) == Summarized()  # never compacted


# -- the chat ----------------------------------------------------------------------------


def big_reader(size: int = len(BIG)) -> Callable[[RunTool], Any]:
    async def answer(job: RunTool) -> ToolDone:
        body = (BIG * (size // len(BIG) + 1))[:size]
        return ToolDone(job.job_id, job.epoch, ToolResult(job.call.id, job.call.name, body))

    return answer


SESSION_RULES = [
    main_rule({"last_tool": "read_file"}, text="Read it."),
    main_rule({"last_user": "read"}, tool_calls=[call("read_file", file_path="big.py")]),
    {"when": {"purpose": "compaction"}, "reply": {"text": "The person is reading files."}},
]


async def make_chat(place: Place, server: Any, workers: Workers, **settings: Any) -> MainChat:
    from coordinator.service.routing import WorkerEventRouter

    chat = MainChat(
        place.root, Settings(**{"enable_memory": False, **settings}), workers, client(server)
    )
    router = WorkerEventRouter({"tool": chat})
    workers.on_event, workers.on_death = router.on_event, router.on_death
    return chat


async def close(chat: MainChat) -> None:
    await chat.shutdown()
    await chat.model.aclose()


def test_a_long_session_compacts_by_itself_and_never_sends_a_request_over_the_window(
    place: Place,
) -> None:
    replies = Replies()
    workers = Workers(answer=big_reader())

    async def main() -> MainChat:
        chat = await make_chat(place, server, workers)
        try:
            assert chat.context.source == "default"
            for n in range(14):
                result = await chat.run_turn(Emitter(replies, b"c", REQ + n), f"read {n}")
                assert result.reason == "completed", result
            assert chat.context.source == "endpoint"  # the scripted model lists the window
            return chat
        finally:
            await close(chat)

    with scripted(*SESSION_RULES, context_window=12_000) as server:
        chat = run(main(), timeout=60)
        requests = list(server.requests)
    posts = [r for r in requests if r["method"] == "POST"]
    assert not [r for r in posts if r["status"] != 200]  # nothing was refused
    assert chat.compactions >= 2
    notices = [n.text for n in replies.of(Notice) if n.text.startswith("Compacted")]
    assert len(notices) == chat.compactions
    assert is_summary(chat.history[0])
    # The summary keeps the model's words and every prompt; the last turn is whole.
    summary = chat.history[0].reminders[0]
    assert summary.startswith(SUMMARY_HEADING) and "The person is reading files." in summary
    assert "- read 0" in summary
    assert [m.text for m in chat.history[-4:] if m.role == "user"] == ["read 13"]
    # On disk: every message, and a restart loads the compacted view.
    report = HistoryStore(place.root).load_report()
    assert len(report.full_messages) == 14 * 4
    assert len(report.compactions) == chat.compactions
    assert report.messages == chat.history
    # Speculations fork from the compacted view.
    assert chat.snapshot is not None and chat.snapshot.history[0] == chat.history[0]


def test_a_restarted_chats_next_summary_still_lists_the_prompts_from_before(
    place: Place,
) -> None:
    """The facts of what the summary on disk stands for come back with the session, so
    a compaction after a restart does not lose the prompts it summarized earlier."""
    replies = Replies()

    async def session(first: int, turns: int) -> MainChat:
        chat = await make_chat(place, server, Workers(answer=big_reader()))
        try:
            for n in range(first, first + turns):
                result = await chat.run_turn(Emitter(replies, b"c", REQ + n), f"read {n}")
                assert result.reason == "completed", result
            return chat
        finally:
            await close(chat)

    with scripted(*SESSION_RULES, context_window=12_000) as server:
        before = run(session(0, 8), timeout=60).compactions
        chat = run(session(8, 8), timeout=60)
    assert before >= 1 and chat.compactions > before
    summary = chat.history[0].reminders[0]
    assert "- read 0\n- read 1\n- read 2" in summary


@pytest.mark.parametrize("style", ["openai", "vllm", "dashscope", "llamacpp"])
def test_a_provider_overflow_error_is_compacted_and_retried_once(place: Place, style: str) -> None:
    """The endpoint reports no window and the setting claims a large one: the provider's
    400 is the first sign. The chat compacts, retries once and learns a smaller window."""
    replies = Replies()
    workers = Workers(answer=big_reader())

    async def main() -> tuple[MainChat, list[str]]:
        chat = await make_chat(place, server, workers, context_window=1_000_000)
        try:
            reasons = []
            for n in range(8):
                result = await chat.run_turn(Emitter(replies, b"c", REQ + n), f"read {n}")
                reasons.append(result.reason)
            return chat, reasons
        finally:
            await close(chat)

    with scripted(*SESSION_RULES, context_window=9_000, overflow_style=style) as server:
        chat, reasons = run(main(), timeout=60)
        refused = [r for r in server.requests if r["outcome"] == "context_overflow"]
    assert reasons == ["completed"] * 8
    assert refused, "the session should have reached the window"
    assert chat.compactions >= 1 and chat.context.source == "provider"
    assert chat.context.window <= 9_000


def test_an_overflow_that_compaction_cannot_fix_ends_the_turn_with_one_sentence(
    place: Place,
) -> None:
    replies = Replies()

    async def main() -> str:
        chat = await make_chat(place, server, Workers(), context_window=1_000_000)
        try:
            result = await chat.run_turn(Emitter(replies, b"c", REQ), "hello " * 4000)
            assert result.reason == "error"
            return result.message
        finally:
            await close(chat)

    with scripted(context_window=2_000) as server:
        message = run(main())
    assert message == CONTEXT_FULL


def test_one_huge_tool_result_is_capped_with_a_note(place: Place) -> None:
    workers = Workers(answer=big_reader(200_000))

    async def main() -> MainChat:
        chat = await make_chat(place, server, workers)
        try:
            assert (await chat.run_turn(Emitter(Replies(), b"c", REQ), "read it")).reason == (
                "completed"
            )
            return chat
        finally:
            await close(chat)

    with scripted(*SESSION_RULES, context_window=16_000) as server:
        chat = run(main())
        refused = [r for r in server.requests if r["status"] != 200]
    [result] = chat.history[2].tool_results
    assert result.output is not None and len(result.output) < 200_000
    assert "[Output cut to fit the model's context window: showing" in result.output
    assert not refused


def test_compact_on_request_keeps_the_last_turn_and_a_speculation_accepted_after_it_joins_the_view(
    place: Place,
) -> None:
    """A speculation forked before a compaction stays valid: its messages start with its
    own prompt, so at Tab they join after the compacted view, on disk as in memory."""
    replies = Replies()

    async def main() -> tuple[MainChat, str | None, str | None]:
        chat = await make_chat(place, server, Workers(answer=big_reader()))
        try:
            for n in range(3):
                await chat.run_turn(Emitter(replies, b"c", REQ + n), f"read {n}")
            done = await chat.compact_on_request(Emitter(replies, b"c", 99))
            again = await chat.compact_on_request(Emitter(replies, b"c", 100))
            speculated = [
                Message.user("run the tests"),
                Message.assistant("All pass."),
            ]
            async with chat.turn_slot():  # as the acceptor records it
                await chat.extend_from_speculation(speculated)
            return chat, done, again
        finally:
            await close(chat)

    with scripted(*SESSION_RULES) as server:
        chat, done, again = run(main())
    assert done is not None and done.startswith("Compacted the conversation: 8 earlier messages")
    assert again is None  # only the last turn is left besides the summary
    assert is_summary(chat.history[0])
    assert [m.text for m in chat.history if m.role == "user"][1:] == ["read 2", "run the tests"]
    assert HistoryStore(place.root).load() == chat.history
    assert chat.snapshot is not None and chat.snapshot.history == tuple(chat.history)



def test_an_accepted_turn_past_compact_at_is_compacted_after_the_accept_holding_the_slot(
    place: Place,
) -> None:
    """The accept leaves the turn slot without waiting for the fast model; the compaction
    its turn made due keeps the slot (a prompt sent meanwhile waits for it), and the next
    speculation forks from the compacted history, never the over-full one."""
    replies = Replies()
    slow = {"when": {"purpose": "compaction"}, "times": 1,
            "reply": {"text": "The person read three files.", "latency_ms": 1_500}}  # fmt: skip
    accepted = [Message.user("read them all")]
    for n in range(3):
        calls = (ToolCall(f"r{n}", "read_file", f'{{"file_path": "f{n}.py"}}'),)
        result = ToolResult(f"r{n}", "read_file", BIG)
        accepted += [Message.assistant("", calls), Message.tool((result,))]
    accepted.append(Message.assistant("Read them."))

    async def main() -> tuple[MainChat, bool, int]:
        chat = await make_chat(place, server, Workers())
        try:
            assert (await chat.run_turn(Emitter(replies, b"c", REQ), "hello")).reason == "completed"
            before = chat.snapshot
            async with chat.turn_slot():  # as the acceptor records it
                await chat.extend_from_speculation(accepted)
            # Left at once: the fast model has not answered yet, and holds the slot.
            held, compactions = chat.busy, chat.compactions
            assert chat.snapshot is before
            waiting = asyncio.ensure_future(
                chat.run_turn(Emitter(replies, b"c", REQ + 1), "hello again")
            )
            await chat.forkable()
            assert chat.snapshot is not None and is_summary(chat.snapshot.history[0])
            assert (await waiting).reason == "completed"
            return chat, held, compactions
        finally:
            await close(chat)

    with scripted(slow, *SESSION_RULES, context_window=12_000) as server:
        chat, held, compactions = run(main(), timeout=60)
        purposes = [r["purpose"] for r in server.requests if r["method"] == "POST"]
    assert held and compactions == 0
    report = HistoryStore(place.root).load_report()
    assert chat.compactions == 1 and len(report.compactions) == 1
    assert report.messages == chat.history
    assert purposes == ["main", "compaction", "main"]  # the waiting prompt ran after it
    prompts = [m.text for m in report.full_messages if m.role == "user" and m.text]
    assert prompts == ["hello", "read them all", "hello again"]


def test_a_failing_fast_model_still_compacts_with_the_facts(place: Place) -> None:
    replies = Replies()
    rules = [
        main_rule({"last_tool": "read_file"}, text="Read it."),
        main_rule({"last_user": "read"}, tool_calls=[call("read_file", file_path="big.py")]),
        {
            "when": {"purpose": "compaction"},
            "fail": {"status": 500, "times": 100},
            "reply": {"text": "never"},
        },
    ]

    async def main() -> MainChat:
        chat = await make_chat(place, server, Workers(answer=big_reader()))
        try:
            for n in range(3):
                await chat.run_turn(Emitter(replies, b"c", REQ + n), f"read {n}")
            assert await chat.compact_on_request(Emitter(replies, b"c", 99)) is not None
            return chat
        finally:
            await close(chat)

    with scripted(*rules) as server:
        chat = run(main())
    [notice] = [n.text for n in replies.of(Notice) if n.text.startswith("Compacted")]
    assert "the fast model failed: kept the facts only" in notice
    summary = chat.history[0].reminders[0]
    assert "- read 0\n- read 1" in summary and "Read it." in summary  # its last answer
    report = HistoryStore(place.root).load_report()
    assert [c.by for c in report.compactions] == ["fallback"]
