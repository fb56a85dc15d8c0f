"""The main chat through a real service: approvals, persistence, limits, abort, and the
memory prefetch's two consume points as the model actually receives them.

Tests that need nothing of their own share one service (``shared``: one scenario with
a trigger phrase per test, a new session and the sample project's files restored before
each test); tests that restart it, or need their own settings, start flags or memory,
start their own (``start``)."""

from __future__ import annotations

import contextlib
import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from coordinator.service.chat.history import HistoryStore
from protocol.wire.control import (
    ApprovalAnswer,
    ApprovalNeeded,
    AskRequest,
    CancelRequest,
    OkReply,
    ResetRequest,
    TextChunk,
    ToolShown,
    WorkersReply,
    WorkersRequest,
)
from tests.coordinator.e2e import Driver
from tests.coordinator.e2e import turn_ended as end
from tests.support import Specrun, make_sample_project, running_service, wait_until

EDIT = {
    "name": "edit",
    "arguments": {"file_path": "src/calc.py", "old_string": "a - b", "new_string": "a + b"},
}


def write_scenario(tmp: Path, rules: list[dict[str, Any]], **top: Any) -> Path:
    path = tmp / "scenario.json"
    path.write_text(
        json.dumps({"name": "test", "latency_ms": 5, "chunk_ms": 1, **top, "rules": rules})
    )
    return path


@pytest.fixture
def start(specrun: Specrun, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Any]:
    """start(rules, *flags) -> Driver on a service with that scenario; logs model requests."""
    monkeypatch.setenv("SPECRUN_RUNTIME_DIR", str(specrun.env.runtime))
    log = tmp_path / "requests.jsonl"
    specrun.env.vars["SPECRUN_MODEL_LOG"] = str(log)
    drivers: list[Driver] = []

    def _start(rules: list[dict[str, Any]], *flags: str) -> Driver:
        scenario = write_scenario(tmp_path, rules)
        specrun.run("start", "--scenario", str(scenario), *flags, check=True)
        driver = Driver(specrun.project)
        driver.log = log  # type: ignore[attr-defined]
        drivers.append(driver)
        # The service answers before its warm workers are up; timing tests start warm.
        assert wait_until(lambda: _has_idle_worker(driver), timeout=10)
        return driver

    yield _start
    for d in drivers:
        d.close()
    specrun.run("stop")


def _has_idle_worker(driver: Driver) -> bool:
    reply = driver.client.request(WorkersRequest(driver.client.next_id()), timeout_s=10)
    assert isinstance(reply, WorkersReply), reply
    return any(w.state == "idle" for w in reply.workers)


def requests(log: Path, purpose: str = "main") -> list[dict[str, Any]]:
    """The model requests of one purpose; a line still being written is not one yet."""
    found = []
    for line in log.read_text().splitlines():
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            continue
        if entry.get("purpose") == purpose:
            found.append(entry)
    return found


def _tail(log: Path, specrun: Specrun) -> str:
    """What the model saw and what the service logged: the story of a failure."""
    service_log = specrun.service_log
    seen = [f"{r.get('purpose')} {r.get('outcome')}" for r in requests(log, "recall")]
    return f"recall requests: {seen}\n" + service_log.read_text()[-4000:]


FIX_RULES: list[dict[str, Any]] = [
    {"when": {"purpose": "recall"}, "reply": {"json": {"selected_memories": []}}},
    {"when": {"purpose": "suggestion"}, "reply": {"json": {"suggestion": ""}}},
    {"when": {"last_user": "fix it"}, "reply": {"tool_calls": [EDIT]}},
    {"when": {"last_tool": "edit"}, "reply": {"text": "Fixed."}},
    {
        "when": {"last_user": "clean up"},
        "reply": {
            "tool_calls": [
                {"name": "run_shell_command", "arguments": {"command": "rm -f README.md"}}
            ]
        },
    },
    {
        "when": {"last_user": "look around"},
        "reply": {
            "tool_calls": [{"name": "run_shell_command", "arguments": {"command": "ls src"}}]
        },
    },
    {"when": {"last_tool": "run_shell_command"}, "reply": {"text": "Ran it."}},
    {"default": {"text": "Hello."}},
]

