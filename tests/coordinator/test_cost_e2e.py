"""What speculation costs, end to end: a real service, real workers and the scripted model
over HTTP, whose usage simulates a provider prefix cache. Tokens per purpose, the
accepted vs thrown-away split, a killed speculation's tokens, and the budget."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.coordinator.e2e import DIFF, FIX, NEG, Driver, scenario_variant
from tests.coordinator.e2e import turn_ended as _ended
from tests.support import Specrun, wait_until

PURPOSES = ("main", "suggestion", "speculation", "pipelined", "recall")


def _start(specrun: Specrun, monkeypatch: pytest.MonkeyPatch, *args: str) -> Driver:
    monkeypatch.setenv("SPECRUN_RUNTIME_DIR", str(specrun.env.runtime))
    specrun.run("start", "--approval-mode", "auto-edit", *args, check=True)
    return Driver(specrun.project)


@pytest.fixture
def driver(specrun: Specrun, monkeypatch: pytest.MonkeyPatch) -> Iterator[Driver]:
    # A memory the recall can pick, so the session makes a request of every purpose.
    specrun.run("memory", "add", "how to test", "-d", "run pytest for the tests", "-b", "pytest -q",
                check=True)
    d = _start(specrun, monkeypatch)
    try:
        yield d
    finally:
        d.close()
        specrun.run("stop")


def _worker_tokens(stats: dict[str, Any]) -> int:
    return sum(
        stats["tokens"][p]["prompt"] + stats["tokens"][p]["completion"]
        for p in ("speculation", "pipelined")
    )


def test_tokens_per_purpose_and_the_accepted_vs_thrown_away_split(
    driver: Driver, specrun: Specrun
) -> None:
    assert _ended(driver.ask(FIX)).reason == "completed"
    driver.wait_for_speculation(NEG, ("completed",))
    # The pipelined suggestion is written after `completed`: wait for it, so the accepted
    # speculation's tokens are all in before they are compared.
    assert wait_until(lambda: driver.suggestion().speculation.pipelined_suggestion, timeout=10)  # type: ignore[union-attr]
    before_accept = specrun.json("stats")
    assert before_accept["speculation_tokens"]["pending"] == _worker_tokens(before_accept) > 0
    assert _ended(driver.accept()).reason == "accepted"
    first = specrun.json("stats")
    accepted = first["speculation_tokens"]["accepted"]
    assert accepted == before_accept["speculation_tokens"]["pending"]

    driver.wait_for_speculation(DIFF, ("completed",))
    assert specrun.json("reject")["message"] == "dismissed"
    stats = specrun.json("stats")

    tokens = stats["tokens"]
    assert set(tokens) == {*PURPOSES, "compaction"}  # this short session never compacts
    assert tokens["compaction"]["requests"] == 0
    for purpose in PURPOSES:
        count = tokens[purpose]
        assert count["requests"] >= 1, (purpose, tokens)
        assert count["prompt"] > 0 and count["completion"] > 0, (purpose, count)
        assert 0 <= count["cached_prompt"] <= count["prompt"]
    # Forked requests reuse the main chat's byte-identical prefix: the cache holds most
    # of each speculation request's prompt.
    spec = tokens["speculation"]
    assert spec["cached_prompt"] / spec["prompt"] > 0.5, spec

    split = stats["speculation_tokens"]
    assert split["accepted"] == accepted > 0
    assert split["discarded"] > 0  # the rejected "show me the diff"
    assert split["pending"] == 0
    assert split["total"] == split["accepted"] + split["discarded"] == _worker_tokens(stats)
    per_1k = stats["time_saved_per_1k_tokens_s"]
    # The service rounds both to 4 decimals: the ratio is off by up to half that step, and
    # the total it is checked against by half a step, divided here by the thousands of
    # tokens (0.0343 against 0.034350 once failed a plain half-step bound).
    thousands = split["total"] / 1000
    expected = stats["time_saved_total_s"] / thousands
    assert abs(per_1k - expected) <= 0.00005 + 0.00005 / thousands + 1e-12, (per_1k, expected)
    assert stats["speculation_budget"] is None
    assert stats["speculations_skipped"] == {"total": 0, "by_reason": {}}

    human = specrun.run("stats", check=True).stdout
    assert "tokens by purpose" in human and "cached prompt" in human
    assert f"{split['total']:,}: {split['accepted']:,} accepted" in human
    assert "per 1,000 tokens" in human


def test_a_killed_speculation_still_counts_what_it_spent(
    specrun: Specrun, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    def slow_second_turn(rules: list[dict[str, Any]]) -> None:
        # The speculation's first model call answers (read_file), the second hangs:
        # the worker is killed while it waits, having spent one request's tokens.
        for rule in rules:
            if rule.get("name") == "negative test, write it":
                rule["when"]["purpose"] = "speculation"
                rule["reply"]["latency_ms"] = 60_000

    scenario = scenario_variant(tmp_path, slow_second_turn)
    driver = _start(specrun, monkeypatch, "--scenario", str(scenario))
    try:
        driver.ask(FIX)
        ready = driver.wait_for_speculation(NEG, ("running",))
        assert wait_until(lambda: driver.suggestion().speculation.tool_uses >= 1, timeout=10)  # type: ignore[union-attr]
        pid = ready.speculation.worker_pid if ready.speculation else None
        assert pid
        os.kill(pid, signal.SIGKILL)
        failed = driver.wait_for_speculation(NEG, ("failed",))
        assert failed.speculation is not None
        stats = specrun.json("stats")
        spec = stats["tokens"]["speculation"]
        assert spec["requests"] == 1 and spec["prompt"] > 0, spec
        split = stats["speculation_tokens"]
        # Failed: it can no longer be accepted, so its tokens are thrown away already.
        assert split == {
            "total": spec["prompt"] + spec["completion"],
            "accepted": 0,
            "discarded": spec["prompt"] + spec["completion"],
            "pending": 0,
        }
    finally:
        driver.close()
        specrun.run("stop")


def test_a_spent_budget_shows_suggestions_without_speculating_them(
    specrun: Specrun, monkeypatch: pytest.MonkeyPatch
) -> None:
    # One token per session: the first speculation runs (nothing spent yet) and spends
    # it; the next suggestion is shown but not speculated.
    specrun.run("config", "set", "speculationBudget", "1", check=True)
    specrun.run("config", "set", "speculationBudgetWindow", "session", check=True)
    driver = _start(specrun, monkeypatch)
    try:
        driver.ask(FIX)
        driver.wait_for_speculation(NEG, ("completed",))
        assert wait_until(lambda: driver.suggestion().speculation.pipelined_suggestion, timeout=10)  # type: ignore[union-attr]
        assert _ended(driver.accept()).reason == "accepted"
        assert wait_until(lambda: driver.suggestion().text == DIFF, timeout=10)
        shown = specrun.json("suggestion")
        assert shown["text"] == DIFF and shown["speculation"] is None
        assert shown["speculation_skipped"] == "budget"

        stats = specrun.json("stats")
        assert stats["speculations_skipped"] == {"total": 1, "by_reason": {"budget": 1}}
        budget = stats["speculation_budget"]
        assert budget["tokens"] == 1 and budget["window"] == "session"
        assert budget["exhausted"] and budget["spent"] == _worker_tokens(stats)
        assert stats["suggestions_shown"] == 2
        human = specrun.run("stats", check=True).stdout
        assert "suggestions not speculated" in human and "spent: not speculating" in human

        # A new session starts its budget again.
        specrun.run("reset", check=True)
        after = specrun.json("stats")["speculation_budget"]
        assert after["spent"] == 0 and not after["exhausted"]
    finally:
        driver.close()
        specrun.run("stop")


def test_bad_budget_window_is_refused_with_the_key(specrun: Specrun) -> None:
    out = specrun.run("config", "set", "speculationBudgetWindow", "day")
    assert out.returncode == 1
    assert "speculationBudgetWindow must be hour or session" in out.stderr
    settings = specrun.env.own_settings(specrun.project)
    settings.write_text('{"speculationBudget": -5}')
    out = specrun.run("config", "show")
    assert out.returncode == 1
    assert "speculationBudget must be at least 0" in out.stderr
