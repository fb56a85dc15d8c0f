"""The control commands built directly: each handler gets the service as it sees it
(``commands/deps.HandlerDeps``) with the real ``Session`` over stand-ins of the chat and
the speculation manager, replies land in a list, and the registry is checked against the
protocol's request union."""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
import typing
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from coordinator.service.commands import HANDLERS, dispatch, registry
from coordinator.service.commands import chat as chat_commands
from coordinator.service.commands import live as live_commands
from coordinator.service.commands import service as service_commands
from coordinator.service.commands import speculation as speculation_commands
from coordinator.service.commands import undo as undo_commands
from coordinator.service.commands.deps import HandlerDeps
from coordinator.service.pool.workers import WorkerHandle
from coordinator.service.speculation import (
    AcceptCancelled,
    AcceptFallback,
    BranchRun,
    Debounced,
    Speculation,
    Suggestion,
)
from protocol.wire import control
from protocol.wire.approval import ApprovalMode
from protocol.wire.chat import ToolCall
from protocol.wire.control import (
    AcceptRequest,
    ApprovalAnswer,
    AskRequest,
    CancelRequest,
    CompactRequest,
    ContextInfo,
    ErrorReply,
    KillWorkerRequest,
    Notice,
    OkReply,
    RejectRequest,
    ResetRequest,
    SpeculationStatus,
    StatsReply,
    StatsRequest,
    StatusReply,
    StatusRequest,
    StopRequest,
    SuggestionReply,
    SuggestionRequest,
    TextChunk,
    TurnEnded,
    WorkersReply,
    WorkersRequest,
    WorkerState,
)

from .fakes import FakeSession, Workers, run


@dataclass
class Deps(FakeSession):
    """Everything any handler may ask for (a ``HandlerDeps``); each test reads only
    what the handler under test used."""

    pool: Workers = field(default_factory=lambda: Workers(answer=None))
    stop_requested: asyncio.Event = field(default_factory=asyncio.Event)
    project_root: Path = Path("/work/project")
    epoch: int = 12345
    uptime_s: float = 3.14159
    base_url: str = "http://127.0.0.1:9/v1"
    scripted_model: bool = True

    async def send(self, identity: bytes, reply: control.ControlReply) -> None:
        await self.replies.send(identity, reply)


def ask(text: str, **fields: Any) -> AskRequest:
    return AskRequest(req_id=3, text=text, **fields)


# -- the registry --------------------------------------------------------------------------


def test_every_request_type_has_exactly_one_handler() -> None:
    requests = set(typing.get_args(control.ControlRequest))
    assert len(requests) >= 12
    assert set(HANDLERS) == requests
    # Registered where they are defined: a handler's module is one of the command modules.
    modules = {chat_commands.__name__, live_commands.__name__, service_commands.__name__,
               speculation_commands.__name__, undo_commands.__name__}
    assert {handler.__module__ for handler in HANDLERS.values()} == modules


def test_a_second_handler_or_one_for_another_type_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(registry, "HANDLERS", {})

    @registry.handles(StopRequest)
    async def stop(deps: HandlerDeps, identity: bytes, req: StopRequest) -> None: ...

    with pytest.raises(TypeError, match="StopRequest already has a handler"):

        @registry.handles(StopRequest)
        async def stop_again(deps: HandlerDeps, identity: bytes, req: StopRequest) -> None: ...

    with pytest.raises(TypeError, match="registered for StatusRequest but takes 'StopRequest'"):

        @registry.handles(StatusRequest)
        async def status(deps: HandlerDeps, identity: bytes, req: StopRequest) -> None: ...

    assert {StopRequest: stop} == registry.HANDLERS


