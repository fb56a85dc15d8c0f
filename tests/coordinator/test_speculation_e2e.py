"""Suggest → speculate → accept / abort, end to end: real coordinator, real workers,
the scripted model over HTTP, real files."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import msgspec
import psutil
import pytest

from coordinator.service.chat.history import HistoryStore
from protocol.wire.control import AskRequest, CancelRequest, Notice, OkReply, Transcript
from tests.coordinator.e2e import COMMIT, DIFF, FIX, NEG, Driver, scenario_variant
from tests.coordinator.e2e import turn_ended as _end
from tests.support import Specrun, snapshot_tree, wait_until


@contextmanager
def driving(specrun: Specrun, monkeypatch: pytest.MonkeyPatch, *extra: str) -> Iterator[Driver]:
    """A service started with ``extra`` flags (auto-edit), driven over its control socket."""
    monkeypatch.setenv("SPECRUN_RUNTIME_DIR", str(specrun.env.runtime))
    specrun.run("start", "--approval-mode", "auto-edit", *extra, check=True)
    d = Driver(specrun.project)
    try:
        yield d
    finally:
        d.close()
        specrun.run("stop")


@pytest.fixture
def driver(
    specrun: Specrun, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> Iterator[Driver]:
    with driving(specrun, monkeypatch, *getattr(request, "param", [])) as d:
        yield d


def _overlay_root(pid: int | None) -> Path:
    import overlay

    return overlay.speculation_base_dir() / str(pid)


def test_accept_applies_files_then_history_and_returns_the_transcript(
    driver: Driver, specrun: Specrun
) -> None:
    assert _end(driver.ask(FIX)).reason == "completed"
    assert "return a + b" in (specrun.project / "src/calc.py").read_text()
    ready = driver.wait_for_speculation(NEG, ("completed",))
    assert ready.speculation is not None
    assert ready.speculation.files_written == ("tests/test_calc_negative.py",)
    assert not (specrun.project / "tests/test_calc_negative.py").exists(), (
        "speculation wrote the real tree"
    )
    before = len(HistoryStore(specrun.project).load())

    replies = driver.accept()
    transcript = next(r for r in replies if isinstance(r, Transcript))
    assert _end(replies).reason == "accepted"
    assert transcript.files == ("tests/test_calc_negative.py",)
    kinds = [e.kind for e in transcript.entries]
    assert kinds[0] == "user" and transcript.entries[0].text == NEG
    tools = [e for e in transcript.entries if e.kind == "tool"]
    assert [t.tool for t in tools] == ["read_file", "write_file"]
    assert all(t.status == "success" for t in tools)
    assert (
        "def test_add_negative_numbers"
        in (specrun.project / "tests/test_calc_negative.py").read_text()
    )
    history = HistoryStore(specrun.project).load()
    assert history[before].role == "user" and history[before].text == NEG
    assert (
        history[-1].role == "assistant" and "Added tests/test_calc_negative.py" in history[-1].text
    )
    root = _overlay_root(ready.speculation.worker_pid)
    assert wait_until(lambda: not root.exists(), timeout=5), list(root.rglob("*"))


def test_tab_tab_tab_follows_the_pipelined_suggestions(driver: Driver, specrun: Specrun) -> None:
    driver.ask(FIX)
    driver.wait_for_speculation(NEG, ("completed",))
    assert _end(driver.accept()).reason == "accepted"
    diff = driver.wait_for_speculation(DIFF, ("completed",))
    assert diff.visible  # a pipelined suggestion shows at once
    replies = driver.accept()
    assert _end(replies).reason == "accepted"
    transcript = next(r for r in replies if isinstance(r, Transcript))
    shell = [e for e in transcript.entries if e.tool == "run_shell_command"]
    assert len(shell) == 2 and "calc.py" in shell[1].text
    commit = driver.wait_for_speculation(COMMIT, ("boundary",))
    assert commit.speculation is not None and commit.speculation.boundary_reason
    assert commit.speculation.boundary_reason.startswith("shell:git add")
    # A boundary speculation is not accepted: the text runs as a normal turn and says why.
    replies = driver.accept()
    notices = [r.text for r in replies if isinstance(r, Notice)]
    assert any("stopped before the shell command `git add" in n for n in notices), notices
    assert _end(replies).reason == "completed"
    stats = specrun.json("stats")
    assert stats["suggestions_accepted"] == 3
    assert stats["speculations_completed"] == 2
    assert stats["speculations_boundary"]["by_reason"] == {"shell": 1}


def test_typing_something_else_kills_the_worker_and_removes_the_overlay(
    driver: Driver, specrun: Specrun
) -> None:
    driver.ask(FIX)
    ready = driver.wait_for_speculation(NEG, ("running", "completed"))
    assert ready.speculation is not None
    pid = ready.speculation.worker_pid
    assert pid is not None
    tree = snapshot_tree(specrun.project)
    driver.ask("what does multiply do?")
    assert wait_until(lambda: not psutil.pid_exists(pid), timeout=1.0)
    assert not _overlay_root(pid).exists()
    assert snapshot_tree(specrun.project) == tree
    assert driver.suggestion().text != NEG
    assert specrun.json("stats")["suggestions_ignored"] == 1


def test_a_file_the_user_changed_makes_accept_fall_back_with_a_conflict(
    specrun: Specrun, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    def main_turn_only_reads(rules: list) -> None:  # type: ignore[type-arg]
        for rule in rules:
            if rule.get("name") == "negative test, write it":
                rule["when"]["purpose"] = "speculation"
        index = next(i for i, r in enumerate(rules) if r.get("name") == "negative test, explain")
        rules.insert(
            index,
            {
                "name": "negative test, main turn",
                "when": {"purpose": "main", "turn_user": NEG, "last_tool": "read_file"},
                "reply": {"text": "You already have that test."},
            },
        )

    scenario = scenario_variant(tmp_path, main_turn_only_reads)
    with driving(specrun, monkeypatch, "--scenario", str(scenario)) as driver:
        driver.ask(FIX)
        driver.wait_for_speculation(NEG, ("completed",))
        mine = specrun.project / "tests/test_calc_negative.py"
        mine.write_text("# my own test\n")
        replies = driver.accept()
        notices = [r.text for r in replies if isinstance(r, Notice)]
        assert any("changed files" in n and "tests/test_calc_negative.py" in n for n in notices), (
            notices
        )
        assert _end(replies).reason == "completed"
        assert mine.read_text() == "# my own test\n"
        leftovers = [p for p in specrun.project.rglob("*specrun-*") if ".specrun" not in p.parts]
        assert leftovers == []


def test_a_worker_killed_mid_speculation_fails_it_and_the_service_keeps_serving(
    driver: Driver, specrun: Specrun
) -> None:
    driver.ask(FIX)
    ready = driver.wait_for_speculation(NEG, ("running", "completed"))
    assert ready.speculation is not None and ready.speculation.worker_pid
    history_before = HistoryStore(specrun.project).load()
    os.kill(ready.speculation.worker_pid, signal.SIGKILL)
    status = driver.wait_for_speculation(NEG, ("failed", "aborted", "completed"))
    assert status.speculation is not None
    assert wait_until(lambda: not _overlay_root(ready.speculation.worker_pid).exists(), timeout=2)
    if status.speculation.status != "completed":
        replies = driver.accept()
        assert any(isinstance(r, Notice) for r in replies)
    assert specrun.json("status")["pid"] > 0
    # The killed worker's results never reached the history.
    history = HistoryStore(specrun.project).load()
    assert history[: len(history_before)] == history_before


def test_reject_kills_the_speculation(driver: Driver, specrun: Specrun) -> None:
    driver.ask(FIX)
    ready = driver.wait_for_speculation(NEG, ("running", "completed"))
    assert ready.speculation is not None
    out = specrun.json("reject")
    assert out["type"] == "ok"
    assert wait_until(lambda: not psutil.pid_exists(ready.speculation.worker_pid or 0), timeout=1.0)
    assert specrun.json("suggestion")["text"] is None
    assert msgspec.json.decode(specrun.run("stats", "--json").stdout)["suggestions_ignored"] == 1


def test_a_sweep_while_the_user_thinks_does_not_lose_the_speculation(
    driver: Driver, specrun: Specrun
) -> None:
    """The worker exits when its speculation is done; the overlay must wait for Tab even
    if a sweep (this service's periodic one, or another project's) runs meanwhile."""
    import overlay

    driver.ask(FIX)
    ready = driver.wait_for_speculation(NEG, ("completed",))
    assert ready.speculation is not None and ready.speculation.worker_pid
    assert wait_until(lambda: not psutil.pid_exists(ready.speculation.worker_pid or 0), timeout=5)
    overlay.sweep()
    assert _end(driver.accept()).reason == "accepted"
    assert (specrun.project / "tests/test_calc_negative.py").exists()


def test_ctrl_c_stops_a_typed_prompt_waiting_for_its_slow_speculation(
    specrun: Specrun, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The person types the predicted prompt out while its speculation still runs (it
    waits for it, acceptTypedPrompt), then presses Ctrl-C: the wait ends, the speculation
    is stopped and nothing is applied."""

    def slow_speculation(rules: list) -> None:  # type: ignore[type-arg]
        for rule in rules:
            if rule.get("name") == "negative test, write it":
                rule["reply"]["latency_ms"] = 20_000

    scenario = scenario_variant(tmp_path, slow_speculation)
    with driving(specrun, monkeypatch, "--scenario", str(scenario)) as driver:
        driver.ask(FIX)
        running = driver.wait_for_speculation(NEG, ("running",))
        assert running.speculation is not None
        ask = AskRequest(req_id=driver.client.next_id(), text=NEG.capitalize() + ".")
        driver.client.send(ask)
        stream = driver.client.replies(ask.req_id, timeout_s=10)
        waiting = next(stream)  # its notice: it waits for the speculation
        assert isinstance(waiting, Notice) and "still running" in waiting.text, waiting
        cancel = driver.client.request(
            CancelRequest(req_id=driver.client.next_id(), ask_req_id=ask.req_id)
        )
        assert isinstance(cancel, OkReply) and cancel.message == "cancelled", cancel
        end = _end(list(stream))
        assert end.reason == "aborted" and "cancelled" in end.message
        assert not (specrun.project / "tests/test_calc_negative.py").exists()
        worker = running.speculation.worker_pid
        assert wait_until(lambda: worker is None or not psutil.pid_exists(worker), timeout=5)
