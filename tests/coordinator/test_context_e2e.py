"""Long sessions through a real service: real coordinator, workers running read_file on a
10 KB file, the embedded scripted model playing a context window (it refuses requests over
it as a provider does and logs every request it gets)."""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml

from coordinator.scripted_model.engine import request_tokens
from coordinator.service.chat.history import HistoryStore
from protocol.wire.control import CompactRequest, Notice
from tests.coordinator.e2e import Driver
from tests.coordinator.e2e import turn_ended as ended
from tests.support import Specrun, ended_or_killed, wait_until

BIG = "".join(f"line {i:04d}: the quick brown fox jumps over the lazy dog 0123456789\n"
              for i in range(150))  # ~10 KB


def scenario(
    tmp: Path, window: int, *, style: str = "openai", compaction_ms: int = 0
) -> Path:
    rules: list[dict[str, Any]] = []
    if compaction_ms:
        rules.append({
            "name": "slow summary",
            "when": {"purpose": "compaction"},
            "times": 1,
            "reply": {"text": "never arrives", "latency_ms": compaction_ms},
        })
    rules += [
        {"when": {"purpose": "compaction"},
         "reply": {"text": "The person reads big.txt again and again; nothing changed."}},
        {"when": {"purpose": "main", "last_tool": "read_file"}, "reply": {"text": "Read it."}},
        {"when": {"purpose": "main", "last_user": "read"},
         "reply": {"tool_calls": [{"name": "read_file", "arguments": {"file_path": "big.txt"}}]}},
        {"default": {"text": "ok"}},
    ]  # fmt: skip
    body = {
        "name": "context",
        "chunk_ms": 0,
        "context_window": window,
        "overflow_style": style,
        "rules": rules,
    }
    path = tmp / "context.yaml"
    path.write_text(yaml.safe_dump(body, sort_keys=False))
    return path


@contextmanager
def session(
    specrun: Specrun, monkeypatch: pytest.MonkeyPatch, tmp: Path, scenario_file: Path,
    **settings: Any,
) -> Iterator[tuple[Driver, Path]]:
    """A service on the sample project with big.txt, suggestions and memory off (only
    the main chat and compaction talk to the model), its model requests logged."""
    (specrun.project / "big.txt").write_text(BIG)
    config = {
        "enableFollowupSuggestions": False,
        "enableMemory": False,
        "scenario": str(scenario_file),
        **settings,
    }
    specrun.env.own_settings(specrun.project).write_text(json.dumps(config))
    log = tmp / "model.jsonl"
    specrun.env.vars["SPECRUN_MODEL_LOG"] = str(log)
    monkeypatch.setenv("SPECRUN_RUNTIME_DIR", str(specrun.env.runtime))
    specrun.run("start", check=True)
    driver = Driver(specrun.project)
    try:
        yield driver, log
    finally:
        driver.close()
        specrun.run("stop")


def model_requests(log: Path) -> list[dict[str, Any]]:
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]