def test_dispatch_finds_the_handler_by_the_request_type(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    deps = Deps()
    run(dispatch(deps, b"client", StatsRequest(req_id=8)))
    [(identity, reply)] = deps.replies.sent
    assert identity == b"client" and isinstance(reply, StatsReply) and reply.req_id == 8
    monkeypatch.setattr(registry, "HANDLERS", {})
    with pytest.raises(LookupError, match="no handler for StatsRequest"):
        run(dispatch(deps, b"client", StatsRequest(req_id=9)))


# -- ask -----------------------------------------------------------------------------------


def test_an_empty_query_is_a_bad_request() -> None:
    deps = Deps()
    run(chat_commands.ask(deps, b"c", ask("   ")))
    [reply] = deps.replies.replies
    assert isinstance(reply, ErrorReply) and reply.code == "bad_request"
    assert deps.log == []


def test_a_query_while_another_turn_waits_for_approval_is_refused_at_once() -> None:
    deps = Deps()
    deps.chat.waiting = ToolCall("c1", "write_file", '{"file_path": "a.py"}')
    run(chat_commands.ask(deps, b"c", ask("something")))
    [reply] = deps.replies.replies
    assert isinstance(reply, ErrorReply) and reply.code == "busy"
    assert "approval of write_file" in reply.message and "after 90 s" in reply.message
    assert deps.log == []  # no turn, and the suggestion is left alone


def test_a_query_runs_a_turn_and_the_next_suggestion_starts_before_its_end_is_sent() -> None:
    deps = Deps()
    deps.chat.busy = True  # another turn holds the chat: this one queues behind it
    request = ask(" explain it ", approval_mode=ApprovalMode.YOLO, can_confirm=True, client_pid=99)
    run(chat_commands.ask(deps, b"c", request))
    assert deps.log == [
        "cancel_generation",
        ("dismiss", "user typed something else"),
        "run_turn",
        ("after_turn", "completed", ApprovalMode.YOLO, 0),  # no TurnEnded out yet
    ]
    assert deps.chat.turns == [
        {
            "req_id": 3,
            "text": "explain it",
            "mode": ApprovalMode.YOLO,
            "can_confirm": True,
            "client_pid": 99,
            "from_accept": False,
        }
    ]
    notice, chunk, end = deps.replies.replies
    assert notice == Notice(3, "Another turn is running; this one starts when it ends.")
    assert chunk == TextChunk(3, "the answer")
    assert isinstance(end, TurnEnded)
    assert (end.req_id, end.reason, end.message, end.speculated) == (
        3,
        "completed",
        "all done",
        False,
    )


def test_a_query_without_a_mode_runs_in_the_chats_mode() -> None:
    deps = Deps()
    run(chat_commands.ask(deps, b"c", ask("explain it")))
    assert deps.chat.turns[0]["mode"] is ApprovalMode.DEFAULT


def test_the_suggested_prompt_applies_its_speculation_instead_of_a_turn() -> None:
    deps = Deps()
    deps.speculation.offer("add a test", "completed")
    run(chat_commands.ask(deps, b"c", ask("add a test", accept_method="tab")))
    assert deps.log == ["cancel_generation", ("accept", "tab", 0)]
    [end] = deps.replies.replies
    assert isinstance(end, TurnEnded)
    assert (end.reason, end.message, end.speculated) == ("accepted", "saved 1.50s", True)


def test_a_second_accept_at_once_is_debounced() -> None:
    deps = Deps()
    deps.speculation.offer("add a test", "completed")
    deps.speculation.accepting = Debounced()
    run(chat_commands.ask(deps, b"c", ask("add a test")))
    [end] = deps.replies.replies
    assert isinstance(end, TurnEnded) and end.reason == "debounced"
    assert "run_turn" not in deps.log


def test_a_speculation_that_cannot_be_used_runs_the_prompt_as_a_normal_turn() -> None:
    deps = Deps()
    deps.speculation.offer("add a test", "failed")
    deps.speculation.accepting = AcceptFallback("its speculation failed (boom)")
    run(chat_commands.ask(deps, b"c", ask("add a test")))
    assert deps.log[:3] == ["cancel_generation", ("accept", "enter", 0), "run_turn"]
    notice = deps.replies.of(Notice)
    assert notice == [Notice(3, "Running it as a normal turn: its speculation failed (boom).")]
    assert deps.replies.of(TurnEnded)[0].reason == "completed"


@pytest.mark.parametrize(
    ("status", "said"),
    [("running", "still running"), ("completed", "completed"), ("failed", None), (None, None)],
)
def test_typing_something_else_says_which_speculation_was_thrown_away(
    status: SpeculationStatus | None, said: str | None
) -> None:
    deps = Deps()
    deps.speculation.offer("add a test", status)
    run(chat_commands.ask(deps, b"c", ask("something else")))
    assert ("dismiss", "user typed something else") in deps.log
    notices = [n.text for n in deps.replies.of(Notice)]
    if said is None:
        assert notices == []
    else:
        [text] = notices
        assert text.startswith(
            f"You typed something else: stopped the speculation of “add a test” ({said})"
        )


@pytest.mark.parametrize(
    ("status", "said"),
    [("running", "still running, waiting for it to finish"), ("completed", "completed")],
)
def test_a_typed_out_predicted_prompt_uses_its_branch(status: SpeculationStatus, said: str) -> None:
    deps = Deps()
    deps.speculation.offer("add a test", "running")
    deps.speculation.typed_branch = BranchRun(
        2, "show the diff", Speculation("s2", "x", status=status)
    )
    run(chat_commands.ask(deps, b"c", ask("show the diff")))
    assert deps.log == ["cancel_generation", ("accept", "typed", 2)]
    assert deps.replies.of(Notice) == [
        Notice(3, f"You typed a predicted prompt: using its speculation ({said}).")
    ]
    assert deps.replies.of(TurnEnded)[0].reason == "accepted"


def test_a_line_enter_filled_and_sent_unchanged_is_an_enter_accept() -> None:
    deps = Deps()
    deps.speculation.offer("add a test", "running")
    deps.speculation.typed_branch = BranchRun(
        1, "show the diff", Speculation("s2", "x", status="completed")
    )
    run(chat_commands.ask(deps, b"c", ask("show the diff", accept_method="typed", filled=True)))
    assert deps.log == ["cancel_generation", ("accept", "enter", 1)]
    assert deps.replies.of(Notice) == [
        Notice(3, "Sent the suggestion: using its speculation (completed).")
    ]


# -- the other chat commands -----------------------------------------------------------------


def test_cancel_says_whether_there_was_a_turn_to_cancel() -> None:
    deps = Deps()
    run(chat_commands.cancel(deps, b"c", CancelRequest(req_id=1, ask_req_id=7)))
    run(chat_commands.cancel(deps, b"c", CancelRequest(req_id=2, ask_req_id=8)))
    assert deps.chat.cancels == [7, 8]
    assert deps.replies.replies == [OkReply(1, "cancelled"), OkReply(2, "nothing to cancel")]


def test_cancel_reaches_a_typed_prompt_waiting_for_its_speculation() -> None:
    deps = Deps()  # the chat has no turn 9 to cancel: the prompt waits in the manager
    deps.speculation.waiting_typed = {9}
    run(chat_commands.cancel(deps, b"c", CancelRequest(req_id=1, ask_req_id=9)))
    assert ("cancel_accept", 9) in deps.log
    assert deps.replies.replies == [OkReply(1, "cancelled")]


def test_a_cancelled_typed_prompt_ends_its_turn_and_runs_nothing() -> None:
    deps = Deps()
    deps.speculation.typed_branch = BranchRun(0, "show the diff", Speculation("s", "x"))
    deps.speculation.accepting = AcceptCancelled()
    run(chat_commands.ask(deps, b"c", ask("show the diff")))
    [end] = deps.replies.of(TurnEnded)
    assert end.reason == "aborted" and "cancelled" in end.message
    assert "run_turn" not in deps.log and deps.chat.turns == []  # no normal turn after it


@pytest.mark.parametrize("found", [True, False])
def test_an_approval_answer_reaches_the_waiting_call_or_is_not_found(found: bool) -> None:
    deps = Deps()
    deps.chat.answer_found = found
    run(chat_commands.approval_answer(deps, b"c", ApprovalAnswer(5, 3, "c1", True)))
    assert deps.chat.answers == [(3, "c1", True)]
    [reply] = deps.replies.replies
    if found:
        assert reply == OkReply(5)
    else:
        assert isinstance(reply, ErrorReply) and reply.code == "not_found"


def test_reset_drops_the_suggestion_then_starts_a_new_session() -> None:
    deps = Deps()
    deps.speculation.offer("add a test", "running")
    run(chat_commands.reset(deps, b"c", ResetRequest(req_id=4)))
    assert deps.log == ["cancel_generation", ("dismiss", "reset"), "chat.reset", "new_session"]
    assert deps.replies.replies == [OkReply(4, "new session session-2")]


@pytest.mark.parametrize("busy", [False, True])
@pytest.mark.parametrize("done", ["Compacted the conversation: 6 earlier messages.", None])
def test_compact_says_what_it_did_or_that_there_was_nothing(busy: bool, done: str | None) -> None:
    deps = Deps()
    deps.chat.busy, deps.chat.compacted = busy, done
    run(chat_commands.compact(deps, b"c", CompactRequest(req_id=5)))
    assert deps.log == ["chat.compact"]
    *notices, last = deps.replies.replies
    assert notices == ([Notice(5, "A turn is running; compacting when it ends.")] if busy else [])
    assert isinstance(last, OkReply) and last.req_id == 5
    assert last.message == (done or "Nothing to compact: the session has no turn before its "
                            "last one.")


# -- speculation commands ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("request_", "waits"),
    [
        (SuggestionRequest(1), []),
        (SuggestionRequest(1, wait_visible=True), [("wait_visible", 30.0)]),
        (
            SuggestionRequest(1, wait_settled=True),
            [("wait_visible", 30.0), ("wait_settled", 60.0)],
        ),
    ],
)
def test_suggestion_waits_as_asked_then_answers(
    request_: SuggestionRequest, waits: list[tuple[str, float]]
) -> None:
    deps = Deps()
    deps.speculation.offer("add a test", "running")
    run(speculation_commands.suggestion(deps, b"c", request_))
    assert deps.log == waits
    [reply] = deps.replies.replies
    assert isinstance(reply, SuggestionReply) and reply.text == "add a test"


