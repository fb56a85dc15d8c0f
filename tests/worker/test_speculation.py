"""The speculative loop in-process, against the scripted model over real HTTP (design §5)."""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path
from typing import Any

import msgspec
import pytest

from protocol.model import ChatRequest, ModelClient
from protocol.wire.approval import ApprovalMode
from protocol.wire.boundary import BoundaryReason
from protocol.wire.chat import Message, ToolCall, ToolResult
from protocol.wire.work import (
    Boundary,
    Completed,
    Failed,
    ModelText,
    PipelinedSuggestion,
    SpeculationLimits,
    ToolFinished,
    ToolStarted,
)
from tests.worker.conftest import (
    FAST_MODEL,
    PIPELINED_RULE,
    SNAPSHOT,
    SUGGESTION,
    Collector,
    call,
    calls,
    rule,
    tree_state,
)
from worker.boundary import cut_turn
from worker.speculation import Toolbox, run_loop


def only(out: Collector, kind: type[Any]) -> Any:
    found = out.of(kind)
    assert len(found) == 1, out.events
    return found[0]


def assistant(text: str, *calls: ToolCall) -> Message:
    return Message.assistant(text, calls)


# --- completed -------------------------------------------------------------------------------


def test_text_only_answer_completes_then_pipelined_suggestion(harness: Any) -> None:
    h = harness([rule({"text": "All 3 tests pass."}), PIPELINED_RULE])
    out = h.run(h.job())

    assert [type(e) for e in out.events] == [ModelText, Completed, PipelinedSuggestion]
    done = only(out, Completed)
    assert done.outcome.messages == (assistant("All 3 tests pass."),)
    assert (done.outcome.turns, done.outcome.tool_use_count, done.outcome.written_files) == (
        1,
        0,
        {},
    )
    assert out.events[0] == ModelText(job_id=done.job_id, epoch=7, turn=0, text="All 3 tests pass.")
    assert only(out, PipelinedSuggestion).text == "commit this"


def test_the_pipelined_step_asks_for_ranked_guesses_with_branches(harness: Any) -> None:
    """speculationBranches 3: the pipelined step asks for three ranked guesses in its one
    request and sends the kept ones best first: the first three, a duplicate dropped (the
    same rules as the suggestion after a turn)."""
    guesses = ["commit this", "Commit this.", "run the tests", "show the diff"]
    h = harness([
        rule({"text": "All 3 tests pass."}),
        rule({"json": {"suggestions": guesses}}, purpose="pipelined"),
    ])
    out = h.run(h.job(alternatives=3))
    event = only(out, PipelinedSuggestion)
    assert event.text == "commit this" and event.reason is None
    assert event.alternatives == ("commit this", "run the tests")
    [body] = h.bodies("pipelined")
    asked = body["messages"][-1]["content"]
    assert "up to 3" in asked and body["response_format"]["json_schema"]["name"] == (
        "next_user_inputs"
    )


def test_the_single_guess_pipelined_request_is_unchanged(harness: Any) -> None:
    """One branch: the request is the single-suggestion one, byte for byte as before."""
    from protocol.prompts.prediction import pipelined_prompt

    h = harness([rule({"text": "All 3 tests pass."}), PIPELINED_RULE])
    event = only(h.run(h.job()), PipelinedSuggestion)
    assert (event.text, event.alternatives) == ("commit this", ())
    [body] = h.bodies("pipelined")
    assert body["messages"][-1]["content"] == pipelined_prompt(SUGGESTION, "All 3 tests pass.")
    assert body["response_format"]["json_schema"]["name"] == "next_user_input"


def test_each_model_request_reports_its_tokens_before_what_its_answer_leads_to(
    harness: Any,
) -> None:
    h = harness(
        [
            rule({"text": "Looking.", "tool_calls": [call("glob", pattern="*.md")]}, times=1),
            rule({"text": "Done."}),
            PIPELINED_RULE,
        ]
    )
    out = h.run(h.job())
    kinds = [type(e).__name__ for e in out.timeline]
    assert kinds == [
        "ModelUsage", "ModelText", "ToolStarted", "ToolFinished",
        "ModelUsage", "ModelText", "Completed",
        "ModelUsage", "PipelinedSuggestion",
    ]  # fmt: skip
    assert [u.purpose for u in out.usage] == ["speculation", "speculation", "pipelined"]
    assert len(h.bodies("speculation")) == 2 and len(h.bodies("pipelined")) == 1
    for u in out.usage:
        assert (u.job_id, u.epoch) == ("spec-1", 7)
        assert u.usage.prompt_tokens > 0 and u.usage.completion_tokens > 0
    # The second request repeats the first one's prefix: the scripted cache holds it.
    assert out.usage[1].usage.cached_tokens > 0


