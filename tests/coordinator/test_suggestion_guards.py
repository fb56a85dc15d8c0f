"""The guards that keep suggestions worth their tokens (issue 35), through a real service on
the scripted model: after unused suggestions the next prediction is skipped (backoff), and
a main request whose prompt the provider's cache did not serve skips it (cold cache); both
are counted in `specrun stats` by reason and configurable."""

from __future__ import annotations

import json
from typing import Any

from tests.coordinator.e2e import FIX
from tests.support import Specrun

OTHER = "what does multiply do?"


def _settings(specrun: Specrun, **values: Any) -> None:
    """The person's own user-wide settings (they apply in any project, trusted or not)."""
    path = specrun.env.home / ".specrun" / "settings.json"
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(values))


def _turn(specrun: Specrun, text: str) -> dict[str, Any]:
    """Ask, then the suggestion once its generation is over."""
    specrun.run("ask", text, check=True)
    return specrun.json("suggestion", "--wait")  # type: ignore[no-any-return]


def test_unused_suggestions_back_off_and_a_prediction_comes_again(specrun: Specrun) -> None:
    _settings(specrun, suggestionBackoffAfter=1, suggestionColdCacheTokens=0)
    specrun.run("start", "--approval-mode", "auto-edit", check=True)
    try:
        assert _turn(specrun, FIX)["text"]  # a suggestion, then not taken:
        skipped = _turn(specrun, OTHER)  # one unused in a row: the next one is skipped
        assert skipped["text"] is None and skipped["suppressed_reason"] == "backoff"
        again = _turn(specrun, OTHER)  # and the one after is predicted again
        assert again["suppressed_reason"] != "backoff"
        stats = specrun.json("stats")
        assert stats["suggestions_suppressed"]["by_reason"].get("backoff") == 1
        assert "backoff" in specrun.run("stats", check=True).stdout
    finally:
        specrun.run("stop")


def test_a_cold_prompt_cache_skips_the_prediction(specrun: Specrun) -> None:
    # the scripted model serves a prompt from its cache as a provider does, all but what
    # the last turn added: more than 1 token of it is "cold" here
    _settings(specrun, suggestionColdCacheTokens=1)
    specrun.run("start", "--approval-mode", "auto-edit", check=True)
    try:
        specrun.run("ask", FIX, check=True)
        shown = specrun.json("suggestion", "--wait")
        assert shown["text"] is None and shown["suppressed_reason"] == "cold_cache"
        assert specrun.json("stats")["suggestions_suppressed"]["by_reason"] == {"cold_cache": 1}
    finally:
        specrun.run("stop")