def test_accept_without_a_suggestion_is_not_found() -> None:
    deps = Deps()
    run(speculation_commands.accept(deps, b"c", AcceptRequest(req_id=6)))
    [reply] = deps.replies.replies
    assert isinstance(reply, ErrorReply) and reply.code == "not_found"
    assert deps.log == []


def test_accept_submits_the_suggestion_and_a_fallback_turn_knows_it_came_from_accept() -> None:
    deps = Deps()
    deps.speculation.offer("add a test", "boundary")
    deps.speculation.accepting = AcceptFallback("its speculation stopped at a boundary")
    run(speculation_commands.accept(deps, b"c", AcceptRequest(req_id=6, method="right")))
    assert ("accept", "right", 0) in deps.log
    [turn] = deps.chat.turns
    assert (turn["req_id"], turn["text"], turn["from_accept"]) == (6, "add a test", True)
    assert turn["mode"] is ApprovalMode.DEFAULT and not turn["can_confirm"]


def test_accept_of_a_rank_that_is_gone_is_not_found() -> None:
    deps = Deps()
    deps.speculation.current = Suggestion(["first", "second"])
    run(speculation_commands.accept(deps, b"c", AcceptRequest(req_id=6, index=2)))
    [reply] = deps.replies.replies
    assert isinstance(reply, ErrorReply) and reply.code == "not_found"
    assert "ranked 2" in reply.message and "live ranks: 0, 1" in reply.message
    assert deps.log == []


