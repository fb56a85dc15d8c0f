"""`specrun diff` and `specrun suggestion --transcript` against a real service.

The preview is the same computation accept uses: on a speculation that creates, modifies,
deletes, changes a mode and writes a file that runs later, the diff shown before Tab is byte
for byte the change Tab then makes, and every file has the status the accept listing gives
it. A file the person changes meanwhile is named as a conflict before Tab. A running
speculation shows the files it wrote so far and its tool calls so far.
"""

from __future__ import annotations

import difflib
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from protocol.wire.control import DiffRequest, Transcript
from tests.coordinator.e2e import (
    STALL,
    TIDY,
    Driver,
    done_unless_stalled,
    driven_service,
    shell_call,
    shell_speculation,
    stepped_scenario,
    tidy_project,
    write_call,
)
from tests.support import Specrun, needs_containment
from worker.contain.landlock import abi

pytestmark = needs_containment(
    "needs Landlock ABI >= 6 for the full profile" if abi() < 6 else None
)

EVERYTHING = TIDY
CONFLICT = "reword the readme"




STEPS: dict[str, list[dict[str, Any]]] = {
    EVERYTHING: [
        write_call("src/util.py", "def double(x):\n    return 2 * x\n"),
        {
            "name": "edit",
            "arguments": {
                "file_path": "src/calc.py",
                "old_string": "return a - b",
                "new_string": "return a + b",
            },
        },
        write_call(".envrc", "export DEBUG=1\n"),
        shell_call("chmod +x tools/run.sh && rm tests/old_test.py"),
    ],
    CONFLICT: [write_call("README.md", "# A reworded readme\n")],
    STALL: [write_call("NOTES.md", "first notes\n")],
}


def scenario() -> dict[str, Any]:
    return stepped_scenario("diff", STEPS, done_unless_stalled)


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Specrun, Driver, Path]]:
    tmp = tmp_path_factory.mktemp("diff")
    project = tidy_project(tmp / "project")
    path = tmp / "diff.yaml"
    path.write_text(yaml.safe_dump(scenario()))
    with driven_service(project, path, before_start=shell_speculation(project)) as running:
        yield running


def read(path: Path) -> str:
    return path.read_text() if path.exists() else ""


def test_the_preview_is_what_tab_then_does(service: tuple[Specrun, Driver, Path]) -> None:
    runner, driver, project = service
    driver.ask(f"go {EVERYTHING}")
    driver.wait_for_speculation(EVERYTHING, ("completed",), timeout=60)
    preview = runner.json("diff")
    before = {f["change"]["path"]: read(project / f["change"]["path"]) for f in preview["files"]}
    statuses = {
        f["change"]["path"]: (f["change"]["status"], f["change"]["mode"], f["change"]["runs_later"])
        for f in preview["files"]
    }
    assert statuses == {
        "src/util.py": ("created", "", False),
        "src/calc.py": ("modified", "", False),
        ".envrc": ("created", "", True),
        "tools/run.sh": ("mode", "+x", True),
        "tests/old_test.py": ("deleted", "", False),
    }
    shown = runner.run("diff", check=True).stdout
    assert "⚠ runs later without a key press" in shown and "+++ b/src/util.py" in shown
    assert "deleted tests/old_test.py" in shown and "mode +x tools/run.sh" in shown
    stat = runner.json("diff", "--stat")
    assert len(stat["files"]) == len(statuses)
    assert all(f["diff"] == "" for f in stat["files"])

    done = driver.accept()
    [transcript] = [r for r in done if isinstance(r, Transcript)]
    applied = {c.path: (c.status, c.mode, c.runs_later) for c in transcript.changes}
    assert applied == statuses
    for item in preview["files"]:
        rel = item["change"]["path"]
        status = item["change"]["status"]
        after = read(project / rel)
        a = "/dev/null" if status == "created" else f"a/{rel}"
        b = "/dev/null" if status == "deleted" else f"b/{rel}"
        again = "".join(
            difflib.unified_diff(
                before[rel].splitlines(keepends=True), after.splitlines(keepends=True), a, b
            )
        )
        assert item["diff"] == again, rel  # byte for byte what Tab did
    assert not (project / "tests/old_test.py").exists()


def test_a_conflict_is_said_before_tab(service: tuple[Specrun, Driver, Path]) -> None:
    runner, driver, project = service
    driver.ask(f"go {CONFLICT}")
    driver.wait_for_speculation(CONFLICT, ("completed",), timeout=60)
    (project / "README.md").write_text("# my own edit\n")
    preview = runner.json("diff")
    [item] = preview["files"]
    assert item["change"]["conflict"] == "modified"
    shown = runner.run("diff", check=True).stdout
    assert "Tab would refuse all of it now: README.md changed" in shown
    runner.run("reject", check=True)


def test_a_running_speculation_shows_what_it_did_so_far(
    service: tuple[Specrun, Driver, Path],
) -> None:
    runner, driver, project = service
    driver.ask(f"go {STALL}")
    driver.wait_for_speculation(STALL, ("running",), timeout=60)

    deadline = time.monotonic() + 30
    while not (preview := runner.query(DiffRequest))["files"]:  # its event is on its way
        assert time.monotonic() < deadline, "the write never reached the coordinator"
        time.sleep(0.02)
    assert preview["status"] == "running"
    assert [f["change"]["path"] for f in preview["files"]] == ["NOTES.md"]
    assert "+first notes" in preview["files"][0]["diff"]
    shown = runner.run("suggestion", "--transcript", check=True).stdout
    assert "write_file" in shown and "NOTES.md" in shown
    reply = runner.json("suggestion", "--transcript")
    tools = [e for e in reply["transcript"] if e["kind"] == "tool"]
    assert [t["tool"] for t in tools] == ["write_file"] and tools[0]["status"] == "success"
    assert "still running: what it wrote so far" in runner.run("diff", check=True).stdout
    runner.run("reject", check=True)
    assert not (project / "NOTES.md").exists()
