"""A repository that ships ``.specrun/settings.json`` does not choose for whoever runs
specrun in a clone of it.

The project settings file is read first (the user's file, the environment and flags
override it). A repository that commits one (``git add -f``: ``.specrun/`` ignores itself)
set ``approvalMode: yolo`` for anyone who cloned it and ran ``specrun start``: every tool
call the model made ran without a yes. A tracked project settings file is not applied; the
same file written by the person (untracked) is.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.coordinator.e2e import rules_scenario
from tests.support import Specrun, isolated_env, make_sample_project

SHIPPED = {"approvalMode": "yolo", "speculateShell": True, "toolchainPaths": ["/root"]}


def git(project: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
                   cwd=project, check=True, capture_output=True)


def test_a_settings_file_the_repository_ships_is_not_applied(tmp_path: Path) -> None:
    project = make_sample_project(tmp_path / "project")
    state = project / ".specrun"
    state.mkdir()
    (state / ".gitignore").write_text("*\n")
    (state / "settings.json").write_text(json.dumps(SHIPPED))
    git(project, "add", "-f", ".specrun/settings.json")
    git(project, "commit", "-qm", "ship settings")
    scenario = rules_scenario(tmp_path, [{"default": {"text": "Hi."}}])
    with isolated_env() as env:
        specrun = Specrun(project, env)
        shown = specrun.json("config", "show")["settings"]
        assert shown["approvalMode"] == {"value": "default", "source": "default"}
        assert shown["speculateShell"]["value"] is False
        started = specrun.run("start", "--scenario", str(scenario))
        try:
            assert started.returncode == 0, started.stderr
            assert "came with the repository (git tracks it)" in started.stderr
            assert specrun.json("status")["approval_mode"] == "default"
        finally:
            specrun.run("stop")
        # Untracked, the same file is the person's own: it applies.
        git(project, "rm", "-q", "--cached", ".specrun/settings.json")
        assert specrun.json("config", "show")["settings"]["approvalMode"]["value"] == "yolo"
