"""Caches and build output never make an accept fail, and deletions are applied (a real
service, real sandboxed commands).

A speculation with ``speculateShell`` runs a command that writes ``.pytest_cache`` and
``__pycache__`` files (ignored by the project's git) and one tracked-style file, and writes
an ignored ``.env`` with the file tool; meanwhile the person writes the same cache files in
the real tree (the tests ran in another terminal). Tab applies the speculation anyway.
What the command wrote of the ignored files is held back (build output and caches, no diff
shows them, and the person may run them next) and summed up on one line; the ``.env`` the
model wrote with its tool is applied and listed like any other file. Bytecode is never kept.
With ``applyIgnoredOutput`` on, the command's ignored files are applied where the real ones
did not change meanwhile (the person's win).
A command that deletes a file has the deletion applied at Tab and listed.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from coordinator.cli.render import accept_summary
from protocol.wire.control import Transcript, TurnEnded
from tests.coordinator.e2e import Driver
from tests.support import Specrun, make_sample_project, needs_containment, running_service
from worker.contain.landlock import abi

pytestmark = needs_containment(
    "needs Landlock ABI >= 6 for the full profile" if abi() < 6 else None
)

SUGGESTION = "run the tests"
COMMAND = (
    "mkdir -p __pycache__ .pytest_cache/v/cache"
    " && echo speculated > __pycache__/calc.cpython-311.pyc"
    " && echo speculated > __pycache__/only_here.pyc"
    " && echo speculated > .pytest_cache/v/cache/lastfailed"
    " && echo speculated > .pytest_cache/v/cache/nodeids"
    " && echo 'ran the tests' > NOTES.txt"
)
DELETE = "remove the calc tests"
DELETE_COMMAND = "rm tests/test_calc.py && echo gone > GONE.txt"
STEPS = {SUGGESTION: COMMAND, DELETE: DELETE_COMMAND}


def scenario() -> dict[str, Any]:
    rules: list[dict[str, Any]] = [
        {"when": {"purpose": "recall"}, "reply": {"json": {"selected_memories": []}}},
        {"when": {"purpose": "pipelined"}, "reply": {"json": {"suggestion": ""}}},
        {"when": {"last_user": "hello"}, "reply": {"text": "Hi."}},
    ]
    for text in STEPS:
        rules.append(
            {
                "when": {"purpose": "suggestion", "prompt_contains": f"NEXT: {text}."},
                "reply": {"json": {"suggestion": text}},
            }
        )
    rules.append({"when": {"purpose": "suggestion"}, "reply": {"json": {"suggestion": ""}}})
    for text in STEPS:
        rules.append({"when": {"last_user": f"go {text}"}, "reply": {"text": f"NEXT: {text}."}})
    for text, command in STEPS.items():
        call = {"name": "run_shell_command", "arguments": {"command": command}}
        env = {"name": "write_file", "arguments": {"file_path": ".env", "content": "A=1\n"}}
        calls = [call, env] if text == SUGGESTION else [call]
        rules.append({"when": {"last_user": text}, "reply": {"tool_calls": calls}})
        rules.append({"when": {"turn_user": text}, "reply": {"text": "Done."}})
    return {
        "name": "caches",
        "latency_ms": 1,
        "chunk_ms": 0,
        "models": ["scripted"],
        "rules": rules,
    }


@pytest.fixture(params=[False, True], ids=["held", "applyIgnoredOutput"])
def apply_output(request: pytest.FixtureRequest) -> bool:
    return bool(request.param)


@pytest.fixture()
def service(tmp_path: Path, apply_output: bool) -> Iterator[tuple[Specrun, Driver, Path]]:
    project = make_sample_project(tmp_path / "project")
    (project / ".gitignore").write_text("__pycache__/\n.pytest_cache/\n.env\n")
    # A cache the person already had: the speculation rewrites it, and so does the person.
    (project / ".pytest_cache/v/cache").mkdir(parents=True)
    (project / ".pytest_cache/v/cache/lastfailed").write_text("{}\n")
    subprocess.run(["git", "add", ".gitignore"], cwd=project, check=True)
    settings = {"speculateShell": True, "applyIgnoredOutput": apply_output}
    scenario_file = tmp_path / "caches.yaml"
    scenario_file.write_text(yaml.safe_dump(scenario()))
    with running_service(
        project, "--approval-mode", "auto-edit", "--scenario", str(scenario_file),
        before_start=lambda env: env.own_settings(project).write_text(json.dumps(settings)),
    ) as runner:
        driver = Driver(project)
        try:
            driver.ask("hello")  # suggestions start from the second model turn
            yield runner, driver, project
        finally:
            driver.close()


def test_caches_changed_meanwhile_do_not_stop_the_accept(
    service: tuple[Specrun, Driver, Path], apply_output: bool
) -> None:
    runner, driver, project = service
    driver.ask(f"go {SUGGESTION}")
    reply = driver.wait_for_speculation(SUGGESTION, ("completed",), timeout=60)
    assert reply.speculation is not None
    assert not (project / "NOTES.txt").exists()
    # Meanwhile the person ran the tests in another terminal.
    (project / "__pycache__").mkdir()
    (project / "__pycache__/calc.cpython-311.pyc").write_text("the person's\n")
    (project / ".pytest_cache/v/cache/lastfailed").write_text('{"t": true}\n')

    done = driver.accept()
    [transcript] = [r for r in done if isinstance(r, Transcript)]
    assert (project / "NOTES.txt").read_text() == "ran the tests\n"
    assert (project / ".env").read_text() == "A=1\n"  # the model's own write, ignored or not
    assert (project / "__pycache__/calc.cpython-311.pyc").read_text() == "the person's\n"
    assert (project / ".pytest_cache/v/cache/lastfailed").read_text() == '{"t": true}\n'
    assert not (project / "__pycache__/only_here.pyc").exists()  # bytecode is never carried
    shown = accept_summary(TurnEnded(1, "accepted", elapsed_s=0.01), transcript).plain
    # .env is ignored, but a file that runs later is listed with the others, not summed up
    assert "2 files applied" in shown
    assert "  created NOTES.txt\n  created .env\n" in shown
    assert "runs later without a key press (check before you commit, build or open): .env" in (
        shown
    )
    applied_ignored = [c.path for c in transcript.changes if c.ignored]
    if apply_output:
        assert (project / ".pytest_cache/v/cache/nodeids").read_text() == "speculated\n"
        assert transcript.ignored_skipped == 1
        assert transcript.ignored_held == 0
        assert applied_ignored == [".pytest_cache/v/cache/nodeids", ".env"]
        assert shown.splitlines()[-1] == (
            "  …and 2 files ignored by git (1 skipped: changed meanwhile)"
        )
    else:
        assert not (project / ".pytest_cache/v/cache/nodeids").exists()
        assert transcript.ignored_skipped == 0
        assert transcript.ignored_held == 2
        assert transcript.ignored_held_in == (".pytest_cache/",)
        assert applied_ignored == [".env"]
        assert shown.splitlines()[-2].startswith("  ⚠ runs later without a key press")
        assert shown.splitlines()[-1] == (
            "  …and 2 files git ignores that its commands wrote were not applied (build "
            "output and caches: .pytest_cache/; applyIgnoredOutput applies them)"
        )
    assert runner.service_pid() is not None


def test_a_file_a_command_deleted_is_deleted_at_tab(service: tuple[Specrun, Driver, Path]) -> None:
    _runner, driver, project = service
    driver.ask(f"go {DELETE}")
    driver.wait_for_speculation(DELETE, ("completed",), timeout=60)
    assert (project / "tests/test_calc.py").exists()  # nothing happens before Tab
    done = driver.accept()
    [transcript] = [r for r in done if isinstance(r, Transcript)]
    assert not (project / "tests/test_calc.py").exists()
    assert (project / "GONE.txt").read_text() == "gone\n"
    statuses = {c.path: c.status for c in transcript.changes}
    assert statuses == {"tests/test_calc.py": "deleted", "GONE.txt": "created"}
    shown = accept_summary(TurnEnded(1, "accepted", elapsed_s=0.01), transcript).plain
    assert "  deleted tests/test_calc.py" in shown.splitlines()
