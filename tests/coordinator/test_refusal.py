"""A model's refusal through a real service: shown in the main chat, "no suggestion"
(with its reason in stats) for suggestions, the lexical fallback for recall."""

from __future__ import annotations

from pathlib import Path

import pytest

from protocol.wire.control import SuggestionRequest, TextChunk, TurnEnded
from tests.coordinator.e2e import Driver, rules_scenario
from tests.support import Specrun, wait_until

RULES = [
    {"when": {"purpose": "recall"}, "reply": {"refusal": "I can't choose memories."}},
    {"when": {"purpose": "suggestion"}, "reply": {"refusal": "I won't guess."}},
    {"when": {"last_user": "do something bad"}, "reply": {"refusal": "I can't help with that."}},
    {"default": {"text": "Sure, done."}},
]


def test_refusals_are_distinct_outcomes_everywhere(
    specrun: Specrun, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SPECRUN_RUNTIME_DIR", str(specrun.env.runtime))
    scenario = rules_scenario(tmp_path, RULES)
    memory = specrun.project / ".specrun" / "memory"
    specrun.run("memory", "add", "calc notes", "-d", "how the calc tests run", "-b",
                "pytest -q", check=True)
    assert (memory / "MEMORY.md").exists()
    specrun.run("start", "--scenario", str(scenario), check=True)
    driver = Driver(specrun.project)
    try:
        # Main chat: the refusal is the turn's end, in the model's words; never empty text.
        refused = driver.ask("do something bad")
        end = refused[-1]
        assert isinstance(end, TurnEnded) and end.reason == "refused", end
        assert end.message == "I can't help with that."
        assert not [r for r in refused if isinstance(r, TextChunk)]
        human = specrun.run("ask", "do something bad")
        assert human.returncode == 1 and "declined: I can't help with that." in human.stdout
        # Two completed turns make a suggestion request; its refusal is "no suggestion".
        for _ in range(2):
            assert isinstance(done := driver.ask("hello")[-1], TurnEnded)
            assert done.reason == "completed"
        assert wait_until(
            lambda: specrun.query(SuggestionRequest)["suppressed_reason"] == "refusal"
        )
        assert specrun.json("suggestion")["text"] is None
        stats = specrun.json("stats")
        assert stats["suggestions_suppressed"]["by_reason"].get("refusal", 0) >= 1
    finally:
        driver.close()
        specrun.run("stop")
    log = specrun.service_log.read_text()
    assert "the selector model refused" in log and "lexical fallback" in log
