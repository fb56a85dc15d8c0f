"""A repository that ships an apply journal (``.specrun/journal/*.json``) and a link out
of the project beside it.

An accept interrupted by a crash is finished or undone at the next start from its journal,
a file in the project. A cloned repository can hold one: a "committed" deletion of
``lnk/precious.txt`` with ``lnk`` a symlink to a directory of the user's deleted that file
at ``specrun start``. Recovery now refuses a journal whose paths go through anything but
real directories, and start says so in one sentence.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.coordinator.e2e import rules_scenario
from tests.support import make_sample_project, start_once


def test_start_deletes_nothing_a_shipped_journal_names_through_a_link(tmp_path: Path) -> None:
    project = make_sample_project(tmp_path / "project", git=False)
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "precious.txt").write_text("mine\n")
    (project / "lnk").symlink_to(victim)
    journal = project / ".specrun" / "journal"
    journal.mkdir(parents=True)
    step = {"rel": "lnk/precious.txt", "stage": None, "backup": "lnk/x.specrun-backup-1",
            "deleted": True}
    (journal / "evil.json").write_text(json.dumps(
        {"version": 1, "id": "evil", "state": "commit", "pid": 1, "steps": [step], "dirs": []}
    ))
    scenario = rules_scenario(tmp_path, [{"default": {"text": "Hi."}}])
    started = start_once(project, "--scenario", str(scenario))
    assert (victim / "precious.txt").read_text() == "mine\n"
    assert started.returncode == 1
    assert "Could not recover the interrupted apply" in started.stderr
    assert "lnk" in started.stderr and "Traceback" not in started.stderr