def test_accept_of_a_rank_submits_that_branch() -> None:
    deps = Deps()
    deps.speculation.current = Suggestion(["first", "second"])
    run(speculation_commands.accept(deps, b"c", AcceptRequest(req_id=6, index=1)))
    assert deps.log == ["cancel_generation", ("accept", "cli", 1)]


def test_accept_of_what_a_client_showed_takes_it_only_while_it_is_still_that() -> None:
    deps = Deps()
    spec = Speculation("spec-a", "first")
    deps.speculation.current = Suggestion(["first", "second"], speculation=spec)
    stale = [
        AcceptRequest(req_id=6, index=0, shown_text="first", shown_speculation="spec-old"),
        AcceptRequest(req_id=7, index=1, shown_text="an older second"),
        AcceptRequest(req_id=8, index=2, shown_text="second"),
    ]
    for request in stale:
        run(speculation_commands.accept(deps, b"c", request))
    replies = deps.replies.replies
    assert all(isinstance(r, ErrorReply) and r.code == "not_found" for r in replies), replies
    assert len(replies) == 3 and all("changed since it was shown" in r.message for r in replies)
    assert deps.log == []
    # The same speculation, or with none shown (not started yet), the same text: taken.
    run(speculation_commands.accept(deps, b"c", AcceptRequest(
        req_id=9, index=0, shown_text="first", shown_speculation="spec-a")))
    run(speculation_commands.accept(deps, b"c", AcceptRequest(
        req_id=10, index=0, shown_text="first")))
    run(speculation_commands.accept(deps, b"c", AcceptRequest(
        req_id=11, index=1, shown_text="second")))
    assert [e for e in deps.log if e != "cancel_generation"] == [
        ("accept", "cli", 0), ("accept", "cli", 0), ("accept", "cli", 1)]


def test_typed_tells_the_manager_then_answers_with_the_suggestion() -> None:
    deps = Deps()
    deps.speculation.offer("add a test", "running")
    run(speculation_commands.typed(deps, b"c", control.TypedRequest(req_id=4, text="add")))
    assert deps.log == [("typed", "add")]
    [reply] = deps.replies.replies
    assert isinstance(reply, SuggestionReply) and (reply.req_id, reply.text) == (4, "add a test")


