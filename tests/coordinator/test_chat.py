"""The main chat through a real service: approvals, persistence, limits, abort, and the
memory prefetch's two consume points as the model actually receives them."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from coordinator.history import HistoryStore
from protocol.control import (
    ApprovalAnswer,
    ApprovalNeeded,
    AskRequest,
    CancelRequest,
    ToolShown,
    TurnEnded,
)
from tests.coordinator.e2e import Driver
from tests.support import Specrun, wait_until

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
        # The service answers before its warm workers are up; timing tests start warm.
        assert wait_until(
            lambda: any(w["state"] == "idle" for w in specrun.json("workers")["workers"]),
            timeout=10,
        )
        driver = Driver(specrun.project)
        driver.log = log  # type: ignore[attr-defined]
        drivers.append(driver)
        return driver

    yield _start
    for d in drivers:
        d.close()
    specrun.run("stop")


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
    service_log = specrun.project / ".specrun" / "logs" / "service.log"
    seen = [f"{r.get('purpose')} {r.get('outcome')}" for r in requests(log, "recall")]
    return f"recall requests: {seen}\n" + service_log.read_text()[-4000:]


def end(replies: list[Any]) -> TurnEnded:
    assert isinstance(replies[-1], TurnEnded), replies[-1]
    return replies[-1]


FIX_RULES = [
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


def test_without_a_terminal_a_write_is_refused_and_names_the_approval_mode(
    start: Any, specrun: Specrun
) -> None:
    driver = start(FIX_RULES)
    replies = driver.ask("fix it")
    refused = [r for r in replies if isinstance(r, ToolShown) and r.status == "refused"]
    assert refused and "--approval-mode" in refused[0].result
    assert end(replies).reason == "completed"
    assert "return a - b" in (specrun.project / "src/calc.py").read_text()


def test_a_terminal_is_asked_and_its_answer_decides(start: Any, specrun: Specrun) -> None:
    driver = start(FIX_RULES)
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
        assert expected in (specrun.project / "src/calc.py").read_text()


def test_read_only_shell_runs_without_asking_and_a_write_command_asks(
    start: Any, specrun: Specrun
) -> None:
    driver = start(FIX_RULES)
    ok = [
        r for r in driver.ask("look around") if isinstance(r, ToolShown) and r.status == "success"
    ]
    assert ok and "calc.py" in ok[0].result
    refused = [
        r for r in driver.ask("clean up") if isinstance(r, ToolShown) and r.status == "refused"
    ]
    assert refused, "a non-read-only command ran without approval"
    assert (specrun.project / "README.md").exists()


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


def test_ctrl_c_aborts_a_slow_turn_and_keeps_the_history_valid(
    start: Any, specrun: Specrun
) -> None:
    rules = [
        {"when": {"purpose": "recall"}, "reply": {"json": {"selected_memories": []}}},
        {
            "when": {"last_user": "slow"},
            "reply": {"text": "thinking very slowly", "latency_ms": 20000},
        },
        {"default": {"text": "Hello."}},
    ]
    driver = start(rules)
    request = AskRequest(req_id=driver.client.next_id(), text="slow")
    driver.client.send(request)
    t0 = time.monotonic()
    time.sleep(0.5)
    driver.client.send(CancelRequest(driver.client.next_id(), request.req_id))
    replies = list(driver.client.replies(request.req_id, timeout_s=10))
    assert end(replies).reason == "aborted"
    assert time.monotonic() - t0 < 5
    assert end(driver.ask("hello")).reason == "completed"


def test_cancelling_mid_stream_never_kills_the_service(start: Any, specrun: Specrun) -> None:
    """Regression: the model server writing into a stream the client closed raised SIGPIPE,
    which killed the whole service when the CLI had restored SIGPIPE's default action."""
    words = " ".join(f"word{i}" for i in range(200))
    rules = [
        {"when": {"purpose": "recall"}, "reply": {"json": {"selected_memories": []}}},
        {"when": {"last_user": "stream"}, "reply": {"text": words, "chunk_ms": 30}},
        {"default": {"text": "Hello."}},
    ]
    driver = start(rules)
    for _ in range(3):
        request = AskRequest(req_id=driver.client.next_id(), text="stream")
        driver.client.send(request)
        time.sleep(0.4)
        driver.client.send(CancelRequest(driver.client.next_id(), request.req_id))
        assert end(list(driver.client.replies(request.req_id, timeout_s=10))).reason == "aborted"
    time.sleep(0.5)  # the server keeps writing into the closed streams meanwhile
    assert specrun.json("status")["pid"] > 0
    assert end(driver.ask("hello")).reason == "completed"


def test_turn_and_token_limits_end_the_turn_with_a_clear_reason(
    start: Any, specrun: Specrun
) -> None:
    settings = specrun.project / ".specrun" / "settings.json"
    settings.parent.mkdir(exist_ok=True)
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


def test_a_model_repeating_the_same_calls_is_stopped(start: Any, specrun: Specrun) -> None:
    rules = [
        {"when": {"purpose": "recall"}, "reply": {"json": {"selected_memories": []}}},
        {"default": {"tool_calls": [{"name": "list_directory", "arguments": {"path": "src"}}]}},
    ]
    driver = start(rules)
    ended = end(driver.ask("loop"))
    assert ended.reason == "loop_detected"
    history = HistoryStore(specrun.project).load()
    assert history[-1].role == "tool"  # every call has its answer: the history stays valid
    assert end(driver.ask("again")).reason == "loop_detected"


def test_ctrl_c_kills_the_running_tool(start: Any, specrun: Specrun) -> None:
    marker = "sleep 37.5"
    rules = [
        {"when": {"purpose": "recall"}, "reply": {"json": {"selected_memories": []}}},
        {
            "when": {"last_user": "wait"},
            "reply": {
                "tool_calls": [{"name": "run_shell_command", "arguments": {"command": marker}}]
            },
        },
        {"default": {"text": "Hello."}},
    ]
    driver = start(rules, "--approval-mode", "yolo")
    request = AskRequest(req_id=driver.client.next_id(), text="wait")
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
