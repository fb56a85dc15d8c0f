"""A repository that ships symbolic links inside specrun's state directory.

``.specrun/`` is in the project, so a cloned repository can hold it: with
``.specrun/logs/service.log -> ~/.bashrc`` the service appended its log (which quotes
model and repository text) to the user's shell start-up file, with ``.specrun ->`` or
``.specrun/sessions ->`` a directory elsewhere it wrote its sessions there. Now specrun
keeps its logs and sessions in its per-user state directory and writes nothing into the
project's ``.specrun/`` at start: such links point at nothing it uses.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.coordinator.e2e import rules_scenario
from tests.support import make_sample_project, start_once


@pytest.mark.parametrize("link", [".specrun", ".specrun/logs", ".specrun/logs/service.log",
                                  ".specrun/sessions", ".specrun/memory"])
def test_start_writes_nothing_through_a_link_in_the_state_directory(
    tmp_path: Path, link: str
) -> None:
    project = make_sample_project(tmp_path / "project", git=False)
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / ".bashrc").write_text("mine\n")
    planted = project / link
    planted.parent.mkdir(parents=True, exist_ok=True)
    planted.symlink_to(victim / ".bashrc" if link.endswith(".log") else victim)
    scenario = rules_scenario(tmp_path, [{"default": {"text": "Hi."}}])
    started = start_once(project, "--scenario", str(scenario))
    assert started.returncode == 0, started.stderr
    assert "Traceback" not in started.stderr
    assert sorted(p.name for p in victim.iterdir()) == [".bashrc"]
    assert (victim / ".bashrc").read_text() == "mine\n"