def test_empty_answer_completes_with_nothing(harness: Any) -> None:
    h = harness([rule({"text": "   "}), PIPELINED_RULE])
    out = h.run(h.job())
    done = only(out, Completed)
    assert done.outcome.messages == ()
    assert done.outcome.turns == 1
    assert not out.of(ModelText)


def test_turn_limit_ends_as_completed(harness: Any) -> None:
    h = harness([rule({"tool_calls": [call("read_file", file_path="README.md")]}), PIPELINED_RULE])
    out = h.run(h.job())

    done = only(out, Completed)
    assert done.outcome.turns == 20
    assert done.outcome.tool_use_count == 20
    assert len(done.outcome.messages) == 40
    assert len(h.bodies()) == 20
    assert not out.of(Boundary)
    assert only(out, PipelinedSuggestion).text == "commit this"


def test_message_limit_ends_as_completed(harness: Any) -> None:
    h = harness([rule({"tool_calls": [call("read_file", file_path="README.md")]}), PIPELINED_RULE])
    out = h.run(h.job(limits=SpeculationLimits(max_turns=80, max_messages=100)))

    done = only(out, Completed)
    # The suggestion's message counts: 1 + 2 per turn reaches 100 after 50 turns.
    assert done.outcome.turns == 50
    assert len(done.outcome.messages) + 1 >= 100
    assert len(h.bodies()) == 50
    assert only(out, PipelinedSuggestion).text == "commit this"


def test_a_request_that_would_not_fit_the_window_ends_at_a_boundary(harness: Any) -> None:
    """Each turn reads the README again: once the snapshot's estimate plus the speculation's
    own messages would pass the window, the speculation stops with what it did instead of
    sending a request the provider would refuse."""
    h = harness([rule({"tool_calls": [call("read_file", file_path="README.md")]}), PIPELINED_RULE])
    job = msgspec.structs.replace(h.job(), context_window=2_000, context_tokens=1_800)
    out = h.run(job)

    end = only(out, Boundary)
    assert end.reason == BoundaryReason("limit", "context_window")
    assert 1 <= end.outcome.turns < 20
    assert len(h.bodies()) == end.outcome.turns  # no request was sent past the window
    assert end.outcome.tool_use_count == end.outcome.turns


def test_a_window_that_is_only_the_default_guess_stops_nothing(harness: Any) -> None:
    """No estimate comes with a default window (the real one may well be larger): the
    speculation runs to its turn limit as before."""
    h = harness([rule({"tool_calls": [call("read_file", file_path="README.md")]}), PIPELINED_RULE])
    out = h.run(msgspec.structs.replace(h.job(), context_window=2_000, context_tokens=0))

    assert only(out, Completed).outcome.turns == 20
    assert not out.of(Boundary)


# --- boundaries --------------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["I'll clean the build first.", ""])
def test_boundary_at_the_first_call(harness: Any, text: str) -> None:
    reply: dict[str, Any] = {"tool_calls": [call("run_shell_command", command="rm -rf build")]}
    if text:
        reply["text"] = text
    h = harness([rule(reply), PIPELINED_RULE])
    out = h.run(h.job())

    end = only(out, Boundary)
    assert end.reason == BoundaryReason("shell", "rm -rf build")
    assert end.outcome.messages == ((assistant(text),) if text else ())
    assert (end.outcome.turns, end.outcome.tool_use_count) == (1, 0)
    assert not out.of(ToolStarted) and not out.of(Completed)
    assert not out.of(PipelinedSuggestion) and not h.bodies("pipelined")