# The shared service's scenario: FIX_RULES plus one trigger phrase per test, placed
# before the rules a follow-up request would otherwise match.
SLOW, STREAM, REPEAT, SLEEP = "think slowly", "stream words", "repeat yourself", "sleep 37.5"
WORDS = " ".join(f"word{i}" for i in range(200))
SHARED_RULES: list[dict[str, Any]] = [
    *FIX_RULES[:2],
    # every request of the turn, tool results included, repeats the same call
    {
        "when": {"turn_user": REPEAT},
        "reply": {"tool_calls": [{"name": "list_directory", "arguments": {"path": "src"}}]},
    },
    {"when": {"last_user": SLOW}, "reply": {"text": "thinking very slowly", "latency_ms": 20000}},
    {"when": {"last_user": STREAM}, "reply": {"text": WORDS, "chunk_ms": 30}},
    {
        "when": {"last_user": "run the sleeper"},
        "reply": {"tool_calls": [{"name": "run_shell_command", "arguments": {"command": SLEEP}}]},
    },
    *FIX_RULES[2:],
]


@pytest.fixture(scope="module")
def shared_service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Specrun, Path]]:
    """One default-mode service on SHARED_RULES for the tests below that need nothing of
    their own; its model requests are logged."""
    tmp = tmp_path_factory.mktemp("chat")
    project = make_sample_project(tmp / "proj")
    log = tmp / "requests.jsonl"
    scenario = write_scenario(tmp, SHARED_RULES)
    with running_service(
        project, "--scenario", str(scenario), extra_env={"SPECRUN_MODEL_LOG": str(log)}
    ) as runner:
        yield runner, log


@pytest.fixture
def shared(shared_service: tuple[Specrun, Path]) -> Iterator[Driver]:
    """A Driver on the shared service, in a new session over the sample project as
    committed (what an earlier test edited or deleted is back)."""
    specrun, log = shared_service
    subprocess.run(["git", "checkout", "-q", "--", "."], cwd=specrun.project, check=True)
    subprocess.run(["git", "clean", "-qfd"], cwd=specrun.project, check=True)
    driver = Driver(specrun.project)
    driver.log = log  # type: ignore[attr-defined]
    try:
        assert isinstance(driver.client.request(ResetRequest(driver.client.next_id())), OkReply)
        assert wait_until(lambda: _has_idle_worker(driver), timeout=10)
        yield driver
    finally:
        driver.close()


def _project(driver: Driver) -> Path:
    return driver.client.project_root


def test_without_a_terminal_a_write_is_refused_and_names_the_approval_mode(
    shared: Driver,
) -> None:
    driver = shared
    replies = driver.ask("fix it")
    refused = [r for r in replies if isinstance(r, ToolShown) and r.status == "refused"]
    assert refused and "--approval-mode" in refused[0].result
    assert end(replies).reason == "completed"
    assert "return a - b" in (_project(driver) / "src/calc.py").read_text()


def test_a_terminal_is_asked_and_its_answer_decides(shared: Driver) -> None:
    driver = shared
    for approved, expected in ((False, "return a - b"), (True, "return a + b")):
        request = AskRequest(req_id=driver.client.next_id(), text="fix it", can_confirm=True)
        driver.client.send(request)
        seen: list[Any] = []
        for reply in driver.client.replies(request.req_id, timeout_s=30):
            seen.append(reply)
            if isinstance(reply, ApprovalNeeded):
                assert reply.call.name == "edit"
                driver.client.send(
                    ApprovalAnswer(driver.client.next_id(), request.req_id, reply.call.id, approved)
                )
        assert end(seen).reason == "completed"
        assert expected in (_project(driver) / "src/calc.py").read_text()


def test_read_only_shell_runs_without_asking_and_a_write_command_asks(shared: Driver) -> None:
    driver = shared
    ok = [
        r for r in driver.ask("look around") if isinstance(r, ToolShown) and r.status == "success"
    ]
    assert ok and "calc.py" in ok[0].result
    refused = [
        r for r in driver.ask("clean up") if isinstance(r, ToolShown) and r.status == "refused"
    ]
    assert refused, "a non-read-only command ran without approval"
    assert (_project(driver) / "README.md").exists()