@pytest.mark.parametrize(
    ("offered", "said"), [(True, "dismissed"), (False, "there was no suggestion")]
)
def test_reject_dismisses_the_suggestion(offered: bool, said: str) -> None:
    deps = Deps()
    if offered:
        deps.speculation.offer("add a test", "running")
    run(speculation_commands.reject(deps, b"c", RejectRequest(req_id=2)))
    assert deps.log == [("dismiss", "rejected")]
    assert deps.replies.replies == [OkReply(2, said)]


def test_stats_answers_with_the_managers_numbers() -> None:
    deps = Deps()
    deps.speculation.stats.shown = 4
    run(speculation_commands.stats(deps, b"c", StatsRequest(req_id=3)))
    [reply] = deps.replies.replies
    assert isinstance(reply, StatsReply) and (reply.req_id, reply.suggestions_shown) == (3, 4)


# -- service commands --------------------------------------------------------------------------


def answer_with_a_busy_worker(
    command: Callable[[Deps, bytes, Any], Awaitable[None]], request: Any, kind: str, job_id: str
) -> Any:
    """The one reply ``command`` sends to ``request`` while a ``kind`` worker runs ``job_id``."""
    deps = Deps()

    async def main() -> None:
        await deps.pool.acquire(kind, job_id)
        await command(deps, b"c", request)

    run(main())
    [reply] = deps.replies.replies
    return reply


def test_status_reports_the_service_its_session_and_its_pool() -> None:
    request = StatusRequest(req_id=1)
    reply = answer_with_a_busy_worker(service_commands.status, request, "tool", "tool-1")
    assert isinstance(reply, StatusReply)
    assert (reply.project, reply.pid, reply.epoch) == ("/work/project", os.getpid(), 12345)
    assert (reply.uptime_s, reply.model_endpoint, reply.scripted_model) == (
        3.142,
        "http://127.0.0.1:9/v1",
        True,
    )
    assert (reply.model, reply.fast_model, reply.session_id) == (
        "main-model",
        "fast-model",
        "session-1",
    )
    assert reply.approval_mode is ApprovalMode.DEFAULT
    assert [w.job_id for w in reply.workers] == ["tool-1"]
    assert (reply.sandbox, reply.pool_warm) == ("none", True)
    assert reply.speculation_enabled and reply.suggestions_enabled
    assert reply.context == ContextInfo(32768, "endpoint", 20000, 0.8, 1)


def test_stop_answers_then_asks_the_service_to_stop() -> None:
    deps = Deps()
    run(service_commands.stop(deps, b"c", StopRequest(req_id=1)))
    assert deps.replies.replies == [OkReply(1, "stopping")]
    assert deps.stop_requested.is_set()


def test_workers_lists_the_pools_workers() -> None:
    request = WorkersRequest(req_id=2)
    reply = answer_with_a_busy_worker(service_commands.workers, request, "speculation", "spec-1")
    assert isinstance(reply, WorkersReply)
    assert [(w.job_kind, w.state) for w in reply.workers] == [("speculation", WorkerState.BUSY)]


@pytest.fixture
def sleeper() -> Any:
    """A real process to stand in for a worker that kill-worker kills."""
    proc = subprocess.Popen(["sleep", "60"])
    yield proc
    proc.kill()
    proc.wait(timeout=10)


def test_kill_worker_sends_sigkill_to_the_worker(sleeper: subprocess.Popen[bytes]) -> None:
    deps = Deps()
    handle = WorkerHandle(pid=sleeper.pid, process=None, started_at=time.monotonic())
    deps.pool.live[handle.pid] = handle
    run(service_commands.kill_worker(deps, b"c", KillWorkerRequest(req_id=1)))  # any worker
    assert sleeper.wait(timeout=10) == -9
    assert deps.replies.replies == [OkReply(1, f"sent SIGKILL to worker {sleeper.pid}")]


@pytest.mark.parametrize(
    ("pid", "said"),
    [(None, "no workers are running"), (4242, "4242 is not a worker of this service")],
)
def test_kill_worker_with_nothing_to_kill_is_not_found(pid: int | None, said: str) -> None:
    deps = Deps()
    run(service_commands.kill_worker(deps, b"c", KillWorkerRequest(req_id=1, pid=pid)))
    [reply] = deps.replies.replies
    assert isinstance(reply, ErrorReply) and reply.code == "not_found"
    assert reply.message == f"Nothing to kill: {said}."
