"""The first minutes of a new user, through the real CLI: the scripted model outside the
sample project, a pending suggestion, what typing something else says, boundary reasons
in words, and approval hints that name the mode that would allow the refused call."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from protocol.wire.control import SuggestionRequest
from tests.coordinator.e2e import COMMIT, DIFF, FIX, NEG, scenario_variant
from tests.support import Env, Specrun, snapshot_tree, wait_until


def test_outside_the_sample_project_the_scripted_model_only_explains_setup(
    env: Env, tmp_path: Path
) -> None:
    project = tmp_path / "mine"
    (project / "src").mkdir(parents=True)
    (project / "src" / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (project / "tests").mkdir()
    (project / "tests" / "test_calc.py").write_text("from src.calc import add\n")
    subprocess.run(["git", "init", "-q"], cwd=project, check=True)
    before = snapshot_tree(project)
    specrun = Specrun(project, env)
    specrun.run("start", "--approval-mode", "yolo", check=True)
    try:
        events = specrun.json_lines("ask", FIX)
        assert events[-1]["reason"] == "completed", events
        assert not [e for e in events if e["type"] == "tool"]  # never a tool call
        text = "".join(e["text"] for e in events if e["type"] == "text")
        for needed in ("OpenAI-compatible", "baseUrl", "API key", "model", "specrun demo"):
            assert needed in text, text
    finally:
        specrun.run("stop")
    assert snapshot_tree(project) == before


def _words(text: str) -> str:
    """Human output with the terminal's line wrapping undone."""
    return " ".join(text.split())


def _slow_first_suggestion(rules: list[dict[str, Any]]) -> None:
    for index, rule in enumerate(rules):
        if rule.get("name") == "suggestion after the fix":
            # The first one only: long enough to be seen pending by two CLI calls on a
            # loaded machine (the suite runs on pytest-xdist workers that share the
            # cores); the test asks the fix again later and need not wait that out twice.
            slow = {**rule, "name": "slow first suggestion after the fix", "times": 1,
                    "reply": {**rule["reply"], "latency_ms": 5000}}
            rules.insert(index, slow)
            return
    raise AssertionError("the demo scenario has no 'suggestion after the fix' rule")


def _wait_status(specrun: Specrun, text: str, statuses: tuple[str, ...]) -> dict[str, Any]:
    found: dict[str, Any] = {}

    def ready() -> bool:
        found.update(specrun.query(SuggestionRequest))
        spec = found.get("speculation") or {}
        return found.get("text") == text and spec.get("status") in statuses

    assert wait_until(ready, timeout=30), found
    return found


@pytest.fixture
def auto_edit(specrun: Specrun, tmp_path: Path) -> Any:
    scenario = scenario_variant(tmp_path, _slow_first_suggestion)
    specrun.run("start", "--approval-mode", "auto-edit", "--scenario", str(scenario), check=True)
    yield specrun
    specrun.run("stop")


def test_pending_suggestion_abort_notice_boundary_words_and_hints(auto_edit: Specrun) -> None:
    specrun = auto_edit
    assert specrun.run("ask", FIX).returncode == 0
    pending = _words(specrun.run("suggestion").stdout)
    assert "suggestion pending" in pending and "--wait" in pending, pending
    assert specrun.json("suggestion")["pending"] is True
    waited = specrun.json("suggestion", "--wait")
    assert waited["text"] == NEG and waited["pending"] is False
    _wait_status(specrun, NEG, ("completed",))

    # Typing something else says which speculation it stopped.
    other = _words(specrun.run("ask", "what does add do?").stdout)
    assert f"stopped the speculation of “{NEG}”" in other, other

    # Back on the path: Tab through the new test and the diff to "commit this".
    assert specrun.run("ask", FIX).returncode == 0
    _wait_status(specrun, NEG, ("completed",))
    assert specrun.run("accept").returncode == 0
    _wait_status(specrun, DIFF, ("completed",))
    assert specrun.run("accept").returncode == 0
    raw = _wait_status(specrun, COMMIT, ("boundary",))
    reason = raw["speculation"]["boundary_reason"]
    assert reason.startswith("shell:git ")  # scripts keep the raw code:detail
    human = _words(specrun.run("suggestion").stdout)
    assert "stopped before the shell command `git " in human, human
    assert "it is not proven read-only" in human

    # Accepting it runs `git commit` as a normal turn; auto-edit does not allow shell,
    # and accept has no --approval-mode: the hint says yolo, and where to give it.
    events = specrun.json_lines("accept")
    refused = [e for e in events if e["type"] == "tool" and e["status"] == "refused"]
    assert refused, events
    hint = refused[0]["result"]
    assert "--approval-mode yolo" in hint and "specrun ask" in hint, hint
    assert "auto-edit or yolo" not in hint and "rerun with" not in hint


def test_the_hint_names_auto_edit_for_a_write_and_yolo_for_shell(specrun: Specrun) -> None:
    specrun.run("start", check=True)  # default mode
    try:
        events = specrun.json_lines("ask", FIX)
        refused = [e for e in events if e["type"] == "tool" and e["status"] == "refused"]
        assert refused and refused[0]["name"] == "edit"
        assert "rerun with --approval-mode auto-edit" in refused[0]["result"]
        events = specrun.json_lines("ask", COMMIT, "--approval-mode", "auto-edit")
        shell = [e for e in events if e["type"] == "tool" and e["status"] == "refused"]
        assert shell and shell[0]["name"] == "run_shell_command", json.dumps(events)
        assert "rerun with --approval-mode yolo" in shell[0]["result"]
    finally:
        specrun.run("stop")