def test_boundary_mid_turn_keeps_the_first_call_and_its_response(harness: Any) -> None:
    h = harness(
        [
            rule(
                {
                    "text": "Reading, then cleaning.",
                    "tool_calls": [
                        call("read_file", file_path="src/app.py"),
                        call("run_shell_command", command="make clean"),
                        call("read_file", file_path="README.md"),
                    ],
                }
            )
        ]
    )
    out = h.run(h.job())

    end = only(out, Boundary)
    assert end.reason == BoundaryReason("shell", "make clean")
    model, tool = end.outcome.messages
    assert model.text == "Reading, then cleaning."
    assert [c.name for c in model.tool_calls] == ["read_file"]
    assert [r.call_id for r in tool.tool_results] == [model.tool_calls[0].id]
    assert "return 'hello'" in (tool.tool_results[0].output or "")
    assert end.outcome.tool_use_count == 1
    assert [e.call.name for e in out.of(ToolStarted)] == ["read_file"]


def test_boundary_mid_turn_keeps_two_calls_to_the_same_tool_by_position(harness: Any) -> None:
    h = harness(
        [
            rule(
                {
                    "tool_calls": [
                        call("read_file", file_path="src/app.py"),
                        call("read_file", file_path="missing.py"),
                        call("edit", file_path="src/app.py", old_string="a", new_string="b"),
                        call("read_file", file_path="README.md"),
                    ]
                }
            )
        ]
    )
    out = h.run(h.job(mode=ApprovalMode.DEFAULT))

    end = only(out, Boundary)
    assert end.reason == BoundaryReason("write_tool_no_auto", "edit")
    model, tool = end.outcome.messages
    assert model.text == ""
    assert [(c.name, c.args()["file_path"]) for c in model.tool_calls] == [
        ("read_file", "src/app.py"),
        ("read_file", "missing.py"),
    ]
    first, second = tool.tool_results
    assert (first.call_id, second.call_id) == (model.tool_calls[0].id, model.tool_calls[1].id)
    assert first.ok and not second.ok  # an error is a response too: N = 2
    assert end.outcome.tool_use_count == 1  # only the success counts


def test_cut_turn_rules() -> None:
    a, b = ToolCall("a", "read_file"), ToolCall("b", "read_file")
    ra = ToolResult("a", "read_file", output="x")
    assert cut_turn(assistant("t", a, b), []) == [assistant("t")]
    assert cut_turn(assistant("", a, b), []) == []
    assert cut_turn(assistant("", a, b), [ra]) == [assistant("", a), Message.tool((ra,))]
    with pytest.raises(ValueError):
        cut_turn(assistant("", a), [ra, ra])


# --- writes and reads through the overlay -------------------------------------------------------


@pytest.mark.parametrize("mode", [ApprovalMode.AUTO_EDIT, ApprovalMode.YOLO])
def test_write_tools_redirect_into_the_overlay(harness: Any, mode: ApprovalMode) -> None:
    h = harness(
        [
            rule(
                {
                    "text": "Updating.",
                    "tool_calls": [
                        call("edit", file_path="src/app.py", old_string="hello", new_string="hi"),
                        call("write_file", file_path="src/new.py", content="NEW = 1\n"),
                    ],
                },
                times=1,
            ),
            rule({"text": "Done."}),
            PIPELINED_RULE,
        ]
    )
    before = tree_state(h.project)
    out = h.run(h.job(mode=mode))

    assert tree_state(h.project) == before
    assert [e.decision for e in out.of(ToolStarted)] == ["redirect", "redirect"]
    done = only(out, Completed)
    assert done.outcome.tool_use_count == 2
    files = done.outcome.written_files
    assert list(files) == ["src/app.py", "src/new.py"]
    original = (h.project / "src/app.py").read_bytes()
    assert files["src/app.py"].original is not None
    assert files["src/app.py"].original.sha256 == hashlib.sha256(original).hexdigest()
    assert files["src/new.py"].original is None
    assert Path(files["src/app.py"].overlay_path).read_text() == "def greet():\n    return 'hi'\n"
    assert Path(files["src/new.py"].overlay_path).read_text() == "NEW = 1\n"
    # The transcript keeps the model's own arguments, never overlay paths.
    sent = done.outcome.messages[0].tool_calls
    assert [c.args()["file_path"] for c in sent] == ["src/app.py", "src/new.py"]


@pytest.mark.parametrize("mode", [ApprovalMode.DEFAULT, ApprovalMode.PLAN])
def test_write_tools_are_a_boundary_without_auto_edits(harness: Any, mode: ApprovalMode) -> None:
    h = harness([rule({"tool_calls": [call("write_file", file_path="x.py", content="1")]})])
    out = h.run(h.job(mode=mode))
    end = only(out, Boundary)
    assert end.reason == BoundaryReason("write_tool_no_auto", "write_file")
    assert end.outcome.written_files == {}
    assert not (h.project / "x.py").exists()


