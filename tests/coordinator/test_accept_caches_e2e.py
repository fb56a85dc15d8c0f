"""Caches never make an accept fail, and deletions are applied (a real service, real
sandboxed commands).

A speculation with ``speculateShell`` runs a command that writes ``.pytest_cache`` and
``__pycache__`` files (ignored by the project's git) and one tracked-style file; meanwhile
the person writes the same cache files in the real tree (the tests ran in another terminal).
Tab applies the speculation anyway: the person's cache files win, the ones only the
speculation wrote are applied, bytecode never (a captured command's ``.pyc`` is dropped: it
would be code the person's next ``python`` runs, shown in no diff), and the listing sums the
ignored files up on one line.
A command that deletes a file has the deletion applied at Tab and listed.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from coordinator.cli.render import accept_summary
from protocol.control import Transcript, TurnEnded
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
        rules.append({"when": {"last_user": text}, "reply": {"tool_calls": [call]}})
        rules.append({"when": {"turn_user": text}, "reply": {"text": "Done."}})
    return {
        "name": "caches",
        "latency_ms": 1,
        "chunk_ms": 0,
        "models": ["scripted"],
        "rules": rules,
    }


@pytest.fixture()
def service(tmp_path: Path) -> Iterator[tuple[Specrun, Driver, Path]]:
    project = make_sample_project(tmp_path / "project")
    (project / ".gitignore").write_text("__pycache__/\n.pytest_cache/\n")
    # A cache the person already had: the speculation rewrites it, and so does the person.
    (project / ".pytest_cache/v/cache").mkdir(parents=True)
    (project / ".pytest_cache/v/cache/lastfailed").write_text("{}\n")
    subprocess.run(["git", "add", ".gitignore"], cwd=project, check=True)
    (project / ".specrun").mkdir(exist_ok=True)
    (project / ".specrun/settings.json").write_text('{"speculateShell": true}\n')
    scenario_file = tmp_path / "caches.yaml"
    scenario_file.write_text(yaml.safe_dump(scenario()))
    with running_service(
        project, "--approval-mode", "auto-edit", "--scenario", str(scenario_file)
    ) as runner:
        driver = Driver(project)
        try:
            driver.ask("hello")  # suggestions start from the second model turn
            yield runner, driver, project
        finally:
            driver.close()


def test_caches_changed_meanwhile_do_not_stop_the_accept(
    service: tuple[Specrun, Driver, Path],
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
    assert (project / "__pycache__/calc.cpython-311.pyc").read_text() == "the person's\n"
    assert (project / ".pytest_cache/v/cache/lastfailed").read_text() == '{"t": true}\n'
    assert (project / ".pytest_cache/v/cache/nodeids").read_text() == "speculated\n"
    assert not (project / "__pycache__/only_here.pyc").exists()  # bytecode is never carried
    assert transcript.ignored_skipped == 1
    listed = [c.path for c in transcript.changes if not c.ignored]
    assert listed == ["NOTES.txt"]
    assert [c.path for c in transcript.changes if c.ignored] == [".pytest_cache/v/cache/nodeids"]
    # The CLI's listing of that accept: one summary line for the ignored files.
    shown = accept_summary(TurnEnded(1, "accepted", elapsed_s=0.01), transcript).plain
    assert "1 file applied (created NOTES.txt)" in shown
    assert shown.splitlines()[-1] == (
        "  …and 2 files ignored by git (1 skipped: changed meanwhile)"
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