def test_a_200_turn_session_compacts_by_itself_and_every_turn_completes(
    specrun: Specrun, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The long-session goal's correctness half (its latency half is
    scripts/bench_context.py: wall times on a shared machine are no test)."""
    window = 20_000
    with session(specrun, monkeypatch, tmp_path, scenario(tmp_path, window)) as (driver, log):
        notices = 0
        for n in range(200):
            replies = driver.ask(f"read big.txt ({n})")
            end = ended(replies)
            assert end.reason == "completed", (n, end, driver.log_tail())
            notices += sum(isinstance(r, Notice) and r.text.startswith("Compacted")
                           for r in replies)
        status = specrun.json("status")
        requests = model_requests(log)
    context = status["context"]
    assert context["window"] == window and context["window_source"] == "endpoint"
    assert context["compactions"] == notices >= 3
    assert context["tokens"] <= window * context["compact_at"]
    posts = [r for r in requests if r["method"] == "POST"]
    assert [r for r in posts if r["status"] != 200] == []  # never a request over the window
    assert max(request_tokens(r["body"], r["body"]["messages"]) for r in posts) <= window
    assert sum(r["purpose"] == "compaction" for r in posts) == notices
    # Every message is on disk; the service keeps working from the compacted view.
    report = HistoryStore(specrun.project).load_report()
    assert sum(m.role == "user" for m in report.full_messages) == 200
    assert len(report.messages) < len(report.full_messages)


@pytest.mark.parametrize("style", ["vllm", "ollama", "anthropic"])
def test_a_provider_overflow_mid_session_is_recovered_from(
    specrun: Specrun, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, style: str
) -> None:
    """The setting claims a window far larger than the provider's: its 400 (vLLM's words;
    Ollama's, which name no window; Anthropic's through LiteLLM's proxy) is the first
    sign; the turn compacts, retries and completes, and the window learnt from the error
    keeps later requests below it."""
    file = scenario(tmp_path, 9_000, style=style)
    with session(specrun, monkeypatch, tmp_path, file, contextWindow=1_000_000) as (driver, log):
        for n in range(10):
            end = ended(driver.ask(f"read big.txt ({n})"))
            assert end.reason == "completed", (n, end, driver.log_tail())
        status = specrun.json("status")
        requests = model_requests(log)
    refused = [r for r in requests if r.get("outcome") == "context_overflow"]
    assert len(refused) == 1  # once learnt, the window is respected
    if style == "ollama":  # it names no window: 90 % of what the refused request was
        assert status["context"]["window"] < refused[0]["prompt_tokens"]
    else:
        assert status["context"]["window"] == 9_000
    assert status["context"]["window_source"] == "provider"


def test_a_kill_in_the_middle_of_compaction_loses_nothing_and_compact_works_after(
    specrun: Specrun, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    file = scenario(tmp_path, 100_000, compaction_ms=60_000)
    with session(specrun, monkeypatch, tmp_path, file) as (driver, log):
        for n in range(3):
            assert ended(driver.ask(f"read big.txt ({n})")).reason == "completed"
        before = HistoryStore(specrun.project).load()
        driver.client.send(CompactRequest(req_id=driver.client.next_id()))
        _kill_while_compacting(specrun, driver, log)
        scenario(tmp_path, 100_000)  # the same file, now without the slow summary
        driver.client = _reconnect(specrun)  # the session's driver talks to the new service
        report = HistoryStore(specrun.project).load_report()
        assert report.messages == before == report.full_messages
        assert report.compactions == [] and not report.torn_tail
        # Restarted: the session goes on where it was, and `specrun compact` works.
        assert ended(driver.ask("read big.txt (3)")).reason == "completed"
        done = specrun.json("compact")
        assert done["type"] == "ok" and done["message"].startswith("Compacted the conversation")
        assert specrun.json("status")["context"]["compactions"] == 1
        after = HistoryStore(specrun.project).load_report()
        assert len(after.full_messages) == len(before) + 4 and len(after.compactions) == 1
        assert [m.text for m in after.messages if m.role == "user" and m.text] == [
            "read big.txt (3)"
        ]
        nothing = specrun.json("compact")
        assert nothing["message"].startswith("Nothing to compact")


def _kill_while_compacting(specrun: Specrun, driver: Driver, log: Path) -> None:
    """SIGKILL the service once its compaction request reached the model (the summary is
    slow, so it is still running), and wait for it to be gone."""
    pid = specrun.service_pid()
    assert wait_until(
        lambda: any(r["purpose"] == "compaction" for r in model_requests(log)), timeout=20
    ), driver.log_tail()
    os.kill(pid, signal.SIGKILL)
    assert wait_until(lambda: not _alive(pid), timeout=10)
    driver.close()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as fh:  # a zombie is gone for our purpose
        return fh.read().split()[2] != "Z"


def _reconnect(specrun: Specrun) -> Any:
    """Start the service again after a kill (what the kill left behind, the fork server
    and workers, is gone first); a client for it."""
    from coordinator.cli.client import ServiceClient

    ended_or_killed(specrun.env.runtime, timeout=5)
    specrun.run("start", check=True)
    return ServiceClient(specrun.project, timeout_s=30)


def test_a_speculation_running_across_a_compaction_stays_valid_and_joins_the_compacted_view(
    specrun: Specrun, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The demo: fix, Tab on the negative-numbers test, and while the pipelined "show me
    the diff" is speculated, `specrun compact`. That speculation is not restarted: at Tab
    its messages join after the compacted view, on disk as in the service."""
    from tests.coordinator.e2e import DIFF, FIX, NEG

    monkeypatch.setenv("SPECRUN_RUNTIME_DIR", str(specrun.env.runtime))
    specrun.run("start", "--approval-mode", "auto-edit", check=True)
    driver = Driver(specrun.project)
    try:
        assert ended(driver.ask(FIX)).reason == "completed"
        driver.wait_for_speculation(NEG, ("completed",))
        assert ended(driver.accept()).reason == "accepted"
        running = driver.wait_for_speculation(DIFF, ("running", "completed"))
        assert running.speculation is not None
        done = specrun.json("compact")
        assert done["message"].startswith("Compacted the conversation"), done
        after = driver.suggestion()
        assert after.text == DIFF and after.speculation is not None
        assert after.speculation.id == running.speculation.id  # the same one, not restarted
        driver.wait_for_speculation(DIFF, ("completed",))
        assert ended(driver.accept()).reason == "accepted"
        report = HistoryStore(specrun.project).load_report()
        prompts = [m.text for m in report.messages if m.role == "user" and m.text]
        assert prompts == [NEG, DIFF]  # FIX is in the summary; the rest whole, in order
        assert len(report.compactions) == 1
        assert [m.text for m in report.full_messages if m.role == "user"] == [FIX, NEG, DIFF]
        assert specrun.json("status")["context"]["compactions"] == 1
    finally:
        driver.close()
        specrun.run("stop")


