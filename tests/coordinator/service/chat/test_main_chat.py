"""MainChat built directly: the real scripted model over HTTP, a real project directory
and history on disk, and a stand-in pool whose "workers" answer tool jobs through the
real event router."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import yaml

from coordinator.scripted_model import ScriptedModelServer
from coordinator.service.chat.history import HistoryStore
from coordinator.service.chat.main_chat import MainChat, TurnResult
from coordinator.service.emitter import Emitter
from coordinator.service.routing import WorkerEventRouter
from coordinator.settings import Settings
from protocol.wire.approval import ApprovalMode
from protocol.wire.chat import Message, ToolResult
from protocol.wire.control import ApprovalNeeded, TextChunk, ToolShown
from protocol.wire.work import RunTool, ToolDone

from ..conftest import Place
from ..fakes import TOOLS, Replies, Workers, client, requests_of, run, scripted, until

REQ = 41  # the request id of the turn under test


def call(name: str, call_id: str = "call_1", **arguments: Any) -> dict[str, Any]:
    return {"name": name, "id": call_id, "arguments": arguments}


def main_rule(when: dict[str, Any], **reply: Any) -> dict[str, Any]:
    return {"when": {"purpose": "main", **when}, "reply": reply}


@asynccontextmanager
async def chat_for(
    place: Place, server: ScriptedModelServer, workers: Workers, **settings: Any
) -> AsyncIterator[MainChat]:
    """A MainChat wired as the service wires it: its tool jobs' events come back through
    a WorkerEventRouter that sends ``tool`` workers to the chat."""
    model = client(server)
    chat = MainChat(place.root, Settings(**{"enable_memory": False, **settings}), workers, model)
    router = WorkerEventRouter({"tool": chat})
    workers.on_event, workers.on_death = router.on_event, router.on_death
    try:
        yield chat
    finally:
        await chat.shutdown()
        await model.aclose()


def shown(replies: Replies, call_id: str = "call_1") -> list[tuple[str, str]]:
    return [(r.status, r.result) for r in replies.of(ToolShown) if r.call_id == call_id]


# -- a turn ------------------------------------------------------------------------------


def test_a_turn_runs_the_tool_calls_on_workers_and_keeps_the_history(place: Place) -> None:
    rules = [
        main_rule(
            {"last_user": "what does app do"},
            text="Reading it. ",
            tool_calls=[call("read_file", file_path="src/app.py")],
        ),
        main_rule({"last_tool": "read_file"}, text="It prints app."),
    ]
    workers, replies = Workers(), Replies()

    async def main() -> TurnResult:
        async with chat_for(place, server, workers) as chat:
            result = await chat.run_turn(Emitter(replies, b"c", REQ), "what does app do")
            history, snapshot = chat.history, chat.snapshot
            assert snapshot is not None and snapshot.history == tuple(history)
            assert snapshot.tools == TOOLS and snapshot.model == "scripted"
            return result

    with scripted(*rules) as server:
        result = run(main())
        main_requests = requests_of(server, "main")
    assert result.reason == "completed"
    assert "".join(r.text for r in replies.of(TextChunk)) == "Reading it. It prints app."
    assert shown(replies) == [("running", ""), ("success", "read_file ran")]
    [(handle, job)] = workers.jobs_of(RunTool)
    assert job.call.name == "read_file" and job.project_root == str(place.root)
    assert job.shell == "read_only" and job.epoch == Workers.epoch
    assert workers.released == [handle]
    # What the model was sent: the workers' tools; the tool result in the second request.
    assert len(main_requests) == 2
    names = [t["function"]["name"] for t in main_requests[0]["body"]["tools"]]
    assert names == [t.name for t in TOOLS]
    assert main_requests[1]["body"]["messages"][-1]["content"] == '{"output":"read_file ran"}'
    # The history is on disk in this order: a restarted service continues from it.
    history = HistoryStore(place.root).load()
    assert [m.role for m in history] == ["user", "assistant", "tool", "assistant"]
    assert history[0] == Message.user("what does app do")
    assert history[2].tool_results == (ToolResult("call_1", "read_file", output="read_file ran"),)


@pytest.mark.parametrize("approved", [True, False])
def test_a_write_in_default_mode_waits_for_the_persons_answer(place: Place, approved: bool) -> None:
    rules = [
        main_rule({"last_user": "write it"}, tool_calls=[call("write_file", file_path="x.txt")]),
        main_rule({"last_tool": "write_file"}, text="Done."),
    ]
    workers, replies = Workers(), Replies()

    async def main() -> None:
        async with chat_for(place, server, workers) as chat:
            turn = asyncio.ensure_future(
                chat.run_turn(Emitter(replies, b"c", REQ), "write it", can_confirm=True)
            )
            await until(lambda: bool(replies.of(ApprovalNeeded)))
            [question] = replies.of(ApprovalNeeded)
            assert question.reason == "write_file changes files"
            assert chat.pending_approval() == question.call
            assert workers.jobs == []  # nothing runs before the answer
            assert not chat.answer_approval(REQ + 1, question.call.id, True)  # another turn's
            assert chat.answer_approval(REQ, question.call.id, approved)
            assert not chat.answer_approval(REQ, question.call.id, approved)  # answered once
            assert (await turn).reason == "completed"
            assert chat.pending_approval() is None

    with scripted(*rules) as server:
        run(main())
    if approved:
        assert [j.call.name for _, j in workers.jobs_of(RunTool)] == ["write_file"]
        assert shown(replies)[-1] == ("success", "write_file ran")
    else:
        assert workers.jobs == []
        assert shown(replies) == [("refused", "The user declined this tool call.")]


@pytest.mark.parametrize(
    ("from_accept", "says"),
    [
        (False, "rerun with --approval-mode auto-edit to allow it"),
        (True, "`specrun accept` takes no approval mode"),
    ],
)
def test_without_a_terminal_a_write_is_refused_naming_the_mode_that_allows_it(
    place: Place, from_accept: bool, says: str
) -> None:
    rules = [
        main_rule({"last_user": "write it"}, tool_calls=[call("write_file", file_path="x.txt")]),
        main_rule({"last_tool": "write_file"}, text="Could not."),
    ]
    workers, replies = Workers(), Replies()

    async def main() -> TurnResult:
        async with chat_for(place, server, workers) as chat:
            out = Emitter(replies, b"c", REQ)
            return await chat.run_turn(out, "write it", from_accept=from_accept)

    with scripted(*rules) as server:
        assert run(main()).reason == "completed"
    [(status, why)] = shown(replies)
    assert status == "refused" and says in why
    assert workers.jobs == []


def test_plan_mode_refuses_writes_and_runs_reads(place: Place) -> None:
    rules = [
        main_rule(
            {"last_user": "change it"},
            tool_calls=[
                call("read_file", "c_read", file_path="src/app.py"),
                call("write_file", "c_write", file_path="src/app.py"),
            ],
        ),
        main_rule({"last_tool": "write_file"}, text="Planned."),
    ]
    workers, replies = Workers(), Replies()

    async def main() -> None:
        async with chat_for(place, server, workers) as chat:
            out = Emitter(replies, b"c", REQ)
            await chat.run_turn(out, "change it", ApprovalMode.PLAN, can_confirm=True)

    with scripted(*rules) as server:
        run(main())
    assert shown(replies, "c_write") == [("refused", "write_file is not allowed in plan mode.")]
    assert [j.call.name for _, j in workers.jobs_of(RunTool)] == ["read_file"]
    assert replies.of(ApprovalNeeded) == []


def test_a_shell_command_the_worker_will_not_run_read_only_is_asked_for_then_run_in_full(
    place: Place,
) -> None:
    rules = [
        main_rule({"last_user": "run the tests"}, tool_calls=[call("run_shell_command")]),
        main_rule({"last_tool": "run_shell_command"}, text="Passed."),
    ]

    async def worker(job: RunTool) -> ToolDone:
        if job.shell == "read_only":
            return ToolDone(job.job_id, job.epoch, ToolResult(job.call.id, ""), "runs pytest")
        return ToolDone(job.job_id, job.epoch, ToolResult(job.call.id, job.call.name, "3 passed"))

    workers, replies = Workers(worker), Replies()

    async def main() -> None:
        async with chat_for(place, server, workers) as chat:
            out = Emitter(replies, b"c", REQ)
            turn = asyncio.ensure_future(chat.run_turn(out, "run the tests", can_confirm=True))
            await until(lambda: bool(replies.of(ApprovalNeeded)))
            [question] = replies.of(ApprovalNeeded)
            assert question.reason == "runs pytest"  # the worker's words, already plain
            chat.answer_approval(REQ, question.call.id, True)
            assert (await turn).reason == "completed"

    with scripted(*rules) as server:
        run(main())
    assert [j.shell for _, j in workers.jobs_of(RunTool)] == ["read_only", "full"]
    assert shown(replies)[-1] == ("success", "3 passed")


# -- ends that are not an answer ---------------------------------------------------------


def test_cancel_kills_the_tool_worker_and_answers_the_open_calls(place: Place) -> None:
    rules = [main_rule({"last_user": "look"}, tool_calls=[call("read_file", file_path="x")])]

    async def never(job: RunTool) -> None:
        await asyncio.sleep(3600)

    workers, replies = Workers(never), Replies()

    async def main() -> tuple[TurnResult, list[Message]]:
        async with chat_for(place, server, workers) as chat:
            turn = asyncio.ensure_future(chat.run_turn(Emitter(replies, b"c", REQ), "look"))
            await until(lambda: bool(workers.jobs))
            assert chat.busy
            assert not chat.cancel(REQ + 1)  # not that turn
            assert chat.cancel(REQ)
            result = await turn
            assert not chat.busy and not chat.cancel()
            return result, list(chat.history)

    with scripted(*rules) as server:
        result, history = run(main())
    assert (result.reason, result.message) == ("aborted", "The turn was cancelled.")
    [(handle, _)] = workers.jobs
    assert workers.killed == [(handle, "turn aborted")]
    assert workers.released == []
    # Every call of the last model message has a result: the history stays valid.
    assert [m.role for m in history] == ["user", "assistant", "tool"]
    assert history[-1].tool_results == (
        ToolResult("call_1", "read_file", error="cancelled by the user"),
    )


def test_ctrl_c_on_a_prompt_waiting_for_the_running_turn_means_it_never_runs(
    place: Place,
) -> None:
    """A second prompt waits for the running turn ("this one starts when it ends"); Ctrl-C
    on it while it waits is taken (not "nothing to cancel") and ends it at once, while the
    running turn goes on; it never runs."""
    rules = [main_rule({"last_user": "look"}, tool_calls=[call("read_file", file_path="x")])]

    async def never(job: RunTool) -> None:
        await asyncio.sleep(3600)

    workers = Workers(never)

    async def main() -> tuple[TurnResult, TurnResult, int]:
        async with chat_for(place, server, workers) as chat:
            first = asyncio.ensure_future(chat.run_turn(Emitter(Replies(), b"c", REQ), "look"))
            await until(lambda: bool(workers.jobs))
            second = asyncio.ensure_future(
                chat.run_turn(Emitter(Replies(), b"c", REQ + 1), "look again")
            )
            await until(lambda: REQ + 1 in chat._queued)
            assert chat.cancel(REQ + 1)  # the waiting one
            waited = await second  # at once: the first turn still runs
            assert chat.busy and not first.done()
            assert chat.cancel(REQ)  # now the running one
            asked = len(requests_of(server, "main"))
            done = await first
            assert not chat.busy and chat._queued == {}
            return done, waited, asked

    with scripted(*rules) as server:
        first, second, asked = run(main())
        assert len(requests_of(server, "main")) == asked == 1  # the second never asked
    assert first.reason == "aborted"
    assert (second.reason, second.message) == (
        "aborted", "The turn was cancelled before it started."
    )


def test_a_tool_worker_that_dies_gives_the_call_an_error_and_the_turn_goes_on(
    place: Place,
) -> None:
    rules = [
        main_rule({"last_user": "look"}, tool_calls=[call("read_file", file_path="x")]),
        main_rule({"last_tool": "read_file"}, text="The read failed."),
    ]
    workers, replies = Workers(answer=None), Replies()

    async def main() -> TurnResult:
        async with chat_for(place, server, workers) as chat:
            turn = asyncio.ensure_future(chat.run_turn(Emitter(replies, b"c", REQ), "look"))
            await until(lambda: bool(workers.jobs))
            [(handle, _)] = workers.jobs
            await workers.die(handle)  # the pool's death notice, through the router
            return await turn

    with scripted(*rules) as server:
        assert run(main()).reason == "completed"
    assert shown(replies)[-1] == (
        "error",
        "the worker running this tool died before it finished",
    )


def test_a_tool_answer_counts_only_from_the_worker_and_job_it_was_sent_to(
    place: Place,
) -> None:
    rules = [
        main_rule({"last_user": "look"}, tool_calls=[call("read_file", file_path="x")]),
        main_rule({"last_tool": "read_file"}, text="Read."),
    ]
    workers, replies = Workers(answer=None), Replies()

    async def main() -> None:
        async with chat_for(place, server, workers) as chat:
            turn = asyncio.ensure_future(chat.run_turn(Emitter(replies, b"c", REQ), "look"))
            await until(lambda: bool(workers.jobs))
            [(handle, job)] = workers.jobs
            assert isinstance(job, RunTool)
            other = await workers.acquire("tool", "tool-99")

            def done(job_id: str, output: str) -> ToolDone:
                return ToolDone(job_id, job.epoch, ToolResult("call_1", "read_file", output))

            # Each delivery is handled when it returns. Had either counted, it would be
            # the tool's result (the first answer wins): the last assertion shows it.
            await workers.deliver(other, done(job.job_id, "from another worker"))
            await workers.deliver(handle, done("tool-99", "for another job"))
            await workers.deliver(handle, done(job.job_id, "the contents"))
            assert (await turn).reason == "completed"

    with scripted(*rules) as server:
        run(main())
    assert shown(replies)[-1] == ("success", "the contents")


def test_the_model_repeating_the_same_calls_ends_the_turn(place: Place) -> None:
    rules = [main_rule({"turn_user": "loop"}, tool_calls=[call("read_file", file_path="x")])]
    workers, replies = Workers(), Replies()

    async def main() -> tuple[TurnResult, list[Message]]:
        async with chat_for(place, server, workers) as chat:
            result = await chat.run_turn(Emitter(replies, b"c", REQ), "loop")
            return result, list(chat.history)

    with scripted(*rules) as server:
        result, history = run(main())
    assert result.reason == "loop_detected"
    assert len(workers.jobs) == 3  # the fourth identical batch is not run
    assert history[-1].tool_results == (
        ToolResult("call_1", "read_file", error="not run: the same calls kept repeating"),
    )


def test_the_turn_limits(place: Place) -> None:
    rules = [
        main_rule({"last_user": "first"}, tool_calls=[call("read_file", "a", file_path="a")]),
        main_rule({"turn_user": "first"}, tool_calls=[call("read_file", "b", file_path="b")]),
    ]
    workers = Workers()

    async def main() -> tuple[TurnResult, TurnResult]:
        async with chat_for(
            place, server, workers, max_turns_per_query=2, max_session_turns=1
        ) as chat:
            first = await chat.run_turn(Emitter(Replies(), b"c", 1), "first")
            second = await chat.run_turn(Emitter(Replies(), b"c", 2), "second")
            return first, second

    with scripted(*rules) as server:
        first, second = run(main())
        asked = len(requests_of(server, "main"))
    assert first.reason == "max_turns_per_query"
    assert second.reason == "max_session_turns"
    assert asked == 2  # the second turn never reached the model


def test_a_model_error_ends_the_turn_with_its_message(place: Place) -> None:
    rules = [
        {
            "when": {"purpose": "main"},
            "fail": {"status": 500, "message": "boom"},
            "reply": {"text": "only after the failure"},
        }
    ]

    async def main() -> TurnResult:
        async with chat_for(place, server, Workers()) as chat:
            return await chat.run_turn(Emitter(Replies(), b"c", REQ), "hello")

    with scripted(*rules) as server:
        result = run(main())
    assert result.reason == "error" and "500" in result.message


# -- memory ------------------------------------------------------------------------------

MEMORY_BODY = "Run `make deploy ENV=staging` first."


def memory_place(place: Place) -> str:
    """One project memory about deploying; its path."""
    memory = place.root / ".specrun" / "memory" / "deploy.md"
    memory.parent.mkdir(parents=True)
    meta = {"name": "Deploy", "description": "How to deploy to staging", "type": "project"}
    memory.write_text(f"---\n{yaml.safe_dump(meta)}---\n\n{MEMORY_BODY}\n")
    return str(memory.resolve())


def recall(path: str, latency_ms: int) -> dict[str, Any]:
    reply = {"json": {"selected_memories": [path]}, "latency_ms": latency_ms}
    return {"when": {"purpose": "recall", "prompt_contains": "Query: deploy"}, "reply": reply}


def test_a_recall_done_before_the_request_goes_first_among_the_users_reminders(
    place: Place,
) -> None:
    path = memory_place(place)
    workers = Workers()
    workers.tools_ready.clear()  # the request is built only once the recall is in

    async def main() -> list[Message]:
        async with chat_for(place, server, workers, enable_memory=True) as chat:
            turn = asyncio.ensure_future(chat.run_turn(Emitter(Replies(), b"c", REQ), "deploy"))
            await until(lambda: chat.prefetcher.pending is not None)
            handle = chat.prefetcher.pending
            assert handle is not None
            await asyncio.wait_for(asyncio.shield(handle.task), 10)
            workers.tools_ready.set()
            assert (await turn).reason == "completed"
            return list(chat.history)

    with scripted(recall(path, 0)) as server:
        history = run(main())
        [request] = requests_of(server, "main")
    user = history[0]
    assert user.text == "deploy" and len(user.reminders) == 1
    assert MEMORY_BODY in user.reminders[0]
    assert MEMORY_BODY in str(request["body"]["messages"][1]["content"])


def test_a_recall_that_finishes_during_a_tool_call_comes_after_the_tool_results(
    place: Place,
) -> None:
    path = memory_place(place)
    rules = [
        recall(path, 300),
        main_rule({"last_user": "deploy"}, tool_calls=[call("read_file", file_path="Makefile")]),
        main_rule({"last_tool": "read_file"}, text="Deploying."),
    ]
    chat_ref: list[MainChat] = []

    async def worker(job: RunTool) -> ToolDone:
        handle = chat_ref[0].prefetcher.pending
        if handle is not None:  # the tool takes until the recall is in
            await asyncio.wait_for(asyncio.shield(handle.task), 10)
        return ToolDone(job.job_id, job.epoch, ToolResult(job.call.id, "read_file", "deploy:"))

    workers = Workers(worker)

    async def main() -> list[Message]:
        async with chat_for(place, server, workers, enable_memory=True) as chat:
            chat_ref.append(chat)
            assert (await chat.run_turn(Emitter(Replies(), b"c", REQ), "deploy")).reason == (
                "completed"
            )
            return list(chat.history)

    with scripted(*rules) as server:
        history = run(main())
    user, _, tool, _ = history
    assert user.reminders == ()
    assert tool.tool_results == (ToolResult("call_1", "read_file", output="deploy:"),)
    assert len(tool.reminders) == 1 and MEMORY_BODY in tool.reminders[0]


# -- the session -------------------------------------------------------------------------


def test_an_accepted_speculation_extends_the_history_as_one_turn(place: Place) -> None:
    accepted = [
        Message.user("add a test"),
        Message.assistant("Added tests/test_x.py."),
    ]

    async def main() -> None:
        async with chat_for(place, server, Workers()) as chat:
            turns = chat.session_turns
            async with chat.turn_slot():  # as the acceptor records it
                await chat.extend_from_speculation(accepted)
            assert chat.history == accepted and chat.session_turns == turns + 1
            assert chat.model_turns() == 1
            # The next speculation forks from a snapshot that includes them.
            assert chat.snapshot is not None
            assert chat.snapshot.history == tuple(accepted)
            assert chat.snapshot.tools == TOOLS

    with scripted() as server:
        run(main())
    assert HistoryStore(place.root).load() == accepted


def test_reset_starts_a_new_session(place: Place) -> None:
    async def main() -> None:
        async with chat_for(place, server, Workers()) as chat:
            await chat.run_turn(Emitter(Replies(), b"c", REQ), "hello")
            old = chat.session_id
            assert chat.history and chat.snapshot is not None
            chat.reset()
            assert chat.session_id != old
            assert chat.history == [] and chat.snapshot is None and chat.session_turns == 0
            assert HistoryStore(place.root).load() == []

    with scripted() as server:
        run(main())


# -- the coordinator's own check of protected shell writes --------------------------------


@pytest.mark.parametrize("mode", [ApprovalMode.YOLO, ApprovalMode.AUTO_EDIT])
def test_a_worker_that_runs_a_protected_shell_write_unasked_is_never_sent_it(
    place: Place, mode: ApprovalMode
) -> None:
    # The stand-in worker runs every call and never asks (a compromised or confused worker):
    # the coordinator judges the command itself and, with no terminal, never sends it.
    command = "echo 'touch /tmp/p' > .git/hooks/pre-commit"
    rules = [
        main_rule({"last_user": "set it up"},
                  tool_calls=[call("run_shell_command", command=command)]),
        main_rule({"last_tool": "run_shell_command"}, text="Done."),
    ]
    workers, replies = Workers(), Replies()

    async def main() -> None:
        async with chat_for(place, server, workers) as chat:
            await chat.run_turn(Emitter(replies, b"c", REQ), "set it up", mode)

    with scripted(*rules) as server:
        run(main())
    [(status, why)] = shown(replies)
    assert status == "refused" and ".git/hooks/pre-commit" in why, why
    assert workers.jobs_of(RunTool) == []


def test_a_yes_to_the_coordinators_question_runs_the_command_once_with_that_yes(
    place: Place,
) -> None:
    command = "git config core.editor vi"
    rules = [
        main_rule({"last_user": "set it up"},
                  tool_calls=[call("run_shell_command", command=command)]),
        main_rule({"last_tool": "run_shell_command"}, text="Done."),
    ]
    workers, replies = Workers(), Replies()

    async def main() -> None:
        async with chat_for(place, server, workers) as chat:
            out = Emitter(replies, b"c", REQ)
            turn = asyncio.ensure_future(
                chat.run_turn(out, "set it up", ApprovalMode.YOLO, can_confirm=True))
            await until(lambda: bool(replies.of(ApprovalNeeded)))
            [question] = replies.of(ApprovalNeeded)
            assert "git config" in question.reason and not question.rememberable
            chat.answer_approval(REQ, question.call.id, True)
            assert (await turn).reason == "completed"

    with scripted(*rules) as server:
        run(main())
    [(_, job)] = workers.jobs_of(RunTool)
    assert (job.shell, job.protected_confirmed) == ("full", True)


def test_plan_mode_refuses_a_protected_shell_write_without_asking(place: Place) -> None:
    rules = [
        main_rule({"last_user": "set it up"},
                  tool_calls=[call("run_shell_command", command="echo x > .envrc")]),
        main_rule({"last_tool": "run_shell_command"}, text="Done."),
    ]
    workers, replies = Workers(), Replies()

    async def main() -> None:
        async with chat_for(place, server, workers) as chat:
            out = Emitter(replies, b"c", REQ)
            await chat.run_turn(out, "set it up", ApprovalMode.PLAN, can_confirm=True)

    with scripted(*rules) as server:
        run(main())
    assert shown(replies) == [("refused", "Only read-only shell commands run in plan mode.")]
    assert replies.of(ApprovalNeeded) == [] and workers.jobs_of(RunTool) == []
