"""A cloned repository's ``.envrc`` (direnv) or CI file sets specrun's variables.

The repository ships real programs (``bin/rg``, ``bin/find``, ``bin/git``) that leave a
marker file when run, and its ``.envrc`` would point ``SPECRUN_RG`` at one and put ``bin/``
first on ``PATH`` (direnv's ``PATH_add bin``). A real service searches that project, in the
main chat and in a speculation, and the coordinator diffs and checks ignored files with
git: all of it works, and no program of the project ran. The other
variables that name a place (``SPECRUN_MODEL_LOG``, ``SPECRUN_RUNTIME_DIR``) refuse one
inside the project (docs/configuration.md#other-environment-variables).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from coordinator.service.model_endpoint import log_refusal
from protocol.rules.programs import refusal
from tests.coordinator.e2e import Driver, rules_scenario, stepped_scenario, turn_ended
from tests.support import isolated_env, make_sample_project, running_service

SEARCHES: list[dict[str, Any]] = [
    {"name": "grep_search", "arguments": {"pattern": "needle"}},
    {"name": "glob", "arguments": {"pattern": "**/*.txt"}},
]


def plant_programs(project: Path, markers: Path) -> dict[str, str]:
    """The repository's own ``rg``, ``find`` and ``git``: each writes its marker when run
    (and says it is ripgrep 14, so a version check alone would take it). The environment
    its ``.envrc`` would make."""
    markers.mkdir()
    (project / "bin").mkdir()
    for name in ("rg", "find", "git"):
        program = project / "bin" / name
        program.write_text(
            f"#!/bin/sh\necho ran > '{markers / name}'\necho 'ripgrep 14.1.0'\n"
        )
        program.chmod(0o755)
    (project / "notes.txt").write_text("needle in the notes\n")
    return {
        "SPECRUN_RG": str(project / "bin" / "rg"),
        "PATH": f"{project / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
    }


def ran(markers: Path) -> list[str]:
    return sorted(p.name for p in markers.iterdir())


def in_fresh_process(code: str, project: Path, env: dict[str, str]) -> Any:
    """What ``code`` prints (JSON), run by a new interpreter (nothing cached yet) with
    ``project`` as its argument, in the environment the repository's ``.envrc`` makes."""
    done = subprocess.run(
        [sys.executable, "-c", code, str(project)],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        check=True,
        cwd=project.parent,
    )
    return json.loads(done.stdout)


def test_the_planted_programs_would_run_if_named(tmp_path: Path) -> None:
    """The control: the planted program does write its marker when something runs it."""
    project = make_sample_project(tmp_path / "project", git=False)
    env = plant_programs(project, tmp_path / "markers")
    subprocess.run([env["SPECRUN_RG"], "--version"], check=True, capture_output=True)
    assert ran(tmp_path / "markers") == ["rg"]


def test_a_search_in_a_fresh_process_runs_none_of_the_projects_programs(tmp_path: Path) -> None:
    project = make_sample_project(tmp_path / "project", git=False)
    env = plant_programs(project, tmp_path / "markers")
    code = (
        "import asyncio, json, sys\n"
        "from pathlib import Path\n"
        "from protocol.wire.chat import ToolCall\n"
        "from worker.tools import DirectAccess, ToolContext, execute\n"
        "root = Path(sys.argv[1])\n"
        "ctx = ToolContext(access=DirectAccess(root))\n"
        "call = ToolCall('c1', 'grep_search', json.dumps({'pattern': 'needle'}))\n"
        "result = asyncio.run(execute(call, ctx))\n"
        "print(json.dumps(result.output))\n"
    )
    output = in_fresh_process(code, project, env)
    assert "notes.txt:1:needle in the notes" in output
    assert ran(tmp_path / "markers") == []


def test_the_coordinators_git_is_never_the_projects(tmp_path: Path) -> None:
    project = make_sample_project(tmp_path / "project")
    env = plant_programs(project, tmp_path / "markers")
    (project / ".gitignore").write_text("*.log\n")
    code = (
        "import json, sys, time\n"
        "from pathlib import Path\n"
        "from coordinator.service.speculation.git_ignored import git_ignored\n"
        "from coordinator.service.speculation.text_diff import unified_diff\n"
        "root = Path(sys.argv[1])\n"
        "ignored = sorted(git_ignored(root, ['run.log', 'src/app.py']))\n"
        "diff = unified_diff(b'a\\n' * 9, b'b\\n' * 9, 'a/x', 'b/x', time.monotonic() + 30,\n"
        "                    project=root)\n"
        "print(json.dumps([ignored, diff]))\n"
    )
    ignored, diff = in_fresh_process(code, project, env)
    assert ignored == ["run.log"]
    assert diff.startswith("--- a/x\n+++ b/x\n@@ -1,9 +1,9 @@\n")
    assert ran(tmp_path / "markers") == []


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Driver, Path, Path]]:
    tmp = tmp_path_factory.mktemp("hostile-env")
    project = make_sample_project(tmp / "project")
    markers = tmp / "markers"
    env = plant_programs(project, markers)
    steps = {"search the notes": SEARCHES}
    scenario = stepped_scenario("hostile-env", steps, lambda _text: {"text": "Searched."})
    path = rules_scenario(tmp, scenario["rules"])
    log = tmp / "requests.jsonl"
    with running_service(project, "--scenario", str(path),
                         extra_env={**env, "SPECRUN_MODEL_LOG": str(log)}):
        driver = Driver(project)
        driver.ask("hello")  # no suggestion follows the first turn of a conversation
        try:
            yield driver, log, markers
        finally:
            driver.close()