def test_plan_mode_refuses_writes_and_yolo_runs_them(start: Any, specrun: Specrun) -> None:
    driver = start(FIX_RULES, "--approval-mode", "plan")
    replies = driver.ask("fix it")
    assert any(
        isinstance(r, ToolShown) and r.status == "refused" and "plan mode" in r.result
        for r in replies
    )
    request = AskRequest(req_id=driver.client.next_id(), text="clean up", approval_mode="yolo")  # type: ignore[arg-type]
    list(driver.stream(request))
    assert not (specrun.project / "README.md").exists()


def test_history_is_persisted_and_reloaded_after_a_restart(start: Any, specrun: Specrun) -> None:
    driver = start(FIX_RULES, "--approval-mode", "auto-edit")
    driver.ask("fix it")
    driver.ask("hello")
    history = HistoryStore(specrun.project).load()
    assert [m.role for m in history] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
        "assistant",
    ]
    driver.close()
    specrun.run("stop", check=True)
    driver = start(FIX_RULES, "--approval-mode", "auto-edit")
    driver.ask("hello again")
    last = requests(driver.log)[-1]["body"]["messages"]
    texts = [m.get("content") for m in last if m["role"] == "user"]
    assert texts[0].endswith("fix it") and texts[-1].endswith("hello again")
    assert specrun.json("reset")["type"] == "ok"
    driver.ask("fresh")
    fresh = requests(driver.log)[-1]["body"]["messages"]
    assert [m["role"] for m in fresh] == ["system", "user"]


def _times_asked(driver: Driver, text: str) -> int:
    """How many main-chat model requests so far ended with the user's ``text``."""
    log: Path = driver.log  # type: ignore[attr-defined]
    return sum(text in json.dumps(r["body"]["messages"][-1]) for r in requests(log))


def test_ctrl_c_aborts_a_slow_turn_and_keeps_the_history_valid(shared: Driver) -> None:
    driver = shared
    before = _times_asked(driver, SLOW)
    request = AskRequest(req_id=driver.client.next_id(), text=SLOW)
    driver.client.send(request)
    t0 = time.monotonic()
    # Mid-turn: the model is working on the question (and would take 20 s).
    assert wait_until(lambda: _times_asked(driver, SLOW) > before, timeout=10)
    driver.client.send(CancelRequest(driver.client.next_id(), request.req_id))
    replies = list(driver.client.replies(request.req_id, timeout_s=10))
    assert end(replies).reason == "aborted"
    assert time.monotonic() - t0 < 5
    assert end(driver.ask("hello")).reason == "completed"


def test_cancelling_mid_stream_never_kills_the_service(
    shared: Driver, shared_service: tuple[Specrun, Path]
) -> None:
    """Regression: the model server writing into a stream the client closed raised SIGPIPE,
    which killed the whole service when the CLI had restored SIGPIPE's default action."""
    driver = shared
    specrun, _ = shared_service
    pid = driver.client.pid
    for _ in range(3):
        request = AskRequest(req_id=driver.client.next_id(), text=STREAM)
        driver.client.send(request)
        replies = driver.client.replies(request.req_id, timeout_s=10)
        seen = []
        for reply in replies:  # cancel once the words are streaming (200 of them, 6 s)
            seen.append(reply)
            if isinstance(reply, TextChunk) and "word2" in "".join(
                r.text for r in seen if isinstance(r, TextChunk)
            ):
                break
        driver.client.send(CancelRequest(driver.client.next_id(), request.req_id))
        rest = list(replies)
        assert end(rest).reason == "aborted"
        assert not any(isinstance(r, TextChunk) and "word199" in r.text for r in rest)
    # The server goes on writing into the closed streams (a chunk every 30 ms) while
    # the next turn runs: the service must live through it.
    assert end(driver.ask("hello")).reason == "completed"
    assert specrun.json("status")["pid"] == pid
    assert end(driver.ask("hello")).reason == "completed"


def test_turn_and_token_limits_end_the_turn_with_a_clear_reason(
    start: Any, specrun: Specrun
) -> None:
    settings = specrun.env.own_settings(specrun.project)
    settings.write_text(json.dumps({"maxTurnsPerQuery": 1, "maxSessionTurns": 2}))
    loop_rules = [
        {"when": {"purpose": "recall"}, "reply": {"json": {"selected_memories": []}}},
        {"default": {"tool_calls": [{"name": "list_directory", "arguments": {"path": "."}}]}},
    ]
    driver = start(loop_rules)
    first = end(driver.ask("go"))
    assert first.reason == "max_turns_per_query"
    end(driver.ask("go"))
    third = end(driver.ask("go"))
    assert third.reason == "max_session_turns" and "reset" in third.message


