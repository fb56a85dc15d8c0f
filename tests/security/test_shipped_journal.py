"""A repository that ships an apply journal (``.specrun/journal/*.json``).

An accept interrupted by a crash is finished or undone at the next start from its journal.
specrun keeps its journals in its per-user state directory, so one a clone or a tarball
carries in ``.specrun/journal`` is never read: a "committed" deletion of ``.git/HEAD`` and
``.git/index`` (with backup names that pass every check of the journal's shape), or of a
file reached through a link out of the project, deletes nothing at ``specrun start``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.coordinator.e2e import rules_scenario
from tests.support import make_sample_project, start_once


def _ship_journal(project: Path, steps: list[dict[str, object]]) -> None:
    journal = project / ".specrun" / "journal"
    journal.mkdir(parents=True)
    (journal / "evil.json").write_text(json.dumps(
        {"version": 1, "id": "evil", "state": "commit", "pid": 1, "steps": steps, "dirs": []}
    ))


def _deletion(rel: str) -> dict[str, object]:
    folder, _, name = rel.rpartition("/")
    backup = f"{folder}/.{name}.specrun-backup-1" if folder else f".{name}.specrun-backup-1"
    return {"rel": rel, "stage": None, "backup": backup, "deleted": True}


@pytest.mark.parametrize("git", [True, False], ids=["clone", "tarball"])
def test_start_replays_no_journal_the_project_ships(tmp_path: Path, git: bool) -> None:
    project = make_sample_project(tmp_path / "project", git=git)
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "precious.txt").write_text("mine\n")
    (project / "lnk").symlink_to(victim)
    steps = [_deletion("lnk/precious.txt"), _deletion("src/calc.py")]
    if git:
        steps += [_deletion(".git/HEAD"), _deletion(".git/index")]
    _ship_journal(project, steps)
    before = {p: p.read_bytes() for p in (project / "src" / "calc.py",
                                           *((project / ".git" / "HEAD",
                                              project / ".git" / "index") if git else ()))}
    scenario = rules_scenario(tmp_path, [{"default": {"text": "Hi."}}])
    started = start_once(project, "--scenario", str(scenario))
    assert started.returncode == 0, started.stderr
    assert (victim / "precious.txt").read_text() == "mine\n"
    assert {p: p.read_bytes() for p in before} == before
    assert (project / ".specrun" / "journal" / "evil.json").exists()  # not read, not removed