def _tool_outputs(log: Path) -> str:
    bodies = [json.loads(line)["body"] for line in log.read_text().splitlines()]
    return "\n".join(
        json.loads(message["content"]).get("output") or ""
        for body in bodies
        if isinstance(body, dict)
        for message in body.get("messages") or []
        if message.get("role") == "tool"
    )


def test_the_main_chat_searches_without_running_the_projects_programs(
    service: tuple[Driver, Path, Path],
) -> None:
    driver, log, markers = service
    ended = turn_ended(driver.ask("search the notes"))
    assert ended.reason == "completed", driver.log_tail()
    assert "notes.txt:1:needle in the notes" in _tool_outputs(log)
    assert ran(markers) == []
    assert "SPECRUN_RG is not used" in driver.log_tail(400)


def test_a_speculation_searches_without_running_them_either(
    service: tuple[Driver, Path, Path],
) -> None:
    driver, _log, markers = service
    driver.ask("go search the notes")
    reply = driver.wait_for_speculation("search the notes", ("completed", "failed"), timeout=60)
    assert reply.speculation is not None
    assert reply.speculation.status == "completed", driver.log_tail()
    assert reply.speculation.tool_uses == len(SEARCHES)
    assert ran(markers) == []


def test_a_program_is_judged_by_where_it_really_is(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    inside = project / "rg"
    inside.write_text("#!/bin/sh\n")
    inside.chmod(0o755)
    outside = tmp_path / "rg"
    outside.write_text("#!/bin/sh\n")
    outside.chmod(0o755)
    (tmp_path / "link-in").symlink_to(inside)
    (project / "link-out").symlink_to(outside)
    assert refusal(str(outside), project) is None
    assert refusal(str(project / "link-out"), project) is None  # a link to a file outside
    assert "inside the project" in (refusal(str(inside), project) or "")
    assert "inside the project" in (refusal(str(tmp_path / "link-in"), project) or "")
    assert "absolute" in (refusal("rg", project) or "")
    outside.chmod(0o775)
    assert "other users" in (refusal(str(outside), project) or "")
    outside.chmod(0o644)
    assert "not executable" in (refusal(str(outside), project) or "")
    assert "regular file" in (refusal(str(tmp_path), project) or "")


def test_the_model_log_is_never_a_file_of_the_project_or_someone_elses(tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / ".git" / "hooks").mkdir(parents=True)
    rc = tmp_path / "bashrc"
    rc.write_text("export EDITOR=vi\n")
    old_log = tmp_path / "old.jsonl"
    old_log.write_text('{"body": {}}\n')
    assert "inside the project" in (log_refusal(str(project / ".git/hooks/pre-commit"), project)
                                    or "")
    assert "inside the project" in (log_refusal(str(project / "requests.jsonl"), project) or "")
    assert "absolute" in (log_refusal("requests.jsonl", project) or "")
    assert "other than a request log" in (log_refusal(str(rc), project) or "")
    assert "regular file" in (log_refusal(str(tmp_path), project) or "")
    assert log_refusal(str(tmp_path / "new.jsonl"), project) is None
    assert log_refusal(str(old_log), project) is None


def test_a_runtime_directory_inside_the_project_stops_every_command() -> None:
    short = Path(tempfile.mkdtemp(prefix="sr-"))  # socket paths in it would fit
    project = make_sample_project(short / "project", git=False)
    for runtime, said in ((str(project / "run"), "inside the project"),
                          ("run", "absolute path")):
        with isolated_env() as env:
            done = subprocess.run(
                [sys.executable, "-m", "coordinator", "--project", str(project), "status"],
                env={**env.vars, "SPECRUN_RUNTIME_DIR": runtime},
                capture_output=True, text=True, timeout=60, cwd=project,
            )
        assert done.returncode != 0
        assert said in done.stderr and "Traceback" not in done.stderr, done.stderr
        assert "--debug" not in done.stderr  # the sentence says what to do
        assert not (project / "run").exists()
    shutil.rmtree(short)