def test_reads_after_a_write_see_the_overlay(harness: Any) -> None:
    h = harness(
        [
            calls(call("write_file", file_path="src/app.py", content="CHANGED = 1\n")),
            calls(
                call("read_file", file_path="src/app.py"),
                call("grep_search", pattern="CHANGED"),
                call("glob", pattern="src/*.py"),
            ),
            rule({"text": "Checked."}),
            PIPELINED_RULE,
        ]
    )
    before = tree_state(h.project)
    out = h.run(h.job())

    results = [e.result for e in out.of(ToolFinished)]
    assert results[1].output is not None and "CHANGED = 1" in results[1].output
    assert results[2].output is not None and "src/app.py" in results[2].output  # grep
    assert "CHANGED" in results[2].output
    assert results[3].output is not None and "src/app.py" in results[3].output  # glob
    assert tree_state(h.project) == before
    assert only(out, Completed).outcome.tool_use_count == 4


def test_absolute_path_read_after_write_sees_the_overlay(harness: Any, spec_project: Path) -> None:
    target = spec_project / "src" / "util.py"
    h = harness(
        [
            calls(call("write_file", file_path=str(target), content="UTIL = 2\n")),
            calls(call("read_file", file_path=str(target))),
            rule({"text": "ok"}),
            PIPELINED_RULE,
        ]
    )
    out = h.run(h.job())
    results = [e.result for e in out.of(ToolFinished)]
    assert results[1].output is not None and "UTIL = 2" in results[1].output
    assert target.read_text() == "def util():\n    return 1\n"
    assert list(only(out, Completed).outcome.written_files) == ["src/util.py"]


