"""Typing at the prompt while a suggestion is speculated, end to end (one branch, the
default): a typed prefix keeps the speculation alive, the first diverging keystroke
kills it, and a prompt typed out in full uses it. Real service, real workers, the
scripted model over HTTP."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

import overlay
from protocol.wire.control import (
    Notice,
    StatsRequest,
    SuggestionReply,
    Transcript,
    TypedRequest,
)
from tests.coordinator.e2e import FIX, NEG, Driver, scenario_variant, start_playing
from tests.coordinator.e2e import turn_ended as _ended
from tests.support import Specrun, snapshot_tree, wait_until


def _slow_first_answer(rules: list[Any]) -> None:
    # The speculation waits for its first model answer long enough to be typed at.
    for rule in rules:
        if rule.get("name") == "negative test, read the tests":
            rule["reply"]["latency_ms"] = 1500


@pytest.fixture
def start(specrun: Specrun, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Any]:
    drivers: list[Driver] = []

    def started(**settings: Any) -> Driver:
        monkeypatch.setenv("SPECRUN_RUNTIME_DIR", str(specrun.env.runtime))
        start_playing(specrun, scenario_variant(tmp_path, _slow_first_answer), **settings)
        drivers.append(Driver(specrun.project))
        return drivers[-1]

    yield started
    for driver in drivers:
        driver.close()
    specrun.run("stop")


def _typed(driver: Driver, text: str) -> SuggestionReply:
    reply = driver.client.request(TypedRequest(req_id=driver.client.next_id(), text=text))
    assert isinstance(reply, SuggestionReply), reply
    return reply


def _running(driver: Driver) -> tuple[int, str]:
    ready = driver.wait_for_speculation(NEG, ("running",))
    assert ready.speculation is not None and ready.speculation.worker_pid is not None
    return ready.speculation.worker_pid, ready.speculation.id


def test_a_typed_prefix_keeps_the_speculation_alive_then_tab_accepts_it(
    start: Any, specrun: Specrun
) -> None:
    driver = start()
    assert _ended(driver.ask(FIX)).reason == "completed"
    pid, spec_id = _running(driver)

    for typed in ("a", "Add a", "add  a TEST for neg"):
        kept = _typed(driver, typed)
        assert kept.text == NEG and kept.speculation is not None, typed
        assert kept.speculation.id == spec_id and kept.speculation.status == "running"
        assert psutil.pid_exists(pid)

    driver.wait_for_speculation(NEG, ("completed",))
    replies = driver.accept()
    assert _ended(replies).reason == "accepted"
    assert any(isinstance(r, Transcript) for r in replies)
    assert (specrun.project / "tests/test_calc_negative.py").exists()
    stats = specrun.query(StatsRequest)
    assert stats["accepted_by_method"] == {"tab": 1}
    assert stats["accepted_by_typing"] == {"prefix_kept": 1}
    assert stats["accepted_by_rank"] == {"0": 1}


def test_the_first_diverging_keystroke_kills_the_speculation(start: Any, specrun: Specrun) -> None:
    driver = start()
    assert _ended(driver.ask(FIX)).reason == "completed"
    pid, spec_id = _running(driver)
    tree = snapshot_tree(specrun.project)
    assert _typed(driver, "add a test").text == NEG

    began = time.monotonic()
    gone = _typed(driver, "add a test for positive")
    answered = time.monotonic() - began
    assert gone.text is None and gone.branches == ()
    assert wait_until(lambda: not psutil.pid_exists(pid), timeout=1.0)
    assert not overlay.overlay_dir_for(pid, spec_id).exists()
    assert answered < 2.0, answered  # the kill happened within the request
    assert snapshot_tree(specrun.project) == tree
    stats = specrun.query(StatsRequest)
    assert stats["suggestions_ignored"] == 1 and stats["speculations_aborted"] == 1
    assert stats["suggestions_accepted"] == 0


def test_a_prompt_typed_out_in_full_uses_the_completed_speculation(
    start: Any, specrun: Specrun
) -> None:
    driver = start()
    assert _ended(driver.ask(FIX)).reason == "completed"
    driver.wait_for_speculation(NEG, ("completed",))
    replies = driver.ask("Add a test for negative numbers!")
    notices = [r.text for r in replies if isinstance(r, Notice)]
    assert notices == ["You typed a predicted prompt: using its speculation (completed)."]
    assert _ended(replies).reason == "accepted"
    transcript = next(r for r in replies if isinstance(r, Transcript))
    assert transcript.files == ("tests/test_calc_negative.py",)
    assert (specrun.project / "tests/test_calc_negative.py").exists()
    stats = specrun.query(StatsRequest)
    assert stats["accepted_by_method"] == {"typed": 1}
    assert stats["accepted_by_typing"] == {"exact_match": 1}


def test_with_both_settings_off_typing_dismisses_and_a_typed_prompt_is_a_normal_turn(
    start: Any, specrun: Specrun
) -> None:
    driver = start(keepSpeculationWhileTyping=False, acceptTypedPrompt=False)
    assert _ended(driver.ask(FIX)).reason == "completed"
    pid, _ = _running(driver)
    assert _typed(driver, "").text == NEG  # nothing typed yet
    assert _typed(driver, "add").text is None  # any keystroke dismisses, as before
    assert wait_until(lambda: not psutil.pid_exists(pid), timeout=1.0)

    assert _ended(driver.ask(FIX)).reason == "completed"
    driver.wait_for_speculation(NEG, ("completed",))
    replies = driver.ask("Add a test for negative numbers.")
    assert not any(isinstance(r, Notice) and "predicted prompt" in r.text for r in replies)
    assert _ended(replies).reason == "completed"  # run as a normal turn
    stats = specrun.query(StatsRequest)
    assert stats["suggestions_accepted"] == 0 and stats["accepted_by_typing"] == {}