HUGE = "".join("第" + str(i) + "行：" + "中文字符测试内容" * 12 + "\n" for i in range(280))
# ~28,000 characters, each non-ASCII one a token: more than the whole window by itself


def test_a_speculation_cuts_a_huge_tool_result_to_fit_the_window(
    specrun: Specrun, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The suggestion reads a file of Chinese text that the worker's 30,000-character cap
    leaves at about 28,000 tokens, more than the 12,000-token window: the speculation cuts
    it to a quarter of the window as the main chat does, so its next request is not
    refused and Tab brings the cut result, with its note, into the history."""
    (specrun.project / "huge.txt").write_text(HUGE)
    rules: list[dict[str, Any]] = [
        {"when": {"purpose": "pipelined"}, "reply": {"json": {"suggestion": ""}}},
        {"when": {"purpose": "suggestion"}, "reply": {"json": {"suggestion": "read huge.txt"}}},
        {"when": {"last_tool": "read_file"}, "reply": {"text": "Read it."}},
        {"when": {"last_user": "read"},
         "reply": {"tool_calls": [{"name": "read_file", "arguments": {"file_path": "huge.txt"}}]}},
        {"default": {"text": "ok"}},
    ]  # fmt: skip
    body = {"name": "huge", "chunk_ms": 0, "context_window": 12_000, "rules": rules}
    file = tmp_path / "huge.yaml"
    file.write_text(yaml.safe_dump(body, sort_keys=False, allow_unicode=True))
    with session(
        specrun, monkeypatch, tmp_path, file, enableFollowupSuggestions=True
    ) as (driver, log):
        for text in ("hello", "hello again"):  # a suggestion comes from the second turn on
            assert ended(driver.ask(text)).reason == "completed"
        driver.wait_for_speculation("read huge.txt", ("completed",))
        assert ended(driver.accept()).reason == "accepted"
        requests = model_requests(log)
    speculated = [r for r in requests if r["purpose"] == "speculation"]
    assert len(speculated) == 2 and [r["status"] for r in speculated] == [200, 200]
    assert max(request_tokens(r["body"], r["body"]["messages"]) for r in speculated) < 12_000
    report = HistoryStore(specrun.project).load_report()
    result = next(m for m in report.messages if m.role == "tool")
    text = result.tool_results[0].output or ""
    assert "Output cut to fit the model's context window" in text
    assert "第0行" in text[:100] and len(text) < 4_000


# -- an accepted speculation's turn ----------------------------------------------------------
#
# "go" ends with "NEXT: study the files.", which the suggestion rule makes the next prompt;
# its speculation reads big1..big4 (about 2,700 tokens each) one step at a time, so its turn
# fits the window while it runs but, accepted, brings the history past compactAt. Its
# pipelined suggestion "study it again" reads two of them again: forked from the over-full
# history its requests would not fit the window.

STUDY, AGAIN = "study the files", "study it again"
MARKS = ("MARK-ONE", "MARK-TWO", "MARK-THREE", "MARK-FOUR")


def _read(path: str) -> dict[str, Any]:
    return {"tool_calls": [{"name": "read_file", "arguments": {"file_path": path}}]}


def accept_scenario(tmp: Path, window: int, *, compaction_ms: int) -> Path:
    steps: list[dict[str, Any]] = [
        {"when": {"turn_user": f"^{STUDY}$", "prompt_contains": MARKS[3]},
         "reply": {"text": f"Studied. NEXT: {AGAIN}."}},
    ]
    for n in (3, 2, 1):
        steps.append({"when": {"turn_user": f"^{STUDY}$", "prompt_contains": MARKS[n - 1]},
                      "reply": _read(f"big{n + 1}.txt")})
    rules: list[dict[str, Any]] = [
        {"name": "slow summary", "when": {"purpose": "compaction"}, "times": 1,
         "reply": {"text": "The person studied big1-4.txt.", "latency_ms": compaction_ms}},
        {"when": {"purpose": "compaction"}, "reply": {"text": "The person studied big1-4.txt."}},
        {"when": {"purpose": "suggestion", "prompt_contains": f"NEXT: {STUDY}."},
         "reply": {"json": {"suggestion": STUDY}}},
        {"when": {"purpose": "suggestion"}, "reply": {"json": {"suggestion": ""}}},
        {"when": {"purpose": "pipelined", "prompt_contains": f"NEXT: {AGAIN}."}, "times": 1,
         "reply": {"json": {"suggestion": AGAIN}}},
        {"when": {"purpose": "pipelined"}, "reply": {"json": {"suggestion": ""}}},
        {"when": {"last_user": "^hello$"}, "reply": {"text": "Hi."}},
        {"when": {"last_user": "^go$"}, "reply": {"text": f"NEXT: {STUDY}."}},
        *steps,
        {"when": {"last_user": f"^{STUDY}$"}, "reply": _read("big1.txt")},
        {"when": {"turn_user": f"^{AGAIN}$", "last_tool": "read_file"}, "reply": {"text": "Done."}},
        {"when": {"last_user": f"^{AGAIN}$"},
         "reply": {"tool_calls": [{"name": "read_file", "arguments": {"file_path": f"big{n}.txt"}}
                                  for n in (1, 2)]}},
        {"default": {"text": "ok"}},
    ]  # fmt: skip
    body = {"name": "accept-compaction", "chunk_ms": 0, "context_window": window,
            "overflow_style": "openai", "rules": rules}  # fmt: skip
    path = tmp / "accept.yaml"
    path.write_text(yaml.safe_dump(body, sort_keys=False))
    return path


def _accepted_study(specrun: Specrun, driver: Driver) -> float:
    """Two turns, the speculation of STUDY completed, Tab: the accept's seconds."""
    for n, mark in enumerate(MARKS, start=1):
        (specrun.project / f"big{n}.txt").write_text(f"{mark}\n{BIG}")
    assert ended(driver.ask("hello")).reason == "completed"
    assert ended(driver.ask("go")).reason == "completed"
    driver.wait_for_speculation(STUDY, ("completed",), timeout=60)
    started = time.monotonic()
    end = ended(driver.accept())
    assert end.reason == "accepted", (end, driver.log_tail())
    return time.monotonic() - started


WINDOW = 18_000
SLOW_SUMMARY_MS = 8_000  # far longer than an accept takes, even on a loaded machine


def test_an_accepted_turn_past_compact_at_is_compacted_before_the_next_speculation_forks(
    specrun: Specrun, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    file = accept_scenario(tmp_path, WINDOW, compaction_ms=SLOW_SUMMARY_MS)
    with session(specrun, monkeypatch, tmp_path, file, enableFollowupSuggestions=True) as (
        driver, log,
    ):
        took = _accepted_study(specrun, driver)
        # The accept did not wait for the fast model: its reply came first.
        assert HistoryStore(specrun.project).load_report().compactions == []
        assert took < SLOW_SUMMARY_MS / 1000, took
        assert wait_until(
            lambda: len(HistoryStore(specrun.project).load_report().compactions) == 1, timeout=30
        ), driver.log_tail()
        driver.wait_for_speculation(AGAIN, ("completed",), timeout=60)
        status = specrun.json("status")
        requests = model_requests(log)
    assert status["context"]["compactions"] == 1
    posts = [r for r in requests if r["method"] == "POST"]
    assert [(r["purpose"], r["status"]) for r in posts if r["status"] != 200] == []
    # The accepted turn made the compaction due; the pipelined speculation forked after it.
    compaction = next(i for i, r in enumerate(posts) if r["purpose"] == "compaction")
    again = [i for i, r in enumerate(posts)
             if r["purpose"] == "speculation" and _last_user(r["body"]) == AGAIN]
    assert again and compaction < min(again)
    study = [r for r in posts if r["purpose"] == "speculation" and _last_user(r["body"]) == STUDY]
    largest_study = max(request_tokens(r["body"], r["body"]["messages"]) for r in study)
    assert largest_study > WINDOW * status["context"]["compact_at"]  # the turn did fill it
    assert max(request_tokens(posts[i]["body"], posts[i]["body"]["messages"]) for i in again) < (
        WINDOW
    )
    report = HistoryStore(specrun.project).load_report()
    assert [m.text for m in report.full_messages if m.role == "user" and m.text] == [
        "hello", "go", STUDY,
    ]


def _last_user(body: dict[str, Any]) -> str | None:
    """The prompt a speculation's request runs: its last plain user message."""
    for message in reversed(body["messages"]):
        if message["role"] == "user" and isinstance(message.get("content"), str):
            return str(message["content"])
    return None


def test_a_kill_during_the_compaction_after_an_accept_loses_nothing(
    specrun: Specrun, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    file = accept_scenario(tmp_path, WINDOW, compaction_ms=60_000)
    with session(specrun, monkeypatch, tmp_path, file, enableFollowupSuggestions=True) as (
        driver, log,
    ):
        _accepted_study(specrun, driver)
        accepted = HistoryStore(specrun.project).load()
        assert accepted[-1].text == f"Studied. NEXT: {AGAIN}."
        _kill_while_compacting(specrun, driver, log)
        accept_scenario(tmp_path, WINDOW, compaction_ms=0)  # the same file, a quick summary
        driver.client = _reconnect(specrun)
        report = HistoryStore(specrun.project).load_report()
        assert report.messages == accepted == report.full_messages
        assert report.compactions == [] and not report.torn_tail
        # Restarted with the accepted turn: the next turn compacts it as a turn's end would.
        assert ended(driver.ask("hello")).reason == "completed"
        after = HistoryStore(specrun.project).load_report()
        assert len(after.compactions) == 1
        assert [m.text for m in after.full_messages if m.role == "user" and m.text] == [
            "hello", "go", STUDY, "hello",
        ]