def test_slow_memory_arrives_after_the_tool_results_never_before(
    start: Any, specrun: Specrun
) -> None:
    memory = specrun.project / ".specrun" / "memory"
    memory.mkdir(parents=True)
    (memory / "testing.md").write_text(
        "---\nname: testing\ndescription: how to run the calc tests with pytest\n"
        "type: project\n---\n"
        "Run `python -m pytest -q` from the project root.\n"
    )
    (memory / "deploy.md").write_text(
        "---\nname: deploy\ndescription: how releases are cut\ntype: project\n---\nTag and push.\n"
    )
    specrun.trust()  # the project memory written here is the person's
    rules = [
        # recall (150 ms) settles while the first model call (1.5 s) is still running:
        # too late for the user query, in time for the first tool-result request. The
        # wide margin keeps a loaded 2-core machine from turning timing into a verdict.
        {
            "when": {"purpose": "recall"},
            # (not "pytest": pytest's own temp paths contain it, and the scripted
            # selector matches words anywhere in a manifest line, paths included)
            "reply": {"select_memories": ["calc tests"], "latency_ms": 150},
        },
        {"when": {"last_user": "fix it"}, "reply": {"tool_calls": [EDIT], "latency_ms": 1500}},
        {"when": {"last_tool": "edit"}, "reply": {"text": "Fixed."}},
        {"when": {"last_tool": "read_file"}, "reply": {"text": "Read."}},
        {
            "default": {
                "tool_calls": [{"name": "read_file", "arguments": {"file_path": "README.md"}}],
                "latency_ms": 400,
            }
        },
    ]
    driver = start(rules, "--approval-mode", "auto-edit")
    t0 = time.monotonic()
    assert end(driver.ask("fix it")).reason == "completed"
    main = requests(driver.log)
    first, second = main[0]["body"]["messages"], main[1]["body"]["messages"]
    assert "Relevant memory" not in json.dumps(first), "the user query waited for a slow recall"
    roles = [m["role"] for m in second]
    assert roles[-3:] == ["assistant", "tool", "user"], (roles, _tail(driver.log, specrun))
    assert "Relevant memory" in second[-1]["content"] and "testing" in second[-1]["content"]
    assert time.monotonic() - t0 < 8
    # Surfaced once: the next query does not recall the same memory again.
    driver.ask("anything else")
    assert wait_until(lambda: len(requests(driver.log, "recall")) >= 2, timeout=15), _tail(
        driver.log, specrun
    )
    manifest = json.dumps(requests(driver.log, "recall")[-1]["body"])
    assert "deploy.md" in manifest and "testing.md" not in manifest


def test_a_model_repeating_the_same_calls_is_stopped(shared: Driver) -> None:
    driver = shared
    ended = end(driver.ask(REPEAT))
    assert ended.reason == "loop_detected"
    history = HistoryStore(_project(driver)).load()
    assert history[-1].role == "tool"  # every call has its answer: the history stays valid
    assert end(driver.ask(f"{REPEAT} again")).reason == "loop_detected"


def test_ctrl_c_kills_the_running_tool(shared: Driver) -> None:
    driver = shared
    marker = SLEEP
    request = AskRequest(
        req_id=driver.client.next_id(),
        text="run the sleeper",
        approval_mode="yolo",  # type: ignore[arg-type]
    )
    driver.client.send(request)

    def sleeping() -> list[psutil.Process]:
        found = []
        for proc in psutil.process_iter(["cmdline"]):
            with contextlib.suppress(psutil.Error):
                if marker in " ".join(proc.info["cmdline"] or []):
                    found.append(proc)
        return found

    assert wait_until(lambda: bool(sleeping()), timeout=10), "the tool never started"
    driver.client.send(CancelRequest(driver.client.next_id(), request.req_id))
    assert end(list(driver.client.replies(request.req_id, timeout_s=10))).reason == "aborted"
    assert wait_until(lambda: not sleeping(), timeout=2), "the tool survived the abort"
    assert end(driver.ask("hello")).reason == "completed"