def test_write_outside_the_project_is_a_boundary(harness: Any, tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    h = harness([rule({"tool_calls": [call("write_file", file_path=str(outside), content="x")]})])
    out = h.run(h.job())
    end = only(out, Boundary)
    assert end.reason.text().startswith("path_rewrite_failed:write_file")
    assert not outside.exists()


def test_real_tree_is_never_written(harness: Any) -> None:
    h = harness(
        [
            calls(
                call("write_file", file_path="tests/test_new.py", content="x = 1\n"),
                call("edit", file_path="README.md", old_string="demo", new_string="D"),
                call("run_shell_command", command="ls -la src && git status"),
                call("glob", pattern="**/*.py"),
                call("list_directory", path="tests"),
            ),
            rule({"text": "done"}),
            PIPELINED_RULE,
        ]
    )
    before = tree_state(h.project)
    out = h.run(h.job())
    assert tree_state(h.project) == before
    finished = [e.result for e in out.of(ToolFinished)]
    assert len(finished) == 5 and all(r.ok for r in finished), finished
    assert "test_new.py" in (finished[3].output or "")  # glob sees the overlay's new file
    assert "test_new.py" in (finished[4].output or "")


# --- tool failures -----------------------------------------------------------------------------


def test_unknown_tool_answers_not_found_and_the_loop_goes_on(harness: Any) -> None:
    # The gate lets `lsp` through (a read tool), but this worker has no such tool.
    h = harness(
        [
            calls(call("lsp", path="src/app.py")),
            rule({"text": "No LSP here."}),
            PIPELINED_RULE,
        ]
    )
    out = h.run(h.job())
    done = only(out, Completed)
    tool = done.outcome.messages[1]
    assert tool.tool_results[0].error == "Tool 'lsp' not found"
    assert done.outcome.tool_use_count == 0
    assert done.outcome.turns == 2
    # The model saw the error as the tool's response.
    last = h.bodies()[-1]["messages"][-1]
    assert last["role"] == "tool" and msgspec.json.decode(last["content"]) == {
        "error": "Tool 'lsp' not found"
    }


def test_a_refusal_ends_the_speculation_at_a_boundary(harness: Any) -> None:
    """A model that declines the predicted prompt: nothing to show at Tab."""
    h = harness(
        [
            calls(call("read_file", file_path="src/app.py")),
            rule({"refusal": "I can't help with that."}),
            PIPELINED_RULE,
        ]
    )
    out = h.run(h.job())
    end = only(out, Boundary)
    assert end.reason == BoundaryReason("refusal")
    assert not any(isinstance(e, PipelinedSuggestion) for e in out.events)


class RaisingToolbox(Toolbox):
    async def execute(self, call: ToolCall, action: str = "allow") -> ToolResult:
        raise RuntimeError("disk on fire")


def test_a_tool_raising_becomes_an_error_response(harness: Any) -> None:
    from overlay import Overlay

    h = harness(
        [
            calls(call("read_file", file_path="README.md")),
            rule({"text": "It failed."}),
        ]
    )
    job = h.job()
    out = Collector()

    async def go() -> Any:
        client = ModelClient(job.endpoint.base_url)
        try:
            tools = RaisingToolbox(Overlay(job.project_root, job.overlay_dir), job.approval_mode)
            return await run_loop(job, client, tools, out.send)
        finally:
            await client.aclose()

    end = asyncio.run(go())
    assert end.status == "completed"
    result = end.conversation.messages[2].tool_results[0]
    assert result == ToolResult(result.call_id, "read_file", error="disk on fire")
    assert end.conversation.tool_use_count == 0
    assert only(out, ToolFinished).result == result


def test_model_error_fails_the_speculation_with_one_sentence(harness: Any) -> None:
    h = harness(
        [
            {
                "when": {"purpose": "speculation"},
                "fail": {"status": 401, "times": 5},
                "reply": {"text": "never"},
            }
        ]
    )
    out = h.run(h.job())
    failed = only(out, Failed)
    assert "rejected" in failed.error or "API key" in failed.error
    assert "\n" not in failed.error
    assert not out.of(Completed) and not out.of(Boundary) and not out.of(PipelinedSuggestion)


# --- the forked request ------------------------------------------------------------------------


def test_forked_request_shares_the_main_prefix_byte_for_byte(harness: Any) -> None:
    h = harness(
        [rule({"text": "main answer"}, purpose="main"), rule({"text": "ok"}), PIPELINED_RULE]
    )

    async def main_request() -> None:
        async with ModelClient(h.server.base_url) as client:
            req = ChatRequest(
                system=SNAPSHOT.system,
                history=SNAPSHOT.history,
                tools=SNAPSHOT.tools,
                model=SNAPSHOT.model,
                purpose="main",
            )
            await client.chat(req)

    asyncio.run(main_request())
    h.run(h.job())

    main = h.bodies("main")[0]
    enc = msgspec.json.encode
    k = len(main["messages"])
    for purpose in ("speculation", "pipelined"):
        fork = h.bodies(purpose)[0]
        assert enc(fork["messages"][:k]) == enc(main["messages"]), purpose
        assert enc(fork["tools"]) == enc(main["tools"]), purpose
        assert fork["enable_thinking"] is False
        assert fork["model"] == FAST_MODEL
    spec = h.bodies("speculation")[0]
    assert spec["messages"][k:] == [{"role": "user", "content": SUGGESTION}]
    assert "enable_thinking" not in main
    headers = [r["headers"] for r in h.server.requests if r["purpose"] == "speculation"]
    assert headers and all(hd.get("X-Specrun-Purpose") == "speculation" for hd in headers)


def test_forked_history_is_cut_to_the_last_40_entries(harness: Any) -> None:
    from protocol.wire.chat import CacheSafeSnapshot

    history = tuple(
        Message.user(f"u{i}") if i % 2 == 0 else Message.assistant(f"a{i}") for i in range(50)
    )
    long = CacheSafeSnapshot(SNAPSHOT.system, SNAPSHOT.tools, history, "main-model", 1)
    h = harness([rule({"text": "ok"}), PIPELINED_RULE])
    h.run(h.job(snapshot=long))
    messages = h.bodies()[0]["messages"]
    assert messages[1]["content"] == "u10"
    assert len(messages) == 1 + 40 + 1


# --- pipelined suggestion ----------------------------------------------------------------------


def test_pipelined_request_carries_the_speculation(harness: Any) -> None:
    h = harness(
        [
            rule(
                {"text": "Running them.", "tool_calls": [call("glob", pattern="tests/*.py")]},
                times=1,
            ),
            rule({"text": "All tests pass."}),
            PIPELINED_RULE,
        ]
    )
    out = h.run(h.job())
    assert out.events[-2:] == [only(out, Completed), only(out, PipelinedSuggestion)]
    body = h.bodies("pipelined")[0]
    prompt = body["messages"][-1]
    assert prompt["role"] == "user"
    assert prompt["content"].startswith(
        'The user just said: "run the tests"\nThe assistant responded: Running them.\n'
        "All tests pass.\n\n"
    )
    # forked history: snapshot + suggestion + the speculated messages, then the prompt
    assert [m["role"] for m in body["messages"][-5:]] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
    ]
    assert body["response_format"]["type"] == "json_schema"
    assert body["stream"] is False


def test_pipelined_prompt_says_tool_calls_when_there_was_no_text(harness: Any) -> None:
    h = harness(
        [
            calls(call("glob", pattern="*.md")),
            rule({"text": " "}),
            PIPELINED_RULE,
        ]
    )
    h.run(h.job())
    prompt = h.bodies("pipelined")[0]["messages"][-1]["content"]
    assert "The assistant responded: (tool calls executed)\n" in prompt


def test_pipelined_suggestion_is_filtered(harness: Any) -> None:
    h = harness(
        [
            rule({"text": "done"}),
            rule({"json": {"suggestion": "Looks good, thanks!"}}, purpose="pipelined"),
        ]
    )
    out = h.run(h.job())
    assert only(out, PipelinedSuggestion) == PipelinedSuggestion(
        job_id="spec-1", epoch=7, text=None, reason="evaluative"
    )


def test_pipelined_falls_back_to_raw_text_when_the_schema_is_refused(harness: Any) -> None:
    h = harness(
        [
            rule({"text": "done"}),
            {
                "when": {"purpose": "pipelined"},
                "fail": {"status": 400, "times": 1},
                "reply": {"text": "push it"},
            },
        ]
    )
    out = h.run(h.job())
    assert only(out, PipelinedSuggestion).text == "push it"
    first, second = h.bodies("pipelined")
    assert "response_format" in first and "response_format" not in second


def test_pipelined_failure_never_fails_the_speculation(harness: Any) -> None:
    h = harness(
        [
            rule({"text": "done"}),
            {
                "when": {"purpose": "pipelined"},
                "fail": {"status": 401, "times": 9},
                "reply": {"text": "never"},
            },
        ]
    )
    out = h.run(h.job())
    assert [type(e) for e in out.events] == [ModelText, Completed, PipelinedSuggestion]
    assert only(out, PipelinedSuggestion).reason == "error"


def test_pipelined_can_be_switched_off(harness: Any) -> None:
    h = harness([rule({"text": "done"}), PIPELINED_RULE])
    out = h.run(h.job(pipelined=False))
    assert only(out, PipelinedSuggestion).reason == "disabled"
    assert not h.bodies("pipelined")


# --- progress ----------------------------------------------------------------------------------


def test_progress_is_streamed_in_order(harness: Any) -> None:
    h = harness(
        [
            rule(
                {
                    "text": "First.",
                    "tool_calls": [
                        call("read_file", file_path="README.md"),
                        call("glob", pattern="*.md"),
                    ],
                },
                times=1,
            ),
            rule({"text": "Second."}),
            PIPELINED_RULE,
        ]
    )
    out = h.run(h.job())
    kinds = [(type(e).__name__, getattr(e, "turn", None)) for e in out.events]
    assert kinds == [
        ("ModelText", 0),
        ("ToolStarted", 0),
        ("ToolFinished", 0),
        ("ToolStarted", 0),
        ("ToolFinished", 0),
        ("ModelText", 1),
        ("Completed", None),
        ("PipelinedSuggestion", None),
    ]
    started = out.of(ToolStarted)
    finished = out.of(ToolFinished)
    assert [s.call.id for s in started] == [f.result.call_id for f in finished]


def test_a_broken_job_fails_cleanly(harness: Any, tmp_path: Path) -> None:
    import msgspec.structs

    h = harness([rule({"text": "never asked"})])
    job = msgspec.structs.replace(h.job(), project_root=str(tmp_path / "no-such-project"))
    out = h.run(job)
    failed = only(out, Failed)
    assert failed.error.startswith("The speculation failed: ")
    assert "no-such-project" in failed.error
    assert len(out.events) == 1
    assert not h.bodies()
